"""The table `grader grade` prints at the end: how the class did per group, and who needs a look."""

from __future__ import annotations

import statistics

from grader.model.record import Record
from grader.model.verdicts import limit_notes, passed

LISTED = 40   # submissions listed one per line up to this many; beyond, only the ones that need a look


def summary_table(records: list[Record], groups: dict[str, dict]) -> str:
    graded = [r for r in records if r["status"] == "graded"]
    lines = [f"{'group':<24} {'points':>6} {'mean':>7} {'full marks':>11}"]
    for group, info in groups.items():
        scores = [r["groups"][group]["score"] if group in r["groups"] else 0.0 for r in graded]
        full = sum(1 for s in scores if passed(s, float(info["points"])))
        mean = statistics.fmean(scores) if scores else 0.0
        lines.append(f"{group:<24} {float(info['points']):>6g} {mean:>7.1f} {full:>5}/{len(scores):<5}")
    totals = [r["score"] for r in graded]
    if totals:
        lines.append(f"{'total':<24} {graded[0]['max_score']:>6g} {statistics.fmean(totals):>7.1f} "
                     f"(median {statistics.median(totals):g}, {len(graded)} graded, {len(records) - len(graded)} error)")
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
