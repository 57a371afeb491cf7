"""Before the first student run: the warm state ready and the fork server started, side by side, and said aloud.

What runs in parallel, so that a batch starts grading as early as it can:
- the fork server imports JAX (in the background, from the first moment);
- the reference facts are read, or measured when none are kept, and beside them the public starter's compiled
  programs of the scenarios without a fresh seed (grading waits for both: the facts are needed before any check);
- for a batch, each fresh-seed world's programs (the starter's in the variant at the batch's seed and batch seed)
  are read, or built in the background while the first baseline runs go ahead; a run of that world waits for
  them (compiling the same programs in every early run would cost more than waiting), every other run does not;
- the batch's world is verified in the background: the reference solution graded there through the real checks
  must score full marks (grading/world_check.py; the verdict is kept per world), which also gives its figures.
  It is graded in its primary run at once, and in every scenario once a student's run first goes outside it.
  Records of a world are kept only once the verdict that speaks for their runs is in (the batch waits for it).

The fork server reads a view (grader/common/warm_store.View) to which each part's programs are added as soon as
it is published. Only parts of public code's programs are ever added: the reference solution writes none.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from grader.common.warm_store import Part, View, mark_used
from grader.config.assignment import Assignment, ConfigError
from grader.grading.run_plan import RunPlan
from grader.grading.warm_state import WarmState, fixed_scenarios, fresh_scenarios, scenario_world, world
from grader.grading.world_check import WorldRejected, WorldVerdict
from grader.model.job import Job
from grader.model.limits import Limits
from grader.runs.runners import ServerStart
from grader.sandbox.isolation import Isolation, recheck, require_isolation
from grader.sandbox.process import run_job
from grader.sandbox.raw_run import RawRun

Note = Callable[[str], None]


class GatedRunner:
    """The command's Runner: the fork server once started (else a fresh sandboxed interpreter per run, isolated by
    `isolation`, the strategy the command's check approved); a run whose world is still being warmed waits for it.
    `first_run_in` hears the world of each run before it starts (the warm-up judges the lesson's world once a
    student's run goes there)."""

    def __init__(self, server: ServerStart, gates: dict[str, threading.Event], isolation: Isolation | None = None,
                 first_run_in: Callable[[str], None] | None = None):
        self.server = server
        self.gates = gates
        self.isolation = isolation
        self.first_run_in = first_run_in

    def __call__(self, job: Job, limits: Limits) -> RawRun:
        key = world(dict(job))
        if self.first_run_in is not None:
            self.first_run_in(key)
        gate = self.gates.get(key)
        if gate is not None:
            gate.wait()
        runner = self.server.runner()
        return runner(job, limits) if runner else self.fresh(job, limits)

    def fresh(self, job: Job, limits: Limits) -> RawRun:
        """The run in a fresh sandboxed interpreter (a run the fork server could not set up is tried once so)."""
        return run_job(job, limits, self.isolation)

    def unheard(self) -> GatedRunner:
        """The same runner, its runs unheard (the reference's own runs judging a world never start another)."""
        return GatedRunner(self.server, self.gates, self.isolation)


class Judgement:
    """One verdict of the batch's world being judged in the background: set once it is in (or failed)."""

    def __init__(self) -> None:
        self.verdict: WorldVerdict | None = None
        self.done = threading.Event()
        self.started = False


class WarmUp:
    """What a command grades with: the reference facts, the runner, and (once judged) the verdicts of its world: the
    reference in its primary run, which every record needs, and in every scenario, which only a record with a run
    in the others needs (judged once such a run starts, or such a record asks)."""

    def __init__(self, state: WarmState, seeds: dict[str, int], batch_seed: int | None, facts: dict[str, Any],
                 runner: GatedRunner):
        self.state = state
        self.seeds = seeds
        self.batch_seed = batch_seed
        self.facts = facts
        self.runner = runner
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self._steps: Note = lambda text: None
        self._judgements = {False: Judgement(), True: Judgement()}   # every scenario? -> its judgement
        self._lock = threading.Lock()
        self._other_worlds: frozenset[str] = frozenset()   # worlds of runs outside the primary verdict's scenarios
        for judgement in self._judgements.values():
            judgement.done.set()     # until a judgement is started: nothing to wait for

    def failure(self) -> BaseException | None:
        """A background warm-up that failed (the reference did not run cleanly), or the world's rejection, if any."""
        if self.errors:
            return self.errors[0]
        for judgement in self._judgements.values():
            verdict = judgement.verdict if judgement.done.is_set() else None
            if verdict is not None and not verdict.suitable:
                return WorldRejected(verdict)
        return None

    def verdict(self, wait: bool = True, scenarios: Iterable[str] = ()) -> WorldVerdict | None:
        """The verdict of the batch's world that speaks for a record run in `scenarios` (none: the primary run's;
        the one judged in every scenario is started when those need it). Waits for it unless `wait` is False: None
        while it is being judged, and None where no reference solution is at hand to judge it. Raises what the
        warm-up failed with, and WorldRejected for a world in which the reference falls short."""
        judgement = self._judgement(scenarios)
        if wait:
            judgement.done.wait()
        failure = self.failure()
        if failure is not None:
            raise failure
        return judgement.verdict if judgement.done.is_set() else None

    def judged(self, scenarios: Iterable[str] = ()) -> bool:
        """The verdict that speaks for a record run in `scenarios` is in (or there is none to wait for)."""
        return self._judgement(scenarios).done.is_set()

    def settle(self) -> None:
        """Wait for every step started in the background; raises what one failed with, or the world's rejection
        (a warm-up that failed after the last record is still the command's failure)."""
        for thread in list(self.threads):
            thread.join()
        failure = self.failure()
        if failure is not None:
            raise failure

    def figures(self, scenarios: Iterable[str] = ()) -> dict[str, Any]:
        """Scenario -> the reference's figure in the batch's world, in at least `scenarios`; waits for the verdict
        that speaks for them."""
        verdict = self.verdict(scenarios=scenarios)
        if not self.state.assignment.figure_name:
            return {}
        if verdict is not None:
            return dict(verdict.figures)
        return self.state.figures(self.seeds, self.batch_seed, self.runner, scenarios)

    def judge(self, steps: Note) -> None:
        """Judge the batch's world in the background, in the reference's primary run (grading/world_check.py); in
        every scenario later, when a record needs it."""
        self._steps = steps
        first = set(RunPlan.first(self.state.assignment).first_runs)
        self._other_worlds = frozenset(
            scenario_world(self.state.assignment, self.state.assignment.scenarios[name], seed, self.batch_seed)
            for name, seed in self.seeds.items() if name not in first)
        self.runner.first_run_in = self._heard
        self._start_judging(False)

    def _judgement(self, scenarios: Iterable[str]) -> Judgement:
        """The judgement that speaks for `scenarios`: the primary run's while it covers them (or is not in yet and
        the scenarios are its plan's first runs), else the one in every scenario, started now if it was not."""
        primary = self._judgements[False]
        if not primary.started:
            return primary
        needed = set(scenarios)
        if primary.done.is_set() and primary.verdict is not None:
            covered = primary.verdict.covers(needed)
        else:
            covered = needed <= set(RunPlan.first(self.state.assignment).first_runs)
        if covered:
            return primary
        self._start_judging(True)
        return self._judgements[True]

    def _heard(self, run_world: str) -> None:
        """A student's run is starting in `run_world`: one outside the primary run's starts the judgement in every
        scenario beside it (its record will need that verdict)."""
        if run_world in self._other_worlds and not self._judgements[True].started:
            self._start_judging(True)

    def _start_judging(self, every: bool) -> None:
        with self._lock:
            judgement = self._judgements[every]
            if judgement.started:
                return
            judgement.started = True
            judgement.done.clear()
        runner = self.runner.unheard()
        steps = self._steps

        def run() -> None:
            started = time.monotonic()
            try:
                assert self.batch_seed is not None
                kept = self.state.read_world(self.batch_seed, self.state.assignment.scenarios if every else ())
                judgement.verdict = kept or self.state.world(self.batch_seed, runner, self.facts, every)
                if kept is None:
                    where = "in every scenario" if every else "in its primary run"
                    steps(f"Warm-up: the reference solution graded in this batch's world ({where}): "
                          f"{judgement.verdict.score:g}/{judgement.verdict.max_score:g} "
                          f"({time.monotonic() - started:.1f} s).")
            finally:
                judgement.done.set()

        self.start("verifying the batch's world" + (" in every scenario" if every else ""), run)

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
        with self._lock:
            self.threads.append(thread)
        thread.start()


@contextmanager
def warmed_up(assignment: Assignment, seeds: dict[str, int], note: Note, cache: Path | None = None,
              warm_fresh_seeds: bool = True, steps: Note | None = None, public_source: str = "",
              batch_seed: int | None = None, allow_weak: bool | None = None) -> Iterator[WarmUp]:
    """The warm-up for grading in the worlds `seeds` (scenario -> seed) of the batch `batch_seed` (the grading
    run's, as grade() passes it to the runs), as a context: the fork server is stopped and the view removed on
    exit. `public_source` is the public starter whose programs runs may read ("": none, runs compile everything).
    `note` hears what the user must know (fast runs unavailable), `steps` each step of the warm-up.
    `warm_fresh_seeds=False` (one submission: `check`, `validate`, otter) uses fresh-seed programs when they are
    kept and never builds them. The world of `batch_seed` is judged in the background wherever the reference
    solution is at hand (`WarmUp.verdict`)."""
    steps = steps or (lambda text: None)
    # Every batch inspects its own sandbox (isolation.py); nothing weak runs unless asked for (`allow_weak`, default:
    # this process's opt-in), and never as root.
    approved = require_isolation(recheck(), allow_weak)
    state = WarmState(assignment, cache, public_source)
    try:
        view = View(state.store) if state.compiled else None
    except OSError as error:
        raise _unusable(state, error) from None
    server = ServerStart(view.folder if view else None, note,
                         ready=lambda seconds: steps(f"Warm-up: fork server ready ({seconds:.1f} s)."))
    gates: dict[str, threading.Event] = {}
    warm = WarmUp(state, seeds, batch_seed, {}, GatedRunner(server, gates, approved))
    try:
        try:
            reference, starter = state.read_reference(), state.read_starter()
        except OSError as error:
            raise _unusable(state, error) from None
        if view and starter:
            view.add(starter)
        # The programs of each world a run may need, without holding the batch back: the fresh-seed worlds' (the
        # primary scenario's: every file runs there) built at once, beside the facts; the lesson's own worlds' only
        # when a run there first waits for them (a class that passes in the primary world never pays for them).
        if starter is None and state.compiled:
            on_demand = OnDemand(lambda: warm.start("compiling the lesson's programs",
                                                    functools.partial(_build_starter, state, view, on_demand, steps)))
            for scenario in fixed_scenarios(assignment):
                if scenario.name in seeds:
                    gates[scenario_world(assignment, scenario, seeds[scenario.name], batch_seed)] = on_demand
        fresh = [s for s in fresh_scenarios(assignment) if s.name in seeds]
        for seed in sorted({seeds[s.name] for s in fresh}):
            part = state.read_seed(seed, batch_seed)
            if part is not None:
                state.store.touch(part)
                if view:
                    view.add(part)
                steps(f"Warm-up: the lesson's programs in the variant world of seed {seed} were built before this "
                      "command: nothing to compile.")
            elif warm_fresh_seeds and state.compiled:
                gate = threading.Event()
                for scenario in fresh:
                    gates[scenario_world(assignment, scenario, seed, batch_seed)] = gate
                warm.start(f"warming up the variant world of seed {seed}",
                           functools.partial(_warm_seed, state, seed, batch_seed, starter, view, gate, steps))
        warm.facts = state.facts(_facts(state, reference, starter, steps))
        if batch_seed is not None and assignment.solution_path.is_file():   # a student bundle ships no solution
            warm.judge(steps)
        yield warm
    finally:
        for thread in warm.threads:
            thread.join()
        server.close()
        if view:
            view.close()


class OnDemand(threading.Event):
    """A gate whose programs are built only when the first run of its worlds waits for it (`start_build` starts
    the build in the background; the build sets the gate, also when it fails)."""

    def __init__(self, start_build: Callable[[], None]):
        super().__init__()
        self._start_build = start_build
        self._lock = threading.Lock()
        self._started = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._lock:
            if not self._started:
                self._started = True
                self._start_build()
        return super().wait(timeout)


def _unusable(state: WarmState, error: OSError) -> ConfigError:
    """The cache folder cannot hold the warm state: say which, and grade nothing."""
    return ConfigError(f"the warm state cannot be kept under {state.folder} ({type(error).__name__}: {error}); give "
                       "a usable folder with --cache-dir or $GRADER_CACHE_DIR")


def _facts(state: WarmState, reference: Part | None, starter: Part | None, note: Note) -> Part:
    """The facts part: `reference` when kept, else measured now (the batch waits: every check needs the facts)."""
    if reference is not None:
        mark_used(state.folder)
        kept = "reference facts and compiled programs" if starter is not None else "reference facts"
        note(f"Warm-up: {kept} reused ({state.folder}).")
        return reference
    note("Warm-up: running the reference solution once for this grader and JAX version (its facts are kept for "
         "later commands) ...")
    started = time.monotonic()
    try:
        reference = state.reference()
    except OSError as error:
        raise _unusable(state, error) from None
    note(f"Warm-up: reference solution measured ({time.monotonic() - started:.1f} s).")
    return reference


def _build_starter(state: WarmState, view: View | None, gate: threading.Event, note: Note) -> None:
    note("Warm-up: compiling the lesson's programs with its public code, for the first run in the lesson's own "
         "world (kept for later commands) ...")
    started = time.monotonic()
    try:
        part = state.starter()
        if view and part:
            view.add(part)
        note(f"Warm-up: the lesson's programs compiled ({time.monotonic() - started:.1f} s).")
    finally:
        gate.set()


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


