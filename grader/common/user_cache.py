"""Where a user's own runs keep what they measured (reference facts, warmed compile cache), keyed by versions."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/jax-course-grader` (else ~/.cache/...): shared by `grader check` and `otter run`."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "jax-course-grader"
