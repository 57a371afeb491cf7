"""The suite's own time, said at the end of every whole run: wall seconds, the machine's CPU seconds, the budget, and
the modules that took longest (their tests' summed seconds, under the other worker's load).

Why: CI's whole run must stay within 15 minutes on 2 cores (docs/testing.md), and the suite grows every turn; a run
that says where its time went, each time, shows a module that doubled before CI's limit does. It is a report, never
a failure: a timed assertion would fail on a slower or busier machine for no fault of the code.
"""

from __future__ import annotations

import os
import time
from collections import Counter

# The tests stage's share of CI's 15 minutes (install, lint, types and the JAX range take about 200 s of them).
BUDGET_SECONDS = 700
SHOWN_MODULES = 8

_started = {"wall": time.monotonic(), "cpu": None}
_seconds: Counter[str] = Counter()


def _machine_cpu_seconds() -> float | None:
    """user + nice + system seconds of every CPU since boot (Linux's /proc/stat), or None elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as stream:
            fields = stream.readline().split()
        return (int(fields[1]) + int(fields[2]) + int(fields[3])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def pytest_sessionstart(session) -> None:
    _started["wall"], _started["cpu"] = time.monotonic(), _machine_cpu_seconds()


def pytest_runtest_logreport(report) -> None:
    _seconds[report.nodeid.split("::")[0]] += report.duration   # setup, call and teardown (the controller hears all)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if hasattr(config, "workerinput") or not _seconds:   # a worker, or nothing ran: the controller says it once
        return
    wall = time.monotonic() - _started["wall"]
    now = _machine_cpu_seconds()
    cpu = f", {now - _started['cpu']:,.0f} machine CPU-s" if now is not None and _started["cpu"] is not None else ""
    over = f": {wall - BUDGET_SECONDS:,.0f} s over its budget" if wall > BUDGET_SECONDS else ""
    slowest = ", ".join(f"{name.removeprefix('tests/')} {seconds:,.0f}" for name, seconds in _seconds.most_common(SHOWN_MODULES))
    terminalreporter.write_line(f"suite time: {wall:,.0f} s wall{cpu} on {os.cpu_count()} CPUs (budget "
                                f"{BUDGET_SECONDS} s{over}); slowest modules, summed test seconds: {slowest}")
