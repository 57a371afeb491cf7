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
