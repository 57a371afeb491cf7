"""What one run left, before any interpretation: shared by every runner (process.py, fork_server.py,
portable_run.py) and by what reads a run (file_end.py, runs/snapshot.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class RawRun:
    """Everything the child produced, before any interpretation: frames, output head/tail, how it ended."""

    frames: list[dict] = field(default_factory=list)
    output_head: bytes = b""
    output_tail: bytes = b""
    output_bytes: int = 0
    output_unread: bool = False            # it printed past `output_read_bytes`: the rest was never read
    returncode: int | None = None
    killed_at_wall_limit: bool = False
    channel_problem: str | None = None
    values_not_kept: int = 0               # rebound values past the channel's kept-values budget (frames.py)
    seconds: float = 0.0
    isolation: str = ""
    cpu_seconds: float | None = None       # measured where the runner can (the fork server)
    cpu_wait_allowance_seconds: float = 0.0  # added to the wall limit: time the run waited for a CPU others held
    max_rss_bytes: int | None = None
    control: bytes = b""                   # the harness's set-up report, on a pipe closed before student code
    memory_limit_hit: bool = False         # the run's cgroup refused memory or killed for it
    grader_failure: str | None = None      # the sandbox itself failed (never the student's doing)
    own_end_index: int | None = None       # the frame saying the file's own code ended (sandbox/file_end.py)
    own_frame_times: list[tuple[int, float]] = field(default_factory=list)   # (frame index, seconds): statements, values
    own_end: dict | None = None            # that frame, once file_end.settle found nothing of the file after it

    @property
    def setup(self) -> dict:
        """The harness's report of its own set-up, read from the control pipe (the student never held it)."""
        try:
            report = json.loads(self.control.decode("utf-8").strip().splitlines()[0])
        except (ValueError, IndexError, UnicodeDecodeError):
            return {}
        return report if isinstance(report, dict) else {}

    @property
    def setup_ok(self) -> bool:
        return self.setup.get("setup") == "ok"
