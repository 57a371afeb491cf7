"""One rule for where the results are, for every command that reads them (`adjust`, `explain`): `--out` when given,
else the folder the last `grader grade` of this user wrote (remembered in the user cache), else `./results`. Each
command says in its first line which folder it reads and why, so a newcomer never reads the wrong class."""

from __future__ import annotations

import difflib
from pathlib import Path

from grader.common.files import atomic_write
from grader.common.private_folder import UnsafeFolder
from grader.common.user_cache import private_cache_dir

NAME = "last-results.txt"
RECORDS = ".grader-results"   # the marker `grader grade` leaves in every results folder it writes


def remember(out: Path) -> None:
    """Called by `grader grade` once its results folder is written; a failure to remember costs nothing."""
    try:
        atomic_write(private_cache_dir() / NAME, str(Path(out).resolve()) + "\n")
    except (OSError, UnsafeFolder):
        pass


def results_folder(given: Path | None) -> tuple[Path | None, str]:
    """(the results folder to read, why that one), or (None, what to do) when there is none to read."""
    if given is not None:
        if not given.is_dir():   # a typo in --out is said as one, never as "grade the class first"
            problem = "is not a folder" if given.exists() else "does not exist"
            return None, f"{given} {problem}{_closest(given)}: give --out the folder `grader grade` wrote"
        return given, "given with --out"
    try:   # a cache others could write is not read: it could name their folder
        last = Path((private_cache_dir() / NAME).read_text().strip())
    except (OSError, ValueError, UnsafeFolder):
        last = None
    if last is not None and (last / RECORDS).exists():
        return last, "the last `grader grade` wrote it; --out reads another"
    if (Path("results") / RECORDS).exists():
        return Path("results"), "./results; --out reads another"
    return None, ("no results folder found: give --out OUT (`grader grade SUBMISSIONS` writes SUBMISSIONS/../results "
                  "unless told --out)")


def _closest(given: Path) -> str:
    """The results folder beside `given` whose name is nearest, as " (did you mean examples/results?)"; else ""."""
    try:
        near = [p for p in given.parent.iterdir() if p.is_dir() and (p / RECORDS).exists()]
    except OSError:
        return ""
    names = difflib.get_close_matches(given.name, [p.name for p in near], n=1, cutoff=0.5)
    return f" (did you mean {given.parent / names[0]}?)" if names else ""
