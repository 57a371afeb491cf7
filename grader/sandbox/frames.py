"""The data channel's frames as the grader parses them: length-prefixed JSON, bounded before it is parsed."""

from __future__ import annotations

import json
import struct
import sys
import time
from collections.abc import Callable

from grader.model.limits import Limits

MAX_FRAME_BYTES = 8 * 1024 * 1024
# Value frames a later frame rebinds (their name bound again) are kept up to this many payload bytes in all; past
# it an older value is replaced by a `too_large` marker (checks see a value too large to keep). An honest run's
# frames total under 110 KB; a run rebinding a name with 1 MB arrays would otherwise keep every one twice (its
# frame here, its decoded value in the snapshot's history) until the record is written.
SUPERSEDED_VALUE_BYTES = 4 * 1024 * 1024
# The frame types the harness sends (grader/sandbox/child/) and runs/snapshot.py reads: any other is dropped as it
# is parsed, so what a run sends that nobody reads never stays in the grader's memory.
FRAME_TYPES = frozenset({"value", "probe", "evaluation", "sighting", "statement", "syntax_error",
                         "evidence_installed", "evidence_problem", "replay", "own_end", "done"})


# Frames the harness sends only while the file's own code runs: after `own_end` (the replays) there are none.
OWN_CODE_FRAMES = frozenset({"statement", "value"})


def run_memory_bound(limits: Limits) -> int:
    """The most one run's channel may hold in the grader's memory: its bytes parsed (strings the size of their text),
    its JSON values as Python objects (a few hundred bytes each at most), and what the snapshot decodes again."""
    return 3 * limits.channel_max_bytes + 200 * limits.channel_max_objects


class FrameReader:
    """Parses length-prefixed JSON frames; stops (and says why) on garbage or when over its budgets.

    Bounded in bytes (the channel as a whole and each frame) and in JSON values: every `{`, `[`, `,` and `:` of a
    frame is counted before it is parsed (each object, array, item and member costs one), so 30 MiB of
    `[{},{},...]` or of `[1.5,2.5,...]` costs a refusal, not gigabytes of dicts or floats. Commas and colons
    inside strings count too: the count can only overstate what parsing would build."""

    def __init__(self, budget: int, max_objects: int = Limits.channel_max_objects, takes_setup: bool = False):
        self.budget = budget
        # The portable strategy's run has no control pipe: the harness's set-up report is its first `setup` frame,
        # sent before any student code runs (so none can come before it); any later one is dropped as unread.
        self.takes_setup = takes_setup
        self.setup: dict | None = None
        self.max_objects = max_objects
        self.objects = 0
        self.buffer = bytearray()
        self.frames: list[dict] = []
        self.ignored = 0                     # frames of a type nobody reads: parsed, counted, not kept
        self.values_not_kept = 0             # rebound values past SUPERSEDED_VALUE_BYTES, replaced by a marker
        self._latest_value: dict[str, tuple[int, int]] = {}   # name -> (its newest value frame's index, bytes)
        self._superseded = 0
        self.received = 0
        self.problem: str | None = None
        # When the file's own code ended (sandbox/file_end.py): the first `own_end` frame, which `on_own_end` hears
        # as it arrives (the runner then grants the replays' time), and when each frame only the file's own code
        # sends (a statement's record, a value it bound) arrived.
        self.started = time.monotonic()
        self.on_own_end: Callable[[], None] | None = None
        self.own_end_index: int | None = None
        self.own_frame_times: list[tuple[int, float]] = []   # (index in frames, seconds after the reader started)

    def feed(self, data: bytes) -> None:
        if self.problem:
            return
        self.received += len(data)
        if self.received > self.budget:
            self.problem = f"the run streamed more than {self.budget} bytes of data; the rest was ignored"
            return
        self.buffer += data
        while len(self.buffer) >= 4:
            (size,) = struct.unpack(">I", self.buffer[:4])
            if size > MAX_FRAME_BYTES:
                self.problem = "the data channel carried an oversized frame; the rest was ignored"
                return
            if len(self.buffer) < 4 + size:
                return
            with memoryview(self.buffer) as view:
                payload = bytes(view[4 : 4 + size])
            del self.buffer[: 4 + size]
            self.objects += sum(payload.count(mark) for mark in (b"{", b"[", b",", b":"))
            if self.objects > self.max_objects:
                self.problem = (f"the data channel carried more than {self.max_objects} objects and values; "
                                "the rest was ignored")
                return
            try:
                frame = json.loads(payload)
            except (ValueError, RecursionError):
                self.problem = "the data channel carried something that is not JSON; the rest was ignored"
                return
            if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
                self.problem = "the data channel carried a malformed frame; the rest was ignored"
                return
            if frame["type"] == "setup" and self.takes_setup and self.setup is None:
                self.setup = frame["report"] if isinstance(frame.get("report"), dict) else {}
                continue
            if frame["type"] not in FRAME_TYPES:
                self.ignored += 1
                continue
            frame = {sys.intern(key): value for key, value in frame.items()}   # one copy of each key for all frames
            if frame["type"] == "value" and isinstance(frame.get("name"), str):
                self._supersede(frame["name"], size)
            self.frames.append(frame)
            if frame["type"] in OWN_CODE_FRAMES:
                self.own_frame_times.append((len(self.frames) - 1, time.monotonic() - self.started))
            elif frame["type"] == "own_end" and self.own_end_index is None:
                self.own_end_index = len(self.frames) - 1
                if self.on_own_end is not None:
                    self.on_own_end()

    def _supersede(self, name: str, size: int) -> None:
        """A value frame for `name` is about to be kept: the one it rebinds stays whole within the budget."""
        previous = self._latest_value.get(name)
        self._latest_value[name] = (len(self.frames), size)
        if previous is None:
            return
        index, previous_size = previous
        if self._superseded + previous_size <= SUPERSEDED_VALUE_BYTES:
            self._superseded += previous_size
            return
        old = self.frames[index]
        if isinstance(old.get("value"), dict):
            kind = old["value"].get("t")
            self.frames[index] = {**old, "value": {"t": "too_large", "type": kind if isinstance(kind, str) else "?"}}
            self.values_not_kept += 1
