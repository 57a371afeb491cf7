"""Choose how runs are started: the fork server where it can work, else a fresh sandboxed interpreter per run.

The fork server imports JAX before it answers, about a second of CPU: `ServerStart` does that in the background,
beside the warm-up's own runs, and callers wait for it only when their first run is due.

The server is started, and stopped, by one thread that lives as long as it does: bubblewrap runs with
`--die-with-parent`, and the kernel's parent-death signal follows the *thread* that started a process, so a server
started by a thread that then ended would be killed at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from grader.runs.jobs import Runner
from grader.sandbox.fork_server import ForkServer, ForkServerError


class ServerStart:
    """A fork server starting in the background over `compile_cache` (a folder of compiled programs, or None)."""

    def __init__(self, compile_cache: Path | None, note: Callable[[str], None],
                 ready: Callable[[float], None] | None = None):
        self._note = note
        self._ready = ready
        self._server: ForkServer | None = None
        self._started = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, args=(compile_cache,), name="fork-server", daemon=True)
        self._thread.start()

    def _keep(self, compile_cache: Path | None) -> None:
        """Start the server, keep this thread (its parent) alive until `close`, then stop it."""
        started = time.monotonic()
        try:
            self._server = ForkServer(compile_cache).start()
        except ForkServerError as error:
            self._note(f"Fast runs unavailable ({error}); each run starts its own interpreter, isolated as the "
                       "'Sandbox:' line says.")
        except Exception as error:  # noqa: BLE001 -- whatever stops the server, fresh interpreters still grade
            self._note(f"Fast runs unavailable ({type(error).__name__}: {error}); each run starts its own "
                       "interpreter, isolated as the 'Sandbox:' line says.")
        finally:
            self._started.set()
        if self._server is None:
            return
        try:
            if self._ready:
                self._ready(time.monotonic() - started)
        finally:
            self._stop.wait()
            self._server.close()

    def runner(self) -> Runner | None:
        """The started server's `run_job` (None: use `sandbox.run_job`); waits for the start to finish."""
        self._started.wait()
        return self._server.run_job if self._server else None

    @property
    def server(self) -> ForkServer | None:
        self._started.wait()
        return self._server

    def close(self) -> None:
        """Stop the server (after its start has finished: nothing is left running)."""
        self._stop.set()
        self._thread.join()
