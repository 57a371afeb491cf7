"""The next batch's world, prepared after a batch returns: its compiled programs ready before it is asked for.

Every batch grades in a world of its own (a fresh variant seed: the secret changes to JAX's rules are traced into
the programs), so a batch used to start by compiling that world's programs: about 5 s of a core with the method
sampler, while the other core had little to do and no student file could run. The seed of the next batch is known
ahead (seed_stock.py keeps it), so the batch that ends builds the next world instead, in a process of its own that
starts when the batch has written everything and outlives the command: the instructor's next `grader grade` takes
that seed from the stock, finds its programs published in the warm state and starts grading at once. The work is the
same a batch would do (`WarmState.seed`, the public code only, in the warm-up's sandbox, then the reference graded
in that world's primary run, whose verdict the batch needs before it keeps a record: grading/world_check.py); it only
moves out of the batch into the time between two commands. A batch started while the programs are still being built waits for them
(the part's lock, warm_store.py) instead of building them a second time.

Only a large batch leaves one (the method sampler's source, `[assignment] method_sampler_min_submissions`: the world
is built for the next large batch), only where compiled programs can be kept, and never with `$GRADER_PREPARE_AHEAD`
set to 0 (the test suite sets it: its batches must not leave work running after them). Nothing here can fail a
batch: a preparation that cannot start, or fails, leaves the next batch to build its world itself, as before.

    python -P -m grader.cli.world_ahead --root ROOT --assignment ID --cache FOLDER [--sampler]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.authoring.starter import public_code
from grader.common.trusted_start import python_module, trusted_environment
from grader.config.assignment import Assignment, load
from grader.grading.seed_stock import SeedStock
from grader.grading.warm_state import WarmState, fresh_scenarios
from grader.grading.warm_up import warmed_up
from grader.runs.jobs import fresh_variant_seed, is_suitable, scenario_seed, seed_map

ENABLED_ENV = "GRADER_PREPARE_AHEAD"   # "0": no batch leaves a preparation behind


@dataclass
class Preparation:
    """The detached process building the next world (a caller that times what follows waits for it first)."""

    process: subprocess.Popen

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit status once it ended (None: still running after `timeout` seconds)."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


def enabled() -> bool:
    return os.environ.get(ENABLED_ENV, "1").strip() != "0"


def start(assignment: Assignment, cache: Path | None, with_sampler: bool) -> Preparation | None:
    """Start preparing the world of the next batch's seed, detached (its own session: it survives the command and
    its terminal); None where it is off, programs cannot be kept, or the process could not start."""
    if not enabled():
        return None
    state = WarmState(assignment, cache, public_code(assignment, with_sampler))
    if not state.compiled:
        return None
    argv = python_module("grader.cli.world_ahead", "--root", str(assignment.root.resolve()),
                         "--assignment", assignment.id, "--cache", str(state.cache))
    if with_sampler:
        argv.append("--sampler")
    # Trusted code, so it starts clean (common/trusted_start.py): no working folder on sys.path (the instructor may
    # grade from inside the submissions folder, where a student's argparse.py waits), in the cache folder (the
    # grader's own, 0700), with no credential in its environment.
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                                   env=trusted_environment(), cwd=state.cache)
    except OSError:
        return None
    return Preparation(process)


def prepare(assignment: Assignment, cache: Path | None, with_sampler: bool) -> int | None:
    """Build the programs of the world the next batch takes from the stock (drawing the stock first when it is
    empty); the seed prepared, or None when none is kept."""
    state = WarmState(assignment, cache, public_code(assignment, with_sampler))
    stock = SeedStock(state.folder, lambda seed: is_suitable(assignment, seed))
    stock.refill(lambda: fresh_variant_seed(assignment))
    seed = stock.peek()
    if seed is None:
        return None
    for world_seed in sorted({scenario_seed(assignment, s, seed) for s in fresh_scenarios(assignment)}):
        state.seed(world_seed, seed)
    if assignment.solution_path.is_file():
        _judge(assignment, cache, seed, state.public_source)
    return seed


def _judge(assignment: Assignment, cache: Path | None, seed: int, public_source: str) -> None:
    """The reference graded in that world's primary run, as the next batch's warm-up would (the programs just
    built, the same sandbox and checks); its verdict is kept, and the next batch reads it instead of judging."""
    with warmed_up(assignment, seed_map(assignment, seed), lambda text: None, cache, public_source=public_source, batch_seed=seed) as warm:
        warm.verdict()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--sampler", action="store_true")
    args = parser.parse_args(argv)
    try:
        prepare(load(args.assignment, args.root), args.cache, args.sampler)
    except Exception:  # noqa: BLE001 -- nobody reads this process's output: the next batch builds its world itself
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
