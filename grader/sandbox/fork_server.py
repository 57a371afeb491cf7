"""Fast runs: a fork server (grader/child/zygote_server.py) inside one bubblewrap sandbox, one isolated child per run.

A fresh interpreter per run spends most of its time importing JAX and compiling; the fork server imports JAX once
and every run is a fork of it that enters its own namespaces, scratch space, cgroup and uid before it sees the
job (see zygote_server.py for what each child gets). Compiled programs come from a persistent compilation cache
that a trusted run of the reference solution filled beforehand; each run works on its own throwaway copy, so no
run can poison another's.

Nothing a run does is read as a sign that the server failed. The server's health comes only from its own
channels: whether the request could be sent, and the supervisor's status report on a pipe the run closed before
reading its job. The report is awaited until the supervisor must have ended the run (its wall limit, stretched at
most by the allowance, plus a grace that holds on a loaded machine), so a run that closes its own pipes or dies
slowly is only a run that ended, never a failed server. Whether the harness set the run up comes from its control
pipe, closed before student code. A dead server is replaced by a new generation while the runs in flight on the
old one finish undisturbed (one restart per failure; the old one is closed when its last run ends), and the
failed run is tried again, then in a fresh sandboxed interpreter.

Every generation is started by one long-lived launcher thread, never by the worker thread whose run found the
server dead: bwrap's --die-with-parent ties the sandbox's life to the thread that started it, and a worker thread
ends with its submission, taking a server and every run in flight on it along.

`ForkServer.run_job` returns the same `RawRun` as `sandbox.run_job`, so grading does not care which ran.
Where bubblewrap or root is missing, `ForkServer.start` fails and callers use `sandbox.run_job`.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.model.job import Job, new_job
from grader.model.limits import Limits
from grader.sandbox.file_end import after_file_seconds
from grader.sandbox.inspection import SandboxFacts, inspect_with, job_source, parse_printed
from grader.sandbox.isolation import (
    NAMESPACES,
    UIDS,
    Bubblewrap,
    installed,
    parents_traversable,
    strongest_available,
    system_view,
)
from grader.sandbox.launcher import Launcher
from grader.sandbox.portable import student_strategy
from grader.sandbox.process import (
    COMPILE_CACHE_PATH,
    copy_child_runtime,
    describe_run,
    pump,
    run_job,
    shared_tree,
)
from grader.sandbox.raw_run import RawRun
from grader.sandbox.run_environment import child_environment
from grader.sandbox.scratch import make_temp_dir
from grader.sandbox.seccomp import filter_program
from grader.sandbox.shared_python import shared

RUNTIME = "/grader-runtime"          # grader/child/ (harness, zygote_server, ...), read-only, inside the sandbox
CACHE = "/grader-compile-cache"      # the warmed compilation cache, read-only, inside the sandbox
CGROUPS = "/grader-cgroup"           # the batch's cgroups, seen by the supervisors only (a run unmounts it)
CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")
START_SECONDS = 120
WALL_GRACE_SECONDS = 30              # the supervisor kills at the (stretched) wall limit; this is the backstop
FD_NAMES = ("job", "output", "channel", "status", "control", "extend")   # as zygote_server.FD_NAMES


class ForkServerError(RuntimeError):
    """The fork server could not start or died; the caller falls back to a fresh process per run."""


class _Server:
    """One generation of the fork server process, with the runs in flight on it."""

    def __init__(self, process: subprocess.Popen, sock: socket.socket, runtime: Path, log, generation: int):
        self.process = process
        self.socket = sock
        self.runtime = runtime
        self.log = log
        self.generation = generation
        self.in_flight = 0
        self.retired = False
        self.send_lock = threading.Lock()

    def close(self) -> None:
        try:
            self.socket.close()
        except OSError:
            pass
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.runtime, ignore_errors=True)


class ForkServer:
    """One fork server per batch (or per `grader check`), shared by all worker threads; `close` when done."""

    name = ("bubblewrap fork server: each run gets its own pid, mount, network, ipc and uts namespaces, "
            "read-only system, grader and instructor files invisible, rlimits, a uid of its own, "
            "private scratch space, scrubbed environment")

    def __init__(self, compile_cache: Path | None = None, python: str = sys.executable):
        self.compile_cache = compile_cache if compile_cache and compile_cache.is_dir() else None
        self.python = python
        self._lock = threading.Lock()          # guards _current, _generation and in-flight counts
        self._restart_lock = threading.Lock()  # one restart at a time
        self._current: _Server | None = None
        self._generation = 0
        self._launcher: Launcher[_Server] | None = None
        self.launches = 0                      # generations started (1 + restarts), for tests and the benchmark
        self._tree = shared_tree()
        self.description = describe_run(self.name, self._tree)

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> ForkServer:
        """Start the first generation (every generation's runs are inspected before it serves: `_launch`)."""
        strategy = student_strategy() if shared() else strongest_available()
        if os.geteuid() != 0 or not isinstance(strategy, Bubblewrap):
            raise ForkServerError("the fork server needs root and bubblewrap")
        self._launcher = Launcher(self._launch)
        try:
            server = self._launcher.launch()
        except BaseException:
            self._launcher.stop()
            self._launcher = None
            raise
        with self._lock:
            self._current = server
        return self

    facts = SandboxFacts(failure="not started")

    def _probe(self, server: _Server, canary: Path) -> object:
        """The sandbox probe as a harness job on `server`, exactly as a student's run is made."""
        limits = Limits()
        job = new_job(job_source(canary, "_grader_probe") + "print(__import__('json').dumps(_grader_probe))\n",
                      "probe.py", [], limits)
        raw, failed = self._run_once(server, job, limits)
        if failed or not raw.setup_ok:
            raise RuntimeError(f"the probe run failed ({raw.setup.get('message') or 'no report from the server'})")
        return parse_printed(raw.output_head + raw.output_tail)

    def _launch(self) -> _Server:
        runtime = make_temp_dir("zygote")
        runtime.rmdir()
        copy_child_runtime(runtime)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = tempfile.TemporaryFile()
        argv = [installed(Bubblewrap.bwrap, "bwrap"), *NAMESPACES, *system_view(Limits().scratch_bytes),
                *parents_traversable(Path(RUNTIME)), "--ro-bind", str(runtime), RUNTIME]
        if self.compile_cache:
            argv += ["--ro-bind", str(self.compile_cache), CACHE]
        if self._tree is not None:
            argv += parents_traversable(Path(CGROUPS) / "x")
            for controller, path in sorted(self._tree.batch.items()):
                argv += ["--bind", str(path), f"{CGROUPS}/{controller}"]
        for capability in CAPABILITIES:
            argv += ["--cap-add", capability]
        argv += ["--chdir", "/", "--", self.python, "-I", "-B", "-u", f"{RUNTIME}/zygote_server.py", str(theirs.fileno())]
        process = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True, env=child_environment(Path("/tmp")), cwd=runtime)
        theirs.close()
        ours.settimeout(START_SECONDS)
        try:
            ready = ours.recv(64)
        except OSError:
            ready = b""
        ours.settimeout(None)
        self._generation += 1
        self.launches += 1
        server = _Server(process, ours, runtime, log, self._generation)
        if ready != b"ready\n":
            text = _read_log(log)
            server.close()
            raise ForkServerError(f"the fork server did not start: {text}")
        # A generation serves only once a run of it was seen strongly isolated from inside (inspection.py); else it
        # is stopped, and runs go to fresh sandboxed interpreters.
        facts = inspect_with(lambda canary: self._probe(server, canary))
        if not facts.strong:
            server.close()
            raise ForkServerError("its runs are not isolated as they must be: " + "; ".join(facts.weaknesses()))
        self.facts = facts
        return server

    def close(self) -> None:
        with self._lock:
            server, self._current = self._current, None
        if server is not None:
            server.close()
        if self._launcher is not None:
            self._launcher.stop()
            self._launcher = None

    def __enter__(self) -> ForkServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def generation(self) -> int:
        return self._current.generation if self._current else 0

    def stats(self) -> dict:
        """What the fork server process itself holds: its peak resident memory (its runs are forks: they share
        most of it), its threads' names (a fork copies only the thread that forks) and whether it made the
        lowering context its runs share. {} when it cannot answer."""
        with self._lock:
            server = self._current
        if server is None:
            return {}
        with server.send_lock:
            try:
                server.socket.sendall(b"stats")
                server.socket.settimeout(10)
                answer = json.loads(server.socket.recv(4096))
                return answer if isinstance(answer, dict) else {}
            except (OSError, ValueError):
                return {}
            finally:
                server.socket.settimeout(None)

    def _acquire(self) -> _Server | None:
        with self._lock:
            if self._current is not None:
                self._current.in_flight += 1
            return self._current

    def _release(self, server: _Server) -> None:
        with self._lock:
            server.in_flight -= 1
            done = server.retired and server.in_flight == 0
        if done:
            server.close()

    def _replace(self, failed: _Server) -> None:
        """A new generation for a server that failed; runs still in flight on the old one finish first."""
        with self._restart_lock:
            with self._lock:
                if self._current is not failed:
                    return   # another thread has already replaced it
            try:
                fresh = self._launcher.launch() if self._launcher else None
            except ForkServerError:
                fresh = None
            with self._lock:
                self._current = fresh
                failed.retired = True
                idle = failed.in_flight == 0
            if idle:
                failed.close()

    # ---- one run ------------------------------------------------------------------------------------------

    def run_job(self, job: Job, limits: Limits) -> RawRun:
        """Run one harness job in a fresh isolated child of the fork server; always returns.

        A failure of the server or of the sandbox's set-up is the grader's: the run is tried again on a healthy
        server, then in a fresh sandboxed interpreter. The student's code cannot cause either verdict."""
        for _ in range(2):
            server = self._acquire()
            if server is None:
                break
            try:
                raw, server_failed = self._run_once(server, job, limits)
            finally:
                self._release(server)
            if server_failed:
                self._replace(server)
                continue
            if raw.setup_ok:
                return raw
        return run_job(job, limits)

    def _run_once(self, server: _Server, job: Job, limits: Limits) -> tuple[RawRun, bool]:
        """The run's RawRun, and whether the server itself failed (it never depends on what the run did)."""
        started = time.monotonic()
        raw = RawRun(isolation=self.description)
        uid = UIDS.take()
        pipes = {name: os.pipe() for name in FD_NAMES}
        ours = {"job": pipes["job"][1], "output": pipes["output"][0], "channel": pipes["channel"][0],
                "status": pipes["status"][0], "control": pipes["control"][0], "extend": pipes["extend"][1]}
        theirs = [pipes["job"][0], pipes["output"][1], pipes["channel"][1], pipes["status"][1], pipes["control"][1],
                  pipes["extend"][0]]
        after_file = after_file_seconds(job)
        workdir = f"/tmp/grader-run-{secrets.token_hex(6)}"
        group = self._tree.run_group(limits) if self._tree is not None else None
        request = {"uid": uid, "workdir": workdir, "environment": child_environment(Path(workdir)),
                   "limits": {"wall_seconds": limits.wall_seconds, "after_file_seconds": after_file,
                              "cpu_wait_allowance_seconds": limits.cpu_wait_allowance_seconds,
                              "cpu_seconds": int(limits.cpu_seconds),
                              "memory_bytes": limits.memory_bytes, "file_size_bytes": limits.file_size_bytes,
                              "max_processes": limits.max_processes, "scratch_bytes": limits.scratch_bytes,
                              "rlimits": limits.rlimits()}}
        if group is not None:
            request["cgroup_procs"] = [f"{CGROUPS}/{controller}/{path.name}/cgroup.procs"
                                       for controller, path in sorted(group.paths.items())]
            request["cgroup_root"] = CGROUPS
            if group.measured_by is not None:   # where the supervisor measures the run's CPU time and waits
                request["cgroup_stats"] = f"{CGROUPS}/{group.measured_by}/{group.paths[group.measured_by].name}"
                if group.quota_by is not None:   # v1: where the run's throttling against its own CPU quota shows
                    request["cgroup_quota"] = f"{CGROUPS}/{group.quota_by}/{group.paths[group.quota_by].name}"
        program = filter_program()
        job = {**job, "seccomp": base64.b64encode(program).decode("ascii") if program else None}
        if self.compile_cache:
            request["compilation_cache"] = {"readonly": CACHE, "writable": COMPILE_CACHE_PATH}
            job = {**job, "compilation_cache_dir": COMPILE_CACHE_PATH}
        status: dict = {}
        server_failed = False
        try:
            try:
                with server.send_lock:
                    socket.send_fds(server.socket, [json.dumps(request).encode()], theirs)
            except OSError:
                return raw, True
            for fd in theirs:
                os.close(fd)
            theirs = []
            writer = threading.Thread(target=_write_all, args=(ours.pop("job"), json.dumps(job).encode()), daemon=True)
            writer.start()
            reader = threading.Thread(target=_read_status, args=(ours.pop("status"), status), daemon=True)
            reader.start()

            def wedged() -> None:  # the supervisor kills at the wall limit; if it has not, the server is unwell
                nonlocal server_failed
                raw.killed_at_wall_limit = True
                server_failed = True

            backstop = [started + limits.wall_seconds + limits.cpu_wait_allowance_seconds + WALL_GRACE_SECONDS]

            def own_end() -> None:   # the file's own code ended: its supervisor grants the replays' time (file_end.py)
                if after_file > 0:
                    backstop[0] += after_file
                    try:
                        os.write(ours["extend"], b"+")
                    except OSError:
                        pass

            pump(ours["output"], ours["channel"], limits, raw, lambda: backstop[0] - time.monotonic(),
                 has_exited=lambda: not reader.is_alive(), at_deadline=wedged, control_fd=ours["control"],
                 on_own_end=own_end)
            # The run may have closed its pipes and still be running: its supervisor reports once it has ended it.
            reader.join(timeout=max(backstop[0] - time.monotonic(), 0) + WALL_GRACE_SECONDS)
        finally:
            for fd in [*theirs, *ours.values()]:
                try:
                    os.close(fd)
                except OSError:
                    pass
            if group is not None and self._tree is not None:
                raw.memory_limit_hit = group.memory_limit_hit()
                raw.max_rss_bytes = group.peak_memory_bytes()
                self._tree.release(group)   # before the uid is reused: nothing of this run may outlive it
            UIDS.give_back(uid)
            raw.seconds = round(time.monotonic() - started, 3)
        if not status or status.get("error"):
            return raw, True   # no report from the supervisor: it (or the server) died
        raw.returncode = status.get("returncode")
        raw.killed_at_wall_limit = raw.killed_at_wall_limit or bool(status.get("killed_at_wall_limit"))
        raw.cpu_seconds = status.get("cpu_seconds")
        allowance = status.get("cpu_wait_allowance_seconds")
        if isinstance(allowance, (int, float)) and 0 <= allowance <= limits.cpu_wait_allowance_seconds:
            raw.cpu_wait_allowance_seconds = float(allowance)
        if raw.max_rss_bytes is None:
            raw.max_rss_bytes = status.get("max_rss_bytes")
        return raw, server_failed


def _read_log(log) -> str:
    log.seek(0)
    return log.read()[-2000:].decode(errors="replace").strip()


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError:
        pass
    finally:
        os.close(fd)


def _read_status(fd: int, into: dict) -> None:
    chunks = []
    try:
        while True:
            data = os.read(fd, 1 << 16)
            if not data:
                break
            chunks.append(data)
        into.update(json.loads(b"".join(chunks) or b"{}"))
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)
