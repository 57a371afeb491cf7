"""Files that reach into JAX's internals or introspect are flagged for the instructor, never scored.

The flags are read from the file's text in the grader's process (intake/introspection.py). The corpus's `review_*`
cases (labelled `flagged = true/false`) grade each at full marks; here the reader itself, and where a flag shows:
the record, the summary, the report and `grader explain`, never a student's feedback or the LMS's results."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from grader.intake.introspection import MAX_FLAGS, review_flags
from grader.intake.notebook import Cell
from tests.case_expectations import ROOT

FLAGGED = {
    "import jax._src.interpreters.ad as ad": "jax._src.interpreters.ad",
    "from jax._src import core": "jax._src.core",
    "table = jax._src.interpreters.ad.primitive_jvps": "jax._src",
    "import sys\nframe = sys._getframe(1)": "sys._getframe",
    "from inspect import currentframe\nf = currentframe()": "inspect.currentframe",
    "cells = fn.__closure__": "__closure__",
    "value = cell.cell_contents": "cell_contents",
    "g = getattr(fn, '__globals__')": "__globals__",
    "c = getattr(fn, '__' + 'closure' + '__')": "'__closure__'",
    "import gc\nobjects = gc.get_objects()": "gc.get_objects",
    "frame = error.__traceback__.tb_frame": "tb_frame",
}
NOT_FLAGGED = ["import inspect\nprint(inspect.signature(f))", "import jax\njax.grad(f)(x)", "x = obj.__class__",
               "import jax.numpy as jnp", "from jax.ad_checkpoint import print_saved_residuals", "src = '_src'",
               "print(fn.__name__, fn.__doc__)", "def broken(:"]


@pytest.mark.parametrize("code", list(FLAGGED))
def test_each_way_in_is_flagged_with_its_place(code):
    flags = review_flags(code)
    assert flags and FLAGGED[code] in " ".join(flags), flags
    assert flags[0].startswith("line "), flags


@pytest.mark.parametrize("code", NOT_FLAGGED)
def test_ordinary_code_is_not_flagged(code):
    assert review_flags(code) == []


def test_notebook_cells_are_cited_as_jupyter_numbers_them_and_the_list_is_bounded():
    cells = [Cell(1, "import jax"), Cell(2, "x = 1\nimport gc\ngc.get_objects()")]
    assert review_flags("", cells) == ["In [2], line 3: calls gc.get_objects (every object the collector tracks)"]
    many = "\n".join(f"c{i} = f.__closure__" for i in range(50))
    assert len(review_flags(many)) == MAX_FLAGS


@pytest.mark.slow
def test_a_flag_reaches_the_instructor_only(tmp_path):
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    corpus = ROOT / "tests" / "assignments" / "performance-05" / "corpus"
    shutil.copy(corpus / "review_frame_globals_walk.py", submissions / "walker.py")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "grader.cli.main", "grade", str(submissions), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    flag = "sys._getframe (the current frame)"
    record = json.loads((out / "walker.json").read_text())
    assert record["score"] == record["max_score"] and any(flag in f for f in record["review_flags"])
    assert "REVIEW: 1 file(s)" in done.stdout + done.stderr
    assert flag in (out / "report.html").read_text()
    explained = subprocess.run([sys.executable, "-m", "grader.cli.main", "explain", "walker", "--out", str(out)],
                               cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert flag in explained.stdout, explained.stdout + explained.stderr
    students = [out / "walker.feedback.md", out / "walker.feedback.html", *sorted((out / "gradescope").rglob("*.json"))]
    assert len(students) >= 3
    for path in students:
        assert flag not in path.read_text() and "review_flags" not in path.read_text(), path
