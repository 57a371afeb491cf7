"""Fast runs: a fork server (grader/zygote_server.py) inside one bubblewrap sandbox, one isolated child per run.

A fresh interpreter per run spends most of its time importing JAX and compiling; the fork server imports
JAX once and every run is a fork of it that enters its own namespaces, scratch space and uid before it sees
the job (see zygote_server.py for what each child gets). Compiled programs come from a persistent
compilation cache that a trusted run of the reference solution filled beforehand; each run works on its
own throwaway copy, so no run can poison another's.

`ForkServer.run_job` returns the same `RawRun` as `sandbox.run_job`, so grading does not care which ran.
Where bubblewrap or root is missing, `ForkServer.start` fails and callers use `sandbox.run_job`.
"""

from __future__ import annotations

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

from . import compile_cache
from .isolation import NAMESPACES, UIDS, Bubblewrap, parents_traversable, strongest_available, system_view
from .sandbox import RawRun, child_environment, copy_child_runtime, pump, run_job
from .sandbox_limits import Limits

RUNTIME = "/grader-runtime"          # grader/child/ (harness, zygote_server, ...), read-only, inside the sandbox
CACHE = "/grader-compile-cache"      # the warmed compilation cache, read-only, inside the sandbox
CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")
START_SECONDS = 120
WALL_GRACE_SECONDS = 10              # the supervisor kills at the wall limit; this is the backstop
SETUP_FAILED = 70                    # zygote_server's exit status when a run could not be set up


class ForkServerError(RuntimeError):
    """The fork server could not start or died; the caller falls back to a fresh process per run."""


