"""The path a student's check takes on Windows, proven on Linux by taking away what Windows does not have.

Windows has no `resource`, `fcntl`, `pwd`, `grp` or `termios`, no `os.fork`, `os.setsid`, `os.killpg`, `os.geteuid`,
`os.sysconf`, `os.pread`, no `signal.setitimer` or SIGALRM, no per-thread CPU clock (`time.clock_gettime`), and no
/proc. Here a student's `grader check FILE --json` runs from the installed student wheel in a Python whose startup
code removes all of them (and makes any /proc path missing, as it is there), with the grader's one platform check
(grader/common/system.py) set to the branch Windows takes; Windows's `msvcrt.locking`, which that branch locks files
with, is a stand-in built on flock. Every run the check starts goes through the same startup code first: the portable strategy's command line is
the only thing the test changes in the grader, by inserting it before the harness. The reference solution must then
score full marks, the starter exactly what `grader grade` gives its visible checks, and no /proc path may have been
opened by the grader's code or a run's harness. What this does not prove: Windows's own pipes, process groups and
file locks (the test runs on Linux's); macOS is proven by neither (docs: not run there).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grader.authoring.student_wheel import write_student_wheel
from grader.common import system
from grader.config.assignment import load
from grader.model.job import new_job
from grader.model.limits import Limits
from grader.runs.snapshot import build_snapshot
from grader.sandbox import isolation, shared_python
from grader.sandbox.isolation import RUNTIME_NAME
from grader.sandbox.portable import Portable, student_strategy
from grader.sandbox.portable_run import portable_job
from grader.sandbox.process import run_job
from grader.student.machine import prepare_runs

ROOT = Path(__file__).resolve().parent.parent
MISSING_MODULES = ("resource", "fcntl", "pwd", "grp", "termios")
MISSING_IN_OS = ("fork", "forkpty", "setsid", "setpgid", "getpgid", "killpg", "geteuid", "getuid", "sysconf",
                 "sched_getaffinity", "pread", "O_DIRECTORY", "register_at_fork")
MISSING_IN_SIGNAL = ("setitimer", "getitimer", "alarm", "SIGALRM", "ITIMER_REAL", "pthread_kill")
MISSING_IN_TIME = ("pthread_getcpuclockid", "clock_gettime")

# Run first in the check's Python and in every run it starts: what Windows lacks is taken away, and a /proc path is
# missing (as there), each attempt logged with the file that made it (the first outside the standard library).
WITHOUT_POSIX = """
import builtins, io, os, signal, sys, time
import fcntl as _fcntl   # kept for the stand-in of Windows's file locks (CHECK)
for _name in {modules!r}:
    sys.modules[_name] = None
for _module, _names in ((os, {in_os!r}), (signal, {in_signal!r}), (time, {in_time!r})):
    for _name in _names:
        if hasattr(_module, _name):
            delattr(_module, _name)
import sysconfig
_log, _real_open, _stdlib = {log!r}, builtins.open, sysconfig.get_paths()["stdlib"]
def _no_proc(real):
    def opener(*args, **kwargs):
        path = args[0] if args else kwargs.get("path")
        if isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path).startswith("/proc"):
            frame = sys._getframe(1)   # the code that asked: the first frame outside the standard library
            while frame.f_back and frame.f_code.co_filename.startswith((_stdlib, "<frozen")):
                frame = frame.f_back
            with _real_open(_log, "a", encoding="utf-8") as stream:
                stream.write(frame.f_code.co_filename + " " + os.fsdecode(path) + chr(10))
            raise FileNotFoundError(2, "No such file or directory (Windows has no /proc)", os.fsdecode(path))
        return real(*args, **kwargs)
    return opener
builtins.open = io.open = _no_proc(builtins.open)
for _name in ("open", "listdir", "scandir", "stat", "lstat", "readlink"):
    setattr(os, _name, _no_proc(getattr(os, _name)))
with _real_open(_log + ".started", "a", encoding="utf-8") as _stream:
    _stream.write(("run " if "harness.py" in " ".join(sys.argv) else "check ") + str(os.getpid()) + chr(10))
