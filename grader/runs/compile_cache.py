"""JAX's persistent compilation cache, filled before any student runs by trusted runs of public code only.

Most of a run's time is compiling the lesson's programs; a cache that already holds them turns those compiles
into lookups (keyed by the program, not by file or line, so a student's copy of the lesson code hits it). Every run
reads the cache: it lists its files, opens them, and can tell a hit from a miss by the time a compile takes. So it
may hold nothing a student is not given: it is warmed by the lesson's public starter (the given code, whose
programs are most of the compile time), never by the reference solution, whose compiled programs name its
methods in their file names and metadata (`jit_vdot`, the transformations applied, the solution's lines). The
exercises' own programs are compiled by each run that needs them.

Only the warm-up writes here, in a sandbox that may write to this folder alone. Student runs get a read-only view
and compile into a throwaway copy (see fork_server.py), so a submission can neither poison the cache nor see
another's programs.
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
WARMED_BY = "public code only"   # part of the folder's name: folders warmed another way (by a solution) are not used


def cache_folder(cache_root: Path) -> Path:
    """One folder per JAX/jaxlib/Python version: compiled programs are only valid for those."""
    key = hashlib.sha256(json.dumps({**environment(), "warmed by": WARMED_BY}, sort_keys=True).encode()).hexdigest()[:12]
    return cache_root / f"compiled-{key}"


def warm(assignment: Assignment, cache_root: Path, seeds: dict[str, int], public_source: str) -> Path:
    """Run `public_source` (the lesson's public starter, which every student has) in each scenario with the given
    seed unless done before; return the folder. Its unfinished exercises fail as they do for a student; only its
    compiled programs are kept. Without public code there is nothing to warm with, and runs compile everything."""
    folder = cache_folder(Path(cache_root).absolute())
    folder.mkdir(parents=True, exist_ok=True)
    markers = folder.parent / f"{folder.name}-warmed"
    markers.mkdir(exist_ok=True)
    isolation = strongest_available()
    if not isinstance(isolation, Bubblewrap) or not public_source.strip():
        return folder   # without bubblewrap there is no fork server to use it (and no way to show it at SANDBOX_PATH)
    isolation = isolation.with_writable(folder, SANDBOX_PATH)
    code = hashlib.sha256(public_source.encode()).hexdigest()
    for name, seed in seeds.items():
        # Markers live beside the cache, not in it: runs see the cache folder, and must not see the batch's seeds.
        marker = markers / hashlib.sha256(f"{assignment.id}-{assignment.fingerprint}-{name}-{seed}-{code}".encode()).hexdigest()[:24]
        if marker.exists():
            continue
        job = make_job(assignment, assignment.scenarios[name], seed, public_source, assignment.submission_filename)
        job["compilation_cache_dir"] = SANDBOX_PATH
        snapshot = build_snapshot(run_job(job, assignment.limits, isolation, own_uid=False), name, seed)
        if snapshot.setup_error:
            raise ConfigError(f"the sandbox could not run the public starter to warm the compilation cache "
                              f"({name}, seed {seed}): {snapshot.setup_error}")
        marker.touch()
    return folder
