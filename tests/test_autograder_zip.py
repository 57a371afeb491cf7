"""The autograder zip: otter's layout, reproducible bytes, and real `otter run -a ZIP FILE` giving our scores.

One module fixture grades the reference solution and a mistaken submission (a forward difference) with
`grade_folder`, and runs the real otter-grader CLI once on each: the reference as `performance-05.py`, the
mistake as a zip that also carries two attacks on otter's own runner (a `.OTTER_LOG` that otter would
unpickle in its process, and an `otter/` package that would shadow otter inside its kernel).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import pickle
import re
import shutil
import stat
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest
from seeded_zip import SEED, with_seed

from grader.cli.batch import grade_folder
from grader.common.user_cache import CACHE_DIR_ENV
from grader.config.assignment import load
from grader.grading.warm_state import WarmState
from grader.lms.autograder_zip import (
    PLUGIN_NAME,
    build_zip_bytes,
    otter_config,
    write_autograder_zip,
    zip_name,
)
from grader.lms.canvas import STUDENT_COLUMNS as CANVAS_STUDENT_COLUMNS
from grader.lms.gradescope import RESULTS_SCHEMA
from grader.lms.otter_csv import POINTS_POSSIBLE_LABEL

ROOT = Path(__file__).resolve().parent.parent
MISTAKE = ROOT / "tests" / "assignments" / "performance-05" / "corpus" / "forward_difference.py"
OTTER = Path(sys.executable).with_name("otter")


@pytest.fixture(scope="module")
def assignment():
    return load()


@pytest.fixture(scope="module")
def built(assignment, tmp_path_factory) -> Path:
    return write_autograder_zip(assignment, tmp_path_factory.mktemp("build"))


def test_zip_is_named_after_the_assignment_and_has_otters_layout(assignment, built):
    assert built.name == zip_name(assignment) == f"{assignment.id}-autograder.zip"
    with zipfile.ZipFile(built) as archive:
        names = archive.namelist()
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        for required in ("run_autograder", "setup.sh", "run_otter.py", "otter_config.json", "requirements.txt",
                         "tests/", "pyproject.toml", "setup.py", "README.md", "grader/__init__.py",
                         "grader/lms/otter_plugin.py", "grader/lms/otter_import_hook.py",
                         "grader/sandbox/child/harness.py", f"assignments/{assignment.id}/assignment.toml",
                         assignment.solution_path.relative_to(assignment.root).as_posix()):
            assert required in names, required
        config = json.loads(archive.read("otter_config.json"))
    assert modes["run_autograder"] & 0o777 == 0o755 and modes["setup.sh"] & 0o777 == 0o755
    assert stat.S_ISDIR(modes["tests/"])
    assert names == sorted(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or n.startswith("tests/") and n != "tests/"
                or "/." in n or n.startswith(".")]
    assert config == {"lang": "python", "plugins": [{PLUGIN_NAME: {"assignment": assignment.id}}]}


def test_plugin_named_in_the_config_is_an_otter_plugin():
    from otter.plugins import AbstractOtterPlugin

    from grader.lms import otter_plugin

    assert otter_plugin.PLUGIN_NAME == PLUGIN_NAME
    assert issubclass(otter_plugin.SandboxedGrader, AbstractOtterPlugin)


def test_rebuild_is_byte_identical(assignment, built, tmp_path):
    again = write_autograder_zip(assignment, tmp_path)
    assert again.read_bytes() == built.read_bytes() == build_zip_bytes(assignment)
    with zipfile.ZipFile(built) as archive:
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_scripts_install_bubblewrap_and_call_otters_entry_point(built):
    with zipfile.ZipFile(built) as archive:
        setup = archive.read("setup.sh").decode()
        run = archive.read("run_autograder").decode()
        run_otter = archive.read("run_otter.py").decode()
    assert setup.startswith("#!/usr/bin/env bash") and run.startswith("#!/usr/bin/env bash")
    assert "apt-get update" in setup and "bubblewrap" in setup and "python3-venv" in setup
    assert "pip install -r \"$SOURCE/requirements.txt\"" in setup and "--no-deps \"$SOURCE\"" in setup
    assert setup.rstrip().endswith('chmod -R go-rwx "$SOURCE"')  # instructor files: root only
    assert "pip install" not in run                              # grading never installs anything
    assert "run_otter.py" in run and 'run_gradescope("/autograder")' in run_otter
    assert "install-hook" not in setup                           # pip installs otter's import hook with the package
    for script in (setup, run):
        assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_requirements_pin_the_installed_versions(built):
    with zipfile.ZipFile(built) as archive:
        lines = [line for line in archive.read("requirements.txt").decode().splitlines()
                 if line and not line.startswith("#")]
    assert f"otter-grader[grading]=={metadata.version('otter-grader')}" in lines   # otter's runner needs a kernel
    assert f"jax=={metadata.version('jax')}" in lines and f"numpy=={metadata.version('numpy')}" in lines
    # the LMS host gets the ml_dtypes this checkout runs (pyproject.toml bounds it: 0.7.0 imports in 0.8 CPU-s)
    assert f"ml_dtypes=={metadata.version('ml_dtypes')}" in lines


def test_zip_carries_the_same_grading_inputs(assignment, built, tmp_path):
    with zipfile.ZipFile(built) as archive:
        archive.extractall(tmp_path)
    shipped = load(assignment.id, tmp_path)
    assert shipped.fingerprint == assignment.fingerprint     # same config, checks, oracle and solution


def test_runner_hands_otter_our_results_and_otter_options_apply():
    import dill
    from otter.run.run_autograder.autograder_config import AutograderConfig
    from test_gradescope import SECRET, make_record

    from grader.lms.gradescope import OtterSettings, results_json
    from grader.lms.otter_runner import SandboxedGradingResults

    record = make_record()
    results = SandboxedGradingResults.from_record(record, 4.0, {})
    gradescope = results.to_gradescope_dict(AutograderConfig({}))
    assert gradescope == results_json(record, 4.0)
    assert (results.total, results.possible) == (9.5, 20.0)                   # partial credit kept
    assert results.test_files == [c["id"] for c in record["checks"]]
    assert SECRET not in results.summary() and SECRET not in json.dumps(gradescope)
    again = dill.loads(dill.dumps(results))                                  # otter pickles it (results.pkl)
    assert again.to_gradescope_dict(AutograderConfig({})) == gradescope
    configured = results.to_gradescope_dict(AutograderConfig({"points_possible": 50, "show_stdout": True}))
    assert configured == results_json(record, 4.0, OtterSettings(points_possible=50, show_stdout=True))
    assert configured["score"] == 50 * 9.5 / 20 and configured["stdout_visibility"] == "after_published"


def test_otter_creates_our_runner_only_for_configs_naming_our_plugin():
    import otter.run.run_autograder as otter_autograder
    from otter.run.run_autograder.runners.python_runner import PythonRunner

    from grader.lms.otter_runner import SandboxedRunner, install

    install()
    ours = otter_autograder.create_runner({"plugins": [{PLUGIN_NAME: {"assignment": "performance-05"}}]})
    theirs = otter_autograder.create_runner({"plugins": []})
    assert isinstance(ours, SandboxedRunner) and isinstance(theirs, PythonRunner)


@pytest.mark.parametrize("options, fragment", [
    ({"pdf": True}, "pdf: PDF export of notebooks is not supported"),
    ({"grade_from_log": True}, "never reads (or unpickles)"),
    ({"seed_variable": "rng"}, "use `seed`"),
    ({"zips": True}, "zip submission"),
    ({"points_possible": "fifty"}, "points_possible: a number"),
    ({"show_stdout": "yes"}, "show_stdout: true or false"),
    ({"seed": 18}, "other than the lesson's own seed"),
    ({"colour": "blue"}, "colour: not an otter option"),
])
def test_otter_options_are_applied_or_refused_at_build(assignment, options, fragment, tmp_path):
    from grader.authoring.build import BuildError, build

    broken = dataclasses.replace(assignment, config={**assignment.config, "lms": {"otter": options}})
    with pytest.raises(BuildError, match=re.escape(fragment)):
        build(broken, tmp_path / "starters", tmp_path / "zip")


def test_applied_otter_options_reach_the_zips_config(assignment):
    configured = dataclasses.replace(assignment, config={**assignment.config,
                                                         "lms": {"otter": {"points_possible": 50, "seed": 7}}})
    config = otter_config(configured)
    assert config["points_possible"] == 50 and config["plugins"][0][PLUGIN_NAME]["variant_seed"] == 7


# --- real otter run -------------------------------------------------------------------------------

class _Canary:
    """Unpickling this writes a file: what a student's `.OTTER_LOG` could do inside otter's process."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (exec, (f"open({str(self.path)!r}, 'w').write('student code ran in otter')",))