"""

# The student's `grader check` (the wheel's entry point), with the platform check on its Windows branch and every run
# started through WITHOUT_POSIX: `python -I -B -u -c <that, then the harness> <harness>`.
CHECK = """
import types
from grader.student.terminal import main   # importing the check must not need what Windows lacks
from grader.common import system
from grader.sandbox import portable

system.POSIX = False
# Windows's file locks, as the grader calls them: a stand-in on flock, installed once the modules that tell Windows
# by whether msvcrt imports (subprocess) are imported.
msvcrt = types.ModuleType("msvcrt")
msvcrt.LK_UNLCK, msvcrt.LK_LOCK, msvcrt.LK_NBLCK, msvcrt.LK_RLCK, msvcrt.LK_NBRLCK = 0, 1, 2, 3, 4

def locking(fd, mode, nbytes):
    if mode == msvcrt.LK_UNLCK:
        return _fcntl.flock(fd, _fcntl.LOCK_UN)
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | (_fcntl.LOCK_NB if mode in (msvcrt.LK_NBLCK, msvcrt.LK_NBRLCK) else 0))
    except BlockingIOError:
        raise OSError(36, "Resource deadlock avoided") from None

msvcrt.locking = locking
sys.modules["msvcrt"] = msvcrt
CHILD = {without!r} + "import runpy; sys.argv[:] = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
command = portable.Portable.command

def through_the_simulation(self, argv, limits, workdir, uid):
    line = command(self, argv, limits, workdir, uid)
    at = line.index(argv[-1])
    return line[:at] + ["-c", CHILD] + line[at:]

portable.Portable.command = through_the_simulation
sys.exit(main(["check", sys.argv[1], "--json"]))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    wheel = write_student_wheel(load("performance-05", ROOT), tmp_path_factory.mktemp("wheel"))
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    return target


