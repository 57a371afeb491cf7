"""How configuration problems name things: lists of allowed names, and the closest spelling."""

from __future__ import annotations

import difflib
from typing import Any


def names(values: Any) -> str:
    return ", ".join(str(v) for v in values) or "none"


def spelling(key: str, allowed: Any) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
