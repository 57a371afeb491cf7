"""What the reference solution produces on the installed JAX, measured by running it, never written down.

- facts: the names in `[assignment] reference_facts` from its baseline run without set-up functions (residual
  counts, compiled memory: they change with the JAX version, and the oracle applies a scenario's changes itself);
- figures: the figure value named by `[report] figure`, per scenario, drawn beside each student's own.

The runs use the same harness as students; the result is cached (one JSON file under the given folder) keyed
by the versions of python/jax/jaxlib/numpy and the assignment's fingerprint, so a batch pays for it once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from grader.api.values import json_safe
from grader.common.environment import environment
from grader.common.files import atomic_write
from grader.config.assignment import Assignment, ConfigError
from grader.runs.jobs import Runner, run_scenario
from grader.runs.snapshot import decode


def cache_key(assignment: Assignment) -> str:
    text = json.dumps([environment(), assignment.fingerprint], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def reference_facts(assignment: Assignment, cache_dir: Path | None) -> dict[str, Any]:
    names = assignment.config["assignment"].get("reference_facts", [])
    encoded = _measured(assignment, cache_dir)["facts"]
    return {name: decode(encoded[name]) for name in names}


def encoded_facts(assignment: Assignment, cache_dir: Path | None) -> dict[str, Any]:
    """The reference facts as the run streamed them (plain JSON): what a student bundle ships."""
    names = assignment.config["assignment"].get("reference_facts", [])
    encoded = _measured(assignment, cache_dir)["facts"]
    return {name: encoded[name] for name in names}


def reference_figures(assignment: Assignment, cache_dir: Path | None,
                      seeds: dict[str, int] | None = None, runner: Runner | None = None,
                      batch_seed: int | None = None) -> dict[str, Any]:
    """Scenario -> the reference solution's figure (JSON-safe), or {} when the assignment names no figure.

    With `seeds` (scenario -> seed, as the batch graded), each scenario runs with its batch seed, so the figure a
    student sees beside theirs is what the reference drew in the same world (the variant's compiler answers
    depend on the seed; with `batch_seed`, the grading run's, so do a scenario's other changes); cached per seeds."""
    if not seeds:
        return _measured(assignment, cache_dir)["figures"]
    key = hashlib.sha256(json.dumps([sorted(seeds.items()), batch_seed]).encode()).hexdigest()[:12]
    cache = cache_dir / f"figures-{assignment.id}-{cache_key(assignment)}-{key}.json" if cache_dir else None
    if cache and cache.is_file():
        try:
            cached = json.loads(cache.read_text())
            if isinstance(cached, dict):
                return cached
        except ValueError:
            pass
    figures = _figures(assignment, seeds, runner, batch_seed)
    if cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cache, json.dumps(figures))
    return figures


def _measured(assignment: Assignment, cache_dir: Path | None) -> dict[str, Any]:
    cache = cache_dir / f"reference-{assignment.id}-{cache_key(assignment)}.json" if cache_dir else None
    if cache and cache.is_file():
        try:
            cached = json.loads(cache.read_text())
            if isinstance(cached.get("facts"), dict) and isinstance(cached.get("figures"), dict):
                return cached
        except ValueError:
            pass  # a torn or stale cache is simply measured again
    measured = {"facts": _measure(assignment, assignment.config["assignment"].get("reference_facts", [])),
                "figures": _figures(assignment)}
    if cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cache, json.dumps(measured))
    return measured


def _figures(assignment: Assignment, seeds: dict[str, int] | None = None, runner: Runner | None = None,
             batch_seed: int | None = None) -> dict[str, Any]:
    name = assignment.figure_name
    if not name:
        return {}
    source = assignment.solution_path.read_text()
    seeds = seeds or {}

    def figure(scenario: Any) -> Any:
        seed = seeds.get(scenario.name, assignment.lesson_seed)
        snapshot, _ = run_scenario(assignment, scenario, seed, source, assignment.submission_filename, runner,
                                   batch_seed=batch_seed)
        return json_safe(snapshot.values.get(name))

    scenarios = list(assignment.scenarios.values())
    with ThreadPoolExecutor(max_workers=len(scenarios)) as pool:
        return dict(zip([s.name for s in scenarios], pool.map(figure, scenarios)))


def _measure(assignment: Assignment, names: list[str]) -> dict[str, Any]:
    """The facts as the installed JAX gives them: the baseline run without its set-up functions (a scenario may
    change what the compiler reports; the oracle applies those changes to these facts itself)."""
    baseline = dataclasses.replace(assignment.scenarios["baseline"], setup=())
    seed = assignment.lesson_seed
    source = assignment.solution_path.read_text()
    snapshot, raw = run_scenario(assignment, baseline, seed, source, assignment.submission_filename)
    failed = snapshot.failed_statements
    if snapshot.ending != "completed" or failed:
        detail = failed[0].error["message"] if failed and failed[0].error else snapshot.ending
        if snapshot.setup_error:
            detail = f"{detail}: {snapshot.setup_error}"
        tail = snapshot.output_tail[-2000:]
        raise ConfigError(f"the reference solution {assignment.solution_path} did not run cleanly ({detail}).\n{tail}")
    latest = {}
    for frame in raw.frames:
        if frame.get("type") == "value" and frame.get("name") in names and "value" in frame:
            latest[frame["name"]] = frame["value"]
    missing = [name for name in names if name not in latest]
    if missing:
        raise ConfigError(f"the reference solution never defined {', '.join(missing)}")
    return latest