def check_as_on_windows(site: Path, folder: Path, file: str, log: Path) -> tuple[dict, str, int]:
    without = WITHOUT_POSIX.format(modules=MISSING_MODULES, in_os=MISSING_IN_OS, in_signal=MISSING_IN_SIGNAL,
                                   in_time=MISSING_IN_TIME, log=str(log))
    environment = {**os.environ, "PYTHONPATH": str(site)}
    environment.pop("GRADER_PORTABLE_RUNS", None)   # the platform check alone must choose the portable strategy
    done = subprocess.run([sys.executable, "-c", without + CHECK.format(without=without), file], cwd=folder,
                          env=environment, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode in (0, 1) and done.stdout.startswith("{"), \
        f"the check did not run (exit {done.returncode}):\n{done.stderr[-4000:]}"
    return json.loads(done.stdout), done.stderr, done.returncode


def started(log: Path) -> list[str]:
    """What started through the simulation: `check` (the student's command) and `run` (each run it started)."""
    path = log.with_name(log.name + ".started")
    return [line.split()[0] for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def graders_proc_reads(log: Path, site: Path) -> list[str]:
    """The /proc paths opened by the grader's code or a run's harness (JAX's and NumPy's own are theirs)."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    grader = str(site / "grader") + os.sep
    return [line for line in lines
            if line.startswith(grader) or Path(line.split(" ", 1)[0]).parent.name == RUNTIME_NAME]


@pytest.mark.slow
def test_the_check_grades_on_the_windows_path_as_the_batch_does(site, tmp_path):
    folder = tmp_path / "student"
    folder.mkdir()
    shutil.copy(ROOT / "solutions" / "performance-05.py", folder / "solution.py")
    shutil.copy(ROOT / "student_templates" / "performance-05.py", folder / "performance-05.py")
    log = tmp_path / "proc-reads.log"

    solution, said, status = check_as_on_windows(site, folder, "solution.py", log)
    assert said.startswith("Runs: plain subprocesses of your own Python, with time limits:"), said[-2000:]
    assert any("(portable strategy), time limits only" in message for message in solution["messages"]), solution
    assert solution["status"] == "graded" and solution["full_marks"] and status == 0, \
        json.dumps({c["id"]: (c["score"], c["feedback"][:300]) for c in solution["checks"]}, indent=1)

    starter, _, status = check_as_on_windows(site, folder, "performance-05.py", log)
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    shutil.copy(folder / "performance-05.py", submissions / "starter.py")
    graded = subprocess.run([sys.executable, "-m", "grader.cli.main", "grade", str(submissions), "--workers", "1"],
                            cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert graded.returncode == 0, graded.stderr[-4000:]
    record = json.loads((tmp_path / "results" / "starter.json").read_text())
    visible = {c["id"]: c["score"] for c in record["checks"] if c["visibility"] == "visible"}
    assert {c["id"]: c["score"] for c in starter["checks"]} == visible
    assert starter["score"] == pytest.approx(sum(visible.values())) and status == (0 if starter["full_marks"] else 1)
    assert starter["score"] < starter["max_score"], "the starter should not pass every visible check"

    assert started(log).count("check") == 2 and started(log).count("run") >= 2, started(log)   # all went through it
    assert not graders_proc_reads(log, site), graders_proc_reads(log, site)


# ---- the portable strategy's run on the Windows branch, in this process (no JAX needed by the files) -------------

FAST = Limits(wall_seconds=30, soft_seconds=2, statement_grace_seconds=1, cpu_seconds=60, cpu_wait_allowance_seconds=0,
              output_keep_bytes=64 * 1024)


@pytest.fixture
def windows_branch(monkeypatch):
    """The one platform check on its Windows branch, for this test only."""
    monkeypatch.setattr(system, "POSIX", False)
    monkeypatch.delenv(shared_python.PORTABLE_ENV, raising=False)


def portable_run(source: str, contract: list[str], limits: Limits = FAST):
    strategy = student_strategy() if shared_python.shared() else Portable()
    raw = run_job(new_job(textwrap.dedent(source).lstrip("\n"), "student.py", contract, limits), limits, strategy)
    return build_snapshot(raw, "baseline", 18), raw


def test_on_the_windows_branch_the_check_starts_by_the_portable_strategy_and_refuses_nothing(windows_branch):
    try:
        line = prepare_runs()
        strategy = student_strategy()
        assert isinstance(strategy, Portable) and line.startswith("Runs: plain subprocesses of your own Python, with "
                                                                  "time limits: no sandbox")
        assert "time limits only" in strategy.describe() and portable_job(new_job("", "a.py", [], FAST), FAST) \
            .get("own_rlimits") is None
        assert not isolation.strongest_available().facts.ran   # nothing probed: no sandbox on such a system
    finally:
        shared_python.unshare()


def test_the_soft_limit_is_a_threads_and_interrupts_again_until_the_statement_is_left(windows_branch):
    snap, raw = portable_run("""
        print("before")
        before = 1
        while True:
            pass
        try:
            while True:
                pass
        except BaseException:
            caught = 'once'
            while True:
                pass
        after = 2
    """, ["before", "caught", "after"])
    assert raw.setup_ok and "portable strategy" in raw.isolation and "time limits only" in raw.isolation
    assert snap.ending == "completed" and snap.soft_limit_hit and not raw.killed_at_wall_limit
    assert snap.values == {"before": 1, "caught": "once", "after": 2}
    first, second = (s for s in snap.statements if s.line in (3, 5))
    assert first.status == second.status == "timeout"
    # the budget, then the grace (the handler's loop interrupted again): each a moment over, never the wall limit
    assert FAST.soft_seconds <= first.seconds < FAST.soft_seconds + 2 and second.seconds < FAST.statement_grace_seconds + 2
    assert b"before" in raw.output_head   # what the file prints is its output, never the channel's


def test_a_run_the_soft_limit_cannot_interrupt_is_killed_at_the_wall_limit_keeping_what_it_sent(windows_branch):
    limits = dataclasses.replace(FAST, wall_seconds=8)
    started = time.monotonic()
    snap, raw = portable_run("""
        import time
        before = 1
        time.sleep(1000)
        after = 2
    """, ["before", "after"], limits)
    assert raw.killed_at_wall_limit and snap.values == {"before": 1}
    assert limits.wall_seconds <= time.monotonic() - started < limits.wall_seconds + 4
