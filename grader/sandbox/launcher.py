"""The thread that starts long-lived sandboxes (fork servers), for as long as their owner lives.

bwrap --die-with-parent kills its sandbox when the thread that started it ends: the kernel's parent-death signal
follows the thread, not the process. A sandbox meant to outlive one submission (a fork server, which any worker
thread may find dead and replace) must therefore be started from a thread that lives as long as its owner, never
from the worker thread that happened to need it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Launcher(Generic[T]):
    """Runs `launch` on one long-lived thread whenever any thread asks; `stop` when the owner closes."""

    def __init__(self, launch: Callable[[], T], name: str = "sandbox-launcher"):
        self._launch = launch
        self._requests: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            request = self._requests.get()
            if request is None:
                return
            done, outcome = request
            try:
                outcome.append(self._launch())
            except BaseException as error:  # handed to the caller, who decides; this thread must live on
                outcome.append(error)
            done.set()

    def launch(self) -> T:
        """What `launch` returned, run on the launcher thread (raises what it raised)."""
        done, outcome = threading.Event(), list[T | BaseException]()
        self._requests.put((done, outcome))
        done.wait()
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def stop(self) -> None:
        self._requests.put(None)
        self._thread.join()
