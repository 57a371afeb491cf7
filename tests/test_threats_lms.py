"""Threats graded the way an LMS grades them: Gradescope's entry point on an `/autograder` layout and the real
`otter run -a ZIP FILE`, where every run is a fresh sandboxed interpreter (the path where JAX, NumPy and the
standard library import modules while the harness sets a run up), and `grader check FILE` (the fork server in
the instructor's checkout, a student's own check).

The cases are the threats (tests/assignments/<id>/threats/) whose expectation says `lms = true`. Each must get
the group scores and messages its expectation gives, on every path, and its grader, once exited, must have left
no cgroup and no temporary folder behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from case_expectations import EXPECTED, case_folders, case_names, record_problems, summary
from leftovers import cgroups_of, temp_dirs_of
from lms_paths import LmsRun, gradescope_run, otter_run
from seeded_zip import with_seed
from test_threats import TIGHT_LIMITS, allowance_problems, file_name, with_solution

from grader.config.assignment import load
from grader.lms.autograder_zip import write_autograder_zip

ASSIGNMENT = "performance-05"
THREATS = case_folders("threats")[ASSIGNMENT]
CASES = [case for case in case_names(THREATS)
         if tomllib.loads((THREATS / f"{case}{EXPECTED}").read_text(encoding="utf-8")).get("lms")]


# `otter run` differs from Gradescope's entry point in how a file arrives and where the grading process stands (a
# temporary copy of the zip, otter's own working folder): what a file named after a module could exploit. Those cases
# go through both paths; the others' sandbox runs are the same on both, so they go through Gradescope's alone (the
# runaway pair and the pool hog ran to their limits twice over for nothing new).
OTTER_CASES = [case for case in CASES if file_name((THREATS / f"{case}.py").read_text(encoding="utf-8"))]


def expectation(case: str) -> dict:
    return tomllib.loads((THREATS / f"{case}{EXPECTED}").read_text(encoding="utf-8"))


def write_case(case: str, solution: str, folder: Path) -> Path:
    """The threat saved under the name it attacks with (`# file-name:`), as a student would submit it."""
    text = (THREATS / f"{case}.py").read_text(encoding="utf-8")
    name = file_name(text) or f"{case}.py".encode()
    text = with_solution(solution, text)
    target = folder / case
    target.mkdir(parents=True)
    path = target / os.fsdecode(name)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    """Every case through both LMS paths; they, and `grader check` below, use the session's warm state
    ($GRADER_CACHE_DIR, tests/conftest.py)."""
    assignment = load(ASSIGNMENT)
    work = tmp_path_factory.mktemp("lms-threats")
    solution = assignment.solution_path.read_text(encoding="utf-8")
    files = {case: write_case(case, solution, work / "submissions") for case in CASES}
    # The batch's tighter limits (test_threats.py): the runaway control and the queueing attack run to them.
    zip_path = with_seed(write_autograder_zip(assignment, work / "build"), work / "seeded.zip", limits=TIGHT_LIMITS)

    def both(case: str) -> tuple[str, LmsRun, LmsRun | None]:
        return (case, gradescope_run(zip_path, files[case], work / "gradescope" / case),
                otter_run(zip_path, files[case], work / "otter" / case) if case in OTTER_CASES else None)

    # The queueing attack and its control side by side, with nothing else of this module beside them: both then wait
    # alike for the machine's other work (graded among the other cases, the control once started 23 s after the
    # attack, and the attack's run as written waited for the control's runaway loop: 8 s allowed against 3.9).
    pair = [case for case in ("self_queueing", "self_queueing_control") if case in CASES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {case: (gradescope, otter) for case, gradescope, otter in pool.map(both, pair)}
        runs.update({case: (gradescope, otter) for case, gradescope, otter in
                     pool.map(both, [case for case in CASES if case not in pair])})
    return {"runs": runs, "files": files, "groups": [c.group for c in assignment.checks]}


def group_scores(results: dict, groups: list[str]) -> dict[str, float]:
    """Group -> score from results.json, whose tests follow the assignment's checks in order (after the summary)."""
    tests = [test for test in results["tests"] if test["name"] != "Public Tests"]
    assert len(tests) == len(groups), [test["name"] for test in tests]
    scores: dict[str, float] = {}
    for group, test in zip(groups, tests):
        scores[group] = scores.get(group, 0.0) + test["score"]
    return scores


def test_the_lms_cases_cover_every_kind_of_module_a_set_up_imports():
    """JAX's lazy imports, NumPy, the standard library; an attacker and honest victims."""
    names = {file_name((THREATS / f"{case}.py").read_text(encoding="utf-8")) for case in CASES}
    assert {b"zstandard.py", b"numpy.py", b"difflib.py", b"copy.py"} <= names
    assert any(case.endswith("_victim") for case in CASES)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_gradescope_grades_the_threat_as_expected_and_leaves_nothing(lms, case):
    expected = expectation(case)
    run, _ = lms["runs"][case]
    assert run.record is not None, f"{case}: the Gradescope path wrote no record: {run.results.get('output')}"
    problems = record_problems(run.record, expected)
    assert not problems, f"{case} ({expected['why']}):\n  " + "\n  ".join(problems) + f"\n\n{summary(run.record)}"
    assert run.results["score"] == pytest.approx(run.record["score"])
    assert cgroups_of(run.pid) == [] and temp_dirs_of(run.pid) == []


def test_otter_run_gets_every_kind_of_name_a_file_can_take():
    """A standard-library module, NumPy, a lazily imported module and JAX itself, as attacker and as victim."""
    names = {file_name((THREATS / f"{case}.py").read_text(encoding="utf-8")) for case in OTTER_CASES}
    assert {b"zstandard.py", b"numpy.py", b"difflib.py", b"copy.py", b"jax.py"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("case", OTTER_CASES)
def test_otter_run_grades_the_threat_as_expected_and_leaves_nothing(lms, case):
    expected = expectation(case)
    _, run = lms["runs"][case]
    assert run is not None
    scores = group_scores(run.results, lms["groups"])
    assert scores == pytest.approx(expected["groups"]), f"{case}: {run.results.get('output')}"
    output = run.results["output"].lower()
    for fragment in expected.get("contains", {}).get("messages", []):
        assert fragment.lower() in output, (case, fragment, run.results["output"])
    assert cgroups_of(run.pid) == [] and temp_dirs_of(run.pid) == []


@pytest.mark.slow
def test_a_run_queueing_behind_its_own_processes_earns_no_extra_time(lms):
    """As in the batch (test_threats.py): compared with the control graded at the same time, on Gradescope's path."""
    attack, control = lms["runs"]["self_queueing"][0].record, lms["runs"]["self_queueing_control"][0].record
    assert attack is not None and control is not None
    problems = allowance_problems(attack, control)
    assert not problems, problems


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("lazy_import_") or c.endswith("_name_victim")])
def test_grader_check_gives_the_same_verdict(lms, case):
    """`grader check` (visible checks only) on the files named after modules: an attacker earns nothing, a victim
    full marks. (Its runs are the fork server's, as in the batch, where the other threats are graded.)"""
    path = lms["files"][case]
    # Not from the file's own folder: `python -m` puts the working directory on the grader's own sys.path.
    done = subprocess.run([sys.executable, "-m", "grader.cli.main", "check", str(path), "--json"], cwd=path.parent.parent,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode in (0, 1), done.stderr
    result = json.loads(done.stdout)
    full = case.endswith("_victim")
    assert result["score"] == (result["max_score"] if full else 0), (case, result["score"], done.stdout[-2000:])
