"""Where the grader keeps what outlives one command: the warm state (reference facts, compiled programs), images.

One folder for every command of one user: `$GRADER_CACHE_DIR` when set (the `--cache-dir` option of `grade`,
`check` and `validate` sets it, so child commands such as `otter run` inherit it), else
`$XDG_CACHE_HOME/jax-course-grader`, else `~/.cache/jax-course-grader`. It is the user's alone (0700), or refused
before anything in it is read (`private_cache_dir`, common/private_folder.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from grader.common.private_folder import private_folder

CACHE_DIR_ENV = "GRADER_CACHE_DIR"


def user_cache_dir() -> Path:
    """The cache folder in force now (an absolute path: sandboxes bind it by path)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return named_cache_dir() or Path(base).expanduser().absolute() / "jax-course-grader"


def private_cache_dir() -> Path:
    """The cache folder in force now, made 0700 where missing; raises UnsafeFolder (nothing read) when another user
    could write it."""
    return private_folder(user_cache_dir())


def named_cache_dir() -> Path | None:
    """The folder named by `$GRADER_CACHE_DIR` (or `--cache-dir`), None when nobody named one."""
    named = os.environ.get(CACHE_DIR_ENV)
    return Path(named).expanduser().absolute() if named else None


def use_cache_dir(folder: Path) -> None:
    """Make `folder` the cache for this process and every command it starts (what `--cache-dir` does)."""
    os.environ[CACHE_DIR_ENV] = str(Path(folder).expanduser().absolute())
