"""Batch progress for people: a bar with an ETA on a terminal, one plain line per submission elsewhere (logs, CI)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from grader.model.record import Record


class Progress:
    """Told about notes and finished submissions by `batch.grade_folder`; decides how to show them."""

    def __init__(self, stream: TextIO | None = None, terminal: bool | None = None,
                 write: Callable[[str], None] | None = None):
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty() if terminal is None and write is None else bool(terminal)
        self._write = write
        self.total = 0
        self.done = 0
        self.started = time.monotonic()
        self._bar_shown = False

    @classmethod
    def lines(cls, write: Callable[[str], None]) -> Progress:
        """Plain lines through `write` (tests pass `lambda line: None`)."""
        return cls(write=write, terminal=False)

    def note(self, text: str) -> None:
        self._clear_bar()
        self._line(text)

    def start(self, total: int) -> None:
        self.total, self.done, self.started = total, 0, time.monotonic()
        self._draw()

    def advance(self, record: Record) -> None:
        self.done += 1
        if self.terminal:
            self._draw()
        else:
            self._line(f"[{self.done}/{self.total}] {record['submission']}: {record['score']:g}/{record['max_score']:g} "
                       f"({record['status']})")

    def finish(self) -> None:
        self._clear_bar()

    def eta_seconds(self) -> float | None:
        if not self.done or self.done >= self.total:
            return None
        return (time.monotonic() - self.started) / self.done * (self.total - self.done)

    def _draw(self) -> None:
        if not self.terminal or not self.total:
            return
        width = 30
        filled = int(width * self.done / self.total)
        eta = self.eta_seconds()
        left = f"about {_clock(eta)} left" if eta is not None else ("done" if self.done >= self.total else "starting")
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} graded, {left}   ")
        self.stream.flush()
        self._bar_shown = True

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()
            self._bar_shown = False

    def _line(self, text: str) -> None:
        if self._write:
            self._write(text)
        else:
            print(text, file=self.stream, flush=True)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"
