"""The result record of one submission (`<id>.json`), as types.

The record stays a plain dict at runtime (TypedDicts), so the JSON on disk is exactly what `json.dumps` of the
dict gives and records written before these types existed still load. mypy checks every key a reader uses.
docs/reference.md's `<id>.json` row is tested against these keys (tests/test_record_schema.py).
"""


import json
from typing import Any, NotRequired, TypedDict, cast

from grader.common.text import clean_data


class CheckRecord(TypedDict):
    """One check's outcome (`CheckResult` in the engine, as stored)."""
    id: str
    group: str
    score: float
    max_score: float
    visibility: str
    feedback: str


class GroupScore(TypedDict):
    score: float
    max_score: float


class RunSummary(TypedDict):
    """How one scenario's run went (an entry of `runs`)."""
    seed: int | None
    ending: str          # completed, syntax_error (a script stopped there), sys_exit, killed_wall, exited_early, setup_failed, lost
    seconds: float
    statements: int
    failed_statements: int
    returncode: int | None
    output_bytes: int
    cpu_seconds: float | None
    max_rss_bytes: int | None
    cpu_wait_allowance_seconds: NotRequired[float]   # added to the wall limit: time it waited for a CPU others held
    skipped: NotRequired[list[str]]   # notebook cells skipped for a syntax error, as Jupyter skips them ("In [9], line 5: ...")


class OutputExcerpt(TypedDict):
    """The head and tail of the baseline run's output."""
    head: str
    tail: str
    bytes: int
    omitted_bytes: int


class AppliedAdjustment(TypedDict):
    """An instructor's adjustment as applied to this record (grader/outputs/adjustments.py): `check` None for the
    whole submission, `kind` "set" or "add", `delta` what it changed the score by."""
    check: str | None
    kind: str
    points: float
    delta: float
    reason: str
    who: str
    when: str


class PendingAdjustment(TypedDict):
    """An adjustment not applied until the instructor confirms it, and why (the file changed since, no such check,
    a score outside 0..max, a record the grader could not grade)."""
    check: str | None
    kind: str
    points: float
    reason: str
    who: str
    when: str
    why: str


class LateEntry(TypedDict):
    """The course's late policy ([late] of assignment.toml) applied to this submission (grader/lms/late.py): when it
    was submitted (None: the LMS marks it late without a time, so nothing is charged), how late, what the policy
    charges and what was taken off the total (after the instructor's override, never below 0)."""
    submitted_at: str | None          # ISO 8601 with offset
    due: str
    source: str                       # where the time came from (Gradescope's metadata, a times file, Canvas's name)
    minutes_late: float | None        # after the due date (the grace included)
    grace_minutes: float
    days_charged: int                 # started days after due + grace
    penalty: float                    # points the policy charges
    deducted: float                   # points taken off the total: the penalty or the instructor's override
    override: NotRequired[AppliedAdjustment]   # `grader adjust STUDENT late ...`, when it applied


class Autograde(TypedDict):
    """The grader's own scores, kept when an instructor's adjustment changed the record's."""
    score: float
    groups: dict[str, GroupScore]
    checks: dict[str, float]


class ReviewHold(TypedDict):
    scenario: str          # the run where a statement of the file raised that the file as written passes ("" for a flag)
    statement: str         # where, and what it raised (or what the file reads of the grader's internals)
    checks: list[str]      # the checks held: no points until the instructor decides
    why: NotRequired[str]  # the whole sentence, where the hold is not a statement that raised in one run only
    credited: NotRequired[dict[str, float]]   # what each held check scored before it was held (a flag hold)


def hold_reason(hold: ReviewHold) -> str:
    """Why checks are held, in one sentence for the instructor."""
    return hold.get("why") or f"{hold['statement']} only in the {hold['scenario']} run (the file as written passed it)"


class Record(TypedDict):
    submission: str
    file: str
    assignment: str
    title: str
    status: str                       # "graded" or "error"
    score: float
    max_score: float
    groups: dict[str, GroupScore]
    checks: list[CheckRecord]
    messages: list[str]
    environment: dict[str, str]
    variant_seed: int
    sha256: str
    fingerprint: str
    runs: NotRequired[dict[str, RunSummary]]
    output: NotRequired[OutputExcerpt]
    figures: NotRequired[dict[str, Any]]                   # scenario -> the figure value, JSON-safe
    grader_faults: NotRequired[dict[str, list[str]]]       # scenario -> why the grader failed in that run
    reported_grader_faults: NotRequired[dict[str, list[str]]]  # claims from the run, for the instructor only
    grader_error: NotRequired[str]                         # the grader's traceback when it failed on this file
    check_errors: NotRequired[dict[str, str]]              # check id -> traceback of a bug in that check (instructor only)
    unscored_checks: NotRequired[list[CheckRecord]]        # what each check found on a record the grader could not
                                                           # grade (its own fault: a check's bug); instructor only
    autograde: NotRequired[Autograde]                      # the grader's scores, when adjustments changed them
    adjustments: NotRequired[list[AppliedAdjustment]]      # the instructor's adjustments applied on top
    pending_adjustments: NotRequired[list[PendingAdjustment]]  # adjustments held back until confirmed (instructor only)
    explanations: NotRequired[dict[str, dict[str, Any]]]   # check id -> scenario -> what it compared (instructor only)
    review_flags: NotRequired[list[str]]                   # where the file reaches into JAX's internals or introspects
                                                           # (intake/introspection.py): instructor only, never scored
    capped: NotRequired[list[str]]                         # which texts were cut to the record limits (record_limits.py)
    runs_why: NotRequired[str]                             # which runs the file got and why (grading/run_plan.py)
    review_hold: NotRequired[ReviewHold]                   # checks held for the instructor's decision (run_plan.py)
    late: NotRequired[LateEntry]                           # the late policy applied (lms/late.py): late submissions only


def record_to_json(record: Record) -> str:
    """The record as written to `<id>.json` (NaN refused: JSON has none; an odd value is written as its str; a lone
    surrogate, which JSON would write as an escape that no reader can write out again, as U+FFFD)."""
    return json.dumps(clean_data(record), indent=2, allow_nan=False, default=str) + "\n"


def record_from_json(text: str) -> Record:
    """A record read back; older records (fewer optional keys) load as they are, any lone surrogate in them (an
    escape in the JSON) as U+FFFD."""
    record = clean_data(json.loads(text))
    if not isinstance(record, dict) or not isinstance(record.get("checks"), list):
        raise ValueError("not a grading record: expected a JSON object with a `checks` list")
    return cast(Record, record)


def ran(record: Record) -> tuple[str, ...]:
    """The scenarios a record's file was run in (none for a file that did not run)."""
    runs = record.get("runs")
    return tuple(runs) if isinstance(runs, dict) else ()


def held_checks(record: Record) -> list[str]:
    """The checks of a record still held for the instructor's review: held, and no adjustment decided them."""
    hold = record.get("review_hold")
    if not isinstance(hold, dict):
        return []
    decided = {a.get("check") for a in record.get("adjustments", [])}
    if None in decided:   # an adjustment of the whole submission decides everything held
        return []
    return [check for check in hold.get("checks", []) if check not in decided]
