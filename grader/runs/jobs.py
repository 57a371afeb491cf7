"""Build harness jobs for a scenario and run them: the one place that joins assignment, scenario and sandbox."""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Callable
from typing import Any

from grader.config.assignment import Assignment, Scenario
from grader.intake.notebook import Cell
from grader.model.job import Job, new_job
from grader.model.limits import Limits
from grader.runs.seed_memo import remembered
from grader.runs.snapshot import Snapshot, build_snapshot
from grader.sandbox.file_end import settle as settle_file_end
from grader.sandbox.process import run_job
from grader.sandbox.raw_run import RawRun

MAX_SEED_DRAWS = 200000    # an assignment may accept few seeds (one in several thousand); each test is cheap
SEED_CHUNK = 4096          # seeds drawn and tested at once where the oracle tests many together
_PARAMETERS: dict[tuple[str, str, int, int], dict[str, Any]] = {}


def scenario_seed(assignment: Assignment, scenario: Scenario, variant_seed: int) -> int:
    return variant_seed if scenario.fresh_seed else assignment.lesson_seed


def seed_map(assignment: Assignment, variant_seed: int) -> dict[str, int]:
    """Scenario -> the seed it runs with in a batch whose variant seed is `variant_seed`."""
    return {name: scenario_seed(assignment, scenario, variant_seed) for name, scenario in assignment.scenarios.items()}


VARIANT_SEED_ENV = "GRADER_VARIANT_SEED"   # a number: every command grades in its world unless told --variant-seed


def named_variant_seed() -> int | None:
    """The number `$GRADER_VARIANT_SEED` names (None: unset or not a number): a course that wants every batch and
    check of a term in one world, reproducibly, and the test suite, whose many small batches then share one world
    (compiled once) drawn per session."""
    try:
        return int(os.environ.get(VARIANT_SEED_ENV, "").strip())
    except ValueError:
        return None


def fresh_variant_seed(assignment: Assignment, rejected: frozenset[int] = frozenset()) -> int:
    """A random seed for this grading run, never the lesson's own nor one whose world was `rejected` (the reference
    fell short there), and one the assignment finds suitable (`oracle.suitable_seed(seed, settings)`, optional: e.g. a
    world where every method's value is told apart). With `$GRADER_VARIANT_SEED` set, the world that number maps to
    (as `--variant-seed` maps it), passing over rejected ones the same way."""
    named = named_variant_seed()
    if named is not None:
        return variant_seed_for(assignment, named, rejected)
    seed = _first_accepted(assignment, lambda: secrets.randbelow(2**31 - 1) + 1, rejected)
    if seed is None:
        raise RuntimeError(f"oracle.suitable_seed accepted none of {MAX_SEED_DRAWS} random seeds: the assignment's "
                           "separation settings cannot be met (see its oracle)")
    return seed


def _first_accepted(assignment: Assignment, draw: Callable[[], int], rejected: frozenset[int]) -> int | None:
    """The first of MAX_SEED_DRAWS seeds from `draw` that is neither the lesson's nor `rejected` and that the oracle
    finds suitable, in the order drawn. Where the oracle also answers for many seeds at once (`suitable_seeds(seeds,
    settings)`, the same answers as `suitable_seed` on each), seeds are drawn and tested SEED_CHUNK at a time: an
    assignment that accepts one seed in thousands would otherwise hold every batch's start for seconds."""
    oracle, settings = assignment.oracle, assignment.settings
    one = getattr(oracle, "suitable_seed", None)
    many = getattr(oracle, "suitable_seeds", None)
    for start in range(0, MAX_SEED_DRAWS, SEED_CHUNK):
        seeds = [seed for seed in (draw() for _ in range(min(SEED_CHUNK, MAX_SEED_DRAWS - start)))
                 if seed != assignment.lesson_seed and seed not in rejected]
        if one is None:
            if seeds:
                return seeds[0]
        elif many is not None:
            accepted = [seed for seed, ok in zip(seeds, many(seeds, settings)) if ok]
            if accepted:
                return accepted[0]
        else:
            accepted_one = next((seed for seed in seeds if one(seed, settings)), None)
            if accepted_one is not None:
                return accepted_one
    return None


_SUITABLE: dict[tuple[str, int, frozenset[int]], int] = {}


def _suitable_for(assignment: Assignment, requested: int, rejected: frozenset[int]) -> int:
    key = (assignment.fingerprint, requested, rejected)
    if key not in _SUITABLE:
        _SUITABLE[key] = remembered(assignment.id, assignment.fingerprint, requested, rejected,
                                    lambda: _first_suitable(assignment, requested, rejected))
    return _SUITABLE[key]


def is_suitable(assignment: Assignment, seed: int) -> bool:
    """A seed a batch may use as its variant seed: not the lesson's own, and suitable to the oracle where it says."""
    suitable = getattr(assignment.oracle, "suitable_seed", None)
    return seed != assignment.lesson_seed and (suitable is None or bool(suitable(seed, assignment.settings)))


