"""A digest of the installed grader's own files: the "grader version" of anything cached across commands.

`__version__` stays "0.1.0" while the code changes under it; a cache keyed by it would trust a warm state that
other code built. This digest changes with any file of the package (code, child code, templates).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from grader import PACKAGE_DIR

SUFFIXES = (".py", ".j2")


@lru_cache(maxsize=1)
def grader_code_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
