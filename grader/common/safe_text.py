"""Student-supplied text made safe for where it goes: the one place every terminal line and output file passes.

A student's file can carry control characters into what the grader prints and writes: a folder name, a string
value, its printed output, a roster's names. Raw, ESC and BEL sequences redraw the instructor's terminal (a forged
"please adjust" line, a new window title) and bidirectional overrides reorder what a text file shows. The grader
itself writes none of them, so every one met on the way out is the student's and is shown as a visible escape:
`\\x1b`, `\\x07`, `\\u202e`. Newlines and tabs stay. JSON keeps its data: there the same characters become JSON's
own `\\u` escapes, which decode to the same strings.

`atomic_write` (files.py) applies this to every text file by its suffix; the command-line entry points wrap
stdout and stderr (`visible_terminal`).
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

# C0 controls but tab, newline and a carriage return that ends a line (CRLF), DEL, C1 controls, and the
# bidirectional marks, embeddings, overrides and isolates. A lone CR redraws a terminal line: it is shown.
CONTROLS = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
UNSAFE = re.compile(CONTROLS + "|\r(?!\n)")
# In JSON and TOML a raw CR can only be whitespace between tokens (inside a string it is always escaped already).
UNSAFE_IN_DATA = re.compile(CONTROLS)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every unsafe character shown as a visible escape (terminals, text, CSV, Markdown, HTML)."""
    return UNSAFE.sub(_escape, text)


def json_visible(text: str) -> str:
    """JSON text with every unsafe character as JSON's own `\\uXXXX` escape (the same data, decoded)."""
    return UNSAFE_IN_DATA.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


class VisibleStream(io.TextIOBase):
    """A text stream that writes to `stream` with every unsafe character made visible."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible(text))
        return len(text)

    def flush(self) -> None:
        # A wrapper outliving its stream (pytest's capture, closed before interpreter exit) has nothing to flush:
        # IOBase's finaliser flushes on close, and an error there is printed as "Exception ignored".
        if not getattr(self.stream, "closed", False):
            self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:   # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")

    def fileno(self) -> int:
        return self.stream.fileno()


@contextmanager
def visible_terminal() -> Iterator[None]:
    """stdout and stderr made safe for a command's life (restored after it)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = VisibleStream(saved[0]), VisibleStream(saved[1])
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = saved
