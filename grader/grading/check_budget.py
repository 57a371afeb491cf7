"""The checks' budget in the grader's own process: each call of a check function on a record's values gets
`check_cpu_seconds` of CPU time and `check_memory_bytes` of memory growth ([limits] in assignment.toml).

Checks are trusted code, but they read values a run sent: a value can lead a check into a loop, or into allocating
far more than the grader has. Such an overrun is that record's failing check (engine.py says so in plain words and
never excuses it), not a stalled or killed batch.

How it is kept cheap: the calls of one record's checks hold one lock (checks are Python under the GIL: they gained
little by running side by side), so the process's resident memory growth while a check runs is that check's, apart
from what the runs in flight beside it add (their frames and snapshots, another record's doing). Those are bounded
(`run_in_flight` declares each run's bound: frames.py's budgets), and a check overruns its memory only by growing
past its own budget plus every bound in flight, so no record is charged for another's run.

One watchdog thread, idle while no check runs, samples every POLL_SECONDS the check thread's own CPU clock (the
process's, where the system has no clock per thread) and the process's resident set (Linux), and on an overrun
raises `CheckOverrun` in the check's thread (PyThreadState_SetAsyncExc: it lands at the check's next bytecode). A
pending exception is withdrawn under the watchdog's lock when the check ends first. Work inside one C call (a NumPy
operation) is only stopped when it returns; the CPU time is measured again then, so it is charged all the same.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from grader.common import system

POLL_SECONDS = 0.02
REFIRE_SECONDS = 0.5          # a check that swallowed the exception (a bare except) is interrupted again


class CheckOverrun(BaseException):
    """Raised in a check's thread when it overran its budget (a BaseException: a check's `except Exception` and
    the engine's own handler of check bugs let it through)."""


_IN_FLIGHT: dict[object, int] = {}    # a run in progress -> the most memory it may add to this process
_IN_FLIGHT_LOCK = threading.Lock()


@contextmanager
def run_in_flight(bound_bytes: int) -> Iterator[None]:
    """Around one run of a record (its pump and snapshot): checks of other records meanwhile are allowed its bound."""
    key = object()
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT[key] = bound_bytes
    try:
        yield
    finally:
        with _IN_FLIGHT_LOCK:
            del _IN_FLIGHT[key]


def in_flight_bytes() -> int:
    with _IN_FLIGHT_LOCK:
        return sum(_IN_FLIGHT.values())


_STATM: list[tuple[int, int]] = []    # (pid, fd of its /proc/<pid>/statm), opened once: read twice per check call


def resident_bytes() -> int:
    """This process's resident memory where Linux's /proc says it, else 0 (no memory budget: macOS, Windows)."""
    if not system.POSIX:
        return 0
    try:
        if not _STATM or _STATM[0][0] != os.getpid():
            _STATM[:] = [(os.getpid(), os.open(f"/proc/{os.getpid()}/statm", os.O_RDONLY | os.O_CLOEXEC))]
        return int(os.pread(_STATM[0][1], 256, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def cpu_clock(ident: int) -> Callable[[], float]:
    """The CPU time of thread `ident`, readable from another thread, where the system has a clock per thread (Linux);
    else the process's CPU time (macOS, Windows), which counts every thread: never less than the check's own."""
    per_thread = getattr(time, "pthread_getcpuclockid", None)
    if per_thread is not None:
        clock = per_thread(ident)
        return lambda: time.clock_gettime(clock)
    return time.process_time


@dataclass
class Watch:
    ident: int
    clock: Callable[[], float]
    cpu_seconds: float
    memory_bytes: int
    cpu_start: float
    memory_start: int
    reason: str = ""              # set when it overran: what, in words
    fired_at: float = 0.0
    pending: bool = field(default=False, repr=False)   # an exception raised in its thread, perhaps not delivered yet

    def cpu_used(self) -> float:
        return self.clock() - self.cpu_start

    def overrun(self, memory_now: int) -> str:
        cpu = self.cpu_used()
        if cpu > self.cpu_seconds:
            return f"it used more than {self.cpu_seconds:g} CPU-seconds ({cpu:.1f} s)"
        grown = memory_now - self.memory_start
        if grown > self.memory_bytes + in_flight_bytes():
            return f"it needed more than {self.memory_bytes / 2**20:.0f} MiB of memory ({grown / 2**20:.0f} MiB)"
        return ""


def _raise_in(ident: int, exception: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                               ctypes.py_object(exception) if exception is not None else None)


class Watchdog:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: dict[int, Watch] = {}
        self.wake = threading.Condition(self.lock)
        self.thread: threading.Thread | None = None

    def start(self, watch: Watch) -> None:
        with self.lock:
            self.active[watch.ident] = watch
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="check-budget", daemon=True)
                self.thread.start()
            self.wake.notify()

    def stop(self, watch: Watch) -> None:
        """The check ended: no exception may reach its thread after this."""
        with self.lock:
            self.active.pop(watch.ident, None)
            if watch.pending:
                _raise_in(watch.ident, None)
                watch.pending = False

    def _loop(self) -> None:
        while True:
            with self.lock:
                while not self.active:
                    self.wake.wait()
            time.sleep(POLL_SECONDS)
            memory = resident_bytes()
            with self.lock:
                now = time.monotonic()
                for watch in self.active.values():
                    if watch.reason and now - watch.fired_at < REFIRE_SECONDS:
                        continue
                    reason = watch.reason or watch.overrun(memory)
                    if reason:
                        watch.reason, watch.fired_at, watch.pending = reason, now, True
                        _raise_in(watch.ident, CheckOverrun)


WATCHDOG = Watchdog()
RECORD_LOCK = threading.RLock()    # one record's checks at a time (see the module's docstring)


class Budget:
    """`with Budget(cpu, memory) as watch:` around one call of a check; after it, `watch.reason` says whether (and
    how) it overran, whether the call was interrupted (CheckOverrun, caught here) or ran to its end."""

    def __init__(self, cpu_seconds: float, memory_bytes: int):
        self.cpu_seconds = cpu_seconds
        self.memory_bytes = memory_bytes
        self.watch: Watch | None = None
        self.interrupted = False

    def __enter__(self) -> Budget:
        ident = threading.get_ident()
        clock = cpu_clock(ident)
        self.watch = Watch(ident, clock, self.cpu_seconds, self.memory_bytes, clock(),
                           resident_bytes())
        WATCHDOG.start(self.watch)
        return self

    @property
    def reason(self) -> str:
        return self.watch.reason if self.watch else ""

    def __exit__(self, kind, error, trace) -> bool:
        assert self.watch is not None
        try:
            WATCHDOG.stop(self.watch)
        except CheckOverrun:    # delivered between the check's end and the withdrawal: the overrun stands
            WATCHDOG.stop(self.watch)
            self.interrupted = True
        if not self.watch.reason and self.watch.cpu_used() > self.cpu_seconds:   # one long C call: charged after it
            self.watch.reason = f"it used more than {self.cpu_seconds:g} CPU-seconds ({self.watch.cpu_used():.1f} s)"
        if kind is not None and issubclass(kind, CheckOverrun):
            self.interrupted = True
            return True
        return False
