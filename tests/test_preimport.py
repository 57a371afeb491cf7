"""Settings a file puts in os.environ before importing JAX: those a run applies as `python file.py` would (float64, ...)
are not named; the grader's own (XLA flags, the platform) are, since its runs cannot honour them."""

from __future__ import annotations

import pytest

from grader.intake.notebook import Cell
from grader.intake.preimport import note, settings_before_import

CASES = {
    'import os\nos.environ["JAX_ENABLE_X64"] = "1"\nimport jax': [],             # applied, as python file.py does
    'import os\nos.environ.setdefault("XLA_FLAGS", "--x")\nfrom jax import numpy': ["XLA_FLAGS"],
    'import os\nos.environ.update({"JAX_PLATFORMS": "cpu"}, JAX_TRACEBACK_FILTERING="off")\nimport jax.numpy':
        ["JAX_PLATFORMS"],
    'import os\nos.environ["XLA_FLAGS"] = "--x"\nos.environ["JAX_ENABLE_X64"] = "1"\nimport jax': ["XLA_FLAGS"],
    'import jax\nimport os\nos.environ["JAX_ENABLE_X64"] = "1"': [],          # after the import: no effect anywhere
    'import os\nos.environ["OMP_NUM_THREADS"] = "1"\nimport jax': [],         # not JAX's or XLA's
    'import os\nif True:\n    os.environ["XLA_FLAGS"] = "1"\nimport jax': ["XLA_FLAGS"],
    "def broken(:": [],
}


@pytest.mark.parametrize("source", list(CASES))
def test_settings_before_the_first_jax_import_are_named(source):
    assert settings_before_import(source) == CASES[source]


def test_notebook_cells_count_in_order_and_the_note_says_what_to_use():
    cells = [Cell(1, 'import os\nos.environ["XLA_FLAGS"] = "--x"'), Cell(2, "import jax")]
    names = settings_before_import("", cells)
    assert names == ["XLA_FLAGS"]
    text = note(names)
    assert "before importing JAX" in text and "XLA_FLAGS" in text and "no effect" in text
