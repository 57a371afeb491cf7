"""What a lesson's calibration tools may use: worlds drawn as `grader grade` draws them, and the reference solution
graded in one through the real sandbox.

A lesson folder holds what the lesson is (its config, checks, oracle, scenario set-up) and the scripts an
instructor runs by hand to size its tolerances (a calibration over drawn worlds, say). Those scripts import only
this module and `grader.api` from the framework (tests/test_layout.py), so the runs' and the engine's modules can
change without them; `grader worlds` (cli/worlds.py) is the part every lesson shares.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.config.assignment import Assignment, find_root, load
from grader.grading.grade import build_oracle
from grader.grading.reference import reference_facts
from grader.grading.warm_up import warmed_up
from grader.grading.world_check import WorldVerdict, judge_world
from grader.runs.jobs import fresh_variant_seed, run_scenario, seed_map, setup_parameters, variant_seed_for


@dataclass(frozen=True)
class World:
    """One drawn world of a scenario: its seed, what its set-up functions receive, and its oracle."""
    seed: int
    parameters: dict[str, Any]
    oracle: Any


@dataclass(frozen=True)
class GradedWorld:
    """The reference solution graded in one batch world: the verdict, and its values in the fresh-seed run."""
    verdict: WorldVerdict
    values: dict[str, Any]
    oracle: Any


def lesson(lesson_id: str, root: Path | None = None) -> Assignment:
    return load(lesson_id, root or find_root())


def draw_seed(assignment: Assignment) -> int:
    """A batch seed as `grader grade` draws one (a suitable world, never the lesson's own seed)."""
    return fresh_variant_seed(assignment)


def distinct_seeds(assignment: Assignment, count: int) -> list[int]:
    """`count` different suitable batch seeds, drawn afresh each call even where $GRADER_VARIANT_SEED names one
    world (as the test suite does, where draw_seed then gives that world every time)."""
    seeds: list[int] = []
    while len(seeds) < count:
        try:
            seed = variant_seed_for(assignment, secrets.randbelow(2**31 - 2) + 1)
        except RuntimeError:    # no suitable seed in that number's sequence: draw another number
            continue
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def world_parameters(assignment: Assignment, scenario: str, seed: int) -> dict[str, Any]:
    """What `scenario`'s set-up functions receive in the batch world `seed`."""
    return setup_parameters(assignment, assignment.scenarios[scenario], seed, seed)


def world(assignment: Assignment, seed: int, scenario: str = "variant", facts: dict | None = None) -> World:
    """The world `seed` of `scenario` with its oracle (reference facts as given: none by default)."""
    parameters = world_parameters(assignment, scenario, seed)
    oracle = assignment.oracle.build(seed, facts or {}, assignment.scenarios[scenario], parameters, seed)
    return World(seed, parameters, oracle)


def grade_reference(assignment: Assignment, seed: int, scenario: str = "variant") -> GradedWorld:
    """The reference graded in batch world `seed` through the real sandbox (as a batch verifies its world), with
    its values in `scenario`'s run there and that scenario's oracle."""
    facts = reference_facts(assignment)
    seeds = seed_map(assignment, seed)
    with warmed_up(assignment, seeds, lambda text: None, warm_fresh_seeds=False) as warm:
        verdict = judge_world(assignment, facts, seed, warm.runner, every=True)   # every scenario a batch may judge
        snapshot, _ = run_scenario(assignment, assignment.scenarios[scenario], seeds[scenario],
                                   assignment.solution_path.read_text(), assignment.submission_filename, warm.runner,
                                   batch_seed=seed)
    return GradedWorld(verdict, dict(snapshot.values), build_oracle(assignment, scenario, seeds[scenario], facts, seed))
