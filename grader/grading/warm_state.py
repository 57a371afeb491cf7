"""The warm state of one assignment on this installation: what grading needs before its first run, kept across commands.

Every command that grades needs the same things before its first student run: the reference facts (names in
`[assignment] reference_facts`, measured because they depend on the installed JAX), the reference's figure per
scenario in the batch's worlds (drawn beside each student's), and JAX's compilation cache holding the lesson's
programs. They are measured once by trusted runs and kept in an entry of the user's cache folder
(grader/common/user_cache.py), shared by `grade`, `check`, `validate`, the otter/Gradescope paths and the tests:

    <cache>/warm/<assignment>-<key>/     key: the assignment's fingerprint, a digest of the grader's own files,
                                              the Python, JAX, jaxlib and NumPy versions, OS, machine and CPU flags
        reference.json                   the facts: the reference solution's baseline run without set-up functions
                                         (the oracle applies a scenario's changes to them itself)
        starter-<h>.json + starter-<h>/  compiled programs of the public starter <h> in the scenarios without a fresh
                                         seed (the baseline's programs do not change per batch: only the compiler's
                                         byte figures it reports do, and those are not in the programs)
        seed-<n>-<b>-<h>.json + folder   the starter's programs in the fresh-seed scenarios (the variant) at seed n
                                         and batch seed b: the lesson's weights and the derivative-rule changes are
                                         in the traced programs, so they differ per batch
        world-<d>.json                   the reference solution graded in the worlds d (seeds, batch seed): whether it
                                         scores full marks there (grading/world_check.py), and its figures; in its
                                         primary run (world-) or, when a record needs it, every scenario (whole-world-)
        variant-seeds.json               suitable variant seeds drawn ahead for the next batches (seed_stock.py)

Compiled programs come only from public code: the starter every student is given, or the reference solution where
the lesson page shows it (`[assignment] solution_is_public`); grader/runs/compile_cache.py says why: every run can
read them. The reference solution's measuring runs (facts, figures) never write programs. Parts are built and
published by grader/common/warm_store.py (atomic, locked, verified, never trusted when stale or corrupt). A batch
draws a new variant seed: the facts and the starter's programs are reused as they are, the seed's programs and
figures are built once, and the last few are kept (tests and re-runs with `--variant-seed` reuse them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from grader.api.values import json_safe
from grader.common import system
from grader.common.code_digest import grader_code_digest
from grader.common.environment import environment
from grader.common.private_folder import private_folder
from grader.common.user_cache import private_cache_dir
from grader.common.warm_store import Part, WarmStore, mark_used, prune_entries
from grader.config.assignment import Assignment, ConfigError, Scenario
from grader.grading.world_check import WorldVerdict, judge_world
from grader.runs import compile_cache
from grader.runs.jobs import Runner, make_job, run_scenario
from grader.runs.snapshot import decode

KEPT_SEEDS = 8                   # batch worlds whose programs and figures are kept per entry
KEPT_ENTRIES = 3                 # entries of other grader code or versions kept per assignment ...
ENTRY_MAX_AGE_SECONDS = 3 * 86400  # ... and any of them used this recently
REFERENCE = "reference"
WORLD = "world-"                 # the reference graded in a batch's world as its own plan runs it (the primary run)
WHOLE_WORLD = "whole-world-"     # ... and in every scenario, once a record of that world has a run in the others


@lru_cache(maxsize=1)
def _cpu_flags() -> str:
    """Compiled programs are for this CPU's instruction set: the flags are part of the key (Linux's /proc says them;
    elsewhere the processor's name)."""
    if not system.POSIX:
        return platform.processor()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    flags = next((line.split(":", 1)[1] for line in text.splitlines() if line.startswith(("flags", "Features"))), "")
    return hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:12]


