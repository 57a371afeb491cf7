"""Run one job in an isolated child process and collect what it streams back.

The parent never runs student code. It starts the harness (grader/child/, copied into a private
temporary directory) in a new session with a scrubbed environment, sets resource limits on the child
before handing it the job, then pumps two pipes without blocking: the combined stdout/stderr (only a
head and a tail are kept, however much is written) and the data channel (length-prefixed JSON frames,
size-capped). The whole process group is killed at the hard wall-clock limit and again at the end. That limit
does not count time the run waited for a CPU other work held (child/cpu_wait.py), up to the configured allowance.

`grader.sandbox.isolation` chooses how the child is isolated (a pid namespace where possible) and wraps the
command line; every result records its description. A student's check without a sandbox (the portable strategy)
runs by portable_run.py instead, which uses nothing but what every system has.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from grader.model.job import Job
from grader.model.limits import Limits
from grader.sandbox.cgroups import CgroupTree, RunCgroup
from grader.sandbox.child.cpu_wait import (
    StretchedDeadline,
    Usage,
    group_usage,
    machine_cpus,
    open_proc,
    starting_usage,
    tree_usage,
)
from grader.sandbox.file_end import after_file_seconds
from grader.sandbox.frames import FrameReader
from grader.sandbox.isolation import RUNTIME_NAME, UIDS, Isolation
from grader.sandbox.portable import default_isolation
from grader.sandbox.raw_run import RawRun
from grader.sandbox.run_environment import child_environment
from grader.sandbox.scratch import make_temp_dir
from grader.sandbox.seccomp import describe as seccomp_description
from grader.sandbox.seccomp import filter_program
from grader.sandbox.shared_python import write_import_paths

CHILD_DIR = Path(__file__).with_name("child")
COMPILE_CACHE_PATH = "/tmp/grader-compile-cache"   # where a run sees JAX's compilation cache (runs/compile_cache.py)
# Every module of child/ (the harness, what it imports by plain name, the fork server): all are copied into a run.
CHILD_MODULES = tuple(sorted(p.name for p in CHILD_DIR.glob("*.py") if p.name != "__init__.py"))
CHANNEL_FD = 3
# A run that writes a few bytes at a time (a frame per statement of 100,000 statements, a print per character) would
# wake the grader's pump once per write. Past SMALL_READS_FREE small reads (an honest run makes a few hundred) the
# pump pauses after each, so it wakes at most 1/SMALL_READ_PAUSE times a second whatever the run does (the pipe
# holds 64 KiB meanwhile; a writer that fills it waits, at its own cost).
SMALL_READ_BYTES = 16 * 1024
SMALL_READS_FREE = 2000
SMALL_READ_PAUSE = 0.02
# A run's output pipe holds up to this much (Linux: F_SETPIPE_SZ, within /proc/sys/fs/pipe-max-size), and the pump
# reads as much at once: a run that prints hundreds of megabytes is drained at pipe speed (its writes block only
# while a read is due), and a pause after small reads still leaves a whole megabyte to read after it.
PIPE_BYTES = 1 << 20



class OutputKeeper:
    """Keeps the first and last `keep/2` bytes of a stream of any length: the middle is counted, never copied
    (a read at least as long as the tail replaces it whole)."""

    def __init__(self, keep: int):
        self.half = max(keep // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if len(data) >= self.half:
            self.tail = bytearray(data[-self.half:])
        elif data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]


def apply_limits(pid: int, limits: Limits) -> None:
    """Set rlimits on the child before it reads its job (so before any student code runs)."""
    import resource  # Linux: the sandbox's strategies only (common/system.py)

    for name, value in limits.rlimits().items():
        resource.prlimit(pid, getattr(resource, f"RLIMIT_{name.upper()}"), (value, value))


_TREE: list[CgroupTree | None] = []
_TREE_LOCK = threading.Lock()


def shared_tree() -> CgroupTree | None:
    """This grader process's cgroup tree (made on first use, removed at exit), or None where none can be made."""
    with _TREE_LOCK:
        if not _TREE:
            tree = CgroupTree.create()
            _TREE.append(tree)
            if tree is not None:
                atexit.register(tree.close)
        return _TREE[0]


