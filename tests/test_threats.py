"""Hostile submissions (tests/threats/) graded by the real batch grader in the real sandbox.

Each threat is `<case>.py` plus `<case>.expected.toml` (the corpus format, see case_expectations.py): the scores it
may get and the messages/output it must produce. A threat whose first line is `# prepend: solution` is graded as
the reference solution followed by its own lines (a correct file that turns hostile at the end); the token
`__LISTENER_PORT__` is replaced by the port of a TCP listener this test opens on the host's loopback.

Beyond per-case scores, the batch as a whole must leave no trace: no file outside the sandbox created or changed
(the threats name everything they write `pwned*` or append `pwned`), no process left behind, no connection
received, and every result written by the grader, never by a student.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import socket
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

import grader.assignment
import grader.batch
from grader.isolation import Bubblewrap, strongest_available

from case_expectations import record_problems, shape_problems, summary
from live_processes import processes_with

THREATS = Path(__file__).with_name("threats")
EXPECTED = ".expected.toml"
PREPEND = "# prepend: solution"
LEFTOVER_TOKENS = ("63.1415", "64.1414")       # command lines of processes the threats start
MARKER = "pwned"


def case_names() -> list[str]:
    return sorted(p.name[: -len(EXPECTED)] for p in THREATS.glob("*" + EXPECTED))


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _marked_files(roots: list[Path], since: float) -> list[str]:
    """Files named pwned*, or text files a threat appended `pwned` to, changed since `since`."""
    found = []
    skip = {".venv", ".git", "__pycache__", ".pytest_cache", "proc", "sys", "dev"}
    for root in roots:
        if not root.is_dir():
            continue
        for top, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in skip]
            for name in files:
                path = Path(top) / name
                try:
                    stat = path.lstat()
                    if stat.st_mtime < since:
                        continue
                    if name.startswith(MARKER) or (name.endswith((".json", ".csv", ".toml", ".md")) and stat.st_size
                                                   and path.read_bytes()[-len(MARKER):] == MARKER.encode()):
                        found.append(str(path))
                except OSError:
                    continue
    return found


@dataclass
class Batch:
    records: dict[str, dict]
    out: Path
    groups: list[str]
    check_ids: set[str]
    marked: list[str]
    leftovers: list[int]
    connections: int
    submissions_unchanged: bool
    seconds: float


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Batch:
    root = tmp_path_factory.mktemp("threats")
    submissions, out = root / "submissions", root / "results"
    submissions.mkdir()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    assignment = grader.assignment.load("performance-05")
    solution = assignment.solution_path.read_text(encoding="utf-8")
    for case in case_names():
        text = (THREATS / f"{case}.py").read_text(encoding="utf-8").replace("__LISTENER_PORT__", str(port))
        if text.startswith(PREPEND):
            text = solution + "\n" + text
        (submissions / f"{case}.py").write_text(text, encoding="utf-8")
    before = _tree_digest(submissions)
    started = time.time()
    grader.batch.grade_folder(assignment, submissions, out, workers=2, regrade=True)
    seconds = time.time() - started
    time.sleep(4)  # the daemon threat wakes after 3 s: give it the chance to act if it survived
    readable, _, _ = select.select([listener], [], [], 0)
    connections = len(readable)
    listener.close()
    project = assignment.root
    roots = [Path("/tmp"), project, Path.home(), Path("/autograder")]
    records = {}
    for path in out.glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        records[record["submission"]] = record
    leftovers = processes_with(*LEFTOVER_TOKENS)
    for pid in leftovers:  # never leave strays, even when the assertion below fails
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return Batch(records=records, out=out, groups=list(assignment.groups), check_ids={c.id for c in assignment.checks},
                 marked=_marked_files(roots, started - 1), leftovers=leftovers, connections=connections,
                 submissions_unchanged=_tree_digest(submissions) == before, seconds=seconds)


@pytest.mark.parametrize("case", case_names())
def test_threat_gets_no_undeserved_credit(case: str, batch: Batch) -> None:
    expected = tomllib.loads((THREATS / f"{case}{EXPECTED}").read_text(encoding="utf-8"))
    shape = shape_problems(case, expected, batch.groups, batch.check_ids)
    assert not shape, "; ".join(shape)
    assert case in batch.records, f"{case} has no result record (records: {sorted(batch.records)})"
    record = batch.records[case]
    problems = record_problems(record, expected)
    if problems:
        pytest.fail(f"{case} ({expected['why']}):\n  " + "\n  ".join(problems) + f"\n\n{summary(record)}", pytrace=False)


def test_nothing_outside_the_sandbox_was_written(batch: Batch) -> None:
    assert batch.marked == []
    assert not Path("/tmp/pwned-unpickled").exists(), "something unpickled a planted payload"
    assert batch.submissions_unchanged


def test_only_the_grader_writes_results(batch: Batch) -> None:
    for path in batch.out.rglob("*"):
        if path.is_file():
            assert MARKER not in path.name and not path.name.startswith(".") or ".grader-cache" in path.parts, path
            if path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))  # every one whole, none torn
    for case, record in batch.records.items():
        assert record["submission"] == case and record["sha256"], case


def test_no_process_outlives_grading(batch: Batch) -> None:
    assert batch.leftovers == []


def test_no_connection_reached_the_host(batch: Batch) -> None:
    assert batch.connections == 0


def test_every_result_names_the_isolation(batch: Batch) -> None:
    isolation = strongest_available()
    assert isinstance(isolation, Bubblewrap), "bubblewrap is part of the setup (README, .ci/run); it is missing here"
    for case, record in batch.records.items():
        assert any(m.startswith("Isolation used: bubblewrap") for m in record["messages"]), case
