"""Time limits that do not count time a run spent waiting for a CPU that other runs held.

On a busy machine (a batch's other runs, a CI job beside it, a shared Gradescope host) an honest run can take
several times longer than alone. Its time limits are therefore stretched by the time it was kept waiting for a CPU
by others, up to a cap, so that load which is not the run's own does not time out an honest run. What the run does
to itself must earn nothing: a run that wakes a hundred processes at once queues behind its own processes, and a
run with more busy threads than CPUs waits behind itself.

The allowance is the smallest of these, each measured by the kernel, none writable by the run:
- waited: the time the run was kept waiting. Where the run has a cgroup of its own on the unified (v2) hierarchy,
  that group's CPU pressure, "full" line: per CPU, time during which some of its threads were runnable there and
  none of them was running there, averaged over the CPUs it had work on. Its processes queueing behind each other
  on one CPU (one of them has it) is not counted, however many queue; queued on another CPU than the one running
  it is (see the bound by others' load below). Elsewhere it is the run-queue waits of all its threads added up
  (/proc/.../schedstat), which over-counts such a queue and is bounded by the others below;
- minus the time the run was throttled against its own CPU quota (its cgroup's cpu.max, v1 cpu.cfs_quota_us:
  `throttled_usec`, v1 `throttled_time`, in its cgroup's cpu.stat). A throttled group has runnable threads and
  none running, so the kernel counts the whole throttle as "full" pressure, yet nobody else caused it: a hundred
  processes of one run bursting together exhaust the run's quota and would otherwise earn the whole allowance
  (57-60 s in the review) while their victims earned nothing. The throttled time is subtracted rather than
  "full" pressure being credited only while the group is not throttled: both counters are cumulative, so the
  difference needs no sampling and nothing can happen between two samples; the kernel adds up throttled time per
  CPU, so on several CPUs it may exceed the wall time the run was held, and then the run simply earns less (it was
  its own doing either way). A throttle of an ancestor group (the batch, the machine's container) is not the
  run's and still counts;
- the time the run spent off the CPU altogether, its own throttled time left out (elapsed - its CPU time): while
  its own processes had the CPUs, its queueing behind them is its own doing;
- the CPU time everything outside the run used meanwhile beyond all the machine's CPUs but one (the busy time of
  the CPUs the grader may use, from /proc/stat, minus the run's own, minus (CPUs - 1) x the elapsed time). This is
  a bound the run cannot raise (beyond the grader's own bounded work of reading what it writes): it is load the
  parent measures outside the run's cgroup. A run that wants one CPU is kept from every CPU only while others hold
  them all, so others cost it at most the time they used more than the other CPUs. The measures above cannot stand
  alone: the kernel's "full" pressure of a group is an average of its CPUs' (weighted by the time the group had
  work on each), so a run with processes queued on the CPU an honest neighbour holds is "full" there while its
  other processes run elsewhere, and a run that confines its processes to one CPU (sched_setaffinity) beside a
  neighbour waits for them and for it while another CPU is free (issue 56: a held-out file earned 27-28 s on a 30 s
  limit; a run confined to its neighbour's CPU, on a machine where others used nothing beyond that one CPU, earned
  3.07 s on a 3 s limit: tests/test_sandbox.py). Alone on a machine, or beside neighbours that leave a CPU free, a
  run earns nothing however it queues behind itself. A run that wants several CPUs is given what a run that wants
  one would have lost, no more; where the grader may use a few CPUs of a larger host (a cpuset), only those count;
  a container held to a CPU quota without a cpuset sees the host's CPUs and earns little (its limits are then the
  configured ones);
- WAIT_PER_CPU_SECOND seconds for each CPU-second the run used: waiting delays a run's work, and a run that does
  little work (wakes a hundred processes for a moment each second and sleeps) has little to be delayed. An honest
  run slowed down up to elevenfold is still given all the time it lost;
- the cap (`cpu_wait_allowance_seconds`).
Where the statistics cannot be read, nothing is added and the limits are the configured ones.

Plain standard library: the harness (the soft limit), the fork server's supervisor and the parent (the hard wall
limit) all use it. Only the last two count: the harness runs the student's code in its own process, so its soft
limit is a courtesy (it lets later statements run) that the hard limit, measured outside, backs up.
"""

