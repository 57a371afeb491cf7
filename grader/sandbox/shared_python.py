"""A student's check runs each file in the Python environment the student's `grader` runs in.

On the student's own machine the code is the student's own: the check needs the same runs, worlds and scoring as
the instructor's grade, and a time limit, not isolation from the student. So `share()` (called by the student
wheel's `grader check` and the notebook's `check()`, never by the instructor's batch) records this process's
`sys.path`: every run then imports what this process imports, whatever made JAX importable here (a venv, the user
site, `PYTHONPATH`, conda, a system install, a notebook kernel). Runs still start with `-I` (no startup files, no
environment variables steering the interpreter); the child adopts the list itself (child/import_paths.py).

How runs start in a shared environment (isolation.student_strategy): bubblewrap where it works strongly here (the
fork server too, as root), with these folders shown read-only; else the portable strategy, a plain subprocess of
this Python (sandbox/portable_run.py: Linux, macOS and Windows). `GRADER_PORTABLE_RUNS=1` forces the
portable strategy (tests, or a student whose sandbox tools misbehave).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from grader.common import system

PORTABLE_ENV = "GRADER_PORTABLE_RUNS"
# Where the dynamic loader finds the libraries of a Python built with a shared libpython (HPC modules, some conda
# and hosted installs): without it that Python cannot even start. Passed to a student's check's runs only.
LOADER_VARIABLES = ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "DYLD_FALLBACK_LIBRARY_PATH")
IMPORT_PATHS_FILE = "import_paths.json"     # the name child/import_paths.py reads
_shared: list[list[str]] = []


def share() -> None:
    """From now on, runs of this process import what it imports (its sys.path as it is now)."""
    here = os.path.realpath(os.getcwd())
    paths = []
    for entry in sys.path:
        if not entry or os.path.realpath(entry) == here:   # the working folder: the student's files, never imported
            continue
        if os.path.exists(entry) and entry not in paths:
            paths.append(os.path.abspath(entry))
    _shared[:] = [paths]


def unshare() -> None:
    _shared.clear()


def shared() -> bool:
    return bool(_shared)


def import_paths() -> list[str]:
    return list(_shared[0]) if _shared else []


def portable_forced() -> bool:
    return os.environ.get(PORTABLE_ENV, "").strip().lower() in ("1", "true", "yes")


def loader_environment() -> dict[str, str]:
    """The loader variables of this process, for its runs, when it shares its environment (else nothing). On Windows
    the loader's path is PATH (a conda Python's DLLs are found there)."""
    if not _shared:
        return {}
    names = LOADER_VARIABLES if system.POSIX else ("PATH",)
    return {name: os.environ[name] for name in names if os.environ.get(name)}


def write_import_paths(runtime: Path) -> None:
    """Beside a run's own modules: the list its child adopts (nothing when this process shares no environment)."""
    if _shared:
        path = runtime / IMPORT_PATHS_FILE
        path.write_text(json.dumps(_shared[0]), encoding="utf-8")
        os.chmod(path, 0o644)


def folders_to_show() -> list[Path]:
    """The shared folders that exist as directories (bubblewrap shows each read-only)."""
    return [Path(p).resolve() for p in import_paths() if os.path.isdir(p)]
