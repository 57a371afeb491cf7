"""One run of the portable strategy (portable.py): the harness in a plain subprocess of the student's own Python, by
what Python offers on Linux, macOS and Windows alike.

- Pipes: only the three every system gives a child. The job goes in on stdin; the harness sends its frames on stdout
  and moves what the file prints to stderr (child/harness.py `serve`), and its set-up report is the channel's first
  `setup` frame, sent before any student code runs (frames.py). No descriptor is inherited (no `pass_fds`).
- Reading: a thread per pipe drains it with blocking reads (no `select`, which takes no pipes on Windows), bounded as
  the sandbox's pump is (process.py): the channel by its budgets, the output read up to `output_read_bytes`, then
  not at all, and paced after SMALL_READS_FREE small reads.
- Time: the calling thread watches the run (`Popen.wait` with a timeout) and kills it at the wall limit; inside the
  run the soft limit's alarm is a watcher thread (child/timer.py `ThreadAlarm`), not SIGALRM.
- Ending: `Popen.kill`, in a process group of the run's own.

Behind the one platform check (common/system.py), a POSIX system adds: a session of its own (`start_new_session`)
whose whole group is killed (`os.killpg`, so what the file started ends with it), the rlimits the run sets on itself
(`resource`), and where Linux's /proc says it, the wall and soft limits stretched by the time the run waited for a
CPU (child/cpu_wait.py). On Windows the run gets a process group of its own (`CREATE_NEW_PROCESS_GROUP`) and
`Popen.kill` ends the harness: a process the file started itself may outlive it (the student's own, on their own
machine); its limits are the wall and soft ones, unstretched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from grader.common import system
from grader.model.job import Job
from grader.model.limits import Limits
from grader.sandbox.child.cpu_wait import NOTHING, StretchedDeadline
from grader.sandbox.file_end import after_file_seconds
from grader.sandbox.frames import FrameReader
from grader.sandbox.isolation import RUNTIME_NAME, Isolation
from grader.sandbox.portable import Portable
from grader.sandbox.process import (
    PIPE_BYTES,
    SMALL_READ_BYTES,
    SMALL_READ_PAUSE,
    SMALL_READS_FREE,
    OutputKeeper,
    RunUsage,
    copy_child_runtime,
)
from grader.sandbox.raw_run import RawRun
from grader.sandbox.run_environment import child_environment
from grader.sandbox.scratch import make_temp_dir, remove_folder

CHANNEL_READ_BYTES = 1 << 16
WATCH_SECONDS = 0.25        # how often the wall limit is looked at while the run goes on
DRAIN_SECONDS = 1.0         # after the run ended: how long its pipes are read on (a process it started may hold them)


class Reader(threading.Thread):
    """Drains one pipe into `feed` with blocking reads until it closes, `most` bytes were read (then it reads no more:
    the writer waits, at its own cost, until the run ends), or it is let go. `feed` runs under `lock`, so a reader let
    go (`let_go`) feeds nothing after it; its pipe is closed by whichever of the two comes last."""

    def __init__(self, stream: IO[bytes], feed: Callable[[bytes], None], chunk: int, most: int | None = None):
        super().__init__(name="portable-run-reader", daemon=True)
        self.stream = stream
        self.feed = feed
        self.chunk = chunk
        self.most = most
        self.total = 0
        self.flooded = False
        self.lock = threading.Lock()
        self.reading = True
        self.released = False

    def run(self) -> None:
        small = 0
        try:
            while True:
                data = self.stream.read(self.chunk)
                if not data:
                    break
                with self.lock:
                    if self.released:
                        break
                    self.feed(data)
                self.total += len(data)
                if self.most is not None and self.total >= self.most:
                    self.flooded = True
                    break
                if len(data) < SMALL_READ_BYTES:
                    small += 1
                    if small > SMALL_READS_FREE:
                        time.sleep(SMALL_READ_PAUSE)   # let small writes gather in the pipe, as the sandbox's pump
        except (OSError, ValueError):
            pass
        finally:
            with self.lock:
                self.reading = False
                if self.released:
                    self.stream.close()

    def let_go(self, wait: float) -> None:
        """Wait up to `wait` seconds for the pipe to close; then nothing more is fed, and the pipe is closed now or,
        when a process the run started still holds it open, once that ends."""
        self.join(wait)
        with self.lock:
            self.released = True
            if not self.reading:
                self.stream.close()


def own_group() -> dict[str, Any]:
    """Popen's arguments that start the run in a process group of its own."""
    if system.POSIX:
        return {"start_new_session": True}
    return {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}   # Windows's constant


def end(process: subprocess.Popen) -> None:
    """Kill the run: on POSIX its whole process group, everywhere the harness itself."""
    if system.POSIX:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if process.poll() is None:
        try:
            process.kill()
        except OSError:
            pass


