"""Turn what a sandboxed run streamed into a Snapshot of plain data, and give checks a view of it.

Decoding is the trust boundary: only the tagged JSON the harness writes is understood, arrays are read
with `np.load(allow_pickle=False)` and coerced to base float64 (or complex128) ndarrays, scalars to
`float`/`int`/`bool`/`str`. Nothing a student object could override survives into the parent.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .sandbox import RawRun


class Missing(Exception):
    """A contract name the check needs is absent, still a TODO, or was never computed."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"`{name}` {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class Opaque:
    """A value the grader will not interpret (a function, an object), kept only as its type and repr."""

    kind: str
    type_name: str
    text: str = ""

    def __str__(self) -> str:
        return f"<{self.type_name}>"

    def __repr__(self) -> str:  # what a student reads when a check shows the compared values
        return "..." if self.kind == "todo" else f"<{self.type_name}>"


UNFINISHED = Opaque("todo", "ellipsis", "...")  # a student placeholder `...` left in the file


def decode(encoded: Any, depth: int = 0) -> Any:
    """Plain Python/NumPy values from the harness's tagged encoding (unknown shapes become Opaque)."""
    if not isinstance(encoded, dict) or depth > 12:
        return Opaque("invalid", "invalid")
    tag = encoded.get("t")
    if tag == "none":
        return None
    if tag == "ellipsis":
        return UNFINISHED
    if tag == "bool":
        return bool(encoded.get("v"))
    if tag == "int":
        value = encoded.get("v")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else Opaque("invalid", "int")
    if tag == "float":
        try:
            return float(str(encoded.get("v")))
        except ValueError:
            return Opaque("invalid", "float")
    if tag == "str":
        return str(encoded.get("v", ""))
    if tag in ("list", "tuple"):
        items = encoded.get("items")
        if not isinstance(items, list):
            return Opaque("invalid", tag)
        if _int(encoded.get("length")) > len(items):
            return Opaque("too_large", tag)
        values = [decode(item, depth + 1) for item in items]
        return values if tag == "list" else tuple(values)
    if tag == "dict":
        items = encoded.get("items")
        if not isinstance(items, list):
            return Opaque("invalid", "dict")
        if _int(encoded.get("length")) > len(items):
            return Opaque("too_large", "dict")
        return {str(pair[0]): decode(pair[1], depth + 1) for pair in items if isinstance(pair, list) and len(pair) == 2}
    if tag == "array":
        return decode_array(encoded)
    if tag == "callable":
        return Opaque("callable", str(encoded.get("type", "function")), str(encoded.get("repr", ""))[:300])
    if tag == "too_large":
        return Opaque("too_large", str(encoded.get("type", "?")))
    return Opaque("other", str(encoded.get("type", "?")), str(encoded.get("repr", ""))[:300])


def decode_array(encoded: dict) -> np.ndarray | Opaque:
    try:
        data = base64.b64decode(str(encoded.get("npy", "")), validate=True)
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception:
        return Opaque("invalid", "array")
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biufc":
        return Opaque("invalid", "array")
    target = np.complex128 if array.dtype.kind == "c" else np.float64
    return np.array(array, dtype=target, copy=True).view(np.ndarray)


@dataclass
class Statement:
    index: int
    line: int
    end_line: int
    assigns: list[str]
    status: str
    seconds: float = 0.0
    error: dict | None = None
    placeholder: bool = False      # the statement still holds a `...` (an unfinished TODO)


@dataclass
class Snapshot:
    """One scenario's run of one submission, as plain data."""

    scenario: str
    seed: int | None
    values: dict[str, Any] = field(default_factory=dict)          # final value of each contract name
    history: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)  # name -> [(statement, value)]
    probes: dict[str, Any] = field(default_factory=dict)          # probe -> last value
    probe_errors: dict[str, dict] = field(default_factory=dict)   # probe -> last error
    statements: list[Statement] = field(default_factory=list)
    ending: str = "lost"   # completed | sys_exit | setup_failed | killed_wall | exited_early | lost
    exit_code: Any = None
    exit_line: int | None = None
    soft_limit_hit: bool = False
    syntax_error: dict | None = None
    setup_error: str | None = None
    returncode: int | None = None
    output_head: str = ""
    output_tail: str = ""
    output_bytes: int = 0
    channel_problem: str | None = None
    seconds: float = 0.0
    cpu_seconds: float | None = None      # where the runner measures them (the fork server)
    max_rss_bytes: int | None = None
    isolation: str = ""

    @property
    def failed_statements(self) -> list[Statement]:
        return [s for s in self.statements if s.status in ("error", "timeout")]

    def statement_assigning(self, name: str) -> Statement | None:
        """The last statement that binds `name` at top level, if it failed (to explain a missing value)."""
        for statement in reversed(self.statements):
            if name in statement.assigns and statement.status != "ok":
                return statement
        return None


