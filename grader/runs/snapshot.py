"""Turn what a sandboxed run streamed into a Snapshot of plain data.

Decoding (grader/runs/decoding.py) is the trust boundary: only the tagged JSON the harness writes is understood,
arrays are read with a strict `.npy` parser and kept as base ndarrays of their numeric dtype, scalars become
`float`/`int`/`bool`/`str` within float64's range. Nothing a student object could override survives into the
parent, and no field of a frame, however malformed, fails the record: a frame that does not fit is ignored
and noted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from grader.common.text import clean
from grader.intake.notebook import where as where  # how feedback cites a place (checks import it from here)
from grader.runs.decoding import INVALID, UNFINISHED, Missing, Opaque, decode, decode_array, seconds, text, whole
from grader.runs.evidence import Evaluation, EvidenceSummary, Sighting, decode_evaluation, decode_sighting
from grader.sandbox.raw_run import RawRun

__all__ = ["INVALID", "UNFINISHED", "Missing", "Opaque", "Snapshot", "Statement", "build_snapshot", "decode",
           "decode_array", "where"]

MAX_EVIDENCE = 20000        # evaluations and sightings kept per run, each (the harness sends at most its own bounds)
MAX_HISTORY = 2000          # bindings kept per contract name
MAX_NAME = 200              # a contract name is far shorter; a longer one was forged
CELL_FILE = re.compile(r"<cell (\d+)>")


@dataclass(slots=True)   # a run may report tens of thousands of statements: no dict for each
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
    evaluations_omitted: int = 0   # evaluations it made beyond the evidence bounds (its evidence is partial)
    sightings_omitted: int = 0
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
    # replay -> {"values": {name: value}, "statements": [first, last]} or {"problem": why it could not run}
    replays: dict[str, dict[str, Any]] = field(default_factory=dict)
    evaluations: list[Evaluation] = field(default_factory=list)   # method evidence, in the order it happened
    sightings: list[Sighting] = field(default_factory=list)
    evidence: EvidenceSummary = field(default_factory=EvidenceSummary)
    statements: list[Statement] = field(default_factory=list)
    ending: str = "lost"   # completed | syntax_error | sys_exit | setup_failed | killed_wall | exited_early | lost
    exit_code: Any = None
    exit_line: int | None = None
    secret: str = ""   # the run's secret tag (jobs.make_job's code_tag): the parent's copy, never read from the run
    exit_cell: int | None = None
    soft_limit_hit: bool = False
    syntax_error: dict | None = None                      # the first one (a notebook may have one per cell)
    syntax_errors: list[dict] = field(default_factory=list)
    setup_error: str | None = None
    returncode: int | None = None
    output_head: str = ""
    output_tail: str = ""
    output_bytes: int = 0
    output_unread: bool = False          # it printed past the grader's read limit: the rest was never read
    channel_problem: str | None = None
    values_not_kept: int = 0       # earlier values of names bound again, past the kept-values budget (not kept)
    seconds: float = 0.0
    cpu_seconds: float | None = None      # where the runner measures them (the fork server)
    max_rss_bytes: int | None = None
    cpu_wait_allowance_seconds: float = 0.0   # added to the wall limit for time the run waited for a CPU
    memory_limit_hit: bool = False        # the run's cgroup refused it memory or killed it for that
    isolation: str = ""
    _by_index: tuple[int, dict[int, Statement]] = field(default=(-1, {}), init=False, repr=False, compare=False)

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
        """The first statement the run reported with this index: O(1) (forged frames may number statements in any
        order; an index of them is built once per length of the list, never a scan per lookup)."""
        if 0 <= index < len(self.statements) and self.statements[index].index == index:
            return self.statements[index]
        count, by_index = self._by_index
        if count != len(self.statements):
            by_index = {}
            for statement in self.statements:
                by_index.setdefault(statement.index, statement)
            self._by_index = (len(self.statements), by_index)
        return by_index.get(index)

    def statement_assigning(self, name: str) -> Statement | None:
        """The last statement that binds `name` at top level, if it failed (to explain a missing value)."""
        for statement in reversed(self.statements):
            if name in statement.assigns and statement.status != "ok":
                return statement
        return None


def build_snapshot(raw: RawRun, scenario: str, seed: int | None) -> Snapshot:
    """Fold a run's frames into a Snapshot; a frame that does not fit the schema is ignored and noted."""
    snap = Snapshot(scenario=scenario, seed=seed, returncode=raw.returncode, output_bytes=raw.output_bytes,
                    output_unread=raw.output_unread,
                    output_head=raw.output_head.decode("utf-8", "replace"),
                    output_tail=raw.output_tail.decode("utf-8", "replace"),
                    channel_problem=raw.channel_problem, values_not_kept=raw.values_not_kept, seconds=raw.seconds, isolation=raw.isolation,
                    cpu_seconds=raw.cpu_seconds, max_rss_bytes=raw.max_rss_bytes,
                    cpu_wait_allowance_seconds=raw.cpu_wait_allowance_seconds, memory_limit_hit=raw.memory_limit_hit)
    done = None
    for frame in raw.frames:
        try:
            done = _apply_frame(snap, frame) or done
        except Exception:  # noqa: BLE001 -- any frame the schema does not foresee is the run's, never a grader failure
            snap.channel_problem = snap.channel_problem or "the data channel carried a malformed frame; it was ignored"
    _set_ending(snap, raw, done)
    return snap


