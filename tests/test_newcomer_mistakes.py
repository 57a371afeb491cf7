"""A newcomer's first hour with nothing broken (issue 68): each slip a tired instructor or a student makes is met by a
message that says which part was wrong and how to fix it, never a fix for something else.

The tiny lesson (tests/fixtures/tiny_project), graded once for the module, with a [late] policy and one submission
named as Canvas's "Download Submissions" names files; tests/test_newcomer_path.py walks the same mistakes on the
README's own examples. The starter's closing PASS line is performance-05's (its starter is the one that printed it).
"""

from __future__ import annotations

import contextlib
import io
import json
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jax
import nbformat
import pytest

from grader import __version__
from grader.authoring.starter import render
from grader.cli.main import main
from grader.config.assignment import load

ROOT = Path(__file__).resolve().parent.parent
TINY = Path(__file__).with_name("fixtures") / "tiny_project"
LATE = """
[late]
due = "2026-12-01T23:59:00+00:00"
penalty_per_day = 0.1
"""
CANVAS_NAMED = "lovelaceada_1001_2001_tiny"     # as Canvas's Download Submissions names a file
STUDENTS = ("alice", "bob", "carol", CANVAS_NAMED)


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    """The tiny class graded once: (project root, submissions folder, results folder, what `grade` printed)."""
    root = tmp_path_factory.mktemp("newcomer") / "project"
    shutil.copytree(TINY, root)
    config = root / "assignments" / "tiny" / "assignment.toml"
    config.write_text(config.read_text(encoding="utf-8") + LATE, encoding="utf-8")
    submissions = root / "submissions"
    submissions.mkdir()
    solution = (TINY / "solutions" / "tiny.py").read_text()
    for name in STUDENTS:
        (submissions / f"{name}.py").write_text(solution)
    out = root / "results"
    printed = _run_capturing(["grade", str(submissions), "--root", str(root), "--assignment", "tiny", "--out", str(out),
                              "--workers", "2", "--no-similarity"])
    assert printed["code"] == 0, printed
    return {"root": root, "submissions": submissions, "out": out, "printed": printed}


def _run_capturing(argv: list[str]) -> dict:
    """What a command returned (or exited with: argparse's own exit) and printed."""
    stdout, stderr = io.StringIO(), io.StringIO()
    code: int | str | None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
    return {"code": code, "out": stdout.getvalue(), "err": stderr.getvalue()}


# ---- 1. which part is wrong: the student, or the folder ------------------------------------------------------

def test_a_wrong_student_id_lists_the_students_closest_first(graded):
    out = graded["out"]
    for argv in (["explain", "bobb", "--out", str(out)],
                 ["adjust", "bobb", "area.value", "+1", "--reason", "r", "--out", str(out)]):
        done = _run_capturing(argv)
        assert done["code"] == 2, done
        assert f"no student `bobb` in {out}" in done["err"], done["err"]
        assert "(students: bob, " in done["err"], done["err"]           # the closest first
        assert "alice" in done["err"] and "grade the class first" not in done["err"], done["err"]


def test_a_mistyped_results_folder_says_it_does_not_exist(graded):
    typo = graded["out"].with_name("reslts")
    for argv in (["explain", "bob", "--out", str(typo)],
                 ["adjust", "bob", "area.value", "+1", "--reason", "r", "--out", str(typo)],
                 ["release", "--out", str(typo)]):
        done = _run_capturing(argv)
        assert done["code"] == 2, done
        assert f"{typo} does not exist" in done["err"], done["err"]
        assert f"did you mean {graded['out']}?" in done["err"], done["err"]
        assert "grade the class first" not in done["err"], done["err"]


# ---- 2. a mistyped flag -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, usage, closest", [
    (["grade", "class", "--regarde"], "usage: grader grade", "--regrade"),
    (["adjust", "--lsit"], "usage: grader adjust", "--list"),
    (["release", "--canvas-ulr", "https://canvas.example.edu"], "usage: grader release", "--canvas-url"),
])
def test_a_mistyped_flag_shows_the_commands_usage_and_the_closest_flag(argv, usage, closest):
    done = _run_capturing(argv)
    assert done["code"] == 2, done
    assert done["err"].startswith(usage), done["err"]
    assert f"did you mean {closest}?" in done["err"], done["err"]


# ---- 3. adjusting one check prints the student's total ------------------------------------------------------

