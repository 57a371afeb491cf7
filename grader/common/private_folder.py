"""A folder the grader keeps between commands is this user's alone (0700), or it is refused before anything in it
is read.

The cache folder holds what a grade rests on: the reference's facts, the verdicts on worlds, the stock of variant
seeds drawn ahead and compiled programs that every run reads. Its checksums are plain sha256 that anyone can
recompute, so they prove a part whole, never who wrote it: only the folder's owner and mode can prove that. Another
user who can write the folder (or one above it) could plant a world a class is then graded in. So before a command
reads or writes its cache, `private_folder` makes the folder (0700, the missing folders above it too) or checks the
one that is there, and refuses, in one sentence naming the owner or mode and the fix, a folder that is:

- not owned by the grader's uid;
- writable by group or others, or below a folder that is (without the sticky bit: its other writers can rename our
  folder away and put theirs in its place);
- below a sticky shared folder (`/tmp`) with no per-user part, where the grader names that folder: the cache
  itself, or a folder the grader makes now, directly in the shared folder names neither the user nor the uid
  (`/tmp/grader-cache` can be made first by anyone on a shared node; `/tmp/grader-cache-alice` is the user's own, and
  refused unless it is). A folder already there that the user owns and no one else can write (a checkout in
  `/tmp/course`, whose build folder holds a cache) is the user's: its name proves nothing more.

On systems without POSIX owners and modes (Windows) there is nothing to check, and nothing is refused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from grader.common import system

PRIVATE_MODE = 0o700


class UnsafeFolder(Exception):
    """A cache or warm-state folder others could write: refused, nothing in it read (the message is one sentence with
    the fix)."""


def private_folder(folder: Path, what: str = "cache folder") -> Path:
    """`folder`, absolute, made 0700 where missing and checked to be this user's alone; raises UnsafeFolder."""
    folder = Path(folder).expanduser().absolute()
    if not _posix():
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    made = _make(folder)
    problem = unsafe_reason(folder, what, named={folder, *made})
    if problem:
        for path in made:   # deepest first, all still empty: a refused name is not left for the next command to find
            try:
                path.rmdir()
            except OSError:
                break
        raise UnsafeFolder(problem)
    return folder


def unsafe_reason(folder: Path, what: str = "cache folder", named: set[Path] | None = None) -> str | None:
    """Why `folder` (which exists) is not this user's alone, as one sentence with the fix; None when it is. `named`:
    the folders the grader chose the name of (the folder itself, those it just made), which need a per-user part
    where they sit directly in a sticky shared folder."""
    named = {Path(os.path.realpath(path)) for path in (named or {folder})}
    me = os.geteuid()
    resolved = Path(os.path.realpath(folder))
    fix = _fix()
    try:
        info = os.stat(resolved)
    except OSError as error:
        return f"The {what} {folder} cannot be read ({error.strerror}): {fix}."
    if not stat.S_ISDIR(info.st_mode):
        return f"The {what} {folder} is not a folder: {fix}."
    if info.st_uid != me:
        return (f"The {what} {folder} belongs to {_owner(info.st_uid)}, not to you ({_owner(me)}), so another user "
                f"could have planted what the grader would read there: {fix}.")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"The {what} {folder} is writable by {_writers(info.st_mode)}, who could plant what the grader "
                f"would read there: run `chmod 700 {folder}` if only you ever wrote it, else {fix}.")
    for parent, child in _ancestors(resolved):
        try:
            above = os.stat(parent)
        except OSError:
            continue
        if above.st_uid not in (me, 0):
            return (f"The {what} {folder} is inside {parent}, which belongs to {_owner(above.st_uid)}, who could "
                    f"replace it: {fix}.")
        if not above.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            continue
        if not above.st_mode & stat.S_ISVTX:
            return (f"The {what} {folder} is inside {parent}, which {_writers(above.st_mode)} can write, so they "
                    f"could replace it: {fix}.")
        if child in named and not _names_user(child.name, me):
            return (f"The {what} {folder} is inside {child}, directly under the shared folder {parent}, and that "
                    f"name has no per-user part (another user could have made it first): {fix}.")
        if os.stat(child).st_uid != me:
            return (f"The {what} {folder} is inside {child}, which belongs to {_owner(os.stat(child).st_uid)}: "
                    f"{fix}.")
    return None


def _make(folder: Path) -> list[Path]:
    """Each missing folder made 0700 (os.makedirs gives the folders above the last the umask's mode); those made."""
    missing: list[Path] = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=PRIVATE_MODE)
        except FileExistsError:
            continue   # another command made it at the same moment: checked below like any folder found
        os.chmod(path, PRIVATE_MODE)   # whatever the umask
    return missing


def _ancestors(folder: Path) -> list[tuple[Path, Path]]:
    """(parent, child) from the folder up to the root, the folder's own parent first."""
    pairs = []
    child = folder
    while child.parent != child:
        pairs.append((child.parent, child))
        child = child.parent
    return pairs


def _names_user(name: str, uid: int) -> bool:
    """`name` holds the user's name or uid as a part of its own (`grader-alice`, `pytest-of-alice`, `1000`)."""
    tokens = {token for token in _split(name.lower()) if token}
    return str(uid) in tokens or _user_name(uid).lower() in tokens


def _split(name: str) -> list[str]:
    out, word = [], ""
    for char in name:
        if char.isalnum():
            word += char
        else:
            out.append(word)
            word = ""
    return [*out, word]


def _user_name(uid: int) -> str:
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _owner(uid: int) -> str:
    name = _user_name(uid)
    return f"uid {uid}" if name == str(uid) else f"{name} (uid {uid})"


def _writers(mode: int) -> str:
    return " and ".join(who for who, bit in (("its group", stat.S_IWGRP), ("every user", stat.S_IWOTH)) if mode & bit)


def _fix() -> str:
    user = _user_name(os.geteuid())
    home_cache = Path("~/.cache/jax-course-grader")
    return (f"name a folder of your own with --cache-dir or $GRADER_CACHE_DIR (such as {home_cache}, or "
            f"{Path(os.sep, 'tmp', 'grader-cache-' + user)} on a machine without a home)")


def _posix() -> bool:
    return system.POSIX
