"""`ast.parse` for the grader's threads, one at a time.

CPython before 3.12.1 and 3.11.8 keeps the AST constructor's recursion depth in state shared by every thread of
the interpreter (python/cpython gh-106905): two threads building trees at once can make either raise
`SystemError: AST constructor recursion depth mismatch`. A batch parses in several threads at once (the workers'
intake, the similarity report's tokenising thread, the world's verification), and once such an error failed the
verification of a batch's world. Every parse of the grader's own goes through here: one lock makes them take turns
(a parse costs milliseconds), and a mismatch raised all the same (a third party's parse in another thread) is tried
once more.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()
MISMATCH = "recursion depth mismatch"


def ast_parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **options) -> Any:
    """`ast.parse(source, filename, mode, **options)` (a Module for "exec"), never at the same time as another
    thread's through here."""
    with _LOCK:
        try:
            return ast.parse(source, filename, mode, **options)
        except SystemError as error:
            if MISMATCH not in str(error):
                raise
            return ast.parse(source, filename, mode, **options)