def test_adjusting_one_check_prints_the_students_total_and_the_checks(graded, tmp_path):
    out = tmp_path / "results"
    shutil.copytree(graded["out"], out)
    done = _run_capturing(["adjust", "bob", "area.value", "-1", "--reason", "typed in", "--yes", "--out", str(out)])
    assert done["code"] == 0, done
    assert "bob, area.value: 1 → 0 of 1 (-1); total 3 → 2 of 3 (-1)" in done["out"], done["out"]


# ---- 4. each warning under its own heading -----------------------------------------------------------------

def test_the_late_policy_warning_is_headed_late_policy_not_canvas(graded):
    lines = graded["printed"]["out"].splitlines()
    assert any(line.startswith("late policy: assignment.toml has [late]") for line in lines), lines
    assert not any(line.startswith("canvas: late policy") for line in lines), lines


# ---- 5. a release that releases nothing says why and fails --------------------------------------------------

def test_release_without_a_token_says_why_nothing_was_released_and_fails(graded, tmp_path, monkeypatch):
    monkeypatch.delenv("CANVAS_TOKEN", raising=False)
    out = tmp_path / "results"
    shutil.copytree(graded["out"], out)
    for stale in out.glob(f"{CANVAS_NAMED}.*"):   # a class with no Canvas download names, as the README's examples
        stale.unlink()
    done = _run_capturing(["release", "--out", str(out)])
    assert done["code"] == 1, done
    why = [line for line in done["err"].splitlines() if line.startswith("grader: nothing was released")]
    assert len(why) == 1, done["err"]
    assert "Canvas download name" in why[0] and "--canvas-url" in why[0] and "--roster" in why[0], why
    assert not (out / "release" / "canvas-bulk.zip").exists()


def test_release_without_a_token_writes_the_bulk_zip_for_a_class_downloaded_from_canvas(graded, tmp_path, monkeypatch):
    monkeypatch.delenv("CANVAS_TOKEN", raising=False)
    out = tmp_path / "results"
    shutil.copytree(graded["out"], out)
    done = _run_capturing(["release", "--out", str(out)])
    assert done["code"] == 0, done
    with zipfile.ZipFile(out / "release" / "canvas-bulk.zip") as bundle:
        assert bundle.namelist() == ["lovelaceada_1001_2001_feedback.html"]


# ---- 6. the check says what it ran on -----------------------------------------------------------------------

def test_check_says_the_grader_jax_and_python_versions_on_one_line(graded):
    ran_on = f"grader {__version__}, JAX {jax.__version__}, Python {platform.python_version()}"
    file = graded["submissions"] / "alice.py"
    common = ["check", str(file), "--root", str(graded["root"]), "--assignment", "tiny"]
    done = _run_capturing(common)
    assert done["code"] == 0, done
    assert ran_on in done["out"].splitlines(), done["out"]
    done = _run_capturing([*common, "--json"])
    assert json.loads(done["out"])["ran_on"] == ran_on


# ---- 7. the untouched starter never says PASS ---------------------------------------------------------------

STARTER = ROOT / "student_templates" / "performance-05.py"


def _passes(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("PASS")]


@pytest.mark.slow
def test_the_untouched_starter_run_with_python_prints_no_pass(tmp_path):
    done = subprocess.run([sys.executable, str(STARTER)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert not _passes(done.stdout), done.stdout[-2000:]


@pytest.mark.slow
def test_the_untouched_starter_notebook_run_all_prints_no_pass_and_names_the_todos(tmp_path):
    from nbclient import NotebookClient
    notebook = nbformat.read(STARTER.with_suffix(".ipynb"), as_version=4)
    notebook.cells[-1].source = "print('REACHED THE END')"      # check() is test_student_venv's
    NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "\n".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
    assert "REACHED THE END" in printed
    assert not _passes(printed), _passes(printed)
    remaining = next(line for line in printed.splitlines() if "TODO" in line and "remain" in line)
    assert all(name in remaining for name in ("memory", "directional", "hvp")), remaining


@pytest.mark.slow
def test_a_finished_starter_still_prints_pass(tmp_path):
    """The guard holds back only unfinished work: the starter with every exercise's code kept prints PASS."""
    assignment = load("performance-05", ROOT)
    exercises = frozenset(("memory", "availability_panel", "directional", "hvp"))
    finished = tmp_path / "finished.py"
    finished.write_text(render(assignment, keep=exercises).python)
    done = subprocess.run([sys.executable, str(finished)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _passes(done.stdout) == ["PASS: performance-05"], done.stdout[-2000:]
