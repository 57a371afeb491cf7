"""Apply the instructor's adjustments (adjustments_file.py) on top of a record's autograde.

Why here, at writing time: every record is written through the batch's files (graded now or reused from an earlier
run), so applying them there makes every `grader grade`, `--regrade` included, show the same decisions in every
output, and the autograde is never lost: the record keeps it under `autograde`, the adjustments that changed it under
`adjustments`, and those held back under `pending_adjustments` with the reason.

Nothing is applied blindly: an adjustment made for another version of the file (its `sha256`), one naming a check
the assignment no longer has, or one that would leave a score outside 0..max is held back (pending) until the
instructor confirms it (`grader adjust ... --confirm`); a record the grader could not grade gets none.
`apply` is a pure function of the record and the adjustments (it returns the record itself when it has nothing to
apply or undo), and `autograded` undoes it, so re-applying is idempotent.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from grader.config.late import TARGET as LATE
from grader.lms.late import deduct
from grader.model.record import AppliedAdjustment, Autograde, PendingAdjustment, Record
from grader.model.verdicts import FULL_SCORE_SLACK, grader_fault
from grader.outputs.adjustments_file import Adjustment

KEYS = ("autograde", "adjustments", "pending_adjustments")


def autograded(record: Record) -> Record:
    """The record as the grader graded it: any adjustment undone (a copy; the argument is left alone)."""
    base = copy.deepcopy(record)
    kept = base.get("autograde")
    if isinstance(kept, dict):
        base["score"] = kept["score"]
        base["groups"] = kept["groups"]
        for check in base["checks"]:
            check["score"] = kept["checks"].get(check["id"], check["score"])
    for key in KEYS:
        base.pop(key, None)   # type: ignore[misc]
    if "late" in base:   # the late policy's charge stays; what was deducted and the instructor's override go
        base["late"]["deducted"] = 0.0
        base["late"].pop("override", None)
    return base


def apply(record: Record, adjustments: list[Adjustment]) -> Record:
    """`record`'s autograde with this submission's adjustments applied (checks first, in the file's order, then the
    whole submission), and those that cannot be applied as they stand listed as pending; then the late policy's
    penalty (or the instructor's decision about it, `late`) comes off the total, never below 0. The one function
    that makes a record's final total."""
    mine = [a for a in adjustments if a.student == record["submission"]]
    late = record.get("late")
    charged = late is not None and (late["penalty"] > 0 or late["deducted"] > 0 or "override" in late)
    if not mine and not charged and not any(key in record for key in KEYS):
        return record   # nothing to apply or undo: the very record (no copy)
    base = autograded(record)
    if not mine and not charged:
        return base
    if grader_fault(base):
        base["pending_adjustments"] = [_pending(a, "the grader could not grade this submission (its own fault): the "
                                                "adjustment applies once a run grades it") for a in mine]
        return base
    result = copy.deepcopy(base)
    checks = {c["id"]: c for c in result["checks"]}
    applied: list[AppliedAdjustment] = []
    pending: list[PendingAdjustment] = []
    for a in sorted((a for a in mine if a.check != LATE), key=lambda a: a.check is None):   # stable: the file's order
        why = _changed(a, base)
        if a.check is not None and a.check not in checks:
            why = f"the assignment has no check `{a.check}` now: remove the adjustment or make it for another check"
        if why:
            pending.append(_pending(a, why))
            continue
        if a.check is not None:
            current, top = checks[a.check]["score"], checks[a.check]["max_score"]
        else:
            current, top = result["score"], result["max_score"]
        new = a.points if a.kind == "set" else current + a.points
        if not -FULL_SCORE_SLACK <= new <= top + FULL_SCORE_SLACK:
            if not a.clamp:
                pending.append(_pending(a, f"it would make the score {new:g}, outside 0..{top:g}: confirm it "
                                           "(`grader adjust ... --confirm`) to clamp it to that range"))
                continue
            new = min(max(new, 0.0), top)
        delta = round(new - current, 6)
        if a.check is not None:
            check = checks[a.check]
            check["score"] = round(new, 6)
            group = result["groups"].get(check["group"])
            if group is not None:
                group["score"] = round(group["score"] + delta, 6)
        result["score"] = round(result["score"] + delta, 6)
        applied.append({"check": a.check, "kind": a.kind, "points": a.points, "delta": delta, "reason": a.reason,
                        "who": a.who, "when": a.when})
    taken = deduct(result, _late_charge(result, [a for a in mine if a.check == LATE], base, pending))
    if applied or taken:
        kept: Autograde = {"score": base["score"], "groups": copy.deepcopy(base["groups"]),
                           "checks": {c["id"]: c["score"] for c in base["checks"]}}
        result["autograde"] = kept
    if applied:
        result["adjustments"] = applied
    if pending:
        result["pending_adjustments"] = pending
    return result


def _late_charge(result: Record, mine: list[Adjustment], base: Record, pending: list[PendingAdjustment]
                 ) -> float | None:
    """The instructor's late penalty in points (`grader adjust STUDENT late`), noted on the record's `late` entry; None
    (the policy's own) without one. The late line reads as a score of -penalty: `--set 0` waives it, `+2` gives two
    points back, `-2` takes two more."""
    entry = result.get("late")
    for a in mine:
        why = _changed(a, base)
        if entry is None:
            why = ("no late penalty applies to this submission now (the [late] policy or its time changed): remove the "
                   "adjustment")
        if why:
            pending.append(_pending(a, why))
            continue
        assert entry is not None
        line = a.points if a.kind == "set" else -float(entry["penalty"]) + a.points
        top = float(result["max_score"])
        if not -top - FULL_SCORE_SLACK <= line <= FULL_SCORE_SLACK:
            if not a.clamp:
                pending.append(_pending(a, f"it would make the late penalty {-line:g} points, outside 0..{top:g}: "
                                           "confirm it (`grader adjust ... --confirm`) to clamp it to that range"))
                continue
            line = min(max(line, -top), 0.0)
        entry["override"] = {"check": LATE, "kind": a.kind, "points": a.points,
                             "delta": round(float(entry["penalty"]) + line, 6), "reason": a.reason, "who": a.who,
                             "when": a.when}
        return -line
    return None


def _changed(a: Adjustment, record: Record) -> str:
    """Why an adjustment does not hold for the record's file as it stands, in words true of it ("" when it does)."""
    if a.sha256 and a.sha256 == record.get("sha256"):
        return ""
    if not a.sha256:   # written by hand into adjustments.toml: it names no version of the file
        return ("it names no version of the submission's file (no `sha256`, as when written by hand): read the file, "
                "then confirm it (`grader adjust ... --confirm`) or remove it")
    return ("the submission's file changed since the adjustment was made: read the new file, then confirm it "
            "(`grader adjust ... --confirm`) or remove it")


def _pending(a: Adjustment, why: str) -> PendingAdjustment:
    return {"check": a.check, "kind": a.kind, "points": a.points, "reason": a.reason, "who": a.who, "when": a.when,
            "why": why}


def adjusted_check(record: Record, check_id: str) -> AppliedAdjustment | None:
    """The applied adjustment of one check of a record (the last, when several changed it), or None."""
    found = [a for a in record.get("adjustments", []) if a.get("check") == check_id]
    return found[-1] if found else None


def describe(adjustment: AppliedAdjustment | PendingAdjustment) -> str:
    """"set to 4" / "+1.5": how an adjustment reads in every output."""
    points = float(adjustment["points"])
    return f"set to {points:g}" if adjustment["kind"] == "set" else f"{points:+g}"


@dataclass
class ClassAdjustments:
    """What the class's adjustments did, for the terminal and report.html: applied, pending, and for nobody."""
    applied: list[tuple[str, AppliedAdjustment]] = field(default_factory=list)
    pending: list[tuple[str, PendingAdjustment]] = field(default_factory=list)
    orphans: list[Adjustment] = field(default_factory=list)     # for a student with no record in this class
    adjusted_submissions: int = 0
    total_change: float = 0.0

    def lines(self) -> list[str]:
        """Plain sentences (the terminal's): one for the count, one per pending or orphan adjustment."""
        if not (self.applied or self.pending or self.orphans):
            return []
        out = [f"{len(self.applied)} instructor adjustment(s) applied to {self.adjusted_submissions} submission(s), "
               f"changing their scores by {self.total_change:+g} point(s) in all."]
        out += [f"NOT applied ({student}, {a['check'] or 'whole submission'}, {describe(a)}): {a['why']}"
                for student, a in self.pending]
        out += [f"NOT applied ({a.student}, {a.check or 'whole submission'}, {a.describe()}): no submission "
                f"{a.student} in this class" for a in self.orphans]
        return out


def summarize(records: list[Record], adjustments: list[Adjustment]) -> ClassAdjustments:
    summary = ClassAdjustments()
    students = {r["submission"] for r in records}
    for record in records:
        applied = record.get("adjustments", [])
        summary.applied += [(record["submission"], a) for a in applied]
        summary.pending += [(record["submission"], a) for a in record.get("pending_adjustments", [])]
        if applied:
            summary.adjusted_submissions += 1
            summary.total_change = round(summary.total_change + sum(a["delta"] for a in applied), 6)
    summary.orphans = [a for a in adjustments if a.student not in students]
    return summary


def student_lines(record: Record, visibilities: tuple[str, ...]) -> list[dict[str, str]]:
    """The applied adjustments as a student reads them (target, change, reason as the instructor wrote it; a hidden
    check is not named). Text is raw: each writer escapes it for its format."""
    visible = {c["id"] for c in record.get("checks", []) if c.get("visibility") in visibilities}
    lines = []
    for a in record.get("adjustments", []):
        check = a.get("check")
        target = "your whole submission" if check is None else (f"check `{check}`" if check in visible else "a hidden check")
        lines.append({"target": target, "change": describe(a), "delta": f"{a['delta']:+g}", "reason": a["reason"]})
    return lines


def autograde_score(record: Record) -> float:
    """The grader's own total (the record's score when no adjustment changed it)."""
    kept = record.get("autograde")
    return float(kept["score"]) if kept else float(record["score"])


def class_rows(records: list[Record]) -> dict[str, Any]:
    """report.html's section: how many submissions were adjusted and by how much, every adjustment, every pending one."""
    applied: list[dict[str, Any]] = [{"id": r["submission"], "check": a.get("check") or "whole submission", "change": describe(a),
                "delta": a["delta"], "reason": a["reason"], "who": a.get("who", ""), "when": a.get("when", "")}
               for r in records for a in r.get("adjustments", [])]
    pending = [{"id": r["submission"], "check": a.get("check") or "whole submission", "change": describe(a),
                "why": a["why"], "reason": a["reason"]} for r in records for a in r.get("pending_adjustments", [])]
    adjusted = [r for r in records if r.get("adjustments")]
    return {"applied": applied, "pending": pending, "n_adjusted": len(adjusted),
            "total_change": round(sum(a["delta"] for a in applied), 6),
            "mean_change": round(sum(a["delta"] for a in applied) / len(adjusted), 6) if adjusted else 0.0}
