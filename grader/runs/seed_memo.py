"""The suitable seed a requested number maps to, remembered on disk between commands.

Why: mapping a requested seed (`--variant-seed`, otter's `seed`, an autograder zip's fixed seed) to its world means
testing seeds in a fixed sequence until the assignment's `suitable_seed` accepts one; an assignment that accepts one
seed in several thousand makes that seconds of work, which every fresh process (each `otter run`, each Gradescope
submission, each command) would repeat for the same answer. The answer is a pure function of the assignment
(its fingerprint covers the oracle and settings) and the grader's code, so it is kept under that key in the cache
folder, beside the warm state. A missing, unreadable or foreign file only means computing it again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from grader.common.code_digest import grader_code_digest
from grader.common.files import atomic_write
from grader.common.private_folder import UnsafeFolder
from grader.common.user_cache import private_cache_dir


def _path(assignment_id: str, fingerprint: str) -> Path | None:
    """Where the answers are kept; None when the cache folder is not the user's alone (then nothing is read)."""
    key = hashlib.sha256(f"{assignment_id} {fingerprint} {grader_code_digest()}".encode()).hexdigest()[:16]
    try:
        return private_cache_dir() / "suitable-seeds" / f"{assignment_id}-{key}.json"
    except (OSError, UnsafeFolder):
        return None


def _read(path: Path) -> dict[str, int]:
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in kept.items() if isinstance(k, str) and isinstance(v, int)} if isinstance(kept, dict) else {}


def remembered(assignment_id: str, fingerprint: str, requested: int, rejected: frozenset[int],
               compute: Callable[[], int]) -> int:
    """The seed `requested` maps to (with `rejected` passed over): kept on disk, else `compute()`d and kept."""
    path = _path(assignment_id, fingerprint)
    if path is None:
        return compute()
    name = f"{requested}:{','.join(str(s) for s in sorted(rejected))}"
    found = _read(path).get(name)
    if found is not None:
        return found
    seed = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({**_read(path), name: seed}, sort_keys=True))   # others' entries kept
    except OSError:
        pass   # a cache that cannot be written costs time, never a result
    return seed

