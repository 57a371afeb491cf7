"""Turn what a sandboxed run streamed into a Snapshot of plain data, and give checks a view of it.

Decoding is the trust boundary: only the tagged JSON the harness writes is understood, arrays are read
with `np.load(allow_pickle=False)` and coerced to base float64 (or complex128) ndarrays, scalars to
`float`/`int`/`bool`/`str`. Nothing a student object could override survives into the parent.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grader.intake.notebook import where as where  # how feedback cites a place (checks import it from here)
from grader.runs.evidence import CallEvent, EvidenceSummary, decode_call
from grader.sandbox.process import RawRun

MAX_CALLS = 5000            # call frames kept per run (the harness sends at most its own bound)
MAX_HISTORY = 2000          # bindings kept per contract name
CELL_FILE = re.compile(r"<cell (\d+)>")


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


NPY_HEADER = re.compile(r"\{'descr': '(?P<descr>[<>|=]?[biufc]\d{1,2})', 'fortran_order': (?P<fortran>True|False), "
                        r"'shape': \((?P<shape>(\d{1,9}, ?)*(\d{1,9})?)\), \} *\n")
MAX_ARRAY_ELEMENTS = 1 << 24


def read_npy(data: bytes) -> np.ndarray:
    """An `.npy` file's array, for the numeric dtypes only, read by a strict parser (no pickle, no eval).

    np.load parses each header with ast.literal_eval; a run sends hundreds of small arrays, and this is the
    trust boundary, so the header must match one exact shape or the array is refused."""
    if data[:6] != b"\x93NUMPY" or len(data) < 10:
        raise ValueError("not an npy file")
    major = data[6]
    if major == 1:
        length, start = int.from_bytes(data[8:10], "little"), 10
    elif major in (2, 3):
        length, start = int.from_bytes(data[8:12], "little"), 12
    else:
        raise ValueError("unknown npy version")
    header = data[start:start + length].decode("latin-1")
    match = NPY_HEADER.fullmatch(header)
    if not match:
        raise ValueError("unexpected npy header")
    shape = tuple(int(n) for n in match.group("shape").replace(" ", "").split(",") if n)
    dtype = np.dtype(match.group("descr"))
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count > MAX_ARRAY_ELEMENTS:
        raise ValueError("array too large")
    body = data[start + length:]
    if len(body) != count * dtype.itemsize:
        raise ValueError("npy body has the wrong size")
    array = np.frombuffer(body, dtype=dtype, count=count)
    return array.reshape(shape, order="F" if match.group("fortran") == "True" else "C")


def decode_array(encoded: dict) -> np.ndarray | Opaque:
    try:
        data = base64.b64decode(str(encoded.get("npy", "")), validate=True)
        array = read_npy(data)
    except Exception:
        return Opaque("invalid", "array")
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biufc":
        return Opaque("invalid", "array")
    target = {"c": np.complex128, "b": np.bool_}.get(array.dtype.kind, np.float64)
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
    cell: int | None = None        # the notebook cell it is in (its line counts from the cell's top)
    calls_omitted: int = 0         # root calls it made beyond the evidence bounds (its evidence is partial)
    reads: list[str] = field(default_factory=list)
    mutates: list[str] = field(default_factory=list)

    @property
    def grader_fault(self) -> bool:
        """The error was raised by the grader's own code in the run (a scenario replacement or a probe)."""
        return bool(self.error and self.error.get("grader_fault"))

    @property
    def raised(self) -> dict:
        """The error this statement raised; asking a statement that raised nothing is the grader's bug."""
        if self.error is None:
            raise ValueError(f"statement {self.index} (line {self.line}) raised no error")
        return self.error