def build_snapshot(raw: RawRun, scenario: str, seed: int | None) -> Snapshot:
    snap = Snapshot(scenario=scenario, seed=seed, returncode=raw.returncode, output_bytes=raw.output_bytes,
                    output_head=raw.output_head.decode("utf-8", "replace"),
                    output_tail=raw.output_tail.decode("utf-8", "replace"),
                    channel_problem=raw.channel_problem, seconds=raw.seconds, isolation=raw.isolation,
                    cpu_seconds=raw.cpu_seconds, max_rss_bytes=raw.max_rss_bytes)
    done = None
    for frame in raw.frames:
        try:
            done = _apply_frame(snap, frame) or done
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError):
            snap.channel_problem = snap.channel_problem or "the data channel carried a malformed frame; it was ignored"
    _set_ending(snap, raw, done)
    return snap


def _apply_frame(snap: Snapshot, frame: dict) -> dict | None:
    """Fold one frame into the snapshot; returns the frame if it is the final `done` one."""
    kind = frame.get("type")
    if kind == "value" and isinstance(frame.get("name"), str):
        name, index = frame["name"], _int(frame.get("stmt"))
        if frame.get("deleted"):
            snap.values.pop(name, None)
            snap.history.setdefault(name, []).append((index, None))
            return None
        value = decode(frame.get("value"))
        snap.values[name] = value
        snap.history.setdefault(name, []).append((index, value))
    elif kind == "probe" and isinstance(frame.get("name"), str):
        name = frame["name"]
        if isinstance(frame.get("error"), dict):
            snap.probe_errors[name] = _error(frame["error"])
            snap.probes.pop(name, None)
        else:
            snap.probes[name] = decode(frame.get("value"))
            snap.probe_errors.pop(name, None)
    elif kind == "statement":
        snap.statements.append(Statement(
            index=_int(frame.get("index")), line=_int(frame.get("line")), end_line=_int(frame.get("end_line")),
            assigns=[n for n in _list(frame.get("assigns")) if isinstance(n, str)][:200],
            status=str(frame.get("status")), seconds=_float(frame.get("seconds")),
            placeholder=frame.get("placeholder") is True,
            error=_error(frame["error"]) if isinstance(frame.get("error"), dict) else None))
    elif kind == "syntax_error":
        snap.syntax_error = {"line": _int(frame.get("line")), "message": str(frame.get("message", ""))[:500]}
    elif kind == "setup_error":
        snap.setup_error = str(frame.get("message", ""))[:500]
    elif kind == "done":
        return frame
    return None


def _set_ending(snap: Snapshot, raw: RawRun, done: dict | None) -> None:
    if raw.killed_at_wall_limit:
        snap.ending = "killed_wall"
    elif done is not None:
        snap.ending = str(done.get("kind")) if done.get("kind") in ("completed", "sys_exit", "setup_failed") else "lost"
        snap.exit_code = done.get("code") if isinstance(done.get("code"), (int, str, type(None))) else None
        snap.exit_line = _int(done.get("line")) if done.get("line") is not None else None
        snap.soft_limit_hit = bool(done.get("soft_limit_hit"))
    else:
        snap.ending = "exited_early"
    snap.soft_limit_hit = snap.soft_limit_hit or any(s.status == "timeout" for s in snap.statements)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else -1


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _error(error: dict) -> dict:
    return {"type": str(error.get("type", "Error"))[:100], "message": str(error.get("message", ""))[:2000],
            "line": _int(error.get("line")) if error.get("line") is not None else None,
            "traceback": str(error.get("traceback", ""))[:8000]}
