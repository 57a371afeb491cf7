"""Files written atomically (a reader never sees a torn file), and clean-up of what a killed write left."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from grader.common.safe_text import json_visible, visible
from grader.common.text import utf8

TEXT_SUFFIXES = (".md", ".txt", ".csv", ".html", ".htm", ".log")


def safe_for(path: Path, text: str) -> str:
    """Text as it may be written to `path` (safe_text.py): JSON and TOML with their own `\\u` escapes (valid in both, the
    same data), other text files visibly."""
    if path.suffix in (".json", ".toml"):
        return json_visible(text)
    return visible(text) if path.suffix in TEXT_SUFFIXES else text


def atomic_write(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Write to a temp file in the same folder, then rename: a reader never sees a torn file. Text is written as
    UTF-8 whatever it holds (a lone surrogate becomes U+FFFD): no student text can fail a write, and no control
    character a student supplied reaches a text file raw (`safe_for`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".write-", suffix=".tmp")   # short, whatever the name
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(utf8(safe_for(path, data)) if isinstance(data, str) else data)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def remove_torn_writes(out: Path) -> int:
    """Delete temp files that `atomic_write` left when a previous run was killed mid-write; returns how many.

    They are named `.<target>.<random>.tmp`, so a finished file is never touched."""
    removed = 0
    for path in out.rglob(".*.tmp") if out.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def write_if_changed(path: Path, data: str | bytes, mode: int | None = None) -> bool:
    """`atomic_write` unless the file already holds exactly `data` (a re-run rewrites nothing it need not, and
    pays no fsync for it); returns whether it wrote."""
    encoded = utf8(safe_for(path, data)) if isinstance(data, str) else data
    try:
        if path.read_bytes() == encoded and (mode is None or path.stat().st_mode & 0o777 == mode):
            return False
    except OSError:
        pass
    atomic_write(path, encoded, mode)
    return True