def warm_key(assignment: Assignment) -> str:
    material = {"assignment": assignment.id, "fingerprint": assignment.fingerprint, "grader": grader_code_digest(),
                "versions": environment(), "platform": [platform.system(), platform.machine(), _cpu_flags()],
                "programs warmed by": compile_cache.WARMED_BY}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def fresh_scenarios(assignment: Assignment) -> list[Scenario]:
    return [s for s in assignment.scenarios.values() if s.fresh_seed]


def fixed_scenarios(assignment: Assignment) -> list[Scenario]:
    """Scenarios that run with the lesson's own seed in every batch (baseline among them)."""
    return [s for s in assignment.scenarios.values() if not s.fresh_seed]


def world(job: dict) -> str:
    """What makes two runs' compiled programs the same world: the scenario set-up calls and their parameters (the
    run's seed, the batch seed, and what the oracle derives from them)."""
    return json.dumps(job.get("setup_calls") or [], sort_keys=True, default=str)


def scenario_world(assignment: Assignment, scenario: Scenario, seed: int, batch_seed: int | None = None) -> str:
    return world(dict(make_job(assignment, scenario, seed, "", assignment.submission_filename, batch_seed=batch_seed)))


def _is_kept_verdict(payload: dict[str, Any]) -> bool:
    """A verdict to reuse: whole, and not a rejection that a limit, a failed run or a loaded machine could explain."""
    return _is_verdict(payload) and WorldVerdict.from_payload(payload).worth_keeping


def _is_verdict(payload: dict[str, Any]) -> bool:
    try:
        WorldVerdict.from_payload(payload)
    except (KeyError, TypeError, ValueError):
        return False
    return True


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


