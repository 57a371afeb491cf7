"""Choose how runs are started: the fork server where it can work, else a fresh sandboxed interpreter per run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.config.assignment import Assignment
from grader.runs import compile_cache
from grader.runs.jobs import Runner
from grader.sandbox.fork_server import ForkServer, ForkServerError


@contextmanager
def fast_runner(assignment: Assignment, cache_root: Path, seeds: dict[str, int],
                note: Callable[[str], None], public_source: str) -> Iterator[Runner | None]:
    """A started fork server's `run_job` (None: use `sandbox.run_job`), with the compilation cache warmed for
    `seeds` (scenario -> seed) by trusted runs of `public_source`, code every student has (the lesson's starter,
    never its solution: runs can read the cache); the server is stopped on exit."""
    try:
        folder = compile_cache.warm(assignment, cache_root, seeds, public_source)
        server = ForkServer(folder).start()
    except ForkServerError as error:
        note(f"Fast runs unavailable ({error}); each run starts its own sandboxed interpreter.")
        yield None
        return
    try:
        yield server.run_job
    finally:
        server.close()