import os
import time
from collections.abc import Callable
from typing import NamedTuple

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MEASURE_EVERY_SECONDS = 0.25   # how often an expired deadline is re-measured while it keeps being stretched
WAIT_PER_CPU_SECOND = 10       # the most waiting credited per CPU-second a run used (see above)


class Usage(NamedTuple):
    """What a run (its cgroup, or a process tree) and the machine have had so far, in seconds."""

    cpu_seconds: float            # the run's time on a CPU, all its threads together
    waited_seconds: float         # wall time the run was kept from every CPU while it had work (see above)
    machine_busy_seconds: float   # CPU time of everything on the machine, the run included (/proc/stat)
    throttled_seconds: float = 0.0   # time its cgroup was throttled against its own CPU quota (cpu.stat)


NOTHING = Usage(0.0, 0.0, 0.0, 0.0)


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


def _usable_cpus():
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


# The CPUs whose load counts: those this process may run on, fixed when it is imported (before any student code
# runs in a process that imports it, so a run that narrows its own affinity later changes nothing). None: all.
USABLE_CPUS = _usable_cpus()
STAT_MAX_BYTES = 1 << 20   # /proc/stat's per-CPU lines on the largest host; read no further


def _per_cpu_busy(proc):
    """CPU number -> seconds that CPU has spent busy since boot: user, nice, system, interrupts and steal (time a
    hypervisor gave to other guests), for the CPUs in USABLE_CPUS. /proc/stat is the machine's in every pid
    namespace. Read only as far as its per-CPU lines go (the lines after them can be long)."""
    try:
        fd = os.open("stat", os.O_RDONLY, dir_fd=proc)
    except OSError:
        return {}
    text = b""
    try:
        while len(text) < STAT_MAX_BYTES and b"\nintr" not in text:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            text += chunk
    except OSError:
        pass
    finally:
        os.close(fd)
    busy = {}
    for line in text.decode("ascii", "replace").splitlines()[1:]:
        fields = line.split()
        if not fields or not fields[0].startswith("cpu"):
            break
        if len(fields) < 9 or not fields[0][3:].isdigit():
            continue
        cpu = int(fields[0][3:])
        if USABLE_CPUS is None or cpu in USABLE_CPUS:
            try:
                busy[cpu] = sum(int(fields[index]) for index in (1, 2, 3, 6, 7, 8)) / TICKS
            except ValueError:
                continue
    return busy


def machine_busy(proc):
    """CPU seconds the CPUs the grader may use have spent busy (all of them together) since boot."""
    return sum(_per_cpu_busy(proc).values())


def machine_cpus(proc=None):
    """How many CPUs `machine_busy` counts (at least 1)."""
    def read(proc):
        return len(_per_cpu_busy(proc))
    return max(1, _with_proc(proc, read, missing=1))


def _cpu_stat(group):
    return dict(line.split(None, 1) for line in _read("cpu.stat", group).splitlines() if " " in line)


def throttled(stat):
    """Seconds a cgroup was throttled against its own CPU quota, from its cpu.stat (v2 `throttled_usec`, v1
    `throttled_time` in nanoseconds); 0 where it has no quota or the controller does not say."""
    usec, nsec = stat.get("throttled_usec", "").strip(), stat.get("throttled_time", "").strip()
    return int(usec) / 1e6 if usec.isdigit() else int(nsec) / 1e9 if nsec.isdigit() else 0.0


