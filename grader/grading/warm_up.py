"""Before the first student run: the warm state ready and the fork server started, side by side, and said aloud.

What runs in parallel, so that a batch starts grading as early as it can:
- the fork server imports JAX (in the background, from the first moment);
- the reference part of the warm state is read, or measured when no valid one is kept (the facts are needed
  before any check, so grading waits for it);
- each fresh-seed part (the variant's programs and figure for the batch's seed) is read, or built in the
  background while the first baseline runs go ahead; a run of that world waits for it (compiling the same
  programs in every early run would cost more than waiting), every other run does not.

The fork server reads a view (grader/common/warm_store.View) to which each part's programs are added as soon as
it is published.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from grader.common.warm_store import Part, View, mark_used
from grader.config.assignment import Assignment, ConfigError
from grader.grading.warm_state import WarmState, fresh_scenarios, scenario_world, world
from grader.model.job import Job
from grader.model.limits import Limits
from grader.runs.runners import ServerStart
from grader.sandbox.process import RawRun, run_job

Note = Callable[[str], None]


class GatedRunner:
    """The command's Runner: the fork server once started (else a fresh sandboxed interpreter per run); a run
    whose world is still being warmed waits for it."""

    def __init__(self, server: ServerStart, gates: dict[str, threading.Event]):
        self.server = server
        self.gates = gates

    def __call__(self, job: Job, limits: Limits) -> RawRun:
        gate = self.gates.get(world(dict(job)))
        if gate is not None:
            gate.wait()
        runner = self.server.runner()
        return runner(job, limits) if runner else run_job(job, limits)


class WarmUp:
    """What a command grades with: the reference facts, the runner, and (once ready) the reference's figures."""

    def __init__(self, state: WarmState, seeds: dict[str, int], facts: dict[str, Any], runner: GatedRunner):
        self.state = state
        self.seeds = seeds
        self.facts = facts
        self.runner = runner
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self._figures: dict[str, Any] | None = None

    def failure(self) -> BaseException | None:
        """A background warm-up that failed (the reference did not run cleanly in its world), if any."""
        return self.errors[0] if self.errors else None

    def figures(self) -> dict[str, Any]:
        """Scenario -> the reference's figure in the batch's world; waits for the background warm-ups."""
        for thread in self.threads:
            thread.join()
        if self.errors:
            raise self.errors[0]
        if self._figures is None:
            self._figures = self.state.figures(self.seeds)
        return self._figures


@contextmanager
def warmed_up(assignment: Assignment, seeds: dict[str, int], note: Note, cache: Path | None = None,
              warm_fresh_seeds: bool = True, steps: Note | None = None) -> Iterator[WarmUp]:
    """The warm-up for grading in the worlds `seeds` (scenario -> seed), as a context: the fork server is
    stopped and the view removed on exit. `note` hears what the user must know (fast runs unavailable), `steps`
    each step of the warm-up. `warm_fresh_seeds=False` (one submission: `check`, `validate`, otter) uses a
    fresh-seed part when one is kept and never builds one."""
    steps = steps or (lambda text: None)
    state = WarmState(assignment, cache)
    view = View(state.store) if state.compiled else None
    server = ServerStart(view.folder if view else None, note,
                         ready=lambda seconds: steps(f"Warm-up: fork server ready ({seconds:.1f} s)."))
    warm = None
    try:
        # One submission (not warming fresh seeds) uses kept facts even without programs: building them would cost
        # the reference run they save.
        reference = _reference(state, steps, programs_optional=not warm_fresh_seeds)
        if view:
            view.add(reference)
        facts = state.facts(reference)
        gates: dict[str, threading.Event] = {}
        warm = WarmUp(state, seeds, facts, GatedRunner(server, gates))
        fresh = fresh_scenarios(assignment)
        for seed in sorted({seeds[s.name] for s in fresh if s.name in seeds}):
            part = state.read_seed(seed)
            if part is not None:
                state.store.touch(part)
                if view:
                    view.add(part)
            elif warm_fresh_seeds:
                gate = threading.Event()
                if state.compiled:   # without compiled programs there is nothing to wait for
                    for scenario in fresh:
                        gates[scenario_world(assignment, scenario, seed)] = gate
                thread = threading.Thread(target=_warm_seed, args=(state, seed, reference, view, gate, warm, steps),
                                          name=f"warm-seed-{seed}", daemon=True)
                warm.threads.append(thread)
                thread.start()
        yield warm
    finally:
        for thread in warm.threads if warm else []:
            thread.join()
        server.close()
        if view:
            view.close()


def _reference(state: WarmState, note: Note, programs_optional: bool) -> Part:
    part = state.read_reference(programs_optional)
    if part is not None:
        mark_used(state.folder)
        note(f"Warm-up: reference facts and compiled programs reused ({state.folder}).")
        return part
    note("Warm-up: running the reference solution once for this grader and JAX version (its facts and compiled "
         "programs are kept for later commands) ...")
    started = time.monotonic()
    part = state.reference()
    note(f"Warm-up: reference solution measured ({time.monotonic() - started:.1f} s).")
    return part


def _warm_seed(state: WarmState, seed: int, reference: Part, view: View | None, gate: threading.Event,
               warm: WarmUp, note: Note) -> None:
    started = time.monotonic()
    note(f"Warm-up: reference solution in the variant world of seed {seed} (its programs and figure), beside the "
         "first runs ...")
    try:
        part = state.seed(seed, reference)
        if view:
            view.add(part)
        note(f"Warm-up: variant world of seed {seed} ready ({time.monotonic() - started:.1f} s).")
    except ConfigError as error:
        warm.errors.append(error)
    except Exception as error:  # noqa: BLE001 -- the warm-up's own sandbox failed: the batch stops and says why
        warm.errors.append(ConfigError(f"warming up the variant world of seed {seed} failed: "
                                       f"{type(error).__name__}: {error}"))
    finally:
        gate.set()
