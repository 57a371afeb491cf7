"""A student's check runs in the student's own Python, by the portable strategy where no sandbox works.

The portable strategy (sandbox/isolation.py `Portable`: plain subprocesses, rlimits the run sets on itself, nothing
Linux-only) is forced here on Linux with $GRADER_PORTABLE_RUNS: it must give the same scores and feedback as the
default strategy (bubblewrap, the fork server as root) on a sample of the corpus's honest files (every
SAMPLE_EVERY-th of those labelled 100/100, 8 in all with the reference and a notebook: the whole set would
add an hour to the suite). The student bundle is unpacked and checked in this process, as the wheel's `grader
check` does. The smaller tests pin what the two strategies rest on: the shared import paths, the limits a run sets
on itself, and the student's wording of a run that could not start."""

from __future__ import annotations

import json
import re
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from grader.authoring.student_wheel import write_student_wheel
from grader.config.assignment import load
from grader.config.bundle import PACKAGE, read_bundle
from grader.model.limits import Limits
from grader.model.verdicts import FAULT_IN_A_CHECK, ISOLATION_PREFIX, for_student
from grader.sandbox import shared_python
from grader.sandbox.portable import Portable, student_strategy
from grader.sandbox.process import copy_child_runtime
from grader.student.machine import ACCELERATOR_DISTRIBUTIONS, prepare_runs, start_failure
from grader.student.session import run_check
from tests.case_expectations import ROOT

CORPUS = ROOT / "tests" / "assignments" / "performance-05" / "corpus"
SAMPLE_EVERY = 50   # about six honest files (the two references added): each runs through fresh interpreters
VARIANT_SEED = 31337


def honest_sample() -> list[Path]:
    honest = []
    for label in sorted(CORPUS.glob("*.expected.toml")):
        expected = tomllib.loads(label.read_text())
        scores = list(expected.get("groups", {}).values())   # a group may be labelled with a range: not sampled
        if expected.get("status", "graded") == "graded" and all(isinstance(score, (int, float)) for score in scores) \
                and abs(sum(scores) - 100) < 1e-9:
            stem = label.name[: -len(".expected.toml")]
            honest += [p for p in (CORPUS / f"{stem}.py", CORPUS / f"{stem}.ipynb") if p.is_file()]
    assert len(honest) > 100, "the corpus should hold many honest files"
    picked = honest[::SAMPLE_EVERY]
    for must in (CORPUS / "reference.py", CORPUS / "notebook_reference.ipynb"):
        if must not in picked:
            picked.append(must)
    return picked


@pytest.fixture(scope="module")
def bundle_assignment(tmp_path_factory):
    wheel = write_student_wheel(load("performance-05", ROOT), tmp_path_factory.mktemp("wheel"))
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    assignment = load("performance-05", site / PACKAGE)
    return assignment, read_bundle(assignment.folder)


@pytest.fixture
def student_process(monkeypatch):
    """This process as a student's `grader check`: its environment shared with its runs, for this test only."""
    monkeypatch.delenv(shared_python.PORTABLE_ENV, raising=False)
    yield
    shared_python.unshare()


def visible_result(path: Path, bundle_assignment) -> dict:
    assignment, bundle = bundle_assignment
    result = run_check(path, assignment, bundle, variant_seed=VARIANT_SEED)   # one world for both strategies
    return {"status": result.status, "score": result.score,
            "checks": [(c["id"], c["score"], c["feedback"]) for c in result.checks],
            "messages": [m for m in result.messages if not m.startswith((ISOLATION_PREFIX, "Fast runs unavailable"))],
            "isolation": [m for m in result.messages if m.startswith(ISOLATION_PREFIX)]}


def _comparable(value):
    """A result part as both strategies must agree on it: how many bytes a run printed is left out (the lesson's
    script prints its own timings, whose digits differ from run to run)."""
    if isinstance(value, list):
        return [re.sub(r"printed \d+ bytes", "printed N bytes", item) if isinstance(item, str) else item
                for item in value]
    return value


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the default strategy to compare with is Linux's")
def test_the_portable_strategy_forced_grades_as_the_default(bundle_assignment, student_process, monkeypatch, tmp_path):
    prepare_runs()
    assert not student_strategy().portable, "this machine's sandbox should be the default to compare with"
    sample = honest_sample()
    default = {path.name: visible_result(path, bundle_assignment) for path in sample}
    monkeypatch.setenv(shared_python.PORTABLE_ENV, "1")
    assert student_strategy().portable
    differing = []
    for path in sample:
        portable = visible_result(path, bundle_assignment)
        assert portable["isolation"] and "portable strategy" in portable["isolation"][0], portable["isolation"]
        assert "portable" not in " ".join(default[path.name]["isolation"])
        for key in ("status", "score", "checks", "messages"):
            if _comparable(portable[key]) != _comparable(default[path.name][key]):
                pairs = zip(default[path.name][key], portable[key]) if isinstance(portable[key], list) else \
                    [(default[path.name][key], portable[key])]
                differing.append((path.name, key, [pair for pair in pairs if pair[0] != pair[1]][:3]))
    assert not differing, json.dumps(differing[:4], indent=1)
    assert all(default[path.name]["score"] == 100 for path in sample), {p: r["score"] for p, r in default.items()}


