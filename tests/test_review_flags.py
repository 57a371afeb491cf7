"""Files that reach into JAX's internals or introspect are flagged for the instructor, never scored.

The flags are read from the file's text in the grader's process (intake/introspection.py). The corpus's `review_*`
cases (labelled `flagged = true/false`) grade each at full marks; here the reader itself, and where a flag shows:
the record, the summary, the report and `grader explain`, never a student's feedback or the LMS's results."""

from __future__ import annotations

import ast
import io
import json
import keyword
import shutil
import subprocess
import sys
import tokenize

import pytest

from grader.intake import introspection
from grader.intake.introspection import MAX_FLAGS, review_flags
from grader.intake.notebook import Cell
from tests.case_expectations import ROOT, case_folders

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


def _wide_names(code: str) -> str:
    """`code` with each identifier's first letter in its fullwidth form ("ｇetattr"): Python reads it in NFKC form,
    so it runs as the same program."""
    out: list[tuple[tuple[int, int], str]] = []
    lines = code.splitlines(keepends=True)
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.NAME and not keyword.iskeyword(token.string) and token.string[0].isascii() \
                and token.string[0].isalpha():
            out.append((token.start, chr(ord(token.string[0]) + 0xFEE0)))
    for (row, column), wide in reversed(out):
        lines[row - 1] = lines[row - 1][:column] + wide + lines[row - 1][column + 1:]
    return "".join(lines)


@pytest.mark.parametrize("code", list(FLAGGED))
def test_a_way_in_spelled_with_compatibility_letters_is_flagged_alike(code):
    """The reader skips a unit whose text names nothing it flags, without parsing it; names are compared in the
    form Python reads them, so a fullwidth spelling of the same program is no way around the flag."""
    wide = _wide_names(code)
    assert wide != code and ast.dump(ast.parse(wide)) == ast.dump(ast.parse(code))
    assert review_flags(wide) == review_flags(code)
    assert review_flags("", [Cell(1, "x = 1"), Cell(2, wide)]) == review_flags("", [Cell(1, "x = 1"), Cell(2, code)])


def test_skipping_units_that_name_nothing_flagged_changes_no_flag(monkeypatch):
    """Every file of the corpus and the threats: the same flags with every unit parsed."""
    files = [path for kind in ("corpus", "threats") for folder in case_folders(kind).values()
             for path in sorted(folder.glob("*.py"))]
    assert len(files) > 100
    quick = {path: review_flags(path.read_text(encoding="utf-8", errors="replace")) for path in files}
    monkeypatch.setattr(introspection, "_may_flag", lambda text: True)
    assert {path: review_flags(path.read_text(encoding="utf-8", errors="replace")) for path in files} == quick
    assert any(quick.values())


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
    assert any(flag in f for f in record["review_flags"])
    # what no value can prove (a file that can read the hidden changes) is held, never credited silently: the method
    # checks it passed keep no points until the instructor decides, and what they scored is kept to restore them
    methods = {c["id"]: c for c in record["checks"] if c["id"] in record["review_hold"]["checks"]}
    assert methods and all(c["score"] == 0 for c in methods.values())
    assert set(record["review_hold"]["credited"]) == set(methods)
    assert record["score"] == record["max_score"] - sum(c["max_score"] for c in methods.values())
    assert flag in record["review_hold"]["why"]
    assert "REVIEW: 1 file(s)" in done.stdout + done.stderr and "HELD: 1 file(s)" in done.stdout + done.stderr
    assert flag in (out / "report.html").read_text()
    explained = subprocess.run([sys.executable, "-m", "grader.cli.main", "explain", "walker", "--out", str(out)],
                               cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert flag in explained.stdout and "HELD for your review" in explained.stdout, explained.stdout + explained.stderr
    students = [out / "walker.feedback.md", out / "walker.feedback.html", *sorted((out / "gradescope").rglob("*.json"))]
    assert len(students) >= 3
    for path in students:
        assert flag not in path.read_text() and "review_flags" not in path.read_text(), path
