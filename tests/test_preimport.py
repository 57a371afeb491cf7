"""Settings a file puts in os.environ before importing JAX: named, since the grader's runs cannot honour them."""

from __future__ import annotations

import pytest

from grader.intake.notebook import Cell
from grader.intake.preimport import note, settings_before_import

CASES = {
    'import os\nos.environ["JAX_ENABLE_X64"] = "1"\nimport jax': ["JAX_ENABLE_X64"],
    'import os\nos.environ.setdefault("XLA_FLAGS", "--x")\nfrom jax import numpy': ["XLA_FLAGS"],
    'import os\nos.environ.update({"JAX_PLATFORMS": "cpu"}, JAX_TRACEBACK_FILTERING="off")\nimport jax.numpy':
        ["JAX_PLATFORMS", "JAX_TRACEBACK_FILTERING"],
    'import os\nos.putenv("JAX_ENABLE_X64", "1")\nimport jax': ["JAX_ENABLE_X64"],
    'from os import environ\nenviron["JAX_ENABLE_X64"] = "True"\nimport jax': ["JAX_ENABLE_X64"],
    'import jax\nimport os\nos.environ["JAX_ENABLE_X64"] = "1"': [],          # after the import: no effect anywhere
    'import os\nos.environ["OMP_NUM_THREADS"] = "1"\nimport jax': [],         # not JAX's or XLA's
    'import os\nif True:\n    os.environ["JAX_ENABLE_X64"] = "1"\nimport jax': ["JAX_ENABLE_X64"],
    "def broken(:": [],
}


@pytest.mark.parametrize("source", list(CASES))
def test_settings_before_the_first_jax_import_are_named(source):
    assert settings_before_import(source) == CASES[source]


def test_notebook_cells_count_in_order_and_the_note_says_what_to_use():
    cells = [Cell(1, 'import os\nos.environ["JAX_ENABLE_X64"] = "1"'), Cell(2, "import jax")]
    names = settings_before_import("", cells)
    assert names == ["JAX_ENABLE_X64"]
    text = note(names)
    assert "before importing JAX" in text and "jax.config.update('jax_enable_x64', True)" in text
    assert "jax.config.update" not in note(["XLA_FLAGS"])
