"""A half-done file's feedback opens with what is still TODO (issue 57): the untouched starter's page puts the
unfinished exercises under a "Read this first" heading before the scores and checks, and says that a later error
may come from them; a finished file's page has no such heading. Real grading of performance-05's starter."""

from __future__ import annotations

import json
import shutil

import pytest

from grader.cli.main import main
from tests.case_expectations import ROOT

pytestmark = pytest.mark.slow


def test_the_starter_reads_its_unfinished_exercises_first(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copy(ROOT / "student_templates" / "performance-05.py", folder / "starter.py")
    shutil.copy(ROOT / "solutions" / "performance-05.py", folder / "done.py")
    assert main(["grade", str(folder), "--out", str(tmp_path / "out"), "--workers", "2", "--no-similarity"]) == 0
    page = (tmp_path / "out" / "starter.feedback.md").read_text()
    heading = page.index("## Read this first: some exercises are still unfinished")
    assert heading < page.index("| Group | Score |")
    todo = page.index("Unfinished exercises (still holding `...`)")
    assert heading < todo < page.index("| Group | Score |") and "Finish them first" in page
    record = json.loads((tmp_path / "out" / "starter.json").read_text())
    assert record["messages"][0].startswith("Unfinished exercises")
    assert "Read this first" not in (tmp_path / "out" / "done.feedback.md").read_text()


def test_errors_from_an_unfinished_exercise_say_so(tmp_path):
    """Each listed error names the unfinished exercise it comes from, with the evidence (raised inside it, a name it
    assigns missing, its `...` reaching later code); an error with no such evidence names no cause, and a finished
    exercise is never blamed."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    starter = (ROOT / "student_templates" / "performance-05.py").read_text()
    solution = (ROOT / "solutions" / "performance-05.py").read_text()
    marker = "# BEGIN EXERCISE directional"
    # memory and the panel finished (the solution's text up to the directional exercise), a mistake of the student's
    # own just before it, the directional and HVP exercises as the starter leaves them
    (folder / "half.py").write_text(solution.split(marker)[0] + "ratio = 1 / 0\n" + starter[starter.index(marker):])
    assert main(["grade", str(folder), "--out", str(tmp_path / "out"), "--workers", "1", "--no-similarity"]) == 0
    record = json.loads((tmp_path / "out" / "half.json").read_text())
    [errors] = [m for m in record["messages"] if "statement(s) raised an error" in m]
    own, _, later = errors.partition("ZeroDivisionError: division by zero")
    assert own and later.startswith("; line ")     # listed first, with no cause named
    assert "(from an unfinished exercise: it was raised inside the exercise directional)" in later
    assert "memory" not in errors and "availability_panel" not in errors
    [no_errors] = [c for c in record["checks"] if c["id"] == "runs.no_errors"]
    assert "ZeroDivisionError" in no_errors["feedback"] and "comes from an unfinished" not in no_errors["feedback"]
