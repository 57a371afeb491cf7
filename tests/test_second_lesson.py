"""A second lesson graded end to end, and a new one made with `grader new`: nothing in grader/ is performance-05's.

The tiny assignment (tests/fixtures/tiny_project: a circle's area, with the framework's `builtin:` run checks) is
copied to a temporary project and four submissions (correct, a wrong value, a crash before the answer, an empty
file) go through every path a student's file can take: `grader grade` (the command line, in process), the
autograder zip from `grader build` run by the real `otter run -a ZIP FILE`, and `grader check`. Each path must
give the scores the tiny lesson's checks call for. Then `grader new demo` in an empty folder must build and grade
its own solution at full marks without a file of grader/ changing, and commands must name or infer the assignment.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import grader.cli.main
import grader.config.assignment
import grader.student.session
from grader import PACKAGE_DIR
from grader.authoring.new_lesson import new_lesson

TINY = Path(__file__).with_name("fixtures") / "tiny_project"
OTTER = Path(sys.executable).with_name("otter")
SUBMISSIONS = {      # name -> (source, expected status, expected score per check id)
    "correct": ((TINY / "solutions" / "tiny.py").read_text(), "graded",
                {"runs.no_errors": 1, "runs.reached_end": 1, "area.value": 1}),
    "wrong_value": ("import math\nradius = 2.0\narea = math.pi * radius\nside = math.sqrt(area)\n", "graded",
                    {"runs.no_errors": 1, "runs.reached_end": 1, "area.value": 0}),
    "crash": ("import math\nradius = 2.0\narea = math.pi * radius ** 2 / 0\nside = 1.0\nprint('done')\n", "graded",
              {"runs.no_errors": 0, "runs.reached_end": 1, "area.value": 0}),
    "empty": ("", "error", {"runs.no_errors": 0, "runs.reached_end": 0, "area.value": 0}),
}


def scores(record: dict) -> dict[str, float]:
    return {check["id"]: check["score"] for check in record["checks"]}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("second") / "project"
    shutil.copytree(TINY, root)
    submissions = root / "submissions"
    submissions.mkdir()
    for name, (source, _, _) in SUBMISSIONS.items():
        (submissions / f"{name}.py").write_text(source)
    return root


@pytest.fixture(scope="module")
def graded(project) -> dict[str, dict]:
    out = project / "results"
    code = grader.cli.main.main(["grade", str(project / "submissions"), "--root", str(project), "--assignment", "tiny",
                                 "--out", str(out), "--workers", "2"])
    assert code == 0
    return {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}


@pytest.mark.parametrize("name", sorted(SUBMISSIONS))
def test_grader_grade_scores_each_submission(graded, name):
    _, status, expected = SUBMISSIONS[name]
    record = graded[name]
    assert record["status"] == status
    assert scores(record) == expected, [c["feedback"] for c in record["checks"]]
    assert record["score"] == sum(expected.values()) and record["max_score"] == 3


def test_feedback_says_what_went_wrong(graded):
    feedback = {name: "\n".join(c["feedback"] for c in record["checks"]) for name, record in graded.items()}
    assert "`area` should be pi * radius ** 2" in feedback["wrong_value"]
    assert "ZeroDivisionError" in feedback["crash"] and "line 3" in feedback["crash"]
    assert "empty" in feedback["empty"]


@pytest.fixture(scope="module")
def otter_results(project, graded) -> dict[str, dict]:
    """`grader build tiny`, then the real `otter run -a ZIP FILE` on every submission, named as students submit."""
    if not OTTER.is_file():
        pytest.fail(f"{OTTER} not found: otter-grader is a dependency of the project")
    build = project / "build-out"
    assert grader.cli.main.main(["build", "tiny", "--root", str(project), "--out", str(build)]) == 0
    zip_path = build / "tiny-autograder.zip"
    # otter finds our runner through the import hook that `pip install` of the package put in site-packages
    # (setup.py): nothing is installed here, as an instructor installs nothing but the package.
    # The environment holds $GRADER_CACHE_DIR: otter finds the batch's warm state.
    env = {**os.environ, "PATH": f"{OTTER.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    results = {}
    for name in SUBMISSIONS:
        folder = project / "otter" / name
        folder.mkdir(parents=True)
        submission = folder / "in" / "tiny.py"
        submission.parent.mkdir()
        shutil.copy(project / "submissions" / f"{name}.py", submission)
        done = subprocess.run([str(OTTER), "run", "-a", str(zip_path), str(submission), "--no-logo"], cwd=folder,
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"otter run failed on {name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        results[name] = json.loads((folder / "results.json").read_text())
    return results


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SUBMISSIONS))
def test_otter_run_on_the_zip_gives_the_same_scores(otter_results, graded, name):
    results = otter_results[name]
    tests = [t for t in results["tests"] if t.get("name") != "Public Tests"]
    expected = SUBMISSIONS[name][2]
    assert [t["score"] for t in tests] == [expected[c["id"]] for c in graded[name]["checks"]]
    assert results["score"] == sum(expected.values()) == graded[name]["score"]
    shown = json.dumps(results)   # what each check compared is the instructor's (`grader explain`), never the student's
    assert "oracle_area" not in shown and "score_fraction" not in shown and "explanations" not in shown


@pytest.mark.parametrize("name, line", [("correct", "Visible checks: 3 / 3"), ("wrong_value", "[FAIL] area.value (0/1)"),
                                        ("crash", "[FAIL] runs.no_errors (0/1)")])
def test_grader_check_prints_the_same_verdicts(project, graded, monkeypatch, capsys, name, line):
    path = project / "submissions" / f"{name}.py"
    expected = SUBMISSIONS[name][2]
    full_marks = sum(expected.values()) == 3
    assert grader.cli.main.main(["check", str(path), "--root", str(project), "--assignment", "tiny"]) == (0 if full_marks else 1)
    output = capsys.readouterr().out
    assert line in output and "oracle_area" not in output
    assert f"Visible checks: {sum(expected.values()):g} / 3" in output


# ---- grader new ------------------------------------------------------------------------------------------

def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def test_a_new_lesson_builds_and_grades_its_solution_at_full_marks(tmp_path, capsys):
    before = _digest(PACKAGE_DIR)
    assert grader.cli.main.main(["new", "demo", "--root", str(tmp_path)]) == 0
    assert sorted(p.name for p in (tmp_path / "assignments" / "demo").iterdir()) == [
        "assignment.toml", "checks.py", "oracle.py", "scenario_setup.py"]
    solution = (tmp_path / "solutions" / "demo.py").read_text()
    assert "# BEGIN EXERCISE gradient" in solution and "# END EXERCISE gradient" in solution
    config = tomllib.loads((tmp_path / "assignments" / "demo" / "assignment.toml").read_text())
    assert all(check["visibility"] == "visible" for check in config["checks"])      # shown, so an author sees it
    toml_text = (tmp_path / "assignments" / "demo" / "assignment.toml").read_text()
    assert "# [evidence]" in toml_text and '"hidden"' in toml_text
    assert grader.cli.main.main(["build", "demo", "--root", str(tmp_path)]) == 0
    starter = (tmp_path / "student_templates" / "demo.py").read_text()
    assert "gradient = ...  # TODO: compute gradient" in starter and "jax.grad(loss)(x)" not in starter
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    shutil.copy(tmp_path / "solutions" / "demo.py", submissions / "solution.py")
    shutil.copy(tmp_path / "student_templates" / "demo.py", submissions / "starter.py")
    capsys.readouterr()
    # The only assignment under the root: inferred.
    assert grader.cli.main.main(["grade", str(submissions), "--root", str(tmp_path), "--workers", "2"]) == 0
    records = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "results").glob("*.json")}
    solved = records["solution"]
    assert solved["status"] == "graded" and solved["score"] == solved["max_score"] == 10, solved["checks"]
    assert set(solved["runs"]) == {"baseline", "variant"}
    assert records["starter"]["score"] < 10               # the untouched starter does not pass
    assert _digest(PACKAGE_DIR) == before, "grader new, build or grade changed a file of grader/"


def test_new_refuses_to_overwrite_a_lesson_or_take_a_bad_name(tmp_path, capsys):
    assert grader.cli.main.main(["new", "demo", "--root", str(tmp_path)]) == 0
    checks = tmp_path / "assignments" / "demo" / "checks.py"
    checks.write_text("# the instructor's own work\n")
    assert grader.cli.main.main(["new", "demo", "--root", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert checks.read_text() == "# the instructor's own work\n"
    (tmp_path / "solutions" / "other.py").write_text("x = 1\n")
    assert grader.cli.main.main(["new", "other", "--root", str(tmp_path)]) == 2
    assert not (tmp_path / "assignments" / "other").exists()
    for name in ("../escape", "a b", ".hidden", ""):
        assert grader.cli.main.main(["new", name, "--root", str(tmp_path)]) == 2
    assert sorted(p.name for p in (tmp_path / "assignments").iterdir()) == ["demo"]


@pytest.mark.parametrize("argv", [["grade", "{root}/submissions"], ["check", "{root}/submissions/a.py"], ["build"],
                                  ["validate"]])
def test_commands_refuse_to_guess_between_several_assignments(tmp_path, capsys, argv):
    for lesson in ("alpha", "beta"):
        new_lesson(lesson, tmp_path)
    (tmp_path / "submissions").mkdir()
    (tmp_path / "submissions" / "a.py").write_text("x = 1\n")
    args = [part.format(root=tmp_path) for part in argv] + ["--root", str(tmp_path)]
    assert grader.cli.main.main(args) == 2
    error = capsys.readouterr().err
    assert "several assignments" in error and "alpha" in error and "beta" in error
    assert {"build": "grader build ID", "validate": "grader validate ID"}.get(argv[0], "--assignment ID") in error
    assert "Traceback" not in error
    assert not (tmp_path / "results").exists() and not (tmp_path / "build").exists()


def test_grade_chooses_the_one_assignment_the_submissions_are_named_after(tmp_path, capsys):
    """With several lessons, submissions named after exactly one lesson's submission_filename choose it (and the
    command says so); named after none, or after several, the command still asks."""
    import argparse
    for lesson in ("alpha", "beta"):
        new_lesson(lesson, tmp_path)
    folder = tmp_path / "submissions"
    for student in ("ann", "ben"):
        (folder / student).mkdir(parents=True)
        (folder / student / "alpha.py").write_text("x = 1\n")
    (folder / "cid.py").write_text("x = 1\n")
    args = argparse.Namespace(command="grade", assignment=None, root=tmp_path, submissions=folder)
    assert grader.cli.main._which_assignment(args) == ("alpha", tmp_path)
    assert "using alpha: 2 of the submission file(s) are named alpha.py" in capsys.readouterr().err
    check = argparse.Namespace(command="check", assignment=None, root=tmp_path, file=tmp_path / "beta.ipynb")
    assert grader.cli.main._which_assignment(check) == ("beta", tmp_path)
    (folder / "dan").mkdir()
    (folder / "dan" / "beta.py").write_text("x = 1\n")
    with pytest.raises(grader.config.assignment.ConfigError, match="several assignments"):
        grader.cli.main._which_assignment(args)


def test_commands_on_a_project_without_assignments_say_how_to_make_one(tmp_path, capsys):
    (tmp_path / "assignments").mkdir()
    assert grader.cli.main.main(["build", "--root", str(tmp_path)]) == 2
    assert "grader new" in capsys.readouterr().err


def test_validate_checks_what_build_needs(tmp_path, capsys):
    """A solution whose exercise region lost its END marker still grades at full marks, but `grader build` cannot
    make its starter: validate must say so (exit 1), naming the region."""
    root = tmp_path / "project"
    shutil.copytree(TINY, root)
    solution = root / "solutions" / "tiny.py"
    solution.write_text(solution.read_text().replace("# END EXERCISE area\n", ""))
    assert grader.cli.main.main(["validate", "tiny", "--root", str(root)]) == 1
    error = capsys.readouterr().err
    assert "`grader build` would fail making the starters" in error and "has no END EXERCISE area" in error
    assert grader.cli.main.main(["build", "tiny", "--root", str(root), "--out", str(tmp_path / "out")]) == 2