def copy_child_runtime(folder: Path) -> None:
    """The code that runs inside the sandbox (grader/child/), copied to `folder`, readable by any uid, with the
    student's import paths where this process shares its environment (a student's check: shared_python.py)."""
    folder.mkdir(mode=0o755)
    for name in CHILD_MODULES:
        shutil.copy(CHILD_DIR / name, folder / name)
        os.chmod(folder / name, 0o644)
    write_import_paths(folder)
    os.chmod(folder, 0o755)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_job(job: Job, limits: Limits, isolation: Isolation | None = None, python: str = sys.executable,
            own_uid: bool = True) -> RawRun:
    """Run one harness job under `limits`; always returns, whatever the child does.

    `own_uid=False` keeps the grader's uid and leaves out the cgroup and syscall filter: only for trusted code
    (the reference solution warming a cache)."""
    isolation = isolation or default_isolation()   # below namespaces only when asked for (or a student's check)
    if isolation.portable:   # a student's check without a sandbox: nothing but what every system has
        from grader.sandbox.portable_run import run_portable

        return run_portable(job, limits, isolation, python)
    workdir = make_temp_dir("run")
    started = time.monotonic()
    read_fd, write_fd = os.pipe()
    control_read, control_write = os.pipe()
    tree = shared_tree() if own_uid else None
    group = None
    raw = RawRun(isolation=describe_run(isolation.describe(), tree, own_uid))
    process = None
    uid = UIDS.take() if isolation.switches_uid and own_uid else None
    try:
        copy_child_runtime(workdir / RUNTIME_NAME)
        isolation.prepare_workdir(workdir, uid)
        # -u: -I ignores PYTHONUNBUFFERED, and output printed before a hard kill must still reach us.
        argv = isolation.command([python, "-I", "-B", "-u", f"{RUNTIME_NAME}/harness.py"], limits, workdir, uid)
        if tree is not None:
            group = tree.run_group(limits)
            argv = enter_cgroup(group) + argv
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=child_environment(workdir),
            start_new_session=True,
            pass_fds=(write_fd, control_write),
        )
        os.close(write_fd)
        os.close(control_write)
        channel_fd, control_fd, write_fd, control_write = write_fd, control_write, -1, -1
        if isolation.limits_need_pid:
            apply_limits(process.pid, limits)
        program = filter_program() if own_uid else None
        _send_job(process, {**job, "channel_fd": channel_fd, "control_fd": control_fd,
                            "seccomp": base64.b64encode(program).decode("ascii") if program else None})
        _pump(process, read_fd, control_read, limits, raw, group, after_file_seconds(job))
    except OSError as error:   # the sandbox could not start the run: the grader's failure, retried by the caller
        raw.grader_failure = f"{type(error).__name__}: {error}"
    finally:
        if process is not None:
            kill_group(process.pid)
            if process.poll() is None:
                process.kill()
            process.wait()
            raw.returncode = process.returncode
            if process.stdout:
                process.stdout.close()
        for fd in (read_fd, write_fd, control_read, control_write):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if group is not None and tree is not None:
            raw.memory_limit_hit = group.memory_limit_hit()
            raw.max_rss_bytes = group.peak_memory_bytes()
            tree.release(group)
        shutil.rmtree(workdir, ignore_errors=True)
        if uid is not None:
            UIDS.give_back(uid)
        raw.seconds = round(time.monotonic() - started, 3)
    return raw


LAUNCHER = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"'


def enter_cgroup(group: RunCgroup) -> list[str]:
    """A launcher that moves itself into the run's groups, then execs the run (so nothing runs outside them)."""
    return ["/bin/sh", "-c", LAUNCHER, "sh", *(str(path) for path in group.directories), "--"]


def describe_run(isolation: str, tree: CgroupTree | None, untrusted: bool = True) -> str:
    if not untrusted:
        return isolation
    kernel = tree.describe() if tree is not None else "no cgroup (memory bounded by RLIMIT_DATA only)"
    return f"{isolation}, {kernel}, {seccomp_description()}"


def _send_job(process: subprocess.Popen, job: Job) -> None:
    assert process.stdin is not None, "the harness is started with stdin=PIPE"
    try:
        process.stdin.write(json.dumps(job).encode("utf-8"))
        process.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the child is already gone; the pump will see it


def _pump(process: subprocess.Popen, channel_fd: int, control_fd: int, limits: Limits, raw: RawRun,
          group: RunCgroup | None, after_file_seconds: float) -> None:
    with RunUsage(process.pid, group) as usage:
        wall = StretchedDeadline(limits.wall_seconds, limits.cpu_wait_allowance_seconds, usage.measure,
                                 start=usage.start(), cpus=usage.cpus())

        def wall_limit() -> None:
            raw.killed_at_wall_limit = True
            kill_group(process.pid)

        assert process.stdout is not None, "the harness is started with stdout=PIPE"
        try:
            pump(process.stdout.fileno(), channel_fd, limits, raw, wall.remaining,
                 has_exited=lambda: process.poll() is not None, at_deadline=wall_limit, control_fd=control_fd,
                 on_own_end=lambda: wall.extend(after_file_seconds))
            # A run that closed its pipes may still be running: it ends when it ends, or at its limit (as under the
            # fork server's supervisor), not when its pipes closed.
            while not raw.killed_at_wall_limit and process.poll() is None:
                if wall.remaining() <= 0:
                    wall_limit()
                    break
                time.sleep(0.02)
        finally:
            raw.cpu_wait_allowance_seconds = round(wall.allowance, 3)
            raw.cpu_seconds = usage.cpu_seconds()


