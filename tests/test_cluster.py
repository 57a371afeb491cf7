"""Grading on a Dask cluster (grader/cli/cluster.py) gives the records a local batch gives, and loses none.

A `distributed.LocalCluster` of two worker processes (one thread each) grades a small class -- an honest file, a
mistaken one, one that raises midway, one that hangs until its time limit, an empty one and a hostile one that
tries every port of the loopback, the scheduler's first -- with the variant seed of a local batch of the same
files: every record's scores and per-check verdicts are the local one's. A second batch loses a worker process
mid-run (SIGKILL): every submission still gets exactly one record, graded in full, and no sandbox outlives it.
Cheap tests (not slow): the assignment travels as bytes with its fingerprint; a worker that cannot sandbox, or has
other versions, refuses; `grader grade --scheduler ADDRESS` end to end with a task that grades nothing (an in-process
cluster); an unreachable scheduler or a missing Dask exits 2 saying why; Ctrl-C cancels what has not started.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from case_expectations import case_folders
from live_processes import processes_with

import grader.cli.batch
import grader.cli.cluster
import grader.cli.main
import grader.config.assignment
import grader.grading.grade
import grader.intake.discovery
from grader.runs.jobs import VARIANT_SEED_ENV, variant_seed_for
from grader.sandbox.isolation import WeakIsolation

distributed = pytest.importorskip("distributed")

CORPUS = case_folders("corpus")["performance-05"]
THREATS = case_folders("threats")["performance-05"]
CASES = ["reference.py", "forward_difference.py", "raises_midway.py", "hang_at_end.py", "blank.py"]
SEED = 4242
SLEEPER = "5.3179"     # the killed batch's runs sleep this long in a child: a sandbox that outlived its worker shows


def session_seed() -> int:
    """The suite's one world (tests/conftest.py): both batches of a comparison ask for it by number, and its programs
    are compiled once for the whole run, not once more for a world of this module's own."""
    return int(os.environ.get(VARIANT_SEED_ENV) or SEED)


@pytest.fixture(scope="module")
def assignment():
    return grader.config.assignment.load("performance-05")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, memory_limit=0,
                                  dashboard_address=None) as local:
        yield local


def _records(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(out.glob("*.json"))}


def _timeless(message: str) -> str:
    """A message with its measured seconds taken out (the CPU-wait allowance depends on the machine's load)."""
    return re.sub(r"\d+(\.\d+)? s\b", "N s", message)


def _scores(record: dict) -> dict:
    return {"status": record["status"], "score": record["score"], "groups": record["groups"],
            "checks": [(c["id"], c["score"]) for c in record["checks"]], "variant_seed": record["variant_seed"]}


def _verdicts(record: dict) -> dict:
    runs = {name: (run["ending"], run["failed_statements"]) for name, run in (record.get("runs") or {}).items()}
    return {"status": record["status"], "score": record["score"], "groups": record["groups"],
            "checks": [(c["id"], c["score"], c["feedback"]) for c in record["checks"]],
            "messages": [_timeless(m) for m in record["messages"]],
            "runs": runs, "variant_seed": record["variant_seed"], "fingerprint": record["fingerprint"],
            "sha256": record["sha256"], "grader_error": record.get("grader_error")}


def test_the_assignment_travels_as_bytes_and_loads_with_its_fingerprint(assignment):
    package = grader.cli.cluster.pack(assignment)
    assert f"assignments/{assignment.id}/assignment.toml" in package.files
    assert assignment.solution_path.relative_to(assignment.root).as_posix() in package.files
    loaded = grader.cli.cluster.unpack(package)
    assert loaded.root != assignment.root and loaded.fingerprint == assignment.fingerprint == package.fingerprint


def test_a_worker_that_cannot_sandbox_refuses_with_the_reason(assignment, monkeypatch):
    def no_namespaces(*args, **kwargs):
        raise WeakIsolation("refusing to grade: this machine offers no namespaces")
    monkeypatch.setattr(grader.cli.cluster, "require_isolation", no_namespaces)
    submission = grader.intake.discovery.discover(CORPUS, assignment.submission_filename, 10**6)[0]
    with pytest.raises(grader.cli.cluster.WorkerRefused, match="cannot sandbox student code.*no namespaces"):
        grader.cli.cluster.grade_task(grader.cli.cluster.pack(assignment), SEED, submission)


