"""Small text helpers: text made writable (no lone surrogate), a student's run text shortened for a sentence of
feedback without cutting a word in half, and whether a piece of source is Python."""

from __future__ import annotations

import re
from typing import Any

from grader.common.python_ast import ast_parse

SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def clean(text: str) -> str:
    """`text` as valid Unicode: each lone surrogate (which no UTF-8 writer accepts: `"\\ud800"` from a run's JSON,
    a notebook or a file name decoded with surrogateescape) becomes U+FFFD. Linear; a clean text is returned as is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return SURROGATE.sub(REPLACEMENT, text)
    return text


def utf8(text: str) -> bytes:
    """`text` encoded as UTF-8, whatever it holds (see `clean`)."""
    return clean(text).encode("utf-8")


def clean_data(value: Any) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings, numbers) with every string in it, keys too, `clean`ed: a
    record read back from disk or about to be written. Linear in its size; other objects are left as they are."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: clean_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_data(item) for item in value]
    if isinstance(value, tuple):
        return tuple(clean_data(item) for item in value)
    return value


_WHITESPACE = re.compile(r"\s+")


def clip(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters: whitespace runs (newlines too) become one space, and a longer
    text ends at the last whole word that fits, followed by "…"."""
    text = str(text)
    if len(text) <= limit and text.isprintable() and "  " not in text and text == text.strip(" "):
        return text   # already one line: a printable str holds no whitespace but ASCII spaces (the common case)
    flat = _WHITESPACE.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[:max(1, limit - 1)]
    if flat[len(cut)] != " " and " " in cut:
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


def parses(code: str, mode: str = "exec") -> bool:
    """Python reads `code` as statements (mode "exec") or as one expression ("eval")."""
    try:
        ast_parse(code, mode=mode)
    except (SyntaxError, ValueError):
        return False
    return True


def cut(text: str, limit: int) -> str:
    """`text` as it is when at most `limit` characters, else its first `limit` characters and "… cut, N characters"
    (N: how many were dropped). Lines are kept: this bounds a text a record or a page holds, it does not reflow it."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… cut, {len(text) - limit} characters"
