"""A new instructor's first term, as the README walks it (issue 57), with no command failing on the way: grade the
bundled examples, add an adjustment and set one, undo one, explain a method check, apply a late policy, and release
the feedback to Canvas. There is no Canvas here: the release goes to the local server of tests/fake_canvas.py,
which answers as Canvas documents its API. Real grading of the examples (the assignment copied, so its late policy
can be set as the README says, in assignment.toml).

On the way, the mistakes of a tired newcomer (issue 68): a wrong student id, a mistyped results folder, a mistyped
flag, a release without a Canvas token on a class Canvas did not name; each message names the part that is wrong
and its fix. And a student's first hour: "Run all" on the untouched starter notebook says which TODOs remain, never
PASS, and `grader check` says what it ran on. (tests/test_newcomer_mistakes.py holds the same mistakes on the tiny
lesson, fast.)"""

from __future__ import annotations

import csv
import json
import platform
import shutil

import jax
import nbformat
import pytest

from grader import __version__
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


def _mistake(capsys, *argv: str, code: int = 2) -> str:
    """A command a newcomer got wrong: it exits with `code` and says why (returned: what it printed on stderr)."""
    capsys.readouterr()
    got: int | str | None
    try:
        got = main(list(argv))
    except SystemExit as stop:    # argparse's own exit, for a mistyped flag
        got = stop.code
    printed = capsys.readouterr()
    assert got == code, (argv, got, printed)
    return printed.err


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
    # A wrong student id, a mistyped results folder, a mistyped flag: each says which part is wrong
    said = _mistake(capsys, "explain", "bobb", "directional.central_difference", "--out", str(out))
    assert f"no student `bobb` in {out} (students: bob, " in said and "grade the class first" not in said, said
    said = _mistake(capsys, "adjust", "bobb", "directional.central_difference", "+2", "--reason", "r", "--out", str(out))
    assert f"no student `bobb` in {out} (students: bob, " in said, said
    typo = out.with_name("reslts")
    for command in (["explain", "bob"], ["adjust", "bob", "directional.central_difference", "+2", "--reason", "r"]):
        said = _mistake(capsys, *command, "--out", str(typo))
        assert f"{typo} does not exist (did you mean {out}?)" in said and "grade the class first" not in said, said
    said = _mistake(capsys, "grade", str(submissions), "--out", str(out), "--regarde")
    assert said.startswith("usage: grader grade") and "did you mean --regrade?" in said, said
    capsys.readouterr()
    _run("adjust", "bob", "directional.central_difference", "+2", "--reason", "the step was explained in office hours",
         "--out", str(out), "--yes")
    adjusted = capsys.readouterr().out       # the check's score, and the student's total as the README says
    assert "bob, directional.central_difference: " in adjusted, adjusted
    assert f"; total {before:g} → {min(before + 2, 100):g} of 100 (+" in adjusted, adjusted
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
    capsys.readouterr()
    _run("grade", str(submissions), "--out", str(out), "--root", str(root), "--workers", "2", "--times", str(times))
    lines = capsys.readouterr().out.splitlines()     # carol, dave and erin have no time: the late policy says so
    assert any(line.startswith("late policy: no submission time for 3 submission(s)") for line in lines), lines
    assert not any(line.startswith("canvas: late policy") for line in lines), lines
    bob = json.loads((out / "bob.json").read_text())
    assert bob["late"]["days_charged"] == 2 and _total(out, "bob") == pytest.approx(min(before + 2, 100) - 20)
    assert _total(out, "alice") == alice_before    # on time

    roster = tmp_path / "gradebook.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n    Points Possible,,,,\n"
                      "Alice A,1001,,alice,S1\nBob B,1002,,bob,S1\n", encoding="utf-8")
    # No token, and the examples are not named as Canvas's download names them: nothing goes, and it says why
    monkeypatch.delenv("CANVAS_TOKEN", raising=False)
    said = _mistake(capsys, "release", "--out", str(out), code=1)
    why = [line for line in said.splitlines() if line.startswith("grader: nothing was released")]
    assert len(why) == 1 and "Canvas download name" in why[0] and "--canvas-url" in why[0] and "--roster" in why[0], said
    assert not (out / "release" / "canvas-bulk.zip").exists()
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    _run("release", "--out", str(out), "--canvas-url", canvas.url, "--course", COURSE,
         "--canvas-assignment", ASSIGNMENT, "--roster", str(roster))
    assert canvas.page_of("1001") == [(out / "alice.feedback.html").read_bytes()]
    assert canvas.page_of("1002") == [(out / "bob.feedback.html").read_bytes()]
    assert b"late" in canvas.page_of("1002")[0].lower()


def test_a_students_first_hour_never_says_pass_about_unfinished_work(tmp_path, capsys):
    """"Run all" on the untouched starter notebook (the final check() cell aside: tests/test_student_venv.py runs it)
    says which exercises' TODOs remain and prints no PASS; `grader check` says what it ran on, in one line."""
    from nbclient import NotebookClient
    notebook = nbformat.read(ROOT / "student_templates" / "performance-05.ipynb", as_version=4)
    notebook.cells[-1].source = "print('REACHED THE END')"
    NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "\n".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
    assert "REACHED THE END" in printed
    assert not [line for line in printed.splitlines() if line.startswith("PASS")], printed[-2000:]
    assert "Not finished: the TODOs of exercise(s) memory" in printed, printed[-2000:]

    starter = tmp_path / "performance-05.py"
    shutil.copy(ROOT / "student_templates" / "performance-05.py", starter)
    assert main(["check", str(starter), "directional"]) == 1       # unfinished: not every visible check passes
    ran_on = f"grader {__version__}, JAX {jax.__version__}, Python {platform.python_version()}"
    assert ran_on in capsys.readouterr().out.splitlines()