class RunUsage:
    """What a run has had (child/cpu_wait.py), read by its cgroup on the unified hierarchy where it has one, else
    from its process tree; open for the run's life."""

    def __init__(self, root: int, group: RunCgroup | None):
        self.root = root
        key = group.measured_by if group is not None else None
        self.proc: int | None = None
        self.group: int | None = None
        try:
            self.proc = open_proc()
        except OSError:
            pass
        self.quota: int | None = None   # v1: the cpu controller's group, whose cpu.stat counts the run's throttling
        if key is not None and group is not None:
            try:
                self.group = os.open(group.paths[key], os.O_RDONLY | os.O_DIRECTORY)
                if group.quota_by is not None:
                    self.quota = os.open(group.paths[group.quota_by], os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                pass

    def start(self) -> Usage:
        return starting_usage(self.proc)

    def cpus(self) -> int:
        """How many CPUs the machine's busy time counts (child/cpu_wait.py)."""
        return machine_cpus(self.proc)

    def measure(self) -> Usage:
        measured = group_usage(self.group, self.proc, self.quota) if self.group is not None else None
        return measured or tree_usage(self.root, self.proc)

    def cpu_seconds(self) -> float | None:
        """The run's CPU time so far, where its cgroup counts it (every process, reaped or not); else None."""
        measured = group_usage(self.group, self.proc) if self.group is not None else None
        return round(measured.cpu_seconds, 3) if measured else None

    def __enter__(self) -> RunUsage:
        return self

    def __exit__(self, *exc) -> None:
        for fd in (self.proc, self.group, self.quota):
            if fd is not None:
                os.close(fd)


CONTROL_MAX_BYTES = 4096


def widen_pipe(fd: int) -> None:
    """Let the pipe behind `fd` hold PIPE_BYTES where the system allows it (Linux), else leave it as it is."""
    import fcntl  # the sandbox's strategies only (Linux: common/system.py)

    setting = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setting is None:
        return
    try:
        with open("/proc/sys/fs/pipe-max-size") as limit:
            most = int(limit.read().strip())
    except (OSError, ValueError):
        most = PIPE_BYTES
    try:
        fcntl.fcntl(fd, setting, min(PIPE_BYTES, most))
    except OSError:
        pass


def pump(out_fd: int, channel_fd: int, limits: Limits, raw: RawRun, time_left: Callable[[], float],
         has_exited: Callable[[], bool], at_deadline: Callable[[], None], control_fd: int | None = None,
         on_own_end: Callable[[], None] | None = None) -> None:
    """Drain output, channel and control pipe until the child ends (or `time_left()` reaches 0), never blocking.
    `on_own_end` hears, once, that the file's own code has ended (sandbox/file_end.py)."""
    output = OutputKeeper(limits.output_keep_bytes)
    frames = FrameReader(limits.channel_max_bytes, limits.channel_max_objects)
    frames.on_own_end = on_own_end
    control = bytearray()
    open_fds = {out_fd, channel_fd} | ({control_fd} if control_fd is not None else set())
    for fd in open_fds:
        os.set_blocking(fd, False)
    widen_pipe(out_fd)
    exited_at, small_reads = None, 0
    while open_fds:
        now = time.monotonic()
        if time_left() <= 0:
            at_deadline()
            break
        if exited_at is None and has_exited():
            exited_at = now
        if exited_at is not None and now - exited_at > 1.0:
            break  # a descendant still holds a pipe open; the kill that follows ends it
        ready, _, _ = select.select(list(open_fds), [], [], 0.05)
        got = 0
        for fd in ready:
            try:
                data = os.read(fd, PIPE_BYTES if fd == out_fd else 1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            got += len(data)
            if not data:
                open_fds.discard(fd)
            elif fd == out_fd:
                output.feed(data)
                if output.total >= limits.output_read_bytes:   # a flood: read no more (its writes block, free to us)
                    open_fds.discard(fd)
                    raw.output_unread = True
            elif fd == control_fd:
                control += data[: max(0, CONTROL_MAX_BYTES - len(control))]
            else:
                frames.feed(data)
        if 0 < got < SMALL_READ_BYTES:
            small_reads += 1
            if small_reads > SMALL_READS_FREE:
                time.sleep(SMALL_READ_PAUSE)   # let small writes gather in the pipe: wakeups bounded, not per write
    raw.control = bytes(control)
    raw.frames = frames.frames
    raw.own_end_index, raw.own_frame_times = frames.own_end_index, frames.own_frame_times
    raw.channel_problem = frames.problem
    raw.values_not_kept = frames.values_not_kept
    raw.output_head, raw.output_tail, raw.output_bytes = bytes(output.head), bytes(output.tail), output.total
