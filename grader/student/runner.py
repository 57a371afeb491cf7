"""How a student check starts its runs: the fork server over the warm state's compiled programs where it can work.

In the instructor's checkout the warm state is the reference solution's (grader/grading/warm_up.py). A student
bundle has no solution: its programs come from the public starter it ships, trusted code that compiles the
lesson's given programs (most of a run's compile time), kept in the same warm state (grader/grading/warm_state.py)
and built once per machine and JAX version, beside the fork server's start. Student runs only ever read a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from grader.common.warm_store import View
from grader.config.assignment import Assignment
from grader.config.bundle import Bundle
from grader.grading.warm_state import WarmState
from grader.grading.warm_up import GatedRunner, warmed_up
from grader.runs.jobs import Runner
from grader.runs.runners import ServerStart


@contextmanager
def check_runner(assignment: Assignment, bundle: Bundle | None, note: Callable[[str], None]) -> Iterator[Runner | None]:
    if bundle is None:
        baseline = {"baseline": assignment.lesson_seed}   # the variant's seed is fresh each time: not worth warming
        with warmed_up(assignment, baseline, note, warm_fresh_seeds=False) as warm:
            yield warm.runner
        return
    state = WarmState(assignment)
    view = View(state.store) if state.compiled else None
    server = ServerStart(view.folder if view else None, note)
    try:
        if view and bundle.starter:
            part = state.starter(bundle.starter)
            if part is not None:
                view.add(part)
        yield GatedRunner(server, {})
    finally:
        server.close()
        if view:
            view.close()