def _apply_frame(snap: Snapshot, frame: dict) -> dict | None:
    """Fold one frame into the snapshot; returns the frame if it is the final `done` one."""
    kind = frame.get("type")
    if kind in ("value", "probe"):
        name = frame.get("name")
        if isinstance(name, str) and len(name) <= MAX_NAME:
            name = clean(name)
            (_apply_value if kind == "value" else _apply_probe)(snap, name, frame)
    elif kind == "evaluation":
        if len(snap.evaluations) < MAX_EVIDENCE:
            snap.evaluations.append(decode_evaluation(frame, decode_array))
    elif kind == "sighting":
        sighting = decode_sighting(frame, decode_array) if len(snap.sightings) < MAX_EVIDENCE else None
        if sighting is not None:
            snap.sightings.append(sighting)
    elif kind == "statement":
        snap.statements.append(Statement(
            index=whole(frame.get("index")), line=whole(frame.get("line")), end_line=whole(frame.get("end_line")),
            assigns=_names(frame.get("assigns")), reads=_names(frame.get("reads")), mutates=_names(frame.get("mutates")),
            status=text(frame.get("status"), 20), seconds=seconds(frame.get("seconds")),
            placeholder=frame.get("placeholder") is True, cell=_cell(frame.get("cell")),
            evaluations_omitted=max(0, whole(frame.get("evaluations_omitted"))),
            sightings_omitted=max(0, whole(frame.get("sightings_omitted"))),
            error=_error(frame["error"]) if isinstance(frame.get("error"), dict) else None))
    elif kind == "syntax_error":
        problem = {"line": whole(frame.get("line")), "cell": _cell(frame.get("cell")),
                   "message": text(frame.get("message"), 500)}
        if len(snap.syntax_errors) < 200:
            snap.syntax_errors.append(problem)
        snap.syntax_error = snap.syntax_error or problem
    elif kind == "replay":
        _apply_replay(snap, frame)
    elif kind == "evidence_installed":
        snap.evidence.installed = True
    elif kind == "evidence_problem":
        snap.evidence.installed = False
        snap.evidence.problem = text(frame.get("message"), 300)
    elif kind == "done":
        return frame
    return None


def _apply_value(snap: Snapshot, name: str, frame: dict) -> None:
    history = snap.history.setdefault(name, [])
    if len(history) >= MAX_HISTORY:
        return
    index = whole(frame.get("stmt"))
    if frame.get("deleted"):
        snap.values.pop(name, None)
        history.append((index, None))
        return
    value = decode(frame.get("value"))
    snap.values[name] = value
    history.append((index, value))


def _apply_replay(snap: Snapshot, frame: dict) -> None:
    """A replay's captured values (the first frame of a name counts; the run sends one per replay). A replay whose
    statements raised keeps, apart from any values (`rebound`), the captured names they had bound again by then:
    only a check that asks for them reads them (a branch judged on the replay still fails on the raise)."""
    name = frame.get("name")
    if not isinstance(name, str) or len(name) > MAX_NAME or name in snap.replays or len(snap.replays) >= 20:
        return
    values = frame.get("values")
    if isinstance(values, dict):
        span = _list(frame.get("statements"))[:2]
        snap.replays[clean(name)] = {"values": {clean(k): decode(v) for k, v in list(values.items())[:50]
                                                if isinstance(k, str) and len(k) <= MAX_NAME},
                                     "statements": [whole(i) for i in span]}
    else:
        snap.replays[clean(name)] = {"problem": text(frame.get("problem"), 300) or "no values",
                                     "raised": frame.get("raised") is True}
        rebound = frame.get("rebound")
        if isinstance(rebound, dict) and frame.get("raised") is True:   # bound again before the statements raised
            snap.replays[clean(name)]["rebound"] = {clean(k): decode(v) for k, v in list(rebound.items())[:50]
                                                    if isinstance(k, str) and len(k) <= MAX_NAME}


