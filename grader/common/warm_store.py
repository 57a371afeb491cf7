"""Storage of a warm state that many commands share: parts that are built once, published whole, never changed.

A warm-state entry is a folder. Each part in it is a JSON document `<part>.json` (what was measured, the key of
the entry it belongs to, a checksum, and the list of the part's files with their sizes and hashes) and, for parts
with files, a folder `<part>/` (compiled programs). Why it is shaped like this:

- Commands run at the same time (two batches, pytest workers, `grader check` during a batch). A part is built
  under an exclusive lock of its own, in a staging folder, then renamed into place; its JSON is written last,
  atomically. A reader therefore sees a part whole or not at all, and never takes a lock.
- A part is never modified after it is published: runs copy its files while other commands use it. A later part
  (a variant seed's programs) starts as a copy of an earlier one's files, so its builder cannot reach them.
- Nothing is trusted on its word. A part whose JSON is torn, whose checksum or key does not match, or whose files
  differ from the list (missing, extra, other sizes or hashes) is treated as absent and built again.
- A batch gives its fork server a *view*: its own folder of hard links to the parts it uses, so a part published
  while the batch runs (the variant seed's) can be added without touching anything another command sees.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.common.file_lock import exclusive
from grader.common.files import atomic_write

FORMAT = 1
STALE_STAGING_SECONDS = 3600          # a staging folder this old was left by a killed build
STALE_VIEW_SECONDS = 24 * 3600        # a view this old was left by a killed batch


@dataclass(frozen=True)
class Part:
    name: str
    payload: dict[str, Any]
    folder: Path | None               # None: a part without files (no compiled programs where runs cannot use them)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(folder: Path) -> dict[str, list]:
    """Relative path -> [size, sha256] of every regular file under `folder`."""
    return {p.relative_to(folder).as_posix(): [p.stat().st_size, _digest(p)]
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def _checksum(key: str, name: str, payload: Any, files: Any) -> str:
    return hashlib.sha256(json.dumps([key, name, payload, files], sort_keys=True).encode()).hexdigest()


def _remove(path: Path) -> None:
    """Move aside, then delete: a half-deleted folder is never seen under the part's name."""
    if not path.exists():
        return
    trash = path.with_name(f".trash-{path.name}-{secrets.token_hex(4)}")
    try:
        path.rename(trash)
    except OSError:
        trash = path
    shutil.rmtree(trash, ignore_errors=True)


