"""CPU seconds of everything a piece of work started: the process, its threads, and every process below it.

`getrusage(RUSAGE_CHILDREN)` misses the runs of a fork server (the server ignores SIGCHLD, so the kernel never
adds their usage to anyone) and the server itself until it is reaped. Where the host has cgroup v1's cpuacct
controller and we are root, the benchmark moves itself into a cpuacct group of its own: everything it starts
(bubblewrap, the fork server, its supervisors and runs, bare `python` runs) is counted there, and the runs'
own share is known from their records, so "outside the runs" is the difference. Elsewhere only this process
and its reaped children are counted (the report says so).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _own_cpuacct() -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpuacct" in controllers.split(","):
                return CPUACCT / path.lstrip("/")
    except OSError:
        return None
    return None


class CpuMeter:
    """`seconds()`: CPU seconds used since creation by this process and everything it started (take differences
    of two readings for a piece of work)."""

    def __init__(self) -> None:
        self.group: Path | None = None
        self.parent: Path | None = None
        own = _own_cpuacct()
        if own is not None and os.geteuid() == 0 and (own / "cpuacct.usage").is_file():
            group = own / f"grader-benchmark-{os.getpid()}"
            try:
                group.mkdir()
                (group / "cgroup.procs").write_text(str(os.getpid()))
                self.group, self.parent = group, own
            except OSError:
                try:
                    group.rmdir()
                except OSError:
                    pass
        self.start = self._now()

    @property
    def whole_tree(self) -> bool:
        """True when every process below is counted (cpuacct); False: this process and reaped children only."""
        return self.group is not None

    def _now(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def seconds(self) -> float:
        return self._now() - self.start

    def close(self) -> None:
        if self.group is not None and self.parent is not None:
            try:
                (self.parent / "cgroup.procs").write_text(str(os.getpid()))
                self.group.rmdir()       # refused while a process of ours is still in it: then it stays, empty later
            except OSError:
                pass
            self.group = None


def process_seconds() -> float:
    """CPU seconds of this process alone (all its threads): the grader's own work."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
