"""Build harness jobs for a scenario and run them: the one place that joins assignment, scenario and sandbox."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from grader.config.assignment import Assignment, Scenario
from grader.intake.notebook import Cell
from grader.model.job import Job, new_job
from grader.model.limits import Limits
from grader.runs.snapshot import Snapshot, build_snapshot
from grader.sandbox.process import RawRun, run_job


def scenario_seed(assignment: Assignment, scenario: Scenario, variant_seed: int) -> int:
    return variant_seed if scenario.fresh_seed else assignment.lesson_seed


def fresh_variant_seed(assignment: Assignment) -> int:
    """A random seed for this grading run, never the lesson's own."""
    while True:
        seed = secrets.randbelow(2**31 - 1) + 1
        if seed != assignment.lesson_seed:
            return seed


def make_job(assignment: Assignment, scenario: Scenario, seed: int, source: str, filename: str,
             cells: list[Cell] | None = None, data: bytes = b"") -> Job:
    """The job the harness runs: the code (a notebook as its cells), the scenario's set-up, probes and limits."""
    params = {**assignment.parameters, "seed": seed}
    return new_job(source, filename, assignment.contract, assignment.limits, setup_source=assignment.setup_source,
                   setup_calls=[(name, params) for name in scenario.setup], probes_source=assignment.probes_source,
                   cells=[{"number": cell.number, "source": cell.source} for cell in cells] if cells else None,
                   data=data, evidence=assignment.evidence)


# How a job is run: `sandbox.run_job` (a fresh sandboxed interpreter) or `zygote.ForkServer.run_job`.
Runner = Callable[[Job, Limits], RawRun]


def run_scenario(assignment: Assignment, scenario: Scenario, seed: int, source: str, filename: str,
                 runner: Runner | None = None, cells: list[Cell] | None = None,
                 data: bytes = b"") -> tuple[Snapshot, RawRun]:
    job = make_job(assignment, scenario, seed, source, filename, cells, data)
    raw = runner(job, assignment.limits) if runner else run_job(job, assignment.limits)
    return build_snapshot(raw, scenario.name, seed), raw
