"""JAX's persistent compilation cache, filled before any student runs by trusted runs of public code only.

Most of a run's time is compiling the lesson's programs; a cache that already holds them turns those compiles
into lookups (keyed by the program, not by file or line, so a student's copy of the lesson code hits it). Every run
reads the cache: it lists its files, opens them, and can tell a hit from a miss by the time a compile takes. So it
may hold nothing a student is not given: it is warmed by the lesson's public starter (the given code, whose
programs are most of the compile time), never by the reference solution, whose compiled programs name its
methods in their file names and metadata (`jit_vdot`, the transformations applied, the solution's lines). The
exercises' own programs are compiled by each run that needs them.

Only the warm-up writes here: the public starter, in a sandbox that may write to one staging folder alone
(grader/grading/warm_state.py publishes it when the run could be set up). Student runs get a read-only view and
compile into a throwaway copy (see fork_server.py), so a submission can neither poison the cache nor see
another's programs.
"""

from __future__ import annotations

from pathlib import Path

from grader.model.job import Job
from grader.model.limits import Limits
from grader.runs.jobs import Runner
from grader.sandbox.isolation import Bubblewrap, strongest_available
from grader.sandbox.process import COMPILE_CACHE_PATH, run_job
from grader.sandbox.raw_run import RawRun

# Where a run sees the cache. JAX folds the cache folder's path into every cache key, so the trusted runs that
# fill it and the student runs that read it must see it at the same path.
SANDBOX_PATH = COMPILE_CACHE_PATH
WARMED_BY = "public code only"   # part of the warm state's key: entries warmed another way (by a solution) are not used


def can_cache() -> bool:
    """Compiled programs are kept only where bubblewrap can show a folder at SANDBOX_PATH (and a fork server,
    which needs it too, can read them)."""
    return isinstance(strongest_available(), Bubblewrap)


def filling_runner(folder: Path) -> Runner:
    """A Runner for trusted public code whose compiled programs land in `folder` (a fresh sandboxed interpreter that
    may write there alone). Only where `can_cache()`."""
    isolation = strongest_available()
    if not isinstance(isolation, Bubblewrap):
        raise RuntimeError("compiled programs can only be kept where bubblewrap is available")
    writable = isolation.with_writable(Path(folder).absolute(), SANDBOX_PATH)

    def run(job: Job, limits: Limits) -> RawRun:
        return run_job({**job, "compilation_cache_dir": SANDBOX_PATH}, limits, writable, own_uid=False)

    return run