def _apply_probe(snap: Snapshot, name: str, frame: dict) -> None:
    inputs = frame.get("inputs")
    used = {text(k, 100): whole(v) for k, v in list(inputs.items())[:20]} if isinstance(inputs, dict) else {}
    entries = snap.probe_history.setdefault(name, [])
    entry: tuple[int, dict[str, int], Any, dict | None]
    if isinstance(frame.get("error"), dict):
        error = _error(frame["error"])
        snap.probe_errors[name] = error
        snap.probes.pop(name, None)
        entry = (whole(frame.get("stmt")), used, None, error)
    else:
        value = decode(frame.get("value"))
        snap.probes[name] = value
        snap.probe_errors.pop(name, None)
        entry = (whole(frame.get("stmt")), used, value, None)
    if len(entries) < MAX_HISTORY:
        entries.append(entry)


def _set_ending(snap: Snapshot, raw: RawRun, done: dict | None) -> None:
    if not raw.setup_ok:
        # Read from the control pipe, which the harness closes before student code: a channel frame cannot fake it.
        snap.setup_error = clean(str(raw.setup.get("message") or raw.grader_failure
                                     or "the run ended before the grader had set it up")[:500])
        snap.ending = "setup_failed"
    elif raw.killed_at_wall_limit and raw.own_end is None:
        snap.ending = "killed_wall"
    elif (done := done or raw.own_end) is not None:
        # `own_end`: the file's own code ended and said how, then the grader's replays did not finish (killed in
        # the time granted for them, or one brought the process down): the file's ending is the one it reported
        # (sandbox/file_end.py)
        snap.ending = str(done.get("kind")) if done.get("kind") in ("completed", "sys_exit") else "lost"
        if snap.ending == "completed" and any(problem["cell"] is None for problem in snap.syntax_errors):
            snap.ending = "syntax_error"   # a script stops at its syntax error (a notebook skips only that cell)
        snap.exit_code = _exit_code(done.get("code"))
        if snap.ending == "sys_exit" and done.get("last") is True and snap.exit_code in (0, None):
            snap.ending = "completed"   # sys.exit(0) as the file's last statement: nothing was left to run
        snap.exit_line = whole(done.get("line")) if done.get("line") is not None else None
        snap.exit_cell = _cell(done.get("cell"))
        snap.soft_limit_hit = done.get("soft_limit_hit") is True
        found = done.get("evidence")
        evidence: dict = found if isinstance(found, dict) else {}
        snap.evidence.evaluations = max(0, whole(evidence.get("evaluations")))
        snap.evidence.sightings = max(0, whole(evidence.get("sightings")))
        snap.evidence.omitted = max(0, whole(evidence.get("omitted")))
        if evidence.get("problem"):
            snap.evidence.problem = text(evidence["problem"], 300) or "malformed report"
    else:
        snap.ending = "exited_early"
    snap.soft_limit_hit = snap.soft_limit_hit or any(s.status == "timeout" for s in snap.statements)


def _exit_code(value: Any) -> int | str | None:
    """sys.exit's argument as the run reported it: an int64, a short string, or None."""
    if isinstance(value, str):
        return clean(value[:200])
    return value if isinstance(value, int) and not isinstance(value, bool) and whole(value, 0) == value else None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _names(value: Any) -> list[str]:
    return [clean(n) for n in _list(value)[:200] if isinstance(n, str) and len(n) <= MAX_NAME]


def _cell(value: Any) -> int | None:
    number = whole(value)
    return number if number >= 0 else None


def _error(error: dict) -> dict:
    match = CELL_FILE.fullmatch(text(error.get("file"), 100))
    return {"type": text(error.get("type"), 100) or "Error", "message": text(error.get("message"), 2000),
            "line": whole(error.get("line")) if error.get("line") is not None else None,
            "cell": int(match.group(1)) if match else None,
            "traceback": text(error.get("traceback"), 8000),
            "grader_fault": error.get("grader_fault") is True, "through_setup": error.get("through_setup") is True}
