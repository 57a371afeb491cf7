"""How a student check starts its runs: the fork server with a warmed compilation cache where it can work.

The cache is warmed by the public starter, trusted code that compiles the lesson's given programs (most of a
run's compile time), in a sandbox that may write to that folder alone: in the instructor's checkout rendered from
the solution (runs/runners.py), in a student bundle the copy it ships.
Student runs only ever read a copy of it, as in `grader grade`. The warm-up runs beside the fork server's
start, and only the first check on a machine (and JAX version) pays for it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.authoring.starter import public_code
from grader.common.user_cache import user_cache_dir
from grader.config.assignment import Assignment
from grader.config.bundle import Bundle
from grader.runs import compile_cache
from grader.runs.jobs import Runner, make_job
from grader.runs.runners import fast_runner
from grader.sandbox.fork_server import ForkServer, ForkServerError
from grader.sandbox.isolation import Bubblewrap, strongest_available
from grader.sandbox.process import run_job


@contextmanager
def check_runner(assignment: Assignment, bundle: Bundle | None, note: Callable[[str], None]) -> Iterator[Runner | None]:
    if bundle is None:
        baseline = {"baseline": assignment.lesson_seed}   # the variant's seed is fresh each time: not worth warming
        with fast_runner(assignment, user_cache_dir(), baseline, note, public_code(assignment)) as runner:
            yield runner
        return
    folder = compile_cache.cache_folder(user_cache_dir().absolute())
    folder.mkdir(parents=True, exist_ok=True)
    warming = threading.Thread(target=warm_with_starter, args=(assignment, bundle, folder), daemon=True)
    warming.start()
    try:
        server = ForkServer(folder).start()
    except ForkServerError as error:
        note(f"Fast runs unavailable ({error}); each run starts its own sandboxed interpreter.")
        server = None
    warming.join()
    try:
        yield server.run_job if server else None
    finally:
        if server:
            server.close()


def warm_with_starter(assignment: Assignment, bundle: Bundle, folder: Path) -> None:
    """Run the bundle's starter once (baseline) with `folder` writable, so later runs find its programs compiled.

    Whatever the starter's TODOs raise does not matter here: only the compiled programs are kept."""
    isolation = strongest_available()
    if not isinstance(isolation, Bubblewrap) or not bundle.starter:
        return      # without bubblewrap there is no fork server to read the cache
    marker = folder.parent / f"{folder.name}-warmed" / hashlib.sha256(
        f"{assignment.id}-{assignment.fingerprint}-starter".encode()).hexdigest()[:24]
    if marker.exists():
        return
    marker.parent.mkdir(exist_ok=True)
    job = make_job(assignment, assignment.scenarios["baseline"], assignment.lesson_seed, bundle.starter,
                   assignment.submission_filename)
    job["compilation_cache_dir"] = compile_cache.SANDBOX_PATH
    run_job(job, assignment.limits, isolation.with_writable(folder, compile_cache.SANDBOX_PATH), own_uid=False)
    marker.touch()