class WarmStore:
    """The parts of one warm-state entry (`folder`), all belonging to `key`."""

    def __init__(self, folder: Path, key: str):
        self.folder = Path(folder).absolute()
        self.key = key

    # ---- reading --------------------------------------------------------------------------------------

    def read(self, name: str, need_files: bool, accept: Callable[[dict[str, Any]], bool] | None = None) -> Part | None:
        """The published part, or None when it is missing, stale or corrupt, has no files where files are needed,
        or its payload is not what the reader needs (`accept`)."""
        try:
            document = json.loads((self.folder / f"{name}.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            return None
        payload, files = document.get("payload"), document.get("files")
        if (document.get("key") != self.key or document.get("part") != name or not isinstance(payload, dict)
                or document.get("sha256") != _checksum(self.key, name, payload, files)):
            return None
        if accept is not None and not accept(payload):
            return None
        if files is None:
            return None if need_files else Part(name, payload, None)
        folder = self.folder / name
        try:
            if not folder.is_dir() or _listing(folder) != files:
                return None
        except OSError:
            return None
        return Part(name, payload, folder)

    def parts(self, prefix: str) -> list[Part]:
        """Every valid part named `prefix*` (without files), most recently used first."""
        try:
            documents = sorted(self.folder.glob(f"{prefix}*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            return []
        found = [self.read(document.name[: -len(".json")], False) for document in documents]
        return [part for part in found if part is not None]

    # ---- building -------------------------------------------------------------------------------------

    def build(self, name: str, make: Callable[[Path | None], dict[str, Any]], with_files: bool,
              base: Part | None = None, accept: Callable[[dict[str, Any]], bool] | None = None) -> Part:
        """The part, built by `make` unless a valid one is published (by us or a command that held the lock first).

        `make(staging)` fills the staging folder (None when `with_files` is False), which starts as a copy of
        `base`'s files (a copy, not links: what the builder writes can never reach a published part), and returns
        the payload. Whatever it raises leaves nothing published."""
        with self.lock(name):
            found = self.read(name, with_files, accept)
            if found is not None:
                return found
            self._clean_staging()
            staging = None
            if with_files:
                staging = self.folder / "staging" / f"{name}-{secrets.token_hex(6)}"
                staging.mkdir(parents=True)
                if base is not None and base.folder is not None:
                    link_files(base.folder, staging, copy=True)
            try:
                payload = make(staging)
                files = _listing(staging) if staging is not None else None
                if staging is not None:
                    _remove(self.folder / name)        # a corrupt or unlisted leftover under the part's name
                    staging.rename(self.folder / name)
                    staging = None
                document = {"format": FORMAT, "key": self.key, "part": name, "payload": payload, "files": files,
                            "sha256": _checksum(self.key, name, payload, files)}
                atomic_write(self.folder / f"{name}.json", json.dumps(document, indent=1, sort_keys=True))
            finally:
                if staging is not None:
                    shutil.rmtree(staging, ignore_errors=True)
            built = self.read(name, with_files)
            if built is None:
                raise OSError(f"the warm state part {self.folder / name} could not be read back after it was written")
            return built

    @contextmanager
    def lock(self, name: str, blocking: bool = True) -> Iterator[bool]:
        """An exclusive lock of one part (released when the holder exits, even when it is killed)."""
        with exclusive(self.folder / "locks" / f"{name}.lock", blocking) as held:
            yield held

    def _clean_staging(self) -> None:
        for path in (self.folder / "staging").glob("*") if (self.folder / "staging").is_dir() else []:
            try:
                if time.time() - path.stat().st_mtime > STALE_STAGING_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass

    # ---- housekeeping ---------------------------------------------------------------------------------

    def touch(self, part: Part) -> None:
        """Mark a part used now (pruning keeps the recently used ones)."""
        try:
            os.utime(self.folder / f"{part.name}.json")
        except OSError:
            pass

    def prune(self, prefix: str, keep: int, spare: frozenset[str] = frozenset()) -> list[str]:
        """Remove all but the `keep` most recently used parts named `prefix*` (never those in `spare`, never one
        that another command is building); returns the names removed."""
        documents = sorted(self.folder.glob(f"{prefix}*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        removed = []
        for document in documents[keep:]:
            name = document.name[: -len(".json")]
            if name in spare:
                continue
            with self.lock(name, blocking=False) as held:
                if not held:
                    continue
                document.unlink(missing_ok=True)   # first: from here on readers see the part as missing
                _remove(self.folder / name)
                removed.append(name)
        return removed


def link_files(source: Path, target: Path, copy: bool = False) -> int:
    """Hard-link (or `copy`) every file of `source` into `target` (copied where links cannot be made); returns how
    many files were added."""
    added = 0
    for path in source.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        destination = target / path.relative_to(source)
        if destination.exists():
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            if copy:
                shutil.copyfile(path, destination)
            else:
                os.link(path, destination)
        except FileExistsError:
            continue
        except OSError:
            shutil.copyfile(path, destination)
        added += 1
    return added


class View:
    """A batch's own folder of hard links to the parts it uses; runs read it while parts are added."""

    def __init__(self, store: WarmStore):
        views = store.folder / "views"
        views.mkdir(parents=True, exist_ok=True)
        for old in views.iterdir():
            try:
                if time.time() - old.stat().st_mtime > STALE_VIEW_SECONDS:
                    shutil.rmtree(old, ignore_errors=True)
            except OSError:
                pass
        self.folder = views / f"{os.getpid()}-{secrets.token_hex(4)}"
        self.folder.mkdir()

    def add(self, part: Part) -> None:
        """Each file appears whole (a link is made at once): a run that starts now sees it or not, never half."""
        if part.folder is not None:
            link_files(part.folder, self.folder)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def prune_entries(root: Path, prefix: str, current: Path, keep: int, max_age_seconds: float) -> list[Path]:
    """Remove entries `prefix*` under `root` other than `current` that were neither among the `keep` most
    recently used nor used within `max_age_seconds` (entries of older grader code or JAX versions)."""
    def used(entry: Path) -> float:
        try:
            return (entry / "used").stat().st_mtime
        except OSError:
            return entry.stat().st_mtime

    entries = sorted((p for p in root.glob(f"{prefix}*") if p.is_dir() and p != current), key=used, reverse=True)
    removed = []
    for entry in entries[keep:]:
        if time.time() - used(entry) > max_age_seconds:
            _remove(entry)
            removed.append(entry)
    return removed


def mark_used(entry: Path) -> None:
    entry.mkdir(parents=True, exist_ok=True)
    (entry / "used").touch()