def _otter_run(built: Path, submission: Path, folder: Path) -> dict:
    folder.mkdir()
    env = {**os.environ, "PATH": f"{OTTER.parent}{os.pathsep}{os.environ.get('PATH', '')}"}   # $GRADER_CACHE_DIR too
    done = subprocess.run([str(OTTER), "run", "-a", str(built), str(submission), "--no-logo", "-p"], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"otter run failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return {"results": json.loads((folder / "results.json").read_text()), "pickle": folder / "results.pkl",
            "stdout": done.stdout}


@pytest.fixture(scope="module")
def graded(assignment, built, tmp_path_factory):
    if not OTTER.is_file():
        pytest.fail(f"{OTTER} not found: otter-grader is a dependency of the project")
    try:
        metadata.version("ipykernel")
    except metadata.PackageNotFoundError:
        pytest.fail("otter run needs a Jupyter kernel for its own cells: install otter-grader[grading] (ipykernel)")
    work = tmp_path_factory.mktemp("otter")
    submissions = work / "submissions"
    submissions.mkdir()
    shutil.copy(assignment.solution_path, submissions / "reference.py")
    shutil.copy(MISTAKE, submissions / "forward_difference.py")
    out = work / "out"
    batch = grade_folder(assignment, submissions, out, variant_seed=SEED, progress=lambda line: None)
    seeded = with_seed(built, work / "seeded.zip")     # the same variant on both paths: messages compare equal

    reference = work / "reference-in" / assignment.submission_filename
    reference.parent.mkdir()
    shutil.copy(assignment.solution_path, reference)
    markers = {"log": work / "OTTER_LOG_UNPICKLED", "shadow": work / "OTTER_SHADOWED"}
    mistake = work / "forward_difference.zip"
    with zipfile.ZipFile(mistake, "w") as archive:
        archive.write(MISTAKE, assignment.submission_filename)
        archive.writestr(".OTTER_LOG", pickle.dumps(_Canary(markers["log"])))
        archive.writestr("otter/__init__.py", f"open({str(markers['shadow'])!r}, 'w').write('shadowed')\n")
    # `otter run` finds the batch's warm state (the session's $GRADER_CACHE_DIR) under the same key.
    return {
        "records": {r["submission"]: r for r in batch.records},
        "out": out,
        "otter": {"reference": _otter_run(seeded, reference, work / "run-reference"),
                  "forward_difference": _otter_run(seeded, mistake, work / "run-forward_difference")},
        "markers": markers,
        "sources": {"reference": assignment.solution_path.read_text(), "forward_difference": MISTAKE.read_text()},
    }