def portable_job(job: Job, limits: Limits) -> Job:
    """The job as the portable run's harness reads it (stdio channel, a thread's alarm, what this system allows)."""
    return {**job, "stdio_channel": True, "soft_timer": "thread", "seccomp": None,
            "own_rlimits": Portable.own_rlimits(limits) if system.POSIX else None,
            "cpu_wait_allowance_seconds": job.get("cpu_wait_allowance_seconds", 0) if system.POSIX else 0}


def _send(process: subprocess.Popen, job: Job) -> None:
    """Write the job to the run's stdin and close it (in a thread of its own: a run that never reads its stdin
    still meets its wall limit)."""
    assert process.stdin is not None, "the harness is started with stdin=PIPE"
    try:
        process.stdin.write(json.dumps(job).encode("utf-8"))
    except (BrokenPipeError, OSError, ValueError):
        pass   # the run is already gone: its output says why
    finally:
        try:
            process.stdin.close()
        except (BrokenPipeError, OSError):
            pass


def _watch(process: subprocess.Popen, wall: StretchedDeadline, raw: RawRun, frames: FrameReader,
           after_file: float) -> None:
    """Wait for the run to end, killing it at the wall limit (the replays' time granted once the file's own code
    has said it ended: file_end.py)."""
    while True:
        if frames.own_end_index is not None:
            wall.extend(after_file)   # once only, however often it is asked
        left = wall.remaining()
        if left <= 0:
            raw.killed_at_wall_limit = True
            end(process)
            return
        try:
            process.wait(timeout=min(left, WATCH_SECONDS))
            return
        except subprocess.TimeoutExpired:
            continue


def run_portable(job: Job, limits: Limits, isolation: Isolation, python: str) -> RawRun:
    """Run one harness job by the portable strategy; always returns, whatever the child does."""
    workdir = make_temp_dir("run")
    started = time.monotonic()
    raw = RawRun(isolation=isolation.describe())
    process: subprocess.Popen | None = None
    readers: list[Reader] = []
    frames = FrameReader(limits.channel_max_bytes, limits.channel_max_objects, takes_setup=True)
    output = OutputKeeper(limits.output_keep_bytes)
    try:
        copy_child_runtime(workdir / RUNTIME_NAME)
        # -u: -I ignores PYTHONUNBUFFERED, and output printed before a hard kill must still reach us.
        argv = isolation.command([python, "-I", "-B", "-u", f"{RUNTIME_NAME}/harness.py"], limits, workdir, None)
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   cwd=workdir, env=child_environment(workdir), **own_group())
        assert process.stdout is not None and process.stderr is not None, "the harness is started with pipes"
        # Unbuffered ends of the pipes: a read returns what is there (and one thread alone reads each).
        readers = [Reader(process.stdout.detach(), frames.feed, CHANNEL_READ_BYTES),   # type: ignore[attr-defined]
                   Reader(process.stderr.detach(), output.feed, PIPE_BYTES,            # type: ignore[attr-defined]
                          limits.output_read_bytes)]
        for reader in readers:
            reader.start()
        threading.Thread(target=_send, args=(process, portable_job(job, limits)), name="portable-run-job",
                         daemon=True).start()
        if system.POSIX:   # the limits stretched by the time the run waited for a CPU, where /proc says it (Linux)
            with RunUsage(process.pid, None) as usage:
                wall = StretchedDeadline(limits.wall_seconds, limits.cpu_wait_allowance_seconds, usage.measure,
                                         start=usage.start(), cpus=usage.cpus())
                _watch(process, wall, raw, frames, after_file_seconds(job))
                raw.cpu_wait_allowance_seconds = round(wall.allowance, 3)
        else:
            _watch(process, StretchedDeadline(limits.wall_seconds, 0, lambda: NOTHING), raw, frames,
                   after_file_seconds(job))
    except OSError as error:   # the run could not be started: the grader's failure, retried by the caller
        raw.grader_failure = f"{type(error).__name__}: {error}"
    finally:
        if process is not None:
            end(process)
            process.wait()
            raw.returncode = process.returncode
        for reader in readers:
            reader.let_go(DRAIN_SECONDS)
        remove_folder(workdir)
        raw.seconds = round(time.monotonic() - started, 3)
    raw.output_unread = any(reader.flooded for reader in readers)
    raw.control = json.dumps(frames.setup).encode("utf-8") + b"\n" if frames.setup is not None else b""
    raw.frames = frames.frames
    raw.own_end_index, raw.own_frame_times = frames.own_end_index, frames.own_frame_times
    raw.channel_problem = frames.problem
    raw.values_not_kept = frames.values_not_kept
    raw.output_head, raw.output_tail, raw.output_bytes = bytes(output.head), bytes(output.tail), output.total
    return raw
