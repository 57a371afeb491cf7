"""How a student's check starts its runs: the portable strategy, and the choice between it and the sandbox.

On the student's own machine the code is the student's own (shared_python.py): bubblewrap where it works strongly
(the fork server too, as root), else plain subprocesses of the student's Python. The instructor's batch never gets
here: `default_isolation` gives it the strongest sandbox, refused when weak and not asked for by name.
"""

from __future__ import annotations

import sys

from grader.common import system
from grader.model.limits import Limits
from grader.sandbox import isolation
from grader.sandbox.inspection import SandboxFacts
from grader.sandbox.shared_python import portable_forced, shared


class Portable(isolation.Isolation):
    """A student's check on a machine without a working sandbox: a plain subprocess of the student's own Python, run
    by portable_run.py with nothing but what Python offers on Linux, macOS and Windows (its three pipes, threads for
    reading and for the time limits, `Popen.kill` of a process group of its own); on POSIX also the rlimits the run
    sets on itself and its whole session killed (common/system.py). No prlimit or setpriv binaries, namespaces,
    cgroup or syscall filter. Never used by the instructor's batch: it isolates nothing."""

    name = "plain subprocesses of your own Python (portable strategy)"
    reach = ("plain subprocesses of your own Python, with time and memory limits: no sandbox, which a check of your "
             "own file on your own machine does not need")
    prlimit = None
    setpriv = None
    portable = True

    def __init__(self) -> None:
        if not system.POSIX:   # no rlimits there (Windows): the wall and soft time limits only
            self.reach = self.reach.replace("with time and memory limits", "with time limits")

    def inspect(self) -> SandboxFacts:
        return SandboxFacts(failure="the portable strategy is not a sandbox")

    def describe(self) -> str:
        limits = "rlimits set by the run itself" if system.POSIX else "time limits only"
        return f"{self.name}, {limits}, scrubbed environment"

    @staticmethod
    def own_rlimits(limits: Limits) -> dict[str, int]:
        """What the run sets on itself. Not the process count: under the student's own uid it counts every process
        and thread of theirs (a desktop has hundreds), so the run would fail for what else runs. Not the data size on
        macOS, whose kernel applies it to what JAX reserves, not what it uses."""
        dropped = {"nproc"} | ({"data"} if sys.platform == "darwin" else set())
        return {name: value for name, value in limits.rlimits().items() if name not in dropped}


def student_strategy() -> isolation.Isolation:
    """How a student's check starts its runs (shared_python.py): bubblewrap where it is strong here, else the portable
    strategy (also when forced by $GRADER_PORTABLE_RUNS, and on a system without POSIX: Windows, where no sandbox is
    even tried). Never refused: the file and the machine are the student's."""
    if portable_forced() or not system.POSIX:
        return Portable()
    strongest = isolation.strongest_available()
    return strongest if isinstance(strongest, isolation.Bubblewrap) and strongest.facts.strong else Portable()


def default_isolation() -> isolation.Isolation:
    """The strategy a run gets when its caller names none: a student's check's, or the strongest, refused when weak
    and not asked for by name (`require_isolation`)."""
    return student_strategy() if shared() else isolation.require_isolation(isolation.strongest_available())
