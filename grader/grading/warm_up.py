"""Before the first student run: the warm state ready and the fork server started, side by side, and said aloud.

What runs in parallel, so that a batch starts grading as early as it can:
- the fork server imports JAX (in the background, from the first moment);
- the reference facts are read, or measured when none are kept, and beside them the public starter's compiled
  programs of the scenarios without a fresh seed (grading waits for both: the facts are needed before any check);
- for a batch, each fresh-seed world's programs (the starter's in the variant at the batch's seed and batch seed)
  are read, or built in the background while the first baseline runs go ahead; a run of that world waits for
  them (compiling the same programs in every early run would cost more than waiting), every other run does not;
- for a batch, the reference's figures in the batch's worlds are drawn in the background (a page needs them,
  a grade does not).

The fork server reads a view (grader/common/warm_store.View) to which each part's programs are added as soon as
it is published. Only parts of public code's programs are ever added: the reference solution writes none.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
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

    def __init__(self, state: WarmState, seeds: dict[str, int], batch_seed: int | None, facts: dict[str, Any],
                 runner: GatedRunner):
        self.state = state
        self.seeds = seeds
        self.batch_seed = batch_seed
        self.facts = facts
        self.runner = runner
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self._figures: dict[str, Any] | None = None

    def failure(self) -> BaseException | None:
        """A background warm-up that failed (the reference did not run cleanly in the batch's world), if any."""
        return self.errors[0] if self.errors else None

    def figures(self) -> dict[str, Any]:
        """Scenario -> the reference's figure in the batch's worlds; waits for the background warm-ups."""
        for thread in self.threads:
            thread.join()
        if self.errors:
            raise self.errors[0]
        if self._figures is None:
            self._figures = self.state.figures(self.seeds, self.batch_seed, self.runner)
        return self._figures

    def start(self, name: str, target: Callable[[], None]) -> None:
        """Run `target` in the background; what it raises is the warm-up's failure (the batch stops and says why)."""
        def run() -> None:
            try:
                target()
            except ConfigError as error:
                self.errors.append(error)
            except Exception as error:  # noqa: BLE001 -- the warm-up's own sandbox failed: the batch stops and says why
                self.errors.append(ConfigError(f"{name} failed: {type(error).__name__}: {error}"))

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()


@contextmanager
def warmed_up(assignment: Assignment, seeds: dict[str, int], note: Note, cache: Path | None = None,
              warm_fresh_seeds: bool = True, steps: Note | None = None, public_source: str = "",
              batch_seed: int | None = None) -> Iterator[WarmUp]:
    """The warm-up for grading in the worlds `seeds` (scenario -> seed) of the batch `batch_seed` (the grading
    run's, as grade() passes it to the runs), as a context: the fork server is stopped and the view removed on
    exit. `public_source` is the public starter whose programs runs may read ("": none, runs compile everything).
    `note` hears what the user must know (fast runs unavailable), `steps` each step of the warm-up.
    `warm_fresh_seeds=False` (one submission: `check`, `validate`, otter) uses fresh-seed programs when they are
    kept and never builds them, nor the figures."""
    steps = steps or (lambda text: None)
    state = WarmState(assignment, cache, public_source)
    view = View(state.store) if state.compiled else None
    server = ServerStart(view.folder if view else None, note,
                         ready=lambda seconds: steps(f"Warm-up: fork server ready ({seconds:.1f} s)."))
    warm = None
    try:
        reference, starter = _facts_and_programs(state, steps)
        if view and starter:
            view.add(starter)
        gates: dict[str, threading.Event] = {}
        warm = WarmUp(state, seeds, batch_seed, state.facts(reference), GatedRunner(server, gates))
        fresh = [s for s in fresh_scenarios(assignment) if s.name in seeds]
        for seed in sorted({seeds[s.name] for s in fresh}):
            part = state.read_seed(seed, batch_seed)
            if part is not None:
                state.store.touch(part)
                if view:
                    view.add(part)
            elif warm_fresh_seeds and state.compiled:
                gate = threading.Event()
                for scenario in fresh:
                    gates[scenario_world(assignment, scenario, seed, batch_seed)] = gate
                warm.start(f"warming up the variant world of seed {seed}",
                           functools.partial(_warm_seed, state, seed, batch_seed, starter, view, gate, steps))
        if warm_fresh_seeds and assignment.figure_name and state.read_figures(seeds, batch_seed) is None:
            warm.start("drawing the reference's figures", lambda: _draw_figures(warm, steps))
        yield warm
    finally:
        for thread in warm.threads if warm else []:
            thread.join()
        server.close()
        if view:
            view.close()


def _facts_and_programs(state: WarmState, note: Note) -> tuple[Part, Part | None]:
    """The facts part and the starter's programs part (None: no programs), each read or built, side by side."""
    reference, starter = state.read_reference(), state.read_starter()
    if reference is not None and (starter is not None or not state.compiled):
        mark_used(state.folder)
        kept = "reference facts and compiled programs" if starter is not None else "reference facts"
        note(f"Warm-up: {kept} reused ({state.folder}).")
        return reference, starter
    with ThreadPoolExecutor(max_workers=1) as pool:
        compiling = pool.submit(_starter, state, note) if starter is None and state.compiled else None
        if reference is None:
            note("Warm-up: running the reference solution once for this grader and JAX version (its facts are kept "
                 "for later commands) ...")
            started = time.monotonic()
            reference = state.reference()
            note(f"Warm-up: reference solution measured ({time.monotonic() - started:.1f} s).")
        else:
            mark_used(state.folder)
        return reference, compiling.result() if compiling else starter


def _starter(state: WarmState, note: Note) -> Part | None:
    note("Warm-up: compiling the lesson's programs with its public code (kept for later commands) ...")
    started = time.monotonic()
    part = state.starter()
    note(f"Warm-up: the lesson's programs compiled ({time.monotonic() - started:.1f} s).")
    return part


def _warm_seed(state: WarmState, seed: int, batch_seed: int | None, starter: Part | None, view: View | None,
               gate: threading.Event, note: Note) -> None:
    started = time.monotonic()
    note(f"Warm-up: the lesson's programs in the variant world of seed {seed}, beside the first runs ...")
    try:
        part = state.seed(seed, batch_seed, starter)
        if view and part:
            view.add(part)
        note(f"Warm-up: variant world of seed {seed} ready ({time.monotonic() - started:.1f} s).")
    finally:
        gate.set()


def _draw_figures(warm: WarmUp, note: Note) -> None:
    started = time.monotonic()
    warm.state.figures(warm.seeds, warm.batch_seed, warm.runner)
    note(f"Warm-up: the reference's figures in this batch's worlds drawn ({time.monotonic() - started:.1f} s).")