def _first_suitable(assignment: Assignment, requested: int, rejected: frozenset[int]) -> int:
    suitable = getattr(assignment.oracle, "suitable_seed", None)
    if requested not in rejected and (suitable is None or is_suitable(assignment, requested)):
        return requested
    draw = random.Random(f"suitable variant seed for {requested}")
    seed = _first_accepted(assignment, lambda: draw.randrange(1, 2**31), rejected)
    if seed is None:
        raise RuntimeError(f"oracle.suitable_seed accepted no seed derived from {requested}")
    return seed


def variant_seed_for(assignment: Assignment, requested: int, rejected: frozenset[int] = frozenset()) -> int:
    """The variant seed a batch asked for by number (`--variant-seed`, otter's `seed`, a test): itself when the
    assignment finds it suitable, else the first suitable seed of a sequence drawn from it, so the same number
    always gives the same world and every world separates the methods (a record says which seed was used). Seeds
    whose world was `rejected` (the reference solution falls short there) are passed over the same way."""
    return _suitable_for(assignment, int(requested), frozenset(rejected))


def setup_parameters(assignment: Assignment, scenario: Scenario, seed: int, batch_seed: int | None) -> dict[str, Any]:
    """What the scenario's set-up functions receive: [parameters], the run's `seed`, the grading run's random
    `batch_seed` (secret to the runs), and what `oracle.scenario_parameters(scenario, seed, batch_seed, settings)`
    derives from them in the trusted grader (optional). The oracle of the scenario is built from the same dict."""
    batch = seed if batch_seed is None else batch_seed
    key = (assignment.fingerprint, scenario.name, seed, batch)
    if key not in _PARAMETERS:
        derive = getattr(assignment.oracle, "scenario_parameters", None)
        derived = derive(scenario.name, seed, batch, assignment.settings) if derive else {}
        _PARAMETERS[key] = {**assignment.parameters, "seed": seed, "batch_seed": batch, **derived}
    return dict(_PARAMETERS[key])


def make_job(assignment: Assignment, scenario: Scenario, seed: int, source: str, filename: str,
             cells: list[Cell] | None = None, data: bytes = b"", batch_seed: int | None = None,
             tagged: bool = True) -> Job:
    """The job the harness runs: the code (a notebook as its cells), the scenario's set-up, probes and limits."""
    params = setup_parameters(assignment, scenario, seed, batch_seed)
    job = new_job(source, filename, assignment.contract, assignment.limits, setup_source=assignment.setup_source,
                  setup_calls=[(name, params) for name in scenario.setup], probes_source=assignment.probes_source,
                  cells=[{"number": cell.number, "source": cell.source} for cell in cells] if cells else None,
                  data=data, evidence=assignment.evidence)
    # The name the file's code runs under holds a tag drawn for this run: a source position the file's own
    # functions print (a saved residual's `file:line:column`) names it, and no text typed into the file can. Runs
    # that measure facts to keep (`tagged=False`) name the file plainly, so what is kept is the same every time.
    if tagged:
        job["code_tag"] = secrets.token_hex(8)
    replays = [{"name": r.name, "replace": list(r.replace), "probe": r.probe, "capture": list(r.capture), "rerun": r.rerun,
                **({"seconds": r.seconds} if r.seconds else {}), **({"patch": list(r.patch)} if r.patch else {})}
               for r in assignment.replays.values() if scenario.name in r.scenarios]
    if replays:
        job["replays"] = replays
        # The replays' time, granted on top of the wall limit once the file's own code has ended
        # (sandbox/file_end.py): each replay's own budget, else a statement's grace, and one grace for the end.
        grace = assignment.limits.statement_grace_seconds
        job["after_file_seconds"] = sum((r.seconds or grace for r in assignment.replays.values()
                                         if scenario.name in r.scenarios), grace)
    return job


# How a job is run: `sandbox.run_job` (a fresh sandboxed interpreter) or `zygote.ForkServer.run_job`.
Runner = Callable[[Job, Limits], RawRun]


def run_scenario(assignment: Assignment, scenario: Scenario, seed: int, source: str, filename: str,
                 runner: Runner | None = None, cells: list[Cell] | None = None,
                 data: bytes = b"", batch_seed: int | None = None, tagged: bool = True) -> tuple[Snapshot, RawRun]:
    job = make_job(assignment, scenario, seed, source, filename, cells, data, batch_seed, tagged)
    raw = runner(job, assignment.limits) if runner else run_job(job, assignment.limits)
    settle_file_end(raw, assignment.limits.wall_seconds)
    snapshot = build_snapshot(raw, scenario.name, seed)
    snapshot.secret = str(job.get("code_tag") or "")
    return snapshot, raw
