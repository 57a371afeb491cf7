"""The warm state of one assignment on this installation: what the reference solution produces, kept across commands.

Every command that grades needs the same things before its first student run: the reference facts (names in
`[assignment] reference_facts`, measured because they depend on the installed JAX), the reference's figure per
scenario (drawn beside each student's), and JAX's compilation cache holding the lesson's programs. They are
measured once by trusted runs of the reference solution and kept in an entry of the user's cache folder
(grader/common/user_cache.py), shared by `grade`, `check`, `validate`, the otter/Gradescope paths and the tests:

    <cache>/warm/<assignment>-<key>/     key: the assignment's fingerprint, a digest of the grader's own files,
                                              the Python, JAX, jaxlib and NumPy versions, OS, machine and CPU flags
        reference.json + reference/      facts and figures of the scenarios without a fresh seed (run at the
                                         lesson's seed), and their compiled programs
        seed-<n>.json + seed-<n>/        the fresh-seed scenarios (the variant) at seed n: figures, and programs
                                         (the lesson's weights are constants in them, so they differ per seed)

Parts are built and published by grader/common/warm_store.py (atomic, locked, verified, never trusted when
stale or corrupt). A batch draws a new variant seed: the reference part is reused as it is, the seed's part is
built once (starting from the reference part's programs) and the last few seeds are kept (tests and re-runs
with `--variant-seed` reuse them).
"""

from __future__ import annotations

import hashlib
import json
import platform
from functools import lru_cache
from pathlib import Path
from typing import Any

from grader.api.values import json_safe
from grader.common.code_digest import grader_code_digest
from grader.common.environment import environment
from grader.common.user_cache import user_cache_dir
from grader.common.warm_store import Part, WarmStore, mark_used, prune_entries
from grader.config.assignment import Assignment, ConfigError, Scenario
from grader.runs import compile_cache
from grader.runs.jobs import Runner, make_job, run_scenario
from grader.runs.snapshot import decode

KEPT_SEEDS = 8                   # variant seeds whose programs and figures are kept per entry
KEPT_ENTRIES = 3                 # entries of other grader code or versions kept per assignment ...
ENTRY_MAX_AGE_SECONDS = 3 * 86400  # ... and any of them used this recently
REFERENCE = "reference"


@lru_cache(maxsize=1)
def _cpu_flags() -> str:
    """Compiled programs are for this CPU's instruction set: the flags are part of the key."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    flags = next((line.split(":", 1)[1] for line in text.splitlines() if line.startswith(("flags", "Features"))), "")
    return hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:12]


def warm_key(assignment: Assignment) -> str:
    material = {"assignment": assignment.id, "fingerprint": assignment.fingerprint, "grader": grader_code_digest(),
                "versions": environment(), "platform": [platform.system(), platform.machine(), _cpu_flags()]}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def fresh_scenarios(assignment: Assignment) -> list[Scenario]:
    return [s for s in assignment.scenarios.values() if s.fresh_seed]


def fixed_scenarios(assignment: Assignment) -> list[Scenario]:
    """Scenarios that run with the lesson's own seed in every batch (baseline among them)."""
    return [s for s in assignment.scenarios.values() if not s.fresh_seed]


def world(job: dict) -> str:
    """What makes two runs' compiled programs the same world: the scenario set-up calls and their parameters."""
    return json.dumps(job.get("setup_calls") or [], sort_keys=True, default=str)


def scenario_world(assignment: Assignment, scenario: Scenario, seed: int) -> str:
    return world(dict(make_job(assignment, scenario, seed, "", assignment.submission_filename)))