class WarmState:
    """The entry of `assignment` under `cache` (default: the user's cache folder). `public_source` is the public
    starter whose compiled programs runs may read ("" where there is none at hand: runs then compile everything)."""

    def __init__(self, assignment: Assignment, cache: Path | None = None, public_source: str = "",
                 fact_source: str = ""):
        self.assignment = assignment
        self.fact_source = fact_source   # a student bundle's facts program (no solution there); "" = the solution
        # the user's alone, or refused (UnsafeFolder) before anything in it is read: common/private_folder.py
        self.cache = private_folder(Path(cache)) if cache else private_cache_dir()
        self.key = warm_key(assignment)
        self.store = WarmStore(self.cache / "warm" / f"{assignment.id}-{self.key}", self.key)
        self.public_source = public_source
        self.compiled = compile_cache.can_cache() and bool(public_source.strip())

    @property
    def folder(self) -> Path:
        return self.store.folder

    # ---- the facts ----------------------------------------------------------------------------------------

    def _reference_name(self) -> str:
        if not self.fact_source:
            return REFERENCE
        return "facts-" + hashlib.sha256(self.fact_source.encode()).hexdigest()[:12]

    def read_reference(self) -> Part | None:
        return self.store.read(self._reference_name(), False, self._has_facts)

    def reference(self) -> Part:
        """The facts part, measured now when no valid one is kept (raises ConfigError when the reference solution,
        or the bundle's facts program, does not run cleanly)."""
        part = self.read_reference()
        if part is None:
            part = self.store.build(self._reference_name(), lambda staging: self._measure_facts(), False,
                                    accept=self._has_facts)
            prune_entries(self.store.folder.parent, f"{self.assignment.id}-", self.store.folder, KEPT_ENTRIES,
                          ENTRY_MAX_AGE_SECONDS)
        mark_used(self.store.folder)
        return part

    def encoded_facts(self, reference: Part | None = None) -> dict[str, Any]:
        """The reference facts as the run streamed them (plain JSON): what a student bundle ships."""
        facts = (reference or self.reference()).payload["facts"]
        return {name: facts[name] for name in self._fact_names()}

    def facts(self, reference: Part | None = None) -> dict[str, Any]:
        return {name: decode(value) for name, value in self.encoded_facts(reference).items()}

    # ---- compiled programs of the public starter --------------------------------------------------------

    def _starter_name(self) -> str:
        return "starter-" + hashlib.sha256(self.public_source.encode()).hexdigest()[:12]

    def read_starter(self) -> Part | None:
        return self.store.read(self._starter_name(), True) if self.compiled else None

    def starter(self) -> Part | None:
        """The starter's programs in the scenarios without a fresh seed (built now when not kept); None where
        programs cannot be kept or there is no public starter."""
        if not self.compiled:
            return None
        part = self.read_starter()
        if part is None:
            runs: list[tuple[Scenario, int, int | None]] = [(s, self.assignment.lesson_seed, None)
                                                             for s in fixed_scenarios(self.assignment)]
            part = self.store.build(self._starter_name(), lambda staging: self._compile_starter(runs, staging), True)
        self.store.touch(part)
        return part

    def _seed_name(self, seed: int, batch_seed: int | None) -> str:
        return f"seed-{seed}-{seed if batch_seed is None else batch_seed}-{self._starter_name()[len('starter-'):]}"

    def read_seed(self, seed: int, batch_seed: int | None) -> Part | None:
        return self.store.read(self._seed_name(seed, batch_seed), True) if self.compiled else None

    def seed(self, seed: int, batch_seed: int | None, base: Part | None = None) -> Part | None:
        """The starter's programs in the fresh-seed scenarios at `seed` in the batch `batch_seed` (built now, from
        `base`'s programs or the kept starter's, when not kept); None where programs cannot be kept or there is no
        public starter."""
        if not self.compiled:
            return None
        name = self._seed_name(seed, batch_seed)
        part = self.read_seed(seed, batch_seed)
        if part is None:
            base = base if base is not None else self.read_starter()   # kept programs it can reuse; never built here
            runs = [(s, seed, batch_seed) for s in fresh_scenarios(self.assignment)]
            # The lesson's own world too, in this batch: its set-up calls carry the batch's parameters (every amount
            # zero, the same lowerings as the variant's), so its programs differ from batch to batch, and the starter
            # part's (no batch) are never found by a batch's as-written runs, which compiled each program again (1.9
            # CPU-s a run against 0.7 in the variant, measured on the starter).
            runs += [(s, self.assignment.lesson_seed, batch_seed) for s in fixed_scenarios(self.assignment)
                     if batch_seed is not None]
            part = self.store.build(name, lambda staging: self._compile_starter(runs, staging), True, base)
            self.store.prune("seed-", KEPT_SEEDS, frozenset({name}))
        else:
            self.store.touch(part)
        return part

    # ---- the batch's world: the reference graded there, and its figures --------------------------------------

    def _world_name(self, batch_seed: int, every: bool = False) -> str:
        seeds = {s.name: batch_seed if s.fresh_seed else self.assignment.lesson_seed
                 for s in self.assignment.scenarios.values()}
        return f"{WHOLE_WORLD if every else WORLD}{_digest([sorted(seeds.items()), batch_seed])}"

    def read_world(self, batch_seed: int, scenarios: Iterable[str] = ()) -> WorldVerdict | None:
        """The kept verdict of the world of `batch_seed` that speaks for records run in `scenarios` (none: the
        primary run's; None when no such verdict was judged here, or it is not whole)."""
        for every in (False, True):
            part = self.store.read(self._world_name(batch_seed, every), False, _is_verdict)
            if part is not None and (verdict := WorldVerdict.from_payload(part.payload)).covers(scenarios):
                return verdict
        return None

    def world(self, batch_seed: int, runner: Runner | None = None, facts: dict[str, Any] | None = None,
              every: bool = False) -> WorldVerdict:
        """How the reference solution does in the world of `batch_seed` (the variant's seed and every amount derived
        from it): in its primary run, or with `every` in every scenario, graded now through the real checks when not
        kept (grading/world_check.py); the last few are kept."""
        name = self._world_name(batch_seed, every)
        part = self.store.read(name, False, _is_kept_verdict)
        if part is None:   # never judged here, or rejected under conditions a failure or load explains: judged now
            known = self.facts() if facts is None else facts
            judge = (lambda staging: judge_world(self.assignment, known, batch_seed, runner, every=True).payload()) \
                if every else (lambda staging: judge_world(self.assignment, known, batch_seed, runner).payload())
            part = self.store.build(name, judge, False, accept=_is_kept_verdict)
            self.store.prune(WHOLE_WORLD if every else WORLD, KEPT_SEEDS, frozenset({name}))
        else:
            self.store.touch(part)
        return WorldVerdict.from_payload(part.payload)

    def world_for(self, batch_seed: int, scenarios: Iterable[str] = (), runner: Runner | None = None,
                  facts: dict[str, Any] | None = None) -> WorldVerdict:
        """The verdict that speaks for records run in `scenarios`: the primary run's when it covers them, else the
        one judged in every scenario (each kept or judged now)."""
        verdict = self.world(batch_seed, runner, facts)
        return verdict if verdict.covers(scenarios) else self.world(batch_seed, runner, facts, every=True)

    def verified_seeds(self) -> list[int]:
        """Batch seeds of the worlds kept here in which the reference scored full marks, and fell short in no run (a
        one-file command may grade in one of them: no new world to verify, and its programs may be compiled already)."""
        verdicts = [WorldVerdict.from_payload(part.payload) for prefix in (WORLD, WHOLE_WORLD)
                    for part in self.store.parts(prefix) if _is_verdict(part.payload)]
        return sorted({v.seed for v in verdicts if v.suitable} - {v.seed for v in verdicts if not v.suitable})

    def figures(self, seeds: dict[str, int] | None = None, batch_seed: int | None = None,
                runner: Runner | None = None, scenarios: Iterable[str] = ()) -> dict[str, Any]:
        """Scenario -> the reference's figure in the world of `batch_seed` (the grading run's; `seeds`, scenario ->
        seed, only names the world when it is not given), in at least the `scenarios` (a record's runs), or {} when
        the assignment names no figure. `runner` runs the reference when the world was never judged here."""
        if not self.assignment.figure_name:
            return {}
        if batch_seed is None:
            fresh = [seeds[s.name] for s in fresh_scenarios(self.assignment) if seeds and s.name in seeds]
            batch_seed = fresh[0] if fresh else self.assignment.lesson_seed
        return dict(self.world_for(batch_seed, scenarios, runner).figures)

    # ---- measuring ---------------------------------------------------------------------------------------

    def _fact_names(self) -> list[str]:
        return list(self.assignment.config["assignment"].get("reference_facts", []))

    def _has_facts(self, payload: dict[str, Any]) -> bool:
        return isinstance(payload.get("facts"), dict) and all(n in payload["facts"] for n in self._fact_names())

    def _measure_facts(self) -> dict[str, Any]:
        """The facts as the installed JAX gives them: the baseline run with only the set-up functions that change the
        programs themselves (`[assignment] fact_setup`: a changed lowering changes the compiled buffers every run
        reports), never those whose effect the oracle applies to the facts itself (what the compiler reports)."""
        keep = set(self.assignment.config["assignment"].get("fact_setup", []))
        scenario = self.assignment.scenarios["baseline"]
        baseline = dataclasses.replace(scenario, setup=tuple(name for name in scenario.setup if name in keep))
        if self.fact_source:
            return {"facts": self._run_fact_source(baseline)}
        frames = self._run_reference(baseline, self.assignment.lesson_seed, None, None, tagged=False)[0]
        missing = [name for name in self._fact_names() if name not in frames]
        if missing:
            raise ConfigError(f"the reference solution never defined {', '.join(missing)}")
        return {"facts": {name: frames[name] for name in self._fact_names()}}

    def _run_fact_source(self, baseline: Scenario) -> dict[str, Any]:
        """The facts from the bundle's facts program (the starter with only the exercises the facts need filled in,
        grader/authoring/starter.py fact_source). Its other exercises are unfinished and may fail, as a student's
        would: the facts count only when every statement up to the last one that bound a fact ran cleanly."""
        assignment, names = self.assignment, self._fact_names()
        snapshot, raw = run_scenario(assignment, baseline, assignment.lesson_seed, self.fact_source,
                                     assignment.submission_filename, None, tagged=False)
        frames: dict[str, tuple[int, Any]] = {}
        for frame in raw.frames:
            if frame.get("type") == "value" and frame.get("name") in names and "value" in frame:
                frames[frame["name"]] = (int(frame.get("stmt", 0)), frame["value"])
        missing = [name for name in names if name not in frames]
        last = max((index for index, _ in frames.values()), default=-1)
        failed = [s for s in snapshot.failed_statements if s.index <= last]
        if snapshot.setup_error or missing or failed:
            detail = (snapshot.setup_error or (f"it never defined {', '.join(missing)}" if missing else
                      f"line {failed[0].line} raised {(failed[0].error or {}).get('message', '')}"))
            raise ConfigError(f"the course bundle's facts program did not run cleanly on JAX "
                              f"{environment().get('jax')} ({detail}).\n{snapshot.output_tail[-2000:]}")
        return {name: value for name, (_, value) in frames.items()}

    def _compile_starter(self, runs: list[tuple[Scenario, int, int | None]], staging: Path | None) -> dict[str, Any]:
        """Run the public starter in each (scenario, seed, batch seed) with `staging` as its writable compilation
        cache. Its unfinished exercises fail as they do for a student: only its compiled programs are kept."""
        assert staging is not None
        runner = compile_cache.filling_runner(staging)
        for scenario, seed, batch_seed in runs:
            snapshot, _ = run_scenario(self.assignment, scenario, seed, self.public_source,
                                       self.assignment.submission_filename, runner, batch_seed=batch_seed)
            if snapshot.setup_error:
                raise ConfigError(f"the sandbox could not run the public starter to compile the lesson's programs "
                                  f"({scenario.name}, seed {seed}): {snapshot.setup_error}")
        return {"starter": hashlib.sha256(self.public_source.encode()).hexdigest(),
                "worlds": [[s.name, seed, batch_seed] for s, seed, batch_seed in runs]}

    def _run_reference(self, scenario: Scenario, seed: int, batch_seed: int | None,
                       runner: Runner | None, tagged: bool = True) -> tuple[dict[str, Any], Any]:
        """One trusted run of the reference (it reads the compiled programs, never writes them): its last streamed
        value of each name, and its figure (JSON-safe)."""
        assignment = self.assignment
        source = assignment.solution_path.read_text()
        snapshot, raw = run_scenario(assignment, scenario, seed, source, assignment.submission_filename, runner,
                                     batch_seed=batch_seed, tagged=tagged)
        if snapshot.setup_error and runner is not None:   # the sandbox could not set the run up: once more, fresh
            snapshot, raw = run_scenario(assignment, scenario, seed, source, assignment.submission_filename,
                                         batch_seed=batch_seed, tagged=tagged)
        failed = snapshot.failed_statements
        if snapshot.ending != "completed" or failed:
            detail = failed[0].error["message"] if failed and failed[0].error else snapshot.ending
            if snapshot.setup_error:
                detail = f"{detail}: {snapshot.setup_error}"
            raise ConfigError(f"the reference solution {assignment.solution_path} did not run cleanly in the "
                              f"{scenario.name} scenario (seed {seed}: {detail}).\n{snapshot.output_tail[-2000:]}")
        frames = {frame["name"]: frame["value"] for frame in raw.frames
                  if frame.get("type") == "value" and isinstance(frame.get("name"), str) and "value" in frame}
        figure = json_safe(snapshot.values.get(assignment.figure_name)) if assignment.figure_name else None
        return frames, figure