def test_a_worker_with_other_versions_refuses(assignment):
    package = grader.cli.cluster.pack(assignment)
    package = grader.cli.cluster.Package(package.assignment_id, package.fingerprint, package.files,
                                         {**package.environment, "jax": "0.0.1"})
    submission = grader.intake.discovery.discover(CORPUS, assignment.submission_filename, 10**6)[0]
    with pytest.raises(grader.cli.cluster.WorkerRefused, match="jax: client 0.0.1"):
        grader.cli.cluster.grade_task(package, SEED, submission)


FAKE: dict = {"started": [], "seconds": 0.0, "assignment": None}    # the fake task's, in this process


def fake_task(package, seed, submission):
    """A worker's task that grades nothing (an error record, at once): the client side on its own. At module level,
    so that an in-process worker runs this very function (Dask pickles it by reference) and shares FAKE."""
    FAKE["started"].append(submission.id)
    time.sleep(FAKE["seconds"])
    record = grader.grading.grade.error_record(FAKE["assignment"], submission, "not graded (a test)", seed)
    return {"record": record, "values": None, "figures": {}, "notes": ["a note from a worker"]}


@pytest.fixture
def fake(assignment, monkeypatch):
    monkeypatch.setattr(grader.cli.cluster, "grade_task", fake_task)
    FAKE.update(started=[], seconds=0.0, assignment=assignment)
    return FAKE


def _submissions(folder: Path, count: int) -> Path:
    folder.mkdir()
    for number in range(count):
        (folder / f"s{number}.py").write_text(f"x = {number}\n", encoding="utf-8")
    return folder