class WarmState:
    """The entry of `assignment` under `cache` (default: the user's cache folder)."""

    def __init__(self, assignment: Assignment, cache: Path | None = None):
        self.assignment = assignment
        self.cache = Path(cache).absolute() if cache else user_cache_dir()
        self.key = warm_key(assignment)
        self.store = WarmStore(self.cache / "warm" / f"{assignment.id}-{self.key}", self.key)
        self.compiled = compile_cache.can_cache()

    @property
    def folder(self) -> Path:
        return self.store.folder

    # ---- the parts --------------------------------------------------------------------------------------

    def read_reference(self, programs_optional: bool = False) -> Part | None:
        """The kept reference part; with `programs_optional`, one kept without compiled programs (measured where
        they could not be kept, as a Gradescope image may be built) is good enough too."""
        part = self.store.read(REFERENCE, self.compiled, self._covers_fixed)
        if part is None and programs_optional and self.compiled:
            part = self.store.read(REFERENCE, False, self._covers_fixed)
        return part

    def reference(self) -> Part:
        """The reference part, measured now when no valid one is kept (raises ConfigError when the reference
        solution does not run cleanly)."""
        part = self.read_reference()
        if part is None:
            part = self.store.build(REFERENCE, self._measure_fixed, self.compiled, accept=self._covers_fixed)
            prune_entries(self.store.folder.parent, f"{self.assignment.id}-", self.store.folder, KEPT_ENTRIES,
                          ENTRY_MAX_AGE_SECONDS)
        mark_used(self.store.folder)
        return part

    def read_seed(self, seed: int) -> Part | None:
        return self.store.read(f"seed-{seed}", self.compiled, self._covers_fresh)

    def seed(self, seed: int, base: Part | None = None) -> Part:
        """The fresh-seed scenarios' part for `seed` (built now, from `base`'s programs, when not kept)."""
        name = f"seed-{seed}"
        part = self.read_seed(seed)
        if part is None:
            base = base or self.reference()
            part = self.store.build(name, lambda staging: self._measure_fresh(seed, staging), self.compiled, base,
                                    self._covers_fresh)
            self.store.prune("seed-", KEPT_SEEDS, frozenset({name}))
        else:
            self.store.touch(part)
        return part

    def starter(self, source: str) -> Part | None:
        """Compiled programs of a student bundle's public starter (where there is no solution); None where
        programs cannot be kept. The starter's TODOs may raise: only its compiled programs matter."""
        if not self.compiled:
            return None
        name = "starter-" + hashlib.sha256(source.encode()).hexdigest()[:12]
        baseline = self.assignment.scenarios["baseline"]

        def make(staging: Path | None) -> dict[str, Any]:
            assert staging is not None
            run_scenario(self.assignment, baseline, self.assignment.lesson_seed, source,
                         self.assignment.submission_filename, compile_cache.filling_runner(staging))
            return {}

        return self.store.read(name, True) or self.store.build(name, make, True)

    # ---- what they hold ----------------------------------------------------------------------------------

    def encoded_facts(self, reference: Part | None = None) -> dict[str, Any]:
        """The reference facts as the run streamed them (plain JSON): what a student bundle ships."""
        facts = (reference or self.reference()).payload["facts"]
        return {name: facts[name] for name in self._fact_names()}

    def facts(self, reference: Part | None = None) -> dict[str, Any]:
        return {name: decode(value) for name, value in self.encoded_facts(reference).items()}

    def figures(self, seeds: dict[str, int] | None = None) -> dict[str, Any]:
        """Scenario -> the reference's figure in the world the batch graded (`seeds`: scenario -> seed; default
        the lesson's seed for all), or {} when the assignment names no figure."""
        if not self.assignment.figure_name:
            return {}
        seeds = seeds or {name: self.assignment.lesson_seed for name in self.assignment.scenarios}
        reference = self.reference()
        figures = {}
        for name, seed in seeds.items():
            scenario = self.assignment.scenarios[name]
            part = self.seed(seed, reference) if scenario.fresh_seed else reference
            figures[name] = part.payload["figures"][name]
        return figures

    # ---- measuring ---------------------------------------------------------------------------------------

    def _fact_names(self) -> list[str]:
        return list(self.assignment.config["assignment"].get("reference_facts", []))

    def _covers_fixed(self, payload: dict[str, Any]) -> bool:
        return (isinstance(payload.get("facts"), dict) and all(n in payload["facts"] for n in self._fact_names())
                and isinstance(payload.get("figures"), dict)
                and all(s.name in payload["figures"] for s in fixed_scenarios(self.assignment)))

    def _covers_fresh(self, payload: dict[str, Any]) -> bool:
        return isinstance(payload.get("figures"), dict) and all(
            s.name in payload["figures"] for s in fresh_scenarios(self.assignment))

    def _runner(self, staging: Path | None) -> Runner | None:
        return compile_cache.filling_runner(staging) if staging is not None else None

    def _measure_fixed(self, staging: Path | None) -> dict[str, Any]:
        """Run the reference in each scenario without a fresh seed (baseline gives the facts)."""
        runner = self._runner(staging)
        facts: dict[str, Any] = {}
        figures = {}
        for scenario in fixed_scenarios(self.assignment):
            frames, figure = self._run(scenario, self.assignment.lesson_seed, runner)
            figures[scenario.name] = figure
            if scenario.name == "baseline":
                facts = {name: frames[name] for name in self._fact_names() if name in frames}
        missing = [name for name in self._fact_names() if name not in facts]
        if missing:
            raise ConfigError(f"the reference solution never defined {', '.join(missing)}")
        return {"facts": facts, "figures": figures}

    def _measure_fresh(self, seed: int, staging: Path | None) -> dict[str, Any]:
        runner = self._runner(staging)
        return {"seed": seed, "figures": {s.name: self._run(s, seed, runner)[1] for s in fresh_scenarios(self.assignment)}}

    def _run(self, scenario: Scenario, seed: int, runner: Runner | None) -> tuple[dict[str, Any], Any]:
        """One trusted run of the reference: (its last streamed value of each name, its figure, JSON-safe)."""
        assignment = self.assignment
        source = assignment.solution_path.read_text()
        snapshot, raw = run_scenario(assignment, scenario, seed, source, assignment.submission_filename, runner)
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
