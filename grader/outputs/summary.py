"""The table `grader grade` prints at the end: how the class did per group, and who needs a look; and the one
definition of the class average that the table and report.html both show."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from grader.model.record import Record, held_checks
from grader.model.verdicts import class_status, grader_fault, limit_notes, passed

LISTED = 40   # submissions listed one per line up to this many; beyond, only the ones that need a look


@dataclass(frozen=True)
class ClassAverage:
    """Over every submission the grader could judge: one whose file could not be run counts as 0, as it does in
    grades.csv and in every gradebook file; one the grader failed on (its own fault) is left out, as its score is
    left blank in every gradebook file, and said."""

    mean: float            # points
    median: float
    max_score: float
    submissions: int
    errors: int
    grader_faults: int = 0

    @property
    def mean_percent(self) -> float:
        return 100.0 * self.mean / self.max_score if self.max_score else 0.0

    @property
    def median_percent(self) -> float:
        return 100.0 * self.median / self.max_score if self.max_score else 0.0

    @property
    def counted(self) -> str:
        """What the average is over, in words."""
        errors = f", the {self.errors} that could not be run counting as 0" if self.errors else ""
        faults = (f"; {self.grader_faults} not graded through the grader's own fault left out (a re-run grades them)"
                  if self.grader_faults else "")
        return f"over {self.submissions} submission(s){errors}{faults}"


def class_average(records: list[Record], max_score: float | None = None) -> ClassAverage:
    judged = [r for r in records if not grader_fault(r)]
    totals = [float(r["score"]) if r["status"] == "graded" else 0.0 for r in judged]
    maximum = max_score if max_score is not None else (float(records[0]["max_score"]) if records else 0.0)
    return ClassAverage(mean=statistics.fmean(totals) if totals else 0.0,
                        median=statistics.median(totals) if totals else 0.0, max_score=maximum,
                        submissions=len(judged), errors=sum(1 for r in judged if r["status"] != "graded"),
                        grader_faults=len(records) - len(judged))


def not_graded_line(records: list[Record]) -> str | None:
    """The line that says how many records the grader could not grade (its own fault), or None."""
    faults = [r["submission"] for r in records if grader_fault(r)]
    if not faults:
        return None
    listed = ", ".join(faults[:10]) + (f" and {len(faults) - 10} more" if len(faults) > 10 else "")
    return (f"NOT GRADED: {len(faults)} submission(s) could not be graded through the grader's own fault ({listed}): "
            "no score is written for them in any gradebook file; fix the cause and run again to grade them.")


def summary_table(records: list[Record], groups: dict[str, dict]) -> str:
    graded = [r for r in records if r["status"] == "graded"]
    lines = [f"{'group':<24} {'points':>6} {'mean':>7} {'full marks':>11}"]
    for group, info in groups.items():
        scores = [r["groups"][group]["score"] if group in r["groups"] else 0.0 for r in graded]
        full = sum(1 for s in scores if passed(s, float(info["points"])))
        mean = statistics.fmean(scores) if scores else 0.0
        lines.append(f"{group:<24} {float(info['points']):>6g} {mean:>7.1f} {full:>5}/{len(scores):<5}")
    if records:
        average = class_average(records)
        lines.append(f"{'total':<24} {average.max_score:>6g} {average.mean:>7.1f} (median {average.median:g}; "
                     f"{average.counted})")
        lines.append(f"(Group rows: the {len(graded)} graded submission(s). Total: {average.counted}.)")
    missing = not_graded_line(records)
    if missing:
        lines.append(missing)
    capped = [r["submission"] for r in records if r.get("capped")]
    if capped:
        listed = ", ".join(capped[:10]) + (f" and {len(capped) - 10} more" if len(capped) > 10 else "")
        lines.append(f"CAPPED: {len(capped)} record(s) had text or values their runs made cut to the record limits ({listed}): "
                     "each record's `capped` says what.")
    review = [r["submission"] for r in records if r.get("review_flags")]
    if review:
        listed = ", ".join(review[:10]) + (f" and {len(review) - 10} more" if len(review) > 10 else "")
        lines.append(f"REVIEW: {len(review)} file(s) reach into JAX's internals or introspect frames or closures "
                     f"({listed}): their method checks are held; `grader explain STUDENT --out OUT` lists where, you "
                     "decide.")
    held = [r["submission"] for r in records if held_checks(r)]
    if held:
        listed = ", ".join(held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
        lines.append(f"HELD: {len(held)} file(s) have checks held without points for your review ({listed}): a "
                     "statement that raised only under the grader's hidden changes, or a file that reads the grader's "
                     "internals; `grader explain STUDENT` shows why and what was found; decide with `grader adjust`.")
    flagged = [r for r in records if r["status"] != "graded" or limit_notes(r)]
    shown = sorted(records, key=lambda r: r["submission"]) if len(records) <= LISTED else flagged
    if shown:
        lines.append("")
        lines.append("submissions:" if len(records) <= LISTED else "submissions that errored or hit a limit:")
        for record in shown:
            note = " (hit a limit)" if limit_notes(record) else ""
            lines.append(f"  {record['submission']:<32} {record['score']:>6g} / {record['max_score']:g}  "
                         f"{class_status(record)}{note}")
    return "\n".join(lines)