def test_grader_grade_takes_a_scheduler_address(fake, tmp_path, capsys):
    submissions = _submissions(tmp_path / "submissions", 3)
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=2, dashboard_address=None) as local:
        code = grader.cli.main.main(["grade", str(submissions), "--scheduler", local.scheduler_address,
                                     "--no-similarity"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert sorted(fake["started"]) == ["s0", "s1", "s2"]
    assert "Sandbox: on the cluster's workers" in err and "Grading on the Dask cluster at" in err
    assert err.count("Cluster: a note from a worker") == 1
    assert sorted(p.name for p in (tmp_path / "results").glob("*.json")) == ["s0.json", "s1.json", "s2.json"]
    assert (tmp_path / "results" / "grades.csv").is_file()


def test_without_dask_the_cluster_path_says_what_to_install(assignment, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)      # a light install: no [cluster] extra
    with pytest.raises(grader.config.assignment.ConfigError, match=r"pip install 'jax-course-grader\[cluster\]'"):
        grader.cli.cluster.ClusterGrading("tcp://127.0.0.1:9", assignment, SEED)


def test_an_unreachable_scheduler_stops_the_batch_with_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(grader.cli.cluster, "CONNECT_SECONDS", 1)
    submissions = _submissions(tmp_path / "submissions", 1)
    assert grader.cli.main.main(["grade", str(submissions), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "cannot reach the Dask scheduler tcp://127.0.0.1:9" in capsys.readouterr().err


def test_ctrl_c_cancels_what_has_not_started(assignment, fake, tmp_path):
    fake["seconds"] = 0.5
    submissions = _submissions(tmp_path / "submissions", 8)

    def interrupt(line: str) -> None:
        if line.startswith("[1/8]"):
            raise KeyboardInterrupt
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None) as local, \
            distributed.Client(local) as client:
        with pytest.raises(KeyboardInterrupt):
            grader.cli.batch.grade_folder(assignment, submissions, tmp_path / "results", scheduler=client,
                                          progress=interrupt)
        deadline = time.monotonic() + 10
        while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0
        time.sleep(1.5)
    started = fake["started"]
    assert 1 <= len(started) <= 3, started       # the one reported, the one running, at most one more queued on it
    assert [p.name for p in (tmp_path / "results").glob("*.json")] == [f"{started[0]}.json"]


@pytest.mark.slow
def test_the_cluster_grades_as_a_local_batch_does(assignment, cluster, tmp_path):
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    for name in CASES:
        (submissions / name).write_bytes((CORPUS / name).read_bytes())
    # The hang sleeps instead of spinning: the same run at its time limit on both paths, without four runs each
    # burning a CPU for 20 s that the other test worker needs (the spinning hang is graded in tests/test_corpus.py).
    spinning = (CORPUS / "hang_at_end.py").read_text(encoding="utf-8")
    sleeping = spinning.replace("while True:\n    pass", "import time\n\nwhile True:\n    time.sleep(1)")
    assert sleeping != spinning
    (submissions / "hang_at_end.py").write_text(sleeping, encoding="utf-8")
    port = cluster.scheduler_address.rsplit(":", 1)[1]
    hostile = (THREATS / "loopback_connect.py").read_text(encoding="utf-8").replace("__LISTENER_PORT__", port)
    (submissions / "loopback_connect.py").write_text(hostile, encoding="utf-8")

    seed = session_seed()
    local = grader.cli.batch.grade_folder(assignment, submissions, tmp_path / "local", workers=2, variant_seed=seed)
    with distributed.Client(cluster) as client:
        remote = grader.cli.batch.grade_folder(assignment, submissions, tmp_path / "cluster", variant_seed=seed,
                                               scheduler=client)
    assert local.variant_seed == remote.variant_seed == variant_seed_for(assignment, seed)   # a suitable world
    print(f"local batch {local.seconds:.1f} s, cluster batch {remote.seconds:.1f} s")
    here, there = _records(tmp_path / "local"), _records(tmp_path / "cluster")
    assert sorted(here) == sorted(there) == sorted(Path(n).stem for n in [*CASES, "loopback_connect.py"])
    for name in here:
        if name == "hang_at_end":   # which limit strikes first (soft interrupt or hard kill) depends on the load
            assert _scores(there[name]) == _scores(here[name]), name
            continue
        assert _verdicts(there[name]) == _verdicts(here[name]), name
    assert there["reference"]["score"] == there["reference"]["max_score"]
    assert any("time limit" in message for message in there["hang_at_end"]["messages"])
    output = there["loopback_connect"]["output"]["head"] + there["loopback_connect"]["output"]["tail"]
    assert "listener port unreachable" in output and "reached: []" in output    # the scheduler's port included
    # The class files and the students' pages are the client's, as in a local batch.
    for name in ("grades.csv", "final_grades.csv", "report.html", "similarity.csv", "reference.feedback.html"):
        assert (tmp_path / "cluster" / name).is_file(), name
    assert json.loads((tmp_path / "cluster" / "similarity" / "reference.json").read_text())["values"] == \
        json.loads((tmp_path / "local" / "similarity" / "reference.json").read_text())["values"]


@pytest.mark.slow
def test_a_lost_worker_costs_no_record(assignment, cluster, tmp_path, monkeypatch):
    solution = assignment.solution_path.read_text(encoding="utf-8")
    submissions, out = tmp_path / "submissions", tmp_path / "results"
    submissions.mkdir()
    header = f"import subprocess\nsubprocess.run(['sleep', '{SLEEPER}'])\n"
    names = ["ann", "ben", "cat", "dan"]
    for name in names:
        (submissions / f"{name}.py").write_text(header + solution, encoding="utf-8")
    written: Counter[str] = Counter()
    graded = grader.cli.batch.BatchFiles.graded

    def counted(self, record):
        written[record["submission"]] += 1
        return graded(self, record)
    monkeypatch.setattr(grader.cli.batch.BatchFiles, "graded", counted)

    client = distributed.Client(cluster)
    outcome: dict = {}
    batch = threading.Thread(target=lambda: outcome.update(result=grader.cli.batch.grade_folder(
        assignment, submissions, out, variant_seed=session_seed(), scheduler=client)))
    batch.start()
    killed = None
    deadline = time.monotonic() + 240
    while killed is None and time.monotonic() < deadline and batch.is_alive():
        busy = [worker for worker, tasks in client.processing().items() if tasks]
        if busy and processes_with(SLEEPER):          # a run is in flight: lose its worker process
            pids = client.run(os.getpid, workers=busy[:1])
            killed = pids[busy[0]]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.2)
    batch.join(timeout=400)
    client.close()
    assert killed is not None, "no worker was killed mid-run: the test meant nothing"
    assert not batch.is_alive() and "result" in outcome
    assert written == Counter({name: 1 for name in names}), "every submission once, and only once"
    records = _records(out)
    assert sorted(records) == names
    for name, record in records.items():
        assert record["status"] == "graded" and record["score"] == record["max_score"], (name, record["messages"])
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    deadline = time.monotonic() + 10
    while processes_with(SLEEPER) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(SLEEPER) == [], "a sandbox outlived its worker"