@dataclass
class Snapshot:
    """One scenario's run of one submission, as plain data."""

    scenario: str
    seed: int | None
    values: dict[str, Any] = field(default_factory=dict)          # final value of each contract name
    history: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)  # name -> [(statement, value)]
    probes: dict[str, Any] = field(default_factory=dict)          # probe -> last value
    probe_errors: dict[str, dict] = field(default_factory=dict)   # probe -> last error
    # probe -> [(statement, {input name: statement of the binding it used}, value or None, error or None)]
    probe_history: dict[str, list[tuple[int, dict[str, int], Any, dict | None]]] = field(default_factory=dict)
    calls: list[CallEvent] = field(default_factory=list)          # method evidence, in the order it happened
    evidence: EvidenceSummary = field(default_factory=EvidenceSummary)
    statements: list[Statement] = field(default_factory=list)
    ending: str = "lost"   # completed | syntax_error | sys_exit | setup_failed | killed_wall | exited_early | lost
    exit_code: Any = None
    exit_line: int | None = None
    exit_cell: int | None = None
    soft_limit_hit: bool = False
    syntax_error: dict | None = None                      # the first one (a notebook may have one per cell)
    syntax_errors: list[dict] = field(default_factory=list)
    setup_error: str | None = None
    returncode: int | None = None
    output_head: str = ""
    output_tail: str = ""
    output_bytes: int = 0
    channel_problem: str | None = None
    seconds: float = 0.0
    cpu_seconds: float | None = None      # where the runner measures them (the fork server)
    max_rss_bytes: int | None = None
    cpu_wait_allowance_seconds: float = 0.0   # added to the wall limit for time the run waited for a CPU
    memory_limit_hit: bool = False        # the run's cgroup refused it memory or killed it for that
    isolation: str = ""

    @property
    def failed_statements(self) -> list[Statement]:
        return [s for s in self.statements if s.status in ("error", "timeout")]

    @property
    def grader_faults(self) -> list[str]:
        """Why this run cannot be held against the student: the grader's own code failed in it."""
        faults = [f"the grader's set-up failed ({self.setup_error})"] if self.setup_error else []
        faults += [f"{where(s.line, s.cell)} raised {s.raised['type']} inside the grader's own code"
                   for s in self.statements if s.grader_fault]
        return faults

    def statement(self, index: int) -> Statement | None:
        if 0 <= index < len(self.statements) and self.statements[index].index == index:
            return self.statements[index]
        return next((s for s in self.statements if s.index == index), None)

    def statement_assigning(self, name: str) -> Statement | None:
        """The last statement that binds `name` at top level, if it failed (to explain a missing value)."""
        for statement in reversed(self.statements):
            if name in statement.assigns and statement.status != "ok":
                return statement
        return None


