"""Killing `grader grade` with SIGKILL halfway, then running it again, finishes the batch without regrading
what was done, leaves no torn file and no sandbox behind (no process, cgroup or temporary folder of either grader
once the second has finished: it removes what the killed one could not); `--regrade` grades everything again."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from leftovers import cgroups_of, temp_dirs_of
from live_processes import processes_with

import grader.config.assignment
from grader.common.files import atomic_write, remove_torn_writes
from grader.sandbox.process import shared_tree

SLEEPER = "66.2718"   # every submission starts `sleep SLEEPER`: a sandbox that outlived its grader would show it


def _grader(*args: str) -> list[str]:
    return [sys.executable, "-m", "grader.cli.main", *args]


@dataclass
class Finished:
    returncode: int
    stderr: str
    pid: int


def _finished(argv: list[str]) -> Finished:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, stderr = process.communicate(timeout=300)
    return Finished(process.returncode, stderr, process.pid)


def _records(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in out.glob("*.json")}


@pytest.mark.slow
def test_a_killed_batch_resumes_without_regrading_or_torn_files(tmp_path):
    solution = grader.config.assignment.load("performance-05").solution_path.read_text(encoding="utf-8")
    submissions, out = tmp_path / "submissions", tmp_path / "results"
    submissions.mkdir()
    header = f"import subprocess\nsubprocess.Popen(['sleep', '{SLEEPER}'])\n"
    for name in ("ann", "ben", "cat", "dan"):
        (submissions / f"{name}.py").write_text(header + solution, encoding="utf-8")
    (submissions / "eve.py").write_text("", encoding="utf-8")

    # This process's own cgroup tree, made before the kill: making one removes the groups of graders that are no
    # longer alive, so made after it, it would remove the killed grader's before the resumed grader is tested on them.
    cgroups_here = shared_tree() is not None
    process = subprocess.Popen(_grader("grade", str(submissions), "--out", str(out), "--workers", "1"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len([p for p in out.glob("*.json") if p.stem != "eve"]) < 1:
        time.sleep(0.1)
    made = cgroups_of(process.pid)                # its groups while alive (any grader started later removes them)
    os.kill(process.pid, signal.SIGKILL)          # a crash: the grader gets no chance to clean up
    process.wait()
    done_before = _records(out)
    graded_before = len([n for n in done_before if n != "eve"])
    assert 0 < graded_before < 4, f"not killed halfway: {sorted(done_before)}"
    # A torn write left by the crash (as if it died inside atomic_write) must not survive or be read.
    torn = out / ".ann.json.crash.tmp"
    torn.write_text('{"submission": "ann", "sco', encoding="utf-8")

    deadline = time.monotonic() + 5
    while processes_with(SLEEPER) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(SLEEPER) == [], "a sandbox outlived the killed grader"

    if cgroups_here:
        assert made, "the killed grader had made no cgroup: the check below would mean nothing"
    resumed = _finished(_grader("grade", str(submissions), "--out", str(out), "--workers", "1"))
    assert resumed.returncode == 0, resumed.stderr
    for pid in (process.pid, resumed.pid):
        assert cgroups_of(pid) == [] and temp_dirs_of(pid) == [], f"grader {pid} left cgroups or temporary folders"
    reused = int(re.search(r"(\d+) unchanged since the last run", resumed.stderr).group(1))
    assert reused == len(done_before)
    after = _records(out)
    assert sorted(after) == ["ann", "ben", "cat", "dan", "eve"]
    for name, record in done_before.items():
        assert after[name] == record, f"{name} was graded again although it was done"
    assert all(after[n]["score"] == after[n]["max_score"] for n in ("ann", "ben", "cat", "dan"))
    assert not torn.exists() and not list(out.rglob("*.tmp"))

    regraded = subprocess.run(_grader("grade", str(submissions), "--out", str(out), "--regrade"),
                              capture_output=True, text=True, timeout=300)
    assert regraded.returncode == 0, regraded.stderr
    assert "0 unchanged since the last run" in regraded.stderr


def test_remove_torn_writes_spares_finished_files(tmp_path):
    atomic_write(tmp_path / "a.json", "{}")
    (tmp_path / ".a.json.x1.tmp").write_text("{", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".b.csv.x2.tmp").write_text("", encoding="utf-8")
    assert remove_torn_writes(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["a.json"]
