"""The reference solution's own run of a scenario, with the seed a submission was graded with: the yardstick the
engine holds a check to when it raises something other than an assertion (see grader/grading/engine.py).

A run is made only when first asked for, then kept for the life of the process, one per (assignment, scenario,
seed): a batch pays for at most one run per scenario, and only if some check raises at all. Where the assignment's
solution is not at hand (the student bundle ships none) or its run did not complete, there is no yardstick; a run
that did not complete (a loaded moment, the sandbox's trouble) is not kept but tried again when next asked, up to
ATTEMPTS times per process, so one bad moment does not leave every later record without a yardstick.
"""

from __future__ import annotations

import threading

from grader.config.assignment import Assignment
from grader.grading.engine import ReferenceRuns
from grader.runs.jobs import Runner, run_scenario
from grader.runs.snapshot import Snapshot

ATTEMPTS = 3    # runs of one (scenario, seed) that did not complete before the process stops asking

_runs: dict[tuple, Snapshot | None] = {}
_failed: dict[tuple, int] = {}
_locks: dict[tuple, threading.Lock] = {}
_guard = threading.Lock()


def reference_runs(assignment: Assignment, seeds: dict[str, int], runner: Runner | None = None,
                   batch_seed: int | None = None) -> ReferenceRuns:
    """scenario -> the reference solution's Snapshot of it with `seeds[scenario]` (and the grading run's
    `batch_seed`, from which the scenario's set-up derives its changes), made on first use (None when there is no
    solution file or its run did not complete)."""

    def snapshot(scenario: str) -> Snapshot | None:
        if scenario not in seeds or scenario not in assignment.scenarios:
            return None
        key = (str(assignment.root), assignment.id, assignment.fingerprint, scenario, seeds[scenario], batch_seed)
        with _guard:
            lock = _locks.setdefault(key, threading.Lock())
        with lock:
            if key not in _runs:
                found = _run(assignment, scenario, seeds[scenario], runner, batch_seed)
                _failed[key] = _failed.get(key, 0) + (found is None)
                if found is not None or _failed[key] >= ATTEMPTS:
                    _runs[key] = found
                return found
            return _runs[key]

    return snapshot


def _run(assignment: Assignment, scenario: str, seed: int, runner: Runner | None, batch_seed: int | None) -> Snapshot | None:
    try:
        source = assignment.solution_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for chosen in (runner, getattr(runner, "fresh", None)):   # a run the sandbox could not set up: once more, fresh
        try:
            snapshot, _ = run_scenario(assignment, assignment.scenarios[scenario], seed, source,
                                       assignment.submission_filename, chosen, batch_seed=batch_seed)
        except Exception:  # noqa: BLE001 -- no yardstick then (the raise is not excused), never a failed record
            return None
        if not snapshot.setup_error:
            break
    if snapshot.setup_error or snapshot.ending != "completed" or snapshot.failed_statements:
        return None
    return snapshot
