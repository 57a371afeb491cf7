"""Time limits that do not count time a run spent waiting for a CPU that other work held.

On a busy machine (a batch's other runs, a CI job beside it, a shared Gradescope host) an honest run can take
several times longer than alone. Its time limits are therefore stretched by the time the kernel says it waited
in the run queue, up to a cap, so that load which is not the run's own does not time out an honest run.

What counts as waiting, from the kernel's per-thread scheduler statistics (/proc/.../schedstat, nanoseconds on a
CPU and waiting for one): the waits of all the run's threads together (JAX passes its work between several, so
no single thread's wait is the time lost), but never more than the part of the elapsed time the run spent off the
CPU altogether (elapsed - CPU time). That bound keeps a run that starves itself (hundreds of busy processes of its
own) from earning anything for it: while it had the CPUs, its threads only queued behind each other. (On a machine
busy with other work it earns what an honest run would, up to the cap.)
Where the statistics cannot be read, nothing is added and the limits are the configured ones.

Plain standard library: the harness (the soft limit), the fork server's supervisor and the parent (the hard wall
limit) all use it.
"""

import os
import time
from collections.abc import Callable
from typing import NamedTuple

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MEASURE_EVERY_SECONDS = 0.25   # how often an expired deadline is re-measured while it keeps being stretched


class Usage(NamedTuple):
    """What a run (a process tree, or the harness's own process) has had so far, in seconds."""

    cpu_seconds: float       # time on a CPU, all its threads together
    waited_seconds: float    # what its threads waited, runnable, for a CPU, all together


NOTHING = Usage(0.0, 0.0)


def _read(path, proc):
    """A small /proc file as text ("" if it is gone); `proc` is a directory fd of the /proc to read."""
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=proc)
    except OSError:
        return ""
    try:
        return os.read(fd, 4096).decode("ascii", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _listdir(path, proc):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY, dir_fd=proc)
    except OSError:
        return []
    try:
        return os.listdir(fd)
    except OSError:
        return []
    finally:
        os.close(fd)


def _waited(pid, proc):
    """The run-queue waits of the live threads of `pid`, added up, in seconds."""
    total = 0
    for tid in _listdir(f"{pid}/task", proc):
        fields = _read(f"{pid}/task/{tid}/schedstat", proc).split()
        if len(fields) >= 2 and fields[1].isdigit():
            total += int(fields[1])
    return total / 1e9


def _stat_fields(pid, proc):
    """/proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    text = _read(f"{pid}/stat", proc)
    return text[text.rfind(")") + 2:].split() if ")" in text else []


def _cpu_seconds(fields):
    """utime + stime of the process (all its threads, live or ended) and of its reaped children."""
    try:
        return sum(int(fields[index]) for index in (11, 12, 13, 14)) / TICKS
    except (IndexError, ValueError):
        return 0.0


def process_tree(root, proc):
    """`root` and every live descendant of it, by parent links in /proc."""
    children = {}
    for entry in _listdir(".", proc):
        if entry.isdigit():
            fields = _stat_fields(entry, proc)
            if len(fields) > 1 and fields[1].isdigit():
                children.setdefault(int(fields[1]), []).append(int(entry))
    tree, seen, frontier = [], set(), [root]
    while frontier:
        pid = frontier.pop()
        if pid not in seen:
            seen.add(pid)
            tree.append(pid)
            frontier.extend(children.get(pid, ()))
    return tree


def open_proc():
    """A directory fd of /proc as it is now: it keeps showing this pid namespace after /proc is mounted over
    (the fork server's run mounts its own /proc in the mount namespace it shares with its supervisor)."""
    return os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)


def tree_usage(root, proc=None):
    """The usage of the run whose first process is `root` (for the parent and the fork server's supervisor)."""
    own = proc is None
    if own:
        try:
            proc = open_proc()
        except OSError:
            return NOTHING
    try:
        cpu, waited = 0.0, 0.0
        for pid in process_tree(root, proc):
            cpu += _cpu_seconds(_stat_fields(pid, proc))
            waited += _waited(pid, proc)
        return Usage(cpu, waited)
    finally:
        if own:
            os.close(proc)


def own_usage():
    """The usage of this process (the harness and the student's code in it)."""
    try:
        proc = open_proc()
    except OSError:
        return Usage(time.process_time(), 0.0)
    try:
        return Usage(time.process_time(), _waited("self", proc))
    finally:
        os.close(proc)


def allowance(elapsed, usage, cap):
    """Seconds to add to a limit: the time waited, bounded by the time spent off the CPU and by `cap`."""
    return max(0.0, min(usage.waited_seconds, elapsed - usage.cpu_seconds, cap))


class StretchedDeadline:
    """`seconds` from now, plus the run's waiting allowance, re-measured only once the deadline has passed.

    `from_zero`: what `measure` reads was started with the deadline (a new process tree, whose kernel counters
    begin at 0), so there is no baseline to read first: no /proc scan at the start of every run."""

    def __init__(self, seconds, cap, measure: Callable[[], Usage], clock=time.monotonic, from_zero=False):
        self.clock = clock
        self.started = clock()
        self.seconds = seconds
        self.cap = cap
        self.measure = measure
        self.baseline = measure() if cap > 0 and not from_zero else NOTHING
        self.allowance = 0.0
        self.measured_at = self.started

    def due(self):
        return self.started + self.seconds + self.allowance

    def remaining(self):
        """Seconds left (<= 0: the limit is reached), stretching the deadline when the run has been kept waiting."""
        now = self.clock()
        if now < self.due() or self.allowance >= self.cap:
            return self.due() - now
        if now - self.measured_at < MEASURE_EVERY_SECONDS and self.allowance > 0:
            return MEASURE_EVERY_SECONDS - (now - self.measured_at)   # a moment's grace until the next measure
        self.measured_at = now
        usage = self.measure()
        since = Usage(usage.cpu_seconds - self.baseline.cpu_seconds,
                      usage.waited_seconds - self.baseline.waited_seconds)
        self.allowance = max(self.allowance, allowance(now - self.started, since, self.cap))
        return self.due() - now
