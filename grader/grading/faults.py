"""The grader's own faults in a run, told apart from the student's: what only the sandbox or the harness's set-up
report can say (`grader_faults`), errors a run claims came from the grader (`reported_faults`, never trusted), and
errors only a scenario other than the file as written raised (`errors_only_in`)."""

from __future__ import annotations

from grader.runs.snapshot import Snapshot, Statement, where


def errors_only_in(scenario: str, snapshots: dict[str, Snapshot]) -> list[Statement]:
    """Statements that raised in `scenario` but not in baseline (the student never sees these locally)."""
    if scenario == "baseline" or "baseline" not in snapshots:
        return []
    baseline = {(b.line, b.cell) for b in snapshots["baseline"].failed_statements}   # one pass each, not a pair scan
    return [s for s in snapshots[scenario].failed_statements if s.error and (s.line, s.cell) not in baseline]


def grader_faults(snapshots: dict[str, Snapshot]) -> dict[str, list[str]]:
    """Scenario -> why the grader failed to set that run up (empty lists are left out).

    Only what the student's process could not have written counts: the harness's set-up report on its control
    pipe (closed before the first student statement) and the sandbox's own status. An error that a run's data
    channel attributes to the grader's code is never taken on its word (`reported_faults` lists it for the
    instructor); the scenario replacements are written so that they cannot raise errors of their own."""
    return {name: [f"the grader could not prepare the run ({snapshot.setup_error})"]
            for name, snapshot in snapshots.items() if snapshot.setup_error}


def reported_faults(snapshots: dict[str, Snapshot]) -> dict[str, list[str]]:
    """Errors a run reported as raised inside the grader's own code (claims from the student's process)."""
    found: dict[str, list[str]] = {}
    for name, snapshot in snapshots.items():
        only_here = {id(statement) for statement in errors_only_in(name, snapshots)}
        for statement in snapshot.failed_statements:
            error = statement.error or {}
            if (error.get("grader_fault") or error.get("through_setup")) and (name == "baseline" or id(statement) in only_here):
                found.setdefault(name, []).append(
                    f"{where(statement.line, statement.cell)} raised {error.get('type')} inside the grader's own code "
                    f"(as the run reported it): {str(error.get('message'))[:200]}")
    return found