def group_usage(group, proc, quota=None):
    """The usage of a run measured by its cgroup on the unified hierarchy: `group` is a directory fd of it, opened
    before the run starts (the fork server's run unmounts the cgroup file system from its view). `quota`: a
    directory fd of the group holding its CPU quota where that is another one (v1's cpu controller), else None."""
    lines = [line.split() for line in _read("cpu.pressure", group).splitlines()]   # full avg10=.. .. total=US
    full = next((fields for fields in lines if fields[:1] == ["full"]), [])
    stat = _cpu_stat(group)
    waited = full[-1][len("total="):] if full and full[-1].startswith("total=") else ""
    cpu = stat.get("usage_usec", "").strip()
    if not (waited.isdigit() and cpu.isdigit()):
        return None
    own_quota = throttled(_cpu_stat(quota) if quota is not None else stat)
    return Usage(int(cpu) / 1e6, int(waited) / 1e6, machine_busy(proc), own_quota)


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


def _with_proc(proc, read, missing=NOTHING):
    """`read(proc)` with `proc`, or with a /proc opened for the call when none is given (`missing` without one)."""
    if proc is not None:
        return read(proc)
    try:
        proc = open_proc()
    except OSError:
        return missing
    try:
        return read(proc)
    finally:
        os.close(proc)


def tree_usage(root, proc=None):
    """The usage of the run whose first process is `root`, where it has no cgroup to measure it by: its threads'
    run-queue waits added up (an over-count of a burst, bounded by the other two measures)."""
    def read(proc):
        cpu, waited = 0.0, 0.0
        for pid in process_tree(root, proc):
            cpu += _cpu_seconds(_stat_fields(pid, proc))
            waited += _waited(pid, proc)
        return Usage(cpu, waited, machine_busy(proc))
    return _with_proc(proc, read)


def own_usage():
    """The usage of this process and everything it started (the harness and the student's code in it)."""
    return tree_usage(os.getpid())


def starting_usage(proc=None):
    """The usage of a run that starts now, with nothing of its own yet: the machine's busy time, in one read."""
    return _with_proc(proc, lambda proc: NOTHING._replace(machine_busy_seconds=machine_busy(proc)))


def allowance(elapsed, usage, cap, cpus=1):
    """Seconds to add to a limit: the time waited less the time throttled against its own quota, bounded by the time
    spent off the CPU (less that throttle too), by the CPU time everything else used beyond `cpus` - 1 CPUs (the
    machine's CPUs: `machine_cpus()`), by WAIT_PER_CPU_SECOND per CPU-second of the run's own, and by `cap`."""
    others = usage.machine_busy_seconds - usage.cpu_seconds - (cpus - 1) * elapsed
    return max(0.0, min(usage.waited_seconds - usage.throttled_seconds,
                        elapsed - usage.cpu_seconds - usage.throttled_seconds, others,
                        WAIT_PER_CPU_SECOND * usage.cpu_seconds, cap))


class StretchedDeadline:
    """`seconds` from now, plus the run's waiting allowance, re-measured only once the deadline has passed.

    `start`: the usage at the start when it is known without measuring (a new process tree or cgroup, whose
    counters begin at 0: `starting_usage()`), so that no /proc scan is paid at the start of every run. `cpus`: how
    many CPUs the machine's busy time counts (`machine_cpus()`, read here when not given)."""

    def __init__(self, seconds, cap, measure: Callable[[], Usage], clock=time.monotonic, start=None, cpus=None):
        self.clock = clock
        self.started = clock()
        self.seconds = seconds
        self.cap = cap
        self.measure = measure
        self.baseline = NOTHING if cap <= 0 else start if start is not None else measure()
        self.cpus = 1 if cap <= 0 else cpus if cpus is not None else machine_cpus()
        self.allowance = 0.0
        self.measured_at = self.started
        self.extended = False

    def extend(self, seconds):
        """Grant `seconds` more, once: the grader's own work after the file's end (its replays) is not the file's
        time. Asked for by a frame the run sends, so never more than once, whoever sends it."""
        if not self.extended and seconds > 0:
            self.seconds += seconds
            self.extended = True

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
        since = Usage(*(now_ - then for now_, then in zip(usage, self.baseline)))
        self.allowance = max(self.allowance, allowance(now - self.started, since, self.cap, self.cpus))
        return self.due() - now
