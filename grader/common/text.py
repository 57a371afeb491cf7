"""Small text helpers: a student's run text shortened for a sentence of feedback without cutting a word in half,
and whether a piece of source is Python."""

from __future__ import annotations

import ast
import re


def clip(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters: whitespace runs (newlines too) become one space, and a longer
    text ends at the last whole word that fits, followed by "…"."""
    flat = re.sub(r"\s+", " ", str(text)).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[:max(1, limit - 1)]
    if flat[len(cut)] != " " and " " in cut:
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


def parses(code: str, mode: str = "exec") -> bool:
    """Python reads `code` as statements (mode "exec") or as one expression ("eval")."""
    try:
        ast.parse(code, mode=mode)
    except (SyntaxError, ValueError):
        return False
    return True