def build_snapshot(raw: RawRun, scenario: str, seed: int | None) -> Snapshot:
    """Fold a run's frames into a Snapshot; a frame that does not fit the schema is ignored and noted."""
    snap = Snapshot(scenario=scenario, seed=seed, returncode=raw.returncode, output_bytes=raw.output_bytes,
                    output_head=raw.output_head.decode("utf-8", "replace"),
                    output_tail=raw.output_tail.decode("utf-8", "replace"),
                    channel_problem=raw.channel_problem, seconds=raw.seconds, isolation=raw.isolation,
                    cpu_seconds=raw.cpu_seconds, max_rss_bytes=raw.max_rss_bytes,
                    cpu_wait_allowance_seconds=raw.cpu_wait_allowance_seconds, memory_limit_hit=raw.memory_limit_hit)
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
        history = snap.history.setdefault(name, [])
        if len(history) >= MAX_HISTORY:
            return None
        if frame.get("deleted"):
            snap.values.pop(name, None)
            history.append((index, None))
            return None
        value = decode(frame.get("value"))
        snap.values[name] = value
        history.append((index, value))
    elif kind == "probe" and isinstance(frame.get("name"), str):
        name = frame["name"]
        inputs = frame.get("inputs")
        used = {str(k)[:100]: _int(v) for k, v in list(inputs.items())[:20]} if isinstance(inputs, dict) else {}
        entries = snap.probe_history.setdefault(name, [])
        entry: tuple[int, dict[str, int], Any, dict | None]
        if isinstance(frame.get("error"), dict):
            error = _error(frame["error"])
            snap.probe_errors[name] = error
            snap.probes.pop(name, None)
            entry = (_int(frame.get("stmt")), used, None, error)
        else:
            value = decode(frame.get("value"))
            snap.probes[name] = value
            snap.probe_errors.pop(name, None)
            entry = (_int(frame.get("stmt")), used, value, None)
        if len(entries) < MAX_HISTORY:
            entries.append(entry)
    elif kind == "call":
        if len(snap.calls) < MAX_CALLS:
            snap.calls.append(decode_call(frame, decode_array))
    elif kind == "statement":
        snap.statements.append(Statement(
            index=_int(frame.get("index")), line=_int(frame.get("line")), end_line=_int(frame.get("end_line")),
            assigns=_names(frame.get("assigns")), reads=_names(frame.get("reads")), mutates=_names(frame.get("mutates")),
            status=str(frame.get("status")), seconds=_float(frame.get("seconds")),
            placeholder=frame.get("placeholder") is True, cell=_cell(frame.get("cell")),
            calls_omitted=max(0, _int(frame.get("calls_omitted"))),
            error=_error(frame["error"]) if isinstance(frame.get("error"), dict) else None))
    elif kind == "syntax_error":
        problem = {"line": _int(frame.get("line")), "cell": _cell(frame.get("cell")),
                   "message": str(frame.get("message", ""))[:500]}
        if len(snap.syntax_errors) < 200:
            snap.syntax_errors.append(problem)
        snap.syntax_error = snap.syntax_error or problem
    elif kind == "evidence_installed":
        snap.evidence.installed = True
    elif kind == "evidence_problem":
        snap.evidence.installed = False
        snap.evidence.problem = str(frame.get("message", ""))[:300]
    elif kind == "done":
        return frame
    return None


def _set_ending(snap: Snapshot, raw: RawRun, done: dict | None) -> None:
    if not raw.setup_ok:
        # Read from the control pipe, which the harness closes before student code: a channel frame cannot fake it.
        snap.setup_error = str(raw.setup.get("message") or raw.grader_failure
                               or "the run ended before the grader had set it up")[:500]
        snap.ending = "setup_failed"
    elif raw.killed_at_wall_limit:
        snap.ending = "killed_wall"
    elif done is not None:
        snap.ending = str(done.get("kind")) if done.get("kind") in ("completed", "sys_exit") else "lost"
        if snap.ending == "completed" and any(problem["cell"] is None for problem in snap.syntax_errors):
            snap.ending = "syntax_error"   # a script stops at its syntax error (a notebook skips only that cell)
        snap.exit_code = done.get("code") if isinstance(done.get("code"), (int, str, type(None))) else None
        snap.exit_line = _int(done.get("line")) if done.get("line") is not None else None
        snap.exit_cell = _cell(done.get("cell"))
        snap.soft_limit_hit = bool(done.get("soft_limit_hit"))
        found = done.get("evidence")
        evidence: dict = found if isinstance(found, dict) else {}
        snap.evidence.calls = max(0, _int(evidence.get("calls")))
        snap.evidence.omitted = max(0, _int(evidence.get("omitted")))
        if evidence.get("problem"):
            snap.evidence.problem = str(evidence["problem"])[:300]
    else:
        snap.ending = "exited_early"
    snap.soft_limit_hit = snap.soft_limit_hit or any(s.status == "timeout" for s in snap.statements)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _names(value: Any) -> list[str]:
    return [n for n in _list(value)[:200] if isinstance(n, str)]


def _cell(value: Any) -> int | None:
    number = _int(value)
    return number if number >= 0 else None


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else -1


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _error(error: dict) -> dict:
    file = str(error.get("file") or "")
    match = CELL_FILE.fullmatch(file)
    return {"type": str(error.get("type", "Error"))[:100], "message": str(error.get("message", ""))[:2000],
            "line": _int(error.get("line")) if error.get("line") is not None else None,
            "cell": int(match.group(1)) if match else None,
            "traceback": str(error.get("traceback", ""))[:8000],
            "grader_fault": error.get("grader_fault") is True, "through_setup": error.get("through_setup") is True}
