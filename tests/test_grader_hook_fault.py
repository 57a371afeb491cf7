"""A fault of the grader's own JAX hook inside a student's statement is the grader's, never the student's.

The hooks (scenario_setup's derivative rules) run inside the student's `jax.grad`, and JAX cuts their frames from
the traceback the student's statement raises. A copy of the project whose tanh rule fails on a shape the lesson
never uses grades a file that differentiates such a shape: the record is a grader-fault error record (no points,
graded again next run) and no sentence tells the student to fix the file."""

from __future__ import annotations

import json
import shutil

import pytest

import grader.cli.main
from tests.case_expectations import ROOT

BROKEN = '''        def tanh_jvp(primals, tangents, **params):
            if len(getattr(primals[0], "shape", ())) == 3:
                raise RuntimeError("the grader's rule cannot take this shape")
'''
EXTRA = "\ncube_slope = jax.grad(lambda a: jnp.tanh(a).sum())(jnp.ones((2, 2, 2)))\n"


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("hook") / "project"
    shutil.copytree(ROOT / "assignments" / "performance-05", root / "assignments" / "performance-05")
    shutil.copytree(ROOT / "solutions", root / "solutions")
    setup = root / "assignments" / "performance-05" / "scenario_setup.py"
    text = setup.read_text()
    rule = "        def tanh_jvp(primals, tangents, **params):\n"
    assert text.count(rule) == 1
    setup.write_text(text.replace(rule, BROKEN))
    submissions = root / "submissions"
    submissions.mkdir()
    solution = (ROOT / "solutions" / "performance-05.py").read_text()
    (submissions / "student.py").write_text(solution + EXTRA)
    out = root / "results"
    grader.cli.main.main(["grade", str(submissions), "--root", str(root), "--assignment", "performance-05",
                          "--out", str(out)])
    return json.loads((out / "student.json").read_text())


def test_the_record_is_the_graders_fault(record):
    assert record["status"] == "error"
    assert "grader_error" in record and "cannot take this shape" in record["grader_error"]
    assert record["score"] == 0


def test_no_sentence_blames_the_file(record):
    texts = [check["feedback"] for check in record["checks"]] + record["messages"]
    assert any("not an error in your file" in text for text in texts)
    for text in texts:
        assert "fix the first error" not in text and "Read the traceback" not in text, text