def test_a_shared_environment_reaches_the_run_and_the_batch_shares_none(tmp_path, student_process, monkeypatch):
    extra = tmp_path / "from-pythonpath"
    extra.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), "", str(extra), *sys.path])
    copy_child_runtime(tmp_path / "batch")
    assert not (tmp_path / "batch" / shared_python.IMPORT_PATHS_FILE).exists(), "the batch's runs see only its choice"
    shared_python.share()
    copy_child_runtime(tmp_path / "check")
    paths = json.loads((tmp_path / "check" / shared_python.IMPORT_PATHS_FILE).read_text())
    assert str(extra) in paths and str(tmp_path) not in paths and "" not in paths   # never the student's folder
    sys.path.insert(0, str(tmp_path / "check"))
    try:
        import import_paths  # the child's module, as the run imports it
        saved = list(sys.path)
        import_paths.adopt(str(tmp_path / "check"))
        assert sys.path == [str(tmp_path / "check"), *paths]
        sys.path[:] = saved
    finally:
        sys.modules.pop("import_paths", None)


def test_a_run_whose_python_cannot_import_jax_says_so_in_the_students_terms(bundle_assignment, student_process,
                                                                          monkeypatch):
    """A check whose runs cannot import the packages (here: the shared folders cut to the standard library) names the
    Python it tried, the import that failed and the pip command; it never says an instructor was told."""
    from grader.student.session import CheckError

    monkeypatch.setenv(shared_python.PORTABLE_ENV, "1")
    prepare_runs()
    shared_python._shared[:] = [[p for p in shared_python.import_paths() if "-packages" not in p]]   # undone after
    assignment, bundle = bundle_assignment
    try:
        result = run_check(CORPUS / "reference.py", assignment, bundle, variant_seed=VARIANT_SEED)
        text = " ".join(result.messages) + " ".join(c["feedback"] for c in result.checks)
        assert result.score == 0 and result.status == "error"
    except CheckError as error:   # the facts program, run first on a machine, cannot start either
        text = str(error)
    assert "could not import" in text and sys.executable in text and f"{sys.executable} -m pip install" in text, text
    assert "instructor" not in text


def test_the_portable_run_never_limits_the_students_process_count():
    own = Portable.own_rlimits(Limits())
    assert "nproc" not in own and own["cpu"] == Limits().cpu_seconds and own["fsize"] == Limits().file_size_bytes


def test_a_run_that_cannot_import_jax_is_explained_in_the_students_terms():
    text = start_failure("the baseline run: the grader's set-up failed (ModuleNotFoundError: No module named 'jax')")
    assert text is not None and sys.executable in text and "could not import jax" in text
    assert f"{sys.executable} -m pip install 'jax>=" in text and "instructor" not in text
    assert start_failure("the baseline run: RuntimeError: something else") is None


def test_no_check_text_says_an_instructor_was_told():
    from grader.model.verdicts import INSTRUCTOR_TOLD, INSTRUCTOR_TOLD_CHECK

    for sentence in (f"This is the grader's fault, not yours; {INSTRUCTOR_TOLD}", f"Not judged. {INSTRUCTOR_TOLD_CHECK}"):
        assert "instructor" not in for_student(sentence) and FAULT_IN_A_CHECK in for_student(sentence)


@pytest.mark.parametrize("name,accelerator", [("libtpu", True), ("jax-cuda12-plugin", True), ("jax_cuda12_pjrt", True),
                                              ("jax-metal", True), ("jax-rocm7-plugin", True), ("jax", False),
                                              ("jaxlib", False), ("jax-cuda12-plugin-extra", False)])
def test_accelerator_backends_are_named_by_their_distributions(name, accelerator):
    assert bool(ACCELERATOR_DISTRIBUTIONS.match(name)) == accelerator


def test_the_loader_path_reaches_a_students_runs_only(student_process, monkeypatch, tmp_path):
    from grader.sandbox.process import child_environment

    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/modules/python/lib")
    assert "LD_LIBRARY_PATH" not in child_environment(tmp_path), "the batch's runs get nothing of the grader's"
    shared_python.share()
    assert child_environment(tmp_path)["LD_LIBRARY_PATH"] == "/opt/modules/python/lib"
