"""JAX's persistent compilation cache, filled by trusted runs of the reference solution before any student runs.

Most of a run's time is compiling the lesson's programs; a cache that already holds them turns those
compiles into lookups (keyed by the program, not by file or line, so a student's copy of the lesson code
hits it). Only trusted code writes here: the reference solution, once per scenario and seed, in a sandbox
that may write to this folder alone. Student runs get a read-only view and compile into a throwaway copy
(see zygote.py), so a submission can neither poison the cache nor see another's programs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from grader.common.environment import environment
from grader.config.assignment import Assignment, ConfigError
from grader.runs.jobs import make_job
from grader.runs.snapshot import build_snapshot
from grader.sandbox.isolation import Bubblewrap, strongest_available
from grader.sandbox.process import COMPILE_CACHE_PATH, run_job

# Where a run sees the cache. JAX folds the cache folder's path into every cache key, so the trusted runs that
# fill it and the student runs that read it must see it at the same path.
SANDBOX_PATH = COMPILE_CACHE_PATH


def cache_folder(cache_root: Path) -> Path:
    """One folder per JAX/jaxlib/Python version: compiled programs are only valid for those."""
    key = hashlib.sha256(json.dumps(environment(), sort_keys=True).encode()).hexdigest()[:12]
    return cache_root / f"compiled-{key}"


def warm(assignment: Assignment, cache_root: Path, seeds: dict[str, int]) -> Path:
    """Run the reference solution in each scenario (with the given seed) unless done before; return the folder."""
    folder = cache_folder(Path(cache_root).absolute())
    folder.mkdir(parents=True, exist_ok=True)
    markers = folder.parent / f"{folder.name}-warmed"
    markers.mkdir(exist_ok=True)
    isolation = strongest_available()
    if not isinstance(isolation, Bubblewrap):
        return folder   # without bubblewrap there is no fork server to use it (and no way to show it at SANDBOX_PATH)
    isolation = isolation.with_writable(folder, SANDBOX_PATH)
    source = assignment.solution_path.read_text()
    for name, seed in seeds.items():
        # Markers live beside the cache, not in it: runs see the cache folder, and must not see the batch's seeds.
        marker = markers / hashlib.sha256(f"{assignment.id}-{assignment.fingerprint}-{name}-{seed}".encode()).hexdigest()[:24]
        if marker.exists():
            continue
        job = make_job(assignment, assignment.scenarios[name], seed, source, assignment.submission_filename)
        job["compilation_cache_dir"] = SANDBOX_PATH
        raw = run_job(job, assignment.limits, isolation, own_uid=False)
        snapshot = build_snapshot(raw, name, seed)
        if snapshot.ending != "completed" or snapshot.failed_statements:
            raise ConfigError(f"the reference solution did not run cleanly while warming the compilation cache "
                              f"({name}, seed {seed}): {snapshot.output_tail[-1000:]}")
        marker.touch()
    return folder
