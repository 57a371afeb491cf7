"""A student's check, from the installed student wheel, scores as `grader grade` does; its exit status is honest.

The wheel is installed into a folder of its own (pip --target) and run from a folder with no `assignments/` or
`solutions/` above it, so only what the wheel carries can be used. Real sandbox, real JAX."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from grader.authoring.student_wheel import write_student_wheel
from grader.config.assignment import load

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "assignments" / "performance-05" / "corpus"
CASES = ["reference.py", "forward_difference.py", "hvp_is_gradient.py", "memory_zeros_when_unavailable.py",
         "notebook_reference.ipynb", "notebook_hvp_plain_differentiates_remat.ipynb"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    wheel = write_student_wheel(load("performance-05", ROOT), tmp_path_factory.mktemp("wheel"))
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    return target


def student_check(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "grader.student.terminal", "check", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_student_check_scores_equal_grader_grade_on_corpus_cases(site, tmp_path):
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    for case in CASES:
        shutil.copy(CORPUS / case, submissions / case)
    graded = subprocess.run([sys.executable, "-m", "grader.cli.main", "grade", str(submissions), "--workers", "2"],
                            cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert graded.returncode == 0, graded.stderr
    for case in CASES:
        record = json.loads((tmp_path / "results" / f"{Path(case).stem}.json").read_text())
        done = student_check(site, submissions, case, "--json")
        assert done.returncode in (0, 1), done.stderr
        mine = json.loads(done.stdout)
        visible = {c["id"]: c["score"] for c in record["checks"] if c["visibility"] == "visible"}
        assert {c["id"]: c["score"] for c in mine["checks"]} == visible, case
        assert mine["score"] == sum(visible.values())
        expected = tomllib.loads((CORPUS / case).with_suffix(".expected.toml").read_text())["groups"]
        assert {g: v["score"] for g, v in mine["groups"].items()} == pytest.approx(expected), case
        assert (done.returncode == 0) == (mine["score"] == mine["max_score"]), case


def test_exit_status_json_and_one_group(site, tmp_path):
    starter = tmp_path / "performance-05.py"
    shutil.copy(ROOT / "student_templates" / "performance-05.py", starter)
    done = student_check(site, tmp_path, starter.name)
    assert done.returncode == 1, done.stderr
    assert "Visible checks: 25 / 100" in done.stdout and "checked performance-05.py" in done.stdout
    one = student_check(site, tmp_path, starter.name, "--group", "gradients", "--json")
    assert one.returncode == 0, one.stderr
    result = json.loads(one.stdout)
    assert {c["group"] for c in result["checks"]} == {"gradients"} and result["score"] == result["max_score"] == 10
    assert result["group"] == "gradients" and result["full_marks"] is True
    assert student_check(site, tmp_path, "missing.py").returncode == 2
    unknown = student_check(site, tmp_path, starter.name, "nosuchgroup")
    assert unknown.returncode == 2 and "no visible checks in group 'nosuchgroup'" in unknown.stderr


def test_checkout_without_solutions_says_so_instead_of_crashing(tmp_path):
    shutil.copytree(ROOT / "assignments", tmp_path / "assignments")
    student = tmp_path / "performance-05.py"
    shutil.copy(ROOT / "student_templates" / "performance-05.py", student)
    done = subprocess.run([sys.executable, "-m", "grader.cli.main", "check", str(student)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "student bundle" in done.stderr


def test_the_notebook_check_result_shows_one_line_under_its_table():
    """Jupyter displays a cell's last value: `check()` returns its result, so its repr must not be the whole record."""
    from grader.student.session import StudentCheck

    checks = [{"id": f"group.check_{n}", "group": "group", "score": 1.0, "max_score": 2.0, "visibility": "visible",
               "feedback": "A long explanation of what was compared. " * 20} for n in range(21)]
    result = StudentCheck(file="/home/me/performance-05.ipynb", assignment="a", title="T", status="graded", score=21.0,
                          max_score=42.0, checks=checks, groups={}, messages=["note"] * 5, environment={})
    assert repr(result) == "StudentCheck(performance-05.ipynb: 21 / 42 over 21 visible checks)"
