"""What a grader may leave on the machine, looked up by the grader's pid: shared by the tests that assert a batch,
killed or not, leaves nothing (grader/sandbox/cgroups.py, grader/sandbox/scratch.py)."""

from __future__ import annotations

from pathlib import Path

from grader.sandbox import scratch


def _cgroup_parents() -> list[Path]:
    """Every directory a grader started from this process's groups makes its batch groups in, on every hierarchy."""
    own = {line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()}
    mounts = [Path(fields[1]) for fields in (line.split() for line in Path("/proc/self/mounts").read_text().splitlines())
              if len(fields) >= 3 and fields[2] in ("cgroup", "cgroup2")]
    return [mount / path.lstrip("/") for mount in mounts for path in own if (mount / path.lstrip("/")).is_dir()]


def cgroups_of(pid: int) -> list[Path]:
    """The batch groups of grader `pid` that still exist, on any hierarchy (each `grader-<pid>-...`)."""
    return sorted({group for parent in _cgroup_parents() for group in parent.glob(f"grader-{pid}-*") if group.is_dir()})


def run_groups(batch: list[Path]) -> list[Path]:
    """The run groups still inside a live grader's batch groups."""
    return sorted(child for group in batch if group.is_dir() for child in group.iterdir() if child.is_dir())


def temp_dirs_of(pid: int) -> list[Path]:
    """The temporary folders of grader `pid` that still exist (`grader-<kind>-<pid>-...`)."""
    return scratch.ours(pid=pid)


def mounts() -> set[str]:
    """This mount namespace's mount points and what is mounted there."""
    return {" ".join(line.split()[3:5]) for line in Path("/proc/self/mountinfo").read_text().splitlines()}
