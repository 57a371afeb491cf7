"""One file graded in a verified world: what `grader check`, `grader validate` and the otter/Gradescope path share.

A one-file command grades in a world whose verdict is kept when it can (grading/world_check.py: a world in which the
reference solution scored full marks, kept by an earlier batch or command, whose programs are often compiled
already), else in a fresh one judged beside the file's own runs. A world the reference falls short in is never
used: the file is graded again in the next, and the command says so. Where the reference solution is not at hand
(a student bundle) there is nothing to judge with, and the world is used as drawn.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from grader.config.assignment import Assignment
from grader.grading.grade import grade_one
from grader.grading.warm_state import WarmState
from grader.grading.warm_up import warmed_up
from grader.grading.world_check import MAX_REJECTED_WORLDS, WorldRejected, WorldVerdict, too_many_rejected
from grader.intake.discovery import Submission
from grader.model.record import Record, ran
from grader.runs.jobs import fresh_variant_seed, seed_map, variant_seed_for

Note = Callable[[str], None]


def choose_seed(assignment: Assignment, cache: Path | None, requested: int | None,
                rejected: frozenset[int] = frozenset()) -> int:
    """The seed asked for by number (mapped to a suitable world), else a kept verified world, else a fresh one."""
    if requested is not None:
        return variant_seed_for(assignment, requested, rejected)
    kept = [seed for seed in WarmState(assignment, cache).verified_seeds() if seed not in rejected]
    return random.choice(kept) if kept else fresh_variant_seed(assignment, rejected)


def grade_in_verified_world(assignment: Assignment, submission: Submission, note: Note, cache: Path | None = None,
                            requested: int | None = None, public_source: str = "", steps: Note | None = None,
                            judged: Assignment | None = None) -> Record:
    """`submission`'s record, graded with `assignment` (its checks may be narrowed: `check GROUP`) in a world in
    which the reference solution scores full marks under `judged` (default: `assignment`) with every check."""
    rejected: list[WorldVerdict] = []
    while True:
        seed = choose_seed(assignment, cache, requested, frozenset(v.seed for v in rejected))
        with warmed_up(judged or assignment, seed_map(assignment, seed), note, cache, warm_fresh_seeds=False, steps=steps,
                       public_source=public_source, batch_seed=seed) as warm:
            record = grade_one(assignment, submission, warm.facts, seed, warm.runner)
            try:
                warm.verdict(scenarios=ran(record))
                return record
            except WorldRejected as rejection:
                rejected.append(rejection.verdict)
                note(f"{rejection}; grading again in another world.")
                if len(rejected) >= MAX_REJECTED_WORLDS:
                    raise too_many_rejected(rejected) from None