def _scores(results_or_record: dict, key: str) -> list[tuple[float, float]]:
    """Per-check (score, max) in order; results.json's "Public Tests" summary (0 points) is not a check."""
    entries = results_or_record["tests" if key == "name" else "checks"]
    return [(e["score"], e["max_score"]) for e in entries if e.get("name") != "Public Tests"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["reference", "forward_difference"])
def test_otter_run_gives_the_same_per_check_scores_as_grader_grade(graded, name):
    results = graded["otter"][name]["results"]
    record = graded["records"][name]
    assert _scores(results, "name") == _scores(record, "id")
    assert results["score"] == record["score"]


@pytest.mark.slow
def test_scores_are_the_expected_ones(graded):
    assert graded["otter"]["reference"]["results"]["score"] == 100.0
    titles = {spec.id: spec.title for spec in load().checks}
    tests = {t["name"]: t for t in graded["otter"]["forward_difference"]["results"]["tests"]}
    expected = tomllib.loads(MISTAKE.with_suffix(".expected.toml").read_text())
    for check, score in expected["checks"].items():
        assert tests[titles[check]]["score"] == score, check
    central = tests[titles["directional.central_difference"]]
    assert central["status"] == "failed" and "forward difference" in central["output"]
    assert graded["otter"]["forward_difference"]["results"]["score"] == sum(expected["groups"].values())


