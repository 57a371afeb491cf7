"""A new instructor's first term, as the README walks it (issue 57), with no command failing on the way: grade the
bundled examples, add an adjustment and set one, undo one, explain a method check, apply a late policy, and release
the feedback to Canvas. There is no Canvas here: the release goes to the local server of tests/fake_canvas.py,
which answers as Canvas documents its API. Real grading of the examples (the assignment copied, so its late policy
can be set as the README says, in assignment.toml)."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from grader.cli.main import main
from tests.case_expectations import ROOT
from tests.fake_canvas import ASSIGNMENT, COURSE, TOKEN, running_canvas

pytestmark = pytest.mark.slow

LATE = """
[late]
due = "2026-12-01T23:59:00+00:00"
grace_minutes = 15
penalty_per_day = 0.1
max_penalty = 0.5
"""


@pytest.fixture
def canvas():
    yield from running_canvas()


def _run(*argv: str) -> None:
    assert main(list(argv)) == 0, f"`grader {' '.join(argv)}` failed"


def _total(out, student: str) -> float:
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    return float(rows[student]["total"])


def test_the_readme_shows_the_instructors_steps_in_this_order():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    steps = ["grader grade examples/submissions", "grader adjust", "--set", "--undo", "grader explain", "[late]",
             "grader release"]
    places = [readme.find(step) for step in steps]
    assert -1 not in places and places == sorted(places), dict(zip(steps, places))


def test_the_readme_path_from_first_batch_to_released_feedback(tmp_path, canvas, monkeypatch, capsys):
    root = tmp_path / "course"            # the project as a newcomer has it: assignments, solutions, starters
    for part in ("assignments", "solutions", "student_templates"):
        shutil.copytree(ROOT / part, root / part)
    submissions = tmp_path / "submissions"
    shutil.copytree(ROOT / "examples" / "submissions", submissions)
    out = tmp_path / "results"

    _run("grade", str(submissions), "--out", str(out), "--root", str(root), "--workers", "2")
    before = _total(out, "bob")
    _run("adjust", "bob", "directional.central_difference", "+2", "--reason", "the step was explained in office hours",
         "--out", str(out), "--yes")
    _run("adjust", "bob", "memory_unavailable.recorded_as_none", "--set", "10", "--reason", "regrade request granted",
         "--out", str(out), "--yes")
    _run("adjust", "--undo", "--out", str(out))          # the --set one goes; the +2 stays
    _run("grade", str(submissions), "--out", str(out), "--root", str(root), "--workers", "2")
    assert _total(out, "bob") == pytest.approx(min(before + 2, 100))
    capsys.readouterr()
    _run("explain", "bob", "directional.central_difference", "--out", str(out))
    explained = capsys.readouterr().out
    assert "expected" in explained and "tolerance" in explained and "adjusted: +2" in explained

    config = root / "assignments" / "performance-05" / "assignment.toml"
    config.write_text(config.read_text(encoding="utf-8") + LATE, encoding="utf-8")
    times = tmp_path / "times.csv"
    times.write_text("submission,submitted_at\nalice,2026-12-01T20:00:00+00:00\nbob,2026-12-03T09:00:00+00:00\n")
    alice_before = _total(out, "alice")
    _run("grade", str(submissions), "--out", str(out), "--root", str(root), "--workers", "2", "--times", str(times))
    bob = json.loads((out / "bob.json").read_text())
    assert bob["late"]["days_charged"] == 2 and _total(out, "bob") == pytest.approx(min(before + 2, 100) - 20)
    assert _total(out, "alice") == alice_before    # on time

    roster = tmp_path / "gradebook.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n    Points Possible,,,,\n"
                      "Alice A,1001,,alice,S1\nBob B,1002,,bob,S1\n", encoding="utf-8")
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    _run("release", "--out", str(out), "--canvas-url", canvas.url, "--course", COURSE,
         "--canvas-assignment", ASSIGNMENT, "--roster", str(roster))
    assert canvas.page_of("1001") == [(out / "alice.feedback.html").read_bytes()]
    assert canvas.page_of("1002") == [(out / "bob.feedback.html").read_bytes()]
    assert b"late" in canvas.page_of("1002")[0].lower()
