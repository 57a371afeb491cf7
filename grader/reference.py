"""Facts measured on the installed JAX by running the reference solution (residual counts, compiled memory).

They are measured, never written down: they change with the JAX version. The run uses the same harness
as students (baseline scenario); the result is cached under the output folder, keyed by the versions of
python/jax/jaxlib/numpy and the assignment's fingerprint, so a batch pays for it once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .assignment import Assignment, ConfigError
from .environment import environment
from .runs import run_scenario
from .snapshot import decode
from .writers import atomic_write


def cache_key(assignment: Assignment) -> str:
    text = json.dumps([environment(), assignment.fingerprint], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def reference_facts(assignment: Assignment, cache_dir: Path | None) -> dict[str, Any]:
    names = assignment.config["assignment"].get("reference_facts", [])
    cache = cache_dir / f"reference-{assignment.id}-{cache_key(assignment)}.json" if cache_dir else None
    if cache and cache.is_file():
        try:
            encoded = json.loads(cache.read_text())
            return {name: decode(encoded[name]) for name in names}
        except (ValueError, KeyError):
            pass  # a torn or stale cache is simply measured again
    encoded = _measure(assignment, names)
    if cache:
        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cache, json.dumps(encoded))
    return {name: decode(encoded[name]) for name in names}


def _measure(assignment: Assignment, names: list[str]) -> dict[str, Any]:
    baseline = assignment.scenarios["baseline"]
    seed = assignment.lesson_seed
    source = assignment.solution_path.read_text()
    snapshot, raw = run_scenario(assignment, baseline, seed, source, assignment.submission_filename)
    failed = snapshot.failed_statements
    if snapshot.ending != "completed" or failed:
        detail = failed[0].error["message"] if failed and failed[0].error else snapshot.ending
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
