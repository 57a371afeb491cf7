"""Batch progress for people: a bar with an ETA on a terminal, one plain line per event elsewhere (logs, CI).

A batch has two stages: the warm-up (the reference solution measured or reused, the fork server started) and the
grading. Both show from their first moment: on a terminal the warm-up has a live line with its latest step and the
seconds spent, the grading a bar; elsewhere each step is a line of its own. Notes may come from any thread.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from grader.model.record import Record

TICK_SECONDS = 0.5
WARM_UP_PREFIX = "Warm-up: "


class Progress:
    """Told about notes, stages and finished submissions by `batch.grade_folder`; decides how to show them."""

    def __init__(self, stream: TextIO | None = None, terminal: bool | None = None,
                 write: Callable[[str], None] | None = None):
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty() if terminal is None and write is None else bool(terminal)
        self._write = write
        self.total = 0
        self.done = 0
        self.started = time.monotonic()
        self._status = ""              # what the live line shows (terminal only): a stage or the bar
        self._lock = threading.RLock()
        self._stage: tuple[str, float, str] | None = None    # (title, started, latest step)
        self._ticker: threading.Thread | None = None

    @classmethod
    def lines(cls, write: Callable[[str], None]) -> Progress:
        """Plain lines through `write` (tests pass `lambda line: None`)."""
        return cls(write=write, terminal=False)

    def note(self, text: str) -> None:
        with self._lock:
            self._clear_status()
            if self._stage is not None:
                title, started, _ = self._stage
                self._stage = (title, started, text.removeprefix(WARM_UP_PREFIX))
            self._line(text)
            self._draw()

    def stage(self, title: str) -> None:
        """A stage before the grading (the warm-up): shown at once, live on a terminal until `start`."""
        with self._lock:
            self._stage = (title, time.monotonic(), "")
            if not self.terminal:
                self._line(f"{title} ...")
                return
            self._draw()
            if self._ticker is None:
                self._ticker = threading.Thread(target=self._tick, name="progress-ticker", daemon=True)
                self._ticker.start()

    def start(self, total: int) -> None:
        with self._lock:
            self._end_stage()
            self.total, self.done, self.started = total, 0, time.monotonic()
            self._draw()

    def advance(self, record: Record) -> None:
        with self._lock:
            self.done += 1
            if self.terminal:
                self._draw()
            else:
                self._line(f"[{self.done}/{self.total}] {record['submission']}: {record['score']:g}/"
                           f"{record['max_score']:g} ({record['status']})")

    def finish(self) -> None:
        with self._lock:
            self._end_stage()
            self.total = 0
            self._clear_status()

    def eta_seconds(self) -> float | None:
        if not self.done or self.done >= self.total:
            return None
        return (time.monotonic() - self.started) / self.done * (self.total - self.done)

    # ---- drawing --------------------------------------------------------------------------------------------

    def _end_stage(self) -> None:
        if self._stage is not None:
            self._clear_status()
            title, started, _ = self._stage
            self._stage = None
            if self.terminal:
                self._line(f"{title}: done ({time.monotonic() - started:.1f} s).")

    def _tick(self) -> None:
        while True:
            time.sleep(TICK_SECONDS)
            with self._lock:
                if self._stage is None:
                    self._ticker = None
                    return
                self._draw()

    def _draw(self) -> None:
        if not self.terminal:
            return
        if self._stage is not None:
            title, started, step = self._stage
            status = f"{title} ({time.monotonic() - started:.0f} s)" + (f": {step}" if step else " ...")
        elif self.total:
            width = 30
            filled = int(width * self.done / self.total)
            eta = self.eta_seconds()
            left = f"about {_clock(eta)} left" if eta is not None else ("done" if self.done >= self.total else "starting")
            status = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} graded, {left}"
        else:
            return
        status = status if len(status) <= 78 else status[:77] + "…"
        self.stream.write("\r" + status.ljust(len(self._status)))
        self.stream.flush()
        self._status = status

    def _clear_status(self) -> None:
        if self._status:
            self.stream.write("\r" + " " * len(self._status) + "\r")
            self.stream.flush()
            self._status = ""

    def _line(self, text: str) -> None:
        if self._write:
            self._write(text)
        else:
            print(text, file=self.stream, flush=True)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"
