"""Per-run resource control by the kernel: one cgroup per run for memory, processes and CPU share.

rlimits bound one process's data segment; they do not see shared mappings, tmpfs pages, socket buffers or the
other 255 processes a run may start. A cgroup counts all of them for the run as a whole:

- memory: `memory_bytes` for everything the run's processes use, page cache, shared memory and tmpfs
  (its scratch space) and kernel memory included (no swap);
- pids: `max_processes` tasks (threads count);
- cpu: an equal share, so a run that starts 250 busy processes competes as one against its neighbours.

cgroup v2 (a unified hierarchy with the three controllers) is used where the host has it, else v1 controllers
(as on the machine this was written on). A batch makes one group under the grader's own groups and one child
per run; runs are placed in theirs before they execute anything (by the sandbox's launcher, or, for the fork
server, by its supervisor, which sees the batch's groups through a bind mount and hides them from the run).
With v1 controllers, a run also gets a group on the unified (v2) hierarchy where the host mounts one beside them
(systemd's hybrid layout): it carries no limit, but the kernel measures the run's CPU time and CPU pressure there
(child/cpu_wait.py: the time the run was kept waiting, counted once however many of its processes queued) and
kills all its processes at once (`cgroup.kill`).
Where no group can be made (not root, a read-only cgroupfs, an unprivileged container) `CgroupTree.create`
returns None and every record says the run was not in a cgroup.

Nothing is left behind: a run's groups are emptied (every process killed) and removed when it ends, before its uid
is used again; the batch's groups when the grader exits. A grader killed outright cannot clean up, so each
grader first removes the groups of graders that are no longer alive (named `grader-<pid>-...`).
"""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from grader.model.limits import Limits
from grader.sandbox.scratch import grader_alive

ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu")
UNIFIED = "unified"        # with v1 controllers: the run's group on the unified hierarchy (measures, kills)
EQUAL_SHARE_V1 = 1024
EQUAL_WEIGHT_V2 = 100
BATCH_NAME = re.compile(r"grader-(\d+)-[0-9a-f]{6}")
REMOVE_SECONDS = 20        # how long a group's last processes may take to die (a killed fork bomb, a loaded machine)


@dataclass(frozen=True)
class RunCgroup:
    """One run's groups: a directory per controller (v1) or one directory (v2)."""

    version: int
    paths: dict[str, Path]       # controller -> directory (v2: every controller -> the same directory; v1: + UNIFIED)

    @property
    def directories(self) -> list[Path]:
        return sorted(set(self.paths.values()))

    @property
    def measured_by(self) -> str | None:
        """The key of `paths` whose directory has the run's `cpu.pressure` and `cpu.stat` (None: none has)."""
        return "cpu" if self.version == 2 else UNIFIED if UNIFIED in self.paths else None

    @property
    def quota_by(self) -> str | None:
        """The key of `paths` whose cpu.stat says how long the run was throttled against its own CPU quota, where
        that is not the `measured_by` group (v1's cpu controller); None: the measuring group says it itself."""
        return "cpu" if self.version == 1 and self.measured_by is not None and "cpu" in self.paths else None

    def peak_memory_bytes(self) -> int | None:
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        return _read_int(self.paths["memory"] / name)

    def memory_limit_hit(self) -> bool:
        """The kernel killed a process of the run for exceeding its memory, or refused it memory."""
        if self.version == 1:
            text = _read(self.paths["memory"] / "memory.oom_control") or ""
            kills = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("oom_kill ")), 0)
            return kills > 0 or (_read_int(self.paths["memory"] / "memory.failcnt") or 0) > 0
        events = _read(self.paths["memory"] / "memory.events") or ""
        return any(line.split()[0] in ("oom_kill", "max") and int(line.split()[1]) > 0
                   for line in events.splitlines() if len(line.split()) == 2)


