"""The suite's own time, said at the end of every whole run: wall seconds, the machine's CPU seconds, the budget, and
the modules that took longest (their tests' summed seconds, under the other worker's load), and the modules that cost
the most CPU (the CPU seconds of each test's own process tree: the worker and every child it reaped, sandbox runs and
fresh interpreters included). The suite is CPU-bound on 2 cores, so the CPU column, not the seconds, says what a cut
saves: a test that sleeps through a time limit costs seconds but leaves its CPU to the other worker.

Why: CI's whole run must stay within 15 minutes on 2 cores (docs/testing.md), and the suite grows every turn; a run
that says where its time went, each time, shows a module that doubled before CI's limit does. It is a report, never
a failure: a timed assertion would fail on a slower or busier machine for no fault of the code.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

try:
    import resource
except ImportError:          # Windows: no getrusage, the CPU column is left out
    resource = None  # type: ignore[assignment]

# The tests stage's share of CI's 15 minutes (install, lint, types and the JAX range take about 200 s of them).
BUDGET_SECONDS = 700
SHOWN_MODULES = 8

_started = {"wall": time.monotonic(), "cpu": None}
_seconds: Counter[str] = Counter()
_cpu: Counter[str] = Counter()
_item_started: dict[str, float] = {}
CPU_PROPERTY = "suite_time_cpu_seconds"


def _tree_cpu_seconds() -> float | None:
    """User + system CPU seconds of this process and of every child it has waited for (theirs include their own)."""
    if resource is None:
        return None
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    now = _tree_cpu_seconds()
    if now is not None:
        _item_started[item.nodeid] = now


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    started = _item_started.pop(item.nodeid, None) if call.when == "teardown" else None
    now = _tree_cpu_seconds()
    if started is not None and now is not None:   # setup, call and teardown (module fixtures' too) of this test
        outcome.get_result().user_properties.append((CPU_PROPERTY, now - started))


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
    for name, value in getattr(report, "user_properties", ()):
        if name == CPU_PROPERTY:
            _cpu[report.nodeid.split("::")[0]] += float(value)


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
    if _cpu:
        costliest = ", ".join(f"{name.removeprefix('tests/')} {seconds:,.0f}" for name, seconds in _cpu.most_common(SHOWN_MODULES))
        terminalreporter.write_line(f"suite CPU: {sum(_cpu.values()):,.0f} CPU-s in the tests' own process trees; "
                                    f"costliest modules: {costliest}")
    path = os.environ.get("SUITE_TIME_JSON")      # the whole table, for docs/testing.md
    if path:
        import json
        with open(path, "w", encoding="utf-8") as stream:
            json.dump({"wall": wall, "seconds": dict(_seconds), "cpu_seconds": dict(_cpu)}, stream, indent=1)