class ForkServer:
    """One fork server per batch (or per `grader check`), shared by all worker threads; `close` when done."""

    description = ("bubblewrap fork server: each run gets its own pid, mount, network, ipc and uts namespaces, "
                   "read-only system, grader and instructor files invisible, rlimits, a uid of its own, "
                   "private scratch space, scrubbed environment")

    def __init__(self, compile_cache: Path | None = None, python: str = sys.executable):
        self.compile_cache = compile_cache if compile_cache and compile_cache.is_dir() else None
        self.python = python
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._socket: socket.socket | None = None
        self._runtime: Path | None = None
        self._log = None

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> "ForkServer":
        if os.geteuid() != 0 or not isinstance(strongest_available(), Bubblewrap):
            raise ForkServerError("the fork server needs root and bubblewrap")
        self._runtime = Path(tempfile.mkdtemp(prefix="grader-zygote-"))
        os.chmod(self._runtime, 0o755)
        shutil.rmtree(self._runtime)
        copy_child_runtime(self._runtime)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = tempfile.TemporaryFile()
        argv = [Bubblewrap.bwrap, *NAMESPACES, *system_view(Limits().scratch_bytes),
                *parents_traversable(Path(RUNTIME)), "--ro-bind", str(self._runtime), RUNTIME]
        if self.compile_cache:
            argv += ["--ro-bind", str(self.compile_cache), CACHE]
        for capability in CAPABILITIES:
            argv += ["--cap-add", capability]
        argv += ["--chdir", "/", "--", self.python, "-I", "-B", "-u", f"{RUNTIME}/zygote_server.py",
                 str(theirs.fileno())]
        self._process = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=self._log, start_new_session=True,
                                         env=child_environment(Path("/tmp")))
        theirs.close()
        self._socket = ours
        ours.settimeout(START_SECONDS)
        try:
            ready = ours.recv(64)
        except OSError:
            ready = b""
        ours.settimeout(None)
        if ready != b"ready\n":
            self.close()
            raise ForkServerError(f"the fork server did not start: {self._read_log()}")
        return self

    def close(self) -> None:
        with self._lock:
            if self._socket:
                self._socket.close()
                self._socket = None
            if self._process:
                self._process.kill()
                self._process.wait()
                self._process = None
            if self._runtime:
                shutil.rmtree(self._runtime, ignore_errors=True)
                self._runtime = None

    def __enter__(self) -> "ForkServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def peak_memory_bytes(self) -> int | None:
        """The fork server's own peak resident memory (its runs are forks: they share most of it)."""
        with self._lock:
            if not self._socket:
                return None
            self._socket.sendall(b"stats")
            self._socket.settimeout(10)
            try:
                return json.loads(self._socket.recv(4096)).get("max_rss_bytes")
            except (OSError, ValueError):
                return None
            finally:
                self._socket.settimeout(None)

    def _read_log(self) -> str:
        if not self._log:
            return ""
        self._log.seek(0)
        return self._log.read()[-2000:].decode(errors="replace").strip()

    # ---- one run ------------------------------------------------------------------------------------------

    def run_job(self, job: dict, limits: Limits) -> RawRun:
        """Run one harness job in a fresh isolated child of the fork server; always returns.

        A failure of the server itself (dead, or a supervisor that could not set a run up) must not cost the
        student anything: the server is restarted and the run tried again, then run in a fresh sandboxed
        interpreter instead."""
        raw = self._run_once(job, limits)
        if raw is None:
            self._restart()
            raw = self._run_once(job, limits)
        return raw if raw is not None else run_job(job, limits)

    def _run_once(self, job: dict, limits: Limits) -> RawRun | None:
        """The run's RawRun, or None when the fork server failed (not the student's code)."""
        started = time.monotonic()
        raw = RawRun(isolation=self.description)
        uid = UIDS.take()
        pipes = {name: os.pipe() for name in ("job", "output", "channel", "status")}
        ours = {"job": pipes["job"][1], "output": pipes["output"][0], "channel": pipes["channel"][0],
                "status": pipes["status"][0]}
        theirs = [pipes["job"][0], pipes["output"][1], pipes["channel"][1], pipes["status"][1]]
        workdir = f"/tmp/grader-run-{secrets.token_hex(6)}"
        request = {"uid": uid, "workdir": workdir, "environment": child_environment(Path(workdir)),
                   "limits": {"wall_seconds": limits.wall_seconds, "cpu_seconds": int(limits.cpu_seconds),
                              "memory_bytes": limits.memory_bytes, "file_size_bytes": limits.file_size_bytes,
                              "max_processes": limits.max_processes, "scratch_bytes": limits.scratch_bytes}}
        if self.compile_cache:
            request["compilation_cache"] = {"readonly": CACHE, "writable": compile_cache.SANDBOX_PATH}
            job = {**job, "compilation_cache_dir": compile_cache.SANDBOX_PATH}
        status: dict = {}
        try:
            with self._lock:
                if not self._socket:
                    return None
                socket.send_fds(self._socket, [json.dumps(request).encode()], theirs)
            for fd in theirs:
                os.close(fd)
            theirs = []
            writer = threading.Thread(target=_write_all, args=(ours.pop("job"), json.dumps(job).encode()), daemon=True)
            writer.start()
            reader = threading.Thread(target=_read_status, args=(ours.pop("status"), status), daemon=True)
            reader.start()

            def wedged() -> None:  # the supervisor kills at the wall limit; if it has not, restart everything
                raw.killed_at_wall_limit = True
                self._restart()

            pump(ours["output"], ours["channel"], limits, raw, started + limits.wall_seconds + WALL_GRACE_SECONDS,
                 has_exited=lambda: not reader.is_alive(), at_deadline=wedged)
            reader.join(timeout=1)
        except OSError:
            return None
        finally:
            for fd in [*theirs, *ours.values()]:
                try:
                    os.close(fd)
                except OSError:
                    pass
            UIDS.give_back(uid)
            raw.seconds = round(time.monotonic() - started, 3)
        setup_failed = status.get("returncode") == SETUP_FAILED and raw.output_head.startswith(b"sandbox setup failed")
        if (not status and not raw.killed_at_wall_limit) or status.get("error") or setup_failed:
            return None
        raw.returncode = status.get("returncode")
        raw.killed_at_wall_limit = raw.killed_at_wall_limit or bool(status.get("killed_at_wall_limit"))
        raw.cpu_seconds = status.get("cpu_seconds")
        raw.max_rss_bytes = status.get("max_rss_bytes")
        return raw

    def _restart(self) -> None:
        """A run outlived its supervisor's wall limit: replace the whole server (runs in flight end with it)."""
        self.close()
        try:
            self.start()
        except ForkServerError:
            pass  # later runs report that the sandbox failed to start them


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
