"""A class's grades are never wrong all at once: the grader fails closed on isolation and never fails open.

- With bubblewrap failing (a PATH stub that exits 1, as a restricted user namespace or an AppArmor profile makes
  it), `grader grade` grades nothing unless weak isolation is asked for by name; with the opt-in and setpriv, no run
  is root; without setpriv, even the opt-in is refused. A Dask worker started with that PATH refuses its tasks with
  its address and reason, and grades (never as root) only when the instructor asked on the client.
- Under every fault that can be injected (a run's set-up fails, the oracle raises, the fork server dies, the warm
  state is corrupt or gone, the cache folder cannot be used, a sandbox tool fails), a file that does nothing and a
  file that only prints score 0, never more: a record the grader could not grade is its error record (no points,
  graded again on the next run) and the batch exits non-zero, or the batch stops before grading anything.

The tiny lesson (tests/fixtures/tiny_project: no JAX) keeps every batch here to seconds; its copy here asks its run
checks for the whole contract, as performance-05's do, so a file that does nothing scores 0 when nothing fails."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import grader.cli.batch
import grader.grading.grade
import grader.sandbox.isolation as isolation
from grader.cli.main import main
from grader.config.assignment import ConfigError, load
from grader.runs.snapshot import build_snapshot
from grader.sandbox.raw_run import RawRun
from tests.python_for_others import needs_python_others_can_start

FIXTURE = Path(__file__).with_name("fixtures") / "tiny_project"
TINY = Path(__file__).with_name("fixtures") / "tiny_project"    # replaced by the copy below, once per module
GRADER = [sys.executable, "-m", "grader.cli.main"]
IDLE = {"does_nothing": "pass\n", "only_prints": "print('radius, area and side are left to the reader')\n"}
SPY = ("import os\nprint('uid', os.getuid(), 'euid', os.geteuid())\nimport math\nradius = 2.0\n"
       "area = math.pi * radius ** 2\nside = math.sqrt(area)\n")


@pytest.fixture(scope="module", autouse=True)
def strict_tiny(tmp_path_factory):
    """The tiny lesson whose `runs.reached_end` needs the whole contract (as performance-05's run checks do)."""
    global TINY
    root = tmp_path_factory.mktemp("strict") / "tiny_project"
    shutil.copytree(FIXTURE, root)
    toml = root / "assignments" / "tiny" / "assignment.toml"
    text = toml.read_text()
    marker = 'id = "runs.reached_end"\ngroup = "runs"\npoints = 1\nfunction = "builtin:ran_to_the_end"\n'
    assert marker in text
    toml.write_text(text.replace(marker, marker + 'needs = ["*"]\n'))
    TINY = root
    yield root
    TINY = FIXTURE


def stub_path(folder: Path, setpriv: bool = True, bwrap: str = "echo 'bwrap: No permissions to create new "
              "namespace' >&2; exit 1") -> str:
    """A PATH of one folder: a `bwrap` stub that fails as a restricted machine's does, the real prlimit and unshare,
    and the real setpriv when `setpriv`."""
    folder.mkdir(parents=True, exist_ok=True)
    stub = folder / "bwrap"
    stub.write_text(f"#!/bin/sh\n{bwrap}\n")
    stub.chmod(0o755)
    for tool in ("prlimit", "unshare") + (("setpriv",) if setpriv else ()):
        found = shutil.which(tool)
        assert found, f"{tool} is part of this machine's setup"
        os.symlink(found, folder / tool)
    return str(folder)


def submissions(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, source in files.items():
        (folder / f"{name}.py").write_text(source)
    return folder


def grade_command(tmp_path: Path, path: str, *extra: str, files: dict[str, str] = IDLE) -> subprocess.CompletedProcess:
    folder = submissions(tmp_path / "submissions", files)
    env = {**os.environ, "PATH": path}
    env.pop(isolation.WEAK_ISOLATION_ENV, None)
    return subprocess.run([*GRADER, "grade", str(folder), "--out", str(tmp_path / "out"), "--root", str(TINY),
                           "--assignment", "tiny", "--workers", "1", *extra],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)


def records(out: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}


# ---- isolation: only real isolation counts ----------------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="the uid a run gets is the question: needs root")
@needs_python_others_can_start
def test_with_bubblewrap_failing_nothing_is_graded_without_the_opt_in(tmp_path):
    done = grade_command(tmp_path, stub_path(tmp_path / "bin"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "refusing to grade" in done.stderr and "No permissions to create new namespace" in done.stderr
    assert "unshare: the machine's files are visible" in done.stderr and not (tmp_path / "out").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid a run gets is the question: needs root")
@needs_python_others_can_start
def test_with_the_opt_in_runs_are_weak_and_never_root(tmp_path):
    done = grade_command(tmp_path, stub_path(tmp_path / "bin"), "--allow-weak-isolation",
                         files={"spy": SPY, **IDLE})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.splitlines()[0].startswith("Sandbox: WEAK, used because it was asked for by name")
    found = records(tmp_path / "out")
    assert {name: r["score"] for name, r in found.items()} == {"spy": 3.0, "does_nothing": 0.0, "only_prints": 0.0}
    uid_line = next(line for line in found["spy"]["output"]["head"].splitlines() if line.startswith("uid"))
    assert uid_line.split()[1] != "0" and uid_line.split()[3] != "0", uid_line
    assert any("WEAK (asked for by name)" in m for m in found["spy"]["messages"])


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid a run gets is the question: needs root")
def test_without_a_way_to_drop_privileges_even_the_opt_in_is_refused(tmp_path):
    done = grade_command(tmp_path, stub_path(tmp_path / "bin", setpriv=False), "--allow-weak-isolation")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "never runs as root" in done.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the uid a run gets is the question: needs root")
@needs_python_others_can_start
def test_a_dask_worker_started_with_bubblewrap_failing_refuses_unless_the_client_asked(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    assignment = load("tiny", TINY)
    folder = submissions(tmp_path / "submissions", {"spy": SPY, **IDLE})
    monkeypatch.setenv("PATH", stub_path(tmp_path / "bin"))     # the workers' environment: spawned with this PATH
    monkeypatch.delenv(isolation.WEAK_ISOLATION_ENV, raising=False)
    monkeypatch.setattr(isolation, "_weak_allowed", False)
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1, memory_limit=0,
                                  dashboard_address=None) as cluster:
        with pytest.raises(ConfigError, match=r"worker tcp://\S+ cannot sandbox student code.*refusing to grade"):
            grader.cli.batch.grade_folder(assignment, folder, tmp_path / "refused", workers=1, scheduler=cluster,
                                          progress=lambda line: None)
        assert not (tmp_path / "refused" / "spy.json").exists()
        monkeypatch.setattr(isolation, "_weak_allowed", True)      # --allow-weak-isolation on the client
        result = grader.cli.batch.grade_folder(assignment, folder, tmp_path / "weak", workers=1, scheduler=cluster,
                                               progress=lambda line: None)
    scores = {r["submission"]: r["score"] for r in result.records}
    assert scores == {"spy": 3.0, "does_nothing": 0.0, "only_prints": 0.0}
    spy = next(r for r in result.records if r["submission"] == "spy")
    uid_line = next(line for line in spy["output"]["head"].splitlines() if line.startswith("uid"))
    assert uid_line.split()[1] != "0" and uid_line.split()[3] != "0", uid_line


# ---- never fail open: a file that does nothing scores 0 under every fault ------------------------------------

def grade_idle(tmp_path: Path, assignment=None) -> tuple[int | None, dict[str, dict]]:
    """`grader grade` of the idle files (the exit status, or None when the batch stopped with ConfigError) and
    every record it wrote."""
    out = tmp_path / "out"
    folder = tmp_path / "submissions"
    if not folder.exists():
        submissions(folder, IDLE)
    assignment = assignment or load("tiny", TINY)
    try:
        result = grader.cli.batch.grade_folder(assignment, folder, out, workers=2, regrade=True,
                                               progress=lambda line: None)
    except ConfigError:
        return None, records(out)
    faults = [r for r in result.records if r.get("grader_error")]
    return (1 if faults else 0), records(out)


def assert_nothing_earned(status: int | None, found: dict[str, dict]) -> None:
    for name, record in found.items():
        assert record["score"] == 0, (name, record["score"], record["messages"][:2])
        assert all(check["score"] == 0 for check in record["checks"]), name


def test_a_run_whose_set_up_fails_is_the_graders_error_record_never_an_excuse(tmp_path, monkeypatch):
    """The issue's case: the warm state is kept (a batch ran before), then every student run's set-up fails (the run's
    uid could not import what it needs): each record is the grader's error, with no points, and the batch exits 1."""
    status, found = grade_idle(tmp_path)          # a first batch keeps the world's verdict
    assert status == 0 and set(found) == set(IDLE)
    real = grader.grading.grade.run_scenario

    def unprepared(assignment, scenario, seed, source, *args, **kwargs):
        if source.startswith(("pass", "print")):    # the students' runs only: the reference's verdict is kept
            raw = RawRun(control=b'{"setup": "failed", "message": "ImportError: No module named numpy"}\n')
            return build_snapshot(raw, scenario.name, seed), raw
        return real(assignment, scenario, seed, source, *args, **kwargs)

    monkeypatch.setattr(grader.grading.grade, "run_scenario", unprepared)
    status, found = grade_idle(tmp_path)
    assert_nothing_earned(status, found)
    assert status == 1 and set(found) == set(IDLE)
    for record in found.values():
        assert record["status"] == "error" and "No module named numpy" in record["grader_error"]
        assert "the grader's fault, not yours" in record["messages"][0]
    grades = (tmp_path / "out" / "grades.csv").read_text().splitlines()[1:]
    assert all(row.endswith("grader_error,,,,,") and ",," in row for row in grades), grades   # no late, autograde, adjusted, penalty, held
    canvas = (tmp_path / "out" / "canvas.csv").read_text().splitlines()[2:]
    assert all(row.endswith(",") for row in canvas), canvas     # no score for Canvas to take


def test_the_command_says_how_many_could_not_be_graded_and_exits_1(tmp_path, monkeypatch, capsys):
    submissions(tmp_path / "submissions", IDLE)
    real = grader.grading.grade.run_scenario

    def unprepared(assignment, scenario, seed, source, *args, **kwargs):
        if source.startswith("pass"):
            raw = RawRun(grader_failure="OSError: [Errno 24] Too many open files")
            return build_snapshot(raw, scenario.name, seed), raw
        return real(assignment, scenario, seed, source, *args, **kwargs)

    monkeypatch.setattr(grader.grading.grade, "run_scenario", unprepared)
    code = main(["grade", str(tmp_path / "submissions"), "--out", str(tmp_path / "out"), "--root", str(TINY),
                 "--assignment", "tiny", "--workers", "1"])
    captured = capsys.readouterr()
    assert code == 1
    assert "1 not graded through the grader's fault" in captured.out
    assert "NOT GRADED: 1 submission(s) could not be graded through the grader's own fault (does_nothing)" in captured.out
    report = (tmp_path / "out" / "report.html").read_text()
    assert 'id="not-graded"' in report


def test_an_oracle_that_raises_gives_nothing(tmp_path, monkeypatch):
    assignment = load("tiny", TINY)

    def broken(*args, **kwargs):
        raise RuntimeError("injected: the oracle failed")

    monkeypatch.setattr(assignment.oracle, "build", broken)
    status, found = grade_idle(tmp_path, assignment)
    assert_nothing_earned(status, found)
    assert status is None or all(r.get("grader_error") for r in found.values())


def test_a_fork_server_that_dies_mid_batch_costs_nothing_and_gives_nothing(tmp_path, monkeypatch):
    """Every run is tried again on a new server generation, then in a fresh interpreter."""
    import grader.sandbox.fork_server as fork_server

    real = fork_server.ForkServer._run_once
    killed: list[int] = []

    def dying(self, server, job, limits):
        if not killed and job.get("source", "").startswith(("pass", "print")):
            killed.append(server.process.pid)
            os.killpg(server.process.pid, signal.SIGKILL)
        return real(self, server, job, limits)

    monkeypatch.setattr(fork_server.ForkServer, "_run_once", dying)
    status, found = grade_idle(tmp_path)
    assert_nothing_earned(status, found)
    assert status == 0 and set(found) == set(IDLE)


@pytest.mark.parametrize("damage", ["corrupt", "gone", "unusable"])
def test_a_warm_state_corrupt_gone_or_unusable_gives_nothing(tmp_path, monkeypatch, damage):
    cache = tmp_path / "cache"
    monkeypatch.setenv("GRADER_CACHE_DIR", str(cache))
    status, found = grade_idle(tmp_path)
    assert status == 0
    parts = list(cache.rglob("*.json"))
    assert parts
    if damage == "corrupt":        # every kept part torn or edited: measured again, never trusted
        for path in parts:
            text = path.read_text()
            path.write_text(text.replace('"score": 3', '"score": 1').replace('"suitable"', '"x"')[: len(text) // 2])
    elif damage == "gone":
        shutil.rmtree(cache)
    else:                          # the cache folder is a file: nothing can be kept there
        shutil.rmtree(cache)
        cache.write_text("not a folder")
    status, found = grade_idle(tmp_path)
    assert_nothing_earned(status, found)
    if damage != "unusable":
        assert status == 0 and set(found) == set(IDLE)


@pytest.mark.parametrize("tool, body", [
    ("bwrap", "exit 1"),                                                    # fails outright
    ("bwrap", 'while [ "$1" != "--" ]; do shift; done; shift; exec "$@"'),   # passes through: no namespace at all
    ("setpriv", "exit 1"),                                                  # cannot drop privileges
])
def test_a_sandbox_tool_that_fails_in_any_way_gives_nothing(tmp_path, monkeypatch, tool, body):
    path = tmp_path / f"{tool}-stub"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    target = isolation.Bubblewrap if tool == "bwrap" else isolation.Isolation
    monkeypatch.setattr(target, tool, str(path))
    monkeypatch.setattr(isolation, "_weak_allowed", False)
    monkeypatch.delenv(isolation.WEAK_ISOLATION_ENV, raising=False)
    isolation.recheck()
    try:
        try:
            status, found = grade_idle(tmp_path)
        except isolation.WeakIsolation:    # refused before anything ran
            status, found = None, records(tmp_path / "out")
        assert_nothing_earned(status, found)
        assert status is None and not found, found
    finally:
        monkeypatch.undo()
        isolation.recheck()


# ---- every world a batch uses is one the reference solution scores full marks in -------------------------------

def test_a_world_the_reference_falls_short_in_is_passed_over_and_said(tmp_path, monkeypatch):
    """The first world's verdict falls short (as in the world of a rare seed): no record of it is kept, the batch
    grades in the next world drawn from the same number, says so, and a second batch asked for the same number
    lands in the same replacement world."""
    import grader.grading.warm_state as warm_state
    from grader.grading.world_check import WorldVerdict

    real = warm_state.judge_world
    judged: list[int] = []

    def short_in_the_first(assignment, facts, seed, runner):
        judged.append(seed)
        verdict = real(assignment, facts, seed, runner)
        if len(judged) == 1:
            return WorldVerdict(seed, verdict.max_score - 1, verdict.max_score,
                                ("area.value: 0/1: injected shortfall",), verdict.figures)
        return verdict

    monkeypatch.setattr(warm_state, "judge_world", short_in_the_first)
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    assignment = load("tiny", TINY)
    folder = submissions(tmp_path / "submissions", {"spy": SPY, **IDLE})
    result = grader.cli.batch.grade_folder(assignment, folder, tmp_path / "out", workers=2, variant_seed=777,
                                           progress=lambda line: None)
    first, second = judged[0], judged[1]
    assert first == 777 and second != first
    assert result.variant_seed == second and all(r["variant_seed"] == second for r in result.records)
    assert any(f"variant seed {first}" in note and "that world is not used" in note
               and f"variant seed {second} instead" in note for note in result.notes), result.notes
    assert {r["submission"]: r["score"] for r in result.records} == {"spy": 3.0, "does_nothing": 0.0, "only_prints": 0.0}
    again = grader.cli.batch.grade_folder(assignment, folder, tmp_path / "again", workers=2, variant_seed=777,
                                          progress=lambda line: None)
    assert again.variant_seed == second       # the rejected world's verdict is kept: the same number, the same world
