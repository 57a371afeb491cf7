"""How a student check starts its runs: the fork server over the warm state's compiled programs where it can work.

The programs are the public starter's, trusted code that compiles the lesson's given programs (most of a run's
compile time): in the instructor's checkout the starter `grader build` wrote (with the reference facts, by
grader/grading/warm_up.py), in a student bundle the copy it ships (which has no solution: its facts come with
it). Both are kept in the same warm state (grader/grading/warm_state.py), built once per machine and JAX version,
beside the fork server's start. Student runs only ever read a copy, as in `grader grade`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from grader.common.warm_store import View
from grader.config.assignment import Assignment, ConfigError
from grader.config.bundle import Bundle
from grader.grading.warm_state import WarmState
from grader.grading.warm_up import GatedRunner, warmed_up
from grader.runs.jobs import Runner
from grader.runs.runners import ServerStart
from grader.sandbox.portable import student_strategy


@contextmanager
def check_runner(assignment: Assignment, bundle: Bundle | None, note: Callable[[str], None]) -> Iterator[Runner | None]:
    if bundle is None:
        # the checkout's public code as `grader build` wrote it (data, never the starter builder, which needs jinja2)
        baseline = {"baseline": assignment.lesson_seed}   # the variant's seed is fresh each time: not worth warming
        with warmed_up(assignment, baseline, note, warm_fresh_seeds=False,
                       public_source=assignment.built_starter()) as warm:
            yield warm.runner
        return
    if student_strategy().portable:   # plain subprocesses: no fork server to start (nor a note that it did not)
        yield None
        return
    state = WarmState(assignment, public_source=bundle.starter)
    view = View(state.store) if state.compiled else None
    server = ServerStart(view.folder if view else None, note)
    try:
        try:
            part = state.starter() if view else None
        except (ConfigError, OSError) as error:   # the check still runs: each run compiles for itself
            note(f"The lesson's programs could not be compiled ahead ({error}); each run compiles its own.")
            part = None
        if view and part is not None:
            view.add(part)
        yield GatedRunner(server, {})
    finally:
        server.close()
        if view:
            view.close()