class CgroupTree:
    """The batch's groups; `run_group` makes each run's, `release` removes it."""

    def __init__(self, version: int, batch: dict[str, Path]):
        self.version = version
        self.batch = batch           # controller -> the batch's directory

    @classmethod
    def create(cls) -> CgroupTree | None:
        if os.geteuid() != 0:
            return None
        name = f"grader-{os.getpid()}-{secrets.token_hex(3)}"
        assert BATCH_NAME.fullmatch(name)
        for attempt in (cls._create_v2, cls._create_v1):
            try:
                tree = attempt(name)
            except OSError:
                tree = None
            if tree is not None:
                return tree
        return None

    @classmethod
    def _create_v2(cls, name: str) -> CgroupTree | None:
        if not (ROOT / "cgroup.controllers").is_file():
            return None
        own = _own_paths().get("")
        if own is None:
            return None
        parent = ROOT / own.lstrip("/")
        available = (parent / "cgroup.controllers").read_text().split()
        if not all(c in available for c in ("memory", "pids", "cpu")):
            return None
        remove_stale(parent)
        batch = parent / name
        batch.mkdir()
        try:
            (batch / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        except OSError:
            batch.rmdir()
            return None
        return cls(2, {c: batch for c in V1_CONTROLLERS})

    @classmethod
    def _create_v1(cls, name: str) -> CgroupTree | None:
        own = _own_paths()
        batch = {}
        for controller in V1_CONTROLLERS:
            mount = _v1_mount(controller)
            if mount is None or controller not in own:
                break
            path = mount / own[controller].lstrip("/") / name
            remove_stale(path.parent)
            path.mkdir()
            batch[controller] = path
        if len(batch) != len(V1_CONTROLLERS):
            for path in batch.values():
                _remove(path)
            return None
        unified = _unified_batch(name, own.get(""))
        if unified is not None:
            batch[UNIFIED] = unified
        return cls(1, batch)

    def describe(self) -> str:
        return f"a cgroup of its own (v{self.version}: memory incl. shared memory and tmpfs, processes, equal CPU share)"

    def run_group(self, limits: Limits, name: str | None = None) -> RunCgroup:
        """Make and configure one run's groups (nothing runs in them yet)."""
        name = name or f"run-{secrets.token_hex(6)}"
        paths = {c: self.batch[c] / name for c in self.batch}
        group = RunCgroup(self.version, paths)
        try:
            for path in group.directories:
                path.mkdir()
            configure(group, limits)
        except OSError:
            self.release(group)
            raise
        return group

    def release(self, group: RunCgroup) -> None:
        """Kill whatever is left of the run and remove its groups."""
        for path in group.directories:
            _kill_all(path)
        for path in group.directories:
            _remove(path)

    def close(self) -> None:
        """Remove the batch's groups, with any run group still in them."""
        for path in sorted(set(self.batch.values())):
            _remove_tree(path)


def configure(group: RunCgroup, limits: Limits) -> None:
    """Write a run's limits into its groups (also used by the fork server's supervisor, inside the sandbox)."""
    for path, settings in settings_for(group.version, group.paths, limits):
        for file, value in settings:
            target = path / file
            if target.exists():
                target.write_text(str(value))


def settings_for(version: int, paths: dict[str, Path], limits: Limits) -> list[tuple[Path, list[tuple[str, int]]]]:
    memory = int(limits.memory_bytes)
    if version == 1:
        return [(paths["memory"], [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory),
                                   ("memory.swappiness", 0)]),
                (paths["pids"], [("pids.max", int(limits.max_processes))]),
                (paths["cpu"], [("cpu.shares", EQUAL_SHARE_V1)])]
    return [(paths["memory"], [("memory.max", memory), ("memory.swap.max", 0), ("pids.max", int(limits.max_processes)),
                               ("cpu.weight", EQUAL_WEIGHT_V2)])]


def remove_stale(parent: Path) -> None:
    """Remove the batch groups under `parent` of graders that are no longer alive (killed before they could)."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for entry in entries:
        match = BATCH_NAME.fullmatch(entry.name)
        if match and entry.is_dir() and not grader_alive(int(match.group(1))):
            _remove_tree(entry)


def _unified_batch(name: str, own: str | None) -> Path | None:
    """The batch's group on a unified hierarchy mounted beside v1 controllers, if the kernel measures CPU pressure
    there; None otherwise (the runs' waits are then read per thread)."""
    mount = next((Path(fields[1]) for fields in (line.split() for line in Path("/proc/self/mounts").read_text().splitlines())
                  if len(fields) >= 3 and fields[2] == "cgroup2"), None)
    if mount is None or own is None:
        return None
    parent = mount / own.lstrip("/")
    if not (parent / "cgroup.procs").is_file():
        return None
    remove_stale(parent)
    batch = parent / name
    try:
        batch.mkdir()
    except OSError:
        return None
    if not (batch / "cpu.pressure").is_file() or not (batch / "cpu.stat").is_file():
        _remove(batch)
        return None
    return batch


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path ("" for the v2 hierarchy), from /proc/self/cgroup."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _v1_mount(controller: str) -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup" and controller in fields[3].split(","):
            return Path(fields[1])
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text.split()[0]) if text else None
    except ValueError:
        return None


def _remove_tree(path: Path) -> None:
    """A group and every group below it, deepest first."""
    try:
        children = [entry for entry in path.iterdir() if entry.is_dir()]
    except OSError:
        children = []
    for child in children:
        _remove_tree(child)
    _kill_all(path)
    _remove(path)


def _remove(path: Path) -> None:
    """rmdir a group; its last processes may take a while to leave after a kill on a loaded machine."""
    deadline = time.monotonic() + REMOVE_SECONDS
    pause = 0.01
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            _kill_all(path)
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


def _kill_all(path: Path) -> None:
    """Kill every process in the group: at once where the kernel can (v2's cgroup.kill), else one by one."""
    try:
        (path / "cgroup.kill").write_text("1")
        return
    except OSError:
        pass
    procs = _read(path / "cgroup.procs") or ""
    for pid in procs.split():
        try:
            os.kill(int(pid), 9)
        except (OSError, ValueError):
            pass