@pytest.mark.slow
def test_otter_results_json_matches_grader_grade_gradescope_file(graded):
    keys = ("name", "number", "score", "max_score", "status", "visibility", "output")
    for name, run in graded["otter"].items():
        ours = json.loads((graded["out"] / "gradescope" / f"{name}.json").read_text())
        assert [{k: t.get(k) for k in keys} for t in run["results"]["tests"]] == [{k: t.get(k) for k in keys} for t in ours["tests"]]
        assert run["results"]["stdout_visibility"] == ours["stdout_visibility"] == "hidden"


@pytest.mark.slow
def test_otter_run_reuses_the_warm_state_of_the_same_assignment_and_versions(assignment, graded):
    entry = WarmState(assignment).folder
    for run in graded["otter"].values():   # a different key would have measured the reference again
        assert f"Warm-up: reference facts and compiled programs reused ({entry})" in run["stdout"]


@pytest.mark.slow
def test_every_results_json_follows_gradescopes_schema(graded):
    files = sorted((graded["out"] / "gradescope").glob("*.json"))
    assert [p.stem for p in files] == ["forward_difference", "reference"]
    for results in [json.loads(p.read_text()) for p in files] + [r["results"] for r in graded["otter"].values()]:
        jsonschema.validate(results, RESULTS_SCHEMA)


@pytest.mark.slow
def test_student_code_never_runs_in_otters_process_or_kernel(graded):
    import dill

    assert not graded["markers"]["log"].exists(), "otter unpickled the submitted .OTTER_LOG"
    assert not graded["markers"]["shadow"].exists(), "a submitted otter/ package ran in otter's kernel"
    for run in graded["otter"].values():
        with open(run["pickle"], "rb") as stream:
            results = dill.load(stream)
        assert getattr(results, "notebook", None) is None                    # otter's kernel never ran anything
        assert results.total == run["results"]["score"] and results.possible == 100.0
        assert "Sandboxed grader:" in run["stdout"]          # the runner's report (stdout: instructor only)


@pytest.mark.slow
def test_batch_writes_otter_and_canvas_csvs_that_read_back(assignment, graded):
    out, records = graded["out"], graded["records"]
    with open(out / "final_grades.csv", newline="") as stream:
        table = list(csv.DictReader(stream))
    assert list(table[0]) == ["file", *sorted(c.id for c in assignment.checks),
                              "total_points_earned", "percent_correct", "grading_status"]
    assert table[0]["file"] == POINTS_POSSIBLE_LABEL
    assert float(table[0]["total_points_earned"]) == assignment.max_score
    for row in table[1:]:
        record = records[Path(row["file"]).stem]
        assert row["grading_status"] == "Completed"
        assert {c["id"]: c["score"] for c in record["checks"]} == {c.id: float(row[c.id]) for c in assignment.checks}
        assert float(row["total_points_earned"]) == record["score"]
    with open(out / "canvas.csv", newline="") as stream:
        canvas = list(csv.DictReader(stream))
    column = assignment.title                   # no canvas_assignment_id: Canvas matches the assignment by name
    assert list(canvas[0]) == [*CANVAS_STUDENT_COLUMNS, column]
    assert {row["SIS Login ID"]: float(row[column]) for row in canvas[1:]} == {n: r["score"] for n, r in records.items()}
    assert (out / "grades.csv").is_file()


@pytest.mark.slow
def test_setup_warms_the_reference_cache_of_the_extracted_zip(assignment, built, graded, tmp_path):
    """On Gradescope (no $GRADER_CACHE_DIR) setup.sh keeps the warm state in source/.grader-cache; one kept under
    the same key is used as it is (here: the session's, copied there), never measured again."""
    source = tmp_path / "autograder" / "source"
    with zipfile.ZipFile(built) as archive:
        archive.extractall(source)
    entry = WarmState(assignment).folder
    kept = source / ".grader-cache" / "warm" / entry.name
    shutil.copytree(entry, kept, ignore=shutil.ignore_patterns("views", "locks", "staging", "seed-*"))
    before = (kept / "reference.json").read_bytes()
    env = {name: value for name, value in os.environ.items() if name != CACHE_DIR_ENV}
    done = subprocess.run([sys.executable, "-m", "grader.lms.otter_plugin", "warm", str(tmp_path / "autograder")],
                          cwd="/", env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"reference facts for performance-05 cached in {kept}" in done.stdout
    assert (kept / "reference.json").read_bytes() == before
    assert [p.name for p in (source / ".grader-cache" / "warm").iterdir()] == [entry.name]
