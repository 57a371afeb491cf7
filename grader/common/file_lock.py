"""An exclusive lock held on a file, released when its holder exits (even when it is killed), on every system.

POSIX: `fcntl.flock` of the open file. Windows: `msvcrt.locking` of its first byte (a lock the system also drops
with the process). Which one is decided by the one platform check (common/system.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from grader.common import system

RETRY_SECONDS = 0.05     # Windows: how often a blocking lock tries again (msvcrt's own blocking mode gives up)


@contextmanager
def exclusive(path: Path, blocking: bool = True) -> Iterator[bool]:
    """Hold the lock of `path` (made where missing) while the block runs; yields False, holding nothing, when
    `blocking` is False and another holder has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        if not _take(handle, blocking):
            yield False
            return
        try:
            yield True
        finally:
            _release(handle)


def _take(handle: IO[Any], blocking: bool) -> bool:
    if system.POSIX:
        import fcntl
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True
    import msvcrt  # Windows
    while True:
        handle.seek(0)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)   # type: ignore[attr-defined]
            return True
        except OSError:
            if not blocking:
                return False
        time.sleep(RETRY_SECONDS)


def _release(handle: IO[Any]) -> None:
    if system.POSIX:
        import fcntl
        fcntl.flock(handle, fcntl.LOCK_UN)
        return
    import msvcrt  # Windows
    handle.seek(0)
    msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)   # type: ignore[attr-defined]
