"""The table `grader grade` prints at the end: how the class did per group, and who needs a look; and the one
definition of the class average that the table and report.html both show."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from grader.model.record import Record
from grader.model.verdicts import limit_notes, passed

LISTED = 40   # submissions listed one per line up to this many; beyond, only the ones that need a look


@dataclass(frozen=True)
class ClassAverage:
    """Over every submission with a record: one that could not be graded counts as 0, as it does in grades.csv and
    in every gradebook file."""

    mean: float            # points
    median: float
    max_score: float
    submissions: int
    errors: int

    @property
    def mean_percent(self) -> float:
        return 100.0 * self.mean / self.max_score if self.max_score else 0.0

    @property
    def median_percent(self) -> float:
        return 100.0 * self.median / self.max_score if self.max_score else 0.0

    @property
    def counted(self) -> str:
        """What the average is over, in words."""
        errors = f", the {self.errors} that could not be graded counting as 0" if self.errors else ""
        return f"over all {self.submissions} submission(s){errors}"


def class_average(records: list[Record], max_score: float | None = None) -> ClassAverage:
    totals = [float(r["score"]) if r["status"] == "graded" else 0.0 for r in records]
    maximum = max_score if max_score is not None else (float(records[0]["max_score"]) if records else 0.0)
    return ClassAverage(mean=statistics.fmean(totals) if totals else 0.0,
                        median=statistics.median(totals) if totals else 0.0, max_score=maximum,
                        submissions=len(records), errors=sum(1 for r in records if r["status"] != "graded"))


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
    flagged = [r for r in records if r["status"] != "graded" or limit_notes(r)]
    shown = sorted(records, key=lambda r: r["submission"]) if len(records) <= LISTED else flagged
    if shown:
        lines.append("")
        lines.append("submissions:" if len(records) <= LISTED else "submissions that errored or hit a limit:")
        for record in shown:
            note = " (hit a limit)" if limit_notes(record) else ""
            lines.append(f"  {record['submission']:<32} {record['score']:>6g} / {record['max_score']:g}  "
                         f"{record['status']}{note}")
    return "\n".join(lines)
