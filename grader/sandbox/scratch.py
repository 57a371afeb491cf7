"""The temporary folders a grader makes on the host for its sandboxes (a run's working dir, a fork server's copy
of the harness), named after the grader's pid so that none outlives its grader.

Each is removed when its run or server ends. A grader killed outright (SIGKILL, an OOM kill, a lost machine) cannot
do that; its sandboxes die with it (bwrap's --die-with-parent), and the first folder a later grader makes on this
machine removes the folders of graders that are no longer alive.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from grader.common import system

KINDS = ("run", "zygote", "probe")
NAME = re.compile(rf"grader-(?:{'|'.join(KINDS)})-(\d+)-.+")
_swept: list[bool] = []
_lock = threading.Lock()


def remove_folder(folder: Path) -> None:
    """Remove a folder made here, whatever is in it (on Windows a read-only file, such as a run's copy of the
    submission, must be made writable first)."""
    if not system.POSIX:
        for base, _, files in os.walk(folder):
            for name in files:
                try:
                    os.chmod(os.path.join(base, name), stat.S_IWRITE)
                except OSError:
                    pass
    shutil.rmtree(folder, ignore_errors=True)


def make_temp_dir(kind: str) -> Path:
    """A new private folder `grader-<kind>-<pid>-...` in the temp dir (after a sweep, once per process)."""
    assert kind in KINDS, kind
    with _lock:
        if not _swept:
            _swept.append(True)
            remove_stale()
    return Path(tempfile.mkdtemp(prefix=f"grader-{kind}-{os.getpid()}-"))


def remove_stale(folder: Path | None = None) -> list[Path]:
    """Remove the folders of graders that are no longer alive; returns what was removed."""
    folder = Path(folder or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = NAME.fullmatch(entry.name)
        if match and not entry.is_symlink() and entry.is_dir() and not grader_alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def ours(folder: Path | None = None, pid: int | None = None) -> list[Path]:
    """The folders grader `pid` (default: this process) has in the temp dir now (for tests: none after a batch)."""
    folder = Path(folder or tempfile.gettempdir())
    pid = os.getpid() if pid is None else pid
    return sorted(entry for entry in folder.iterdir()
                  if (match := NAME.fullmatch(entry.name)) and int(match.group(1)) == pid)


def grader_alive(pid: int) -> bool:
    """Whether the grader whose pid a leftover carries may still be running (a reused pid errs on the safe side).
    Without POSIX (Windows, where `os.kill(pid, 0)` would send a Ctrl+C) it may always be: nothing is removed."""
    if not system.POSIX:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
