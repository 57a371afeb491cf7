"""otter's grade CSV (`final_grades.csv`) and the CSV safety every class file shares.

`final_grades.csv` is laid out exactly as `otter grade` writes it: `file` (the submission's entry name in the
submissions folder), one column per question (here a question is a check, as in the results.json), sorted by
name, then `total_points_earned`, `percent_correct` (a fraction 0-1 rounded to 4 digits, as otter writes it) and
`grading_status` ("Completed", or the reason the file could not be graded). The first row is
`points-per-question`, rows are sorted by file. Canvas's CSV is grader.lms.canvas.
"""

from __future__ import annotations

import csv
import io

from grader.model.record import Record, held_checks
from grader.model.verdicts import grader_fault

POINTS_POSSIBLE_LABEL = "points-per-question"      # otter.grade.utils.POINTS_POSSIBLE_LABEL
COMPLETED = "Completed"


def final_grades_csv(records: list[Record], checks: list[tuple[str, float]]) -> str:
    """otter's final_grades.csv. `checks`: (check id, points) for every check of the assignment."""
    questions = sorted(checks)
    total = sum(points for _, points in questions)
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["file", *(name for name, _ in questions), "total_points_earned", "percent_correct", "grading_status"])
    writer.writerow([POINTS_POSSIBLE_LABEL, *(num(points) for _, points in questions), num(total), "1", "--"])
    for record in sorted(records, key=lambda r: (entry_name(r), r["submission"])):
        scores = {check["id"]: check["score"] for check in record["checks"]}
        graded = record["status"] == "graded"
        status = COMPLETED if graded else (record["messages"][0] if record["messages"] else "not graded")
        fraction = round(record["score"] / record["max_score"], 4) if record["max_score"] else 0.0
        if grader_fault(record):   # no score the grader did not earn: empty cells, the status says why
            writer.writerow([safe_cell(entry_name(record)), *("" for _ in questions), "", "",
                             safe_cell(f"Grader error: {status}")])
            continue
        if held := held_checks(record):   # neither docked nor credited: the total waits for the instructor
            writer.writerow([safe_cell(entry_name(record)), *("" if name in held else num(scores.get(name, 0.0))
                                                              for name, _ in questions), "", "",
                             safe_cell(f"Held for the instructor's review: {', '.join(held)}")])
            continue
        writer.writerow([safe_cell(entry_name(record)), *(num(scores.get(name, 0.0)) for name, _ in questions),
                         num(record["score"]), num(fraction), safe_cell(status)])
    return stream.getvalue()


def entry_name(record: Record) -> str:
    """The name of the submission's entry in the submissions folder, as otter's `file` column gives it: the file's
    name, or the folder's for a Gradescope-style folder (never a path inside it)."""
    return str(record["file"]).split("/")[0]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def safe_cell(value: object) -> str:
    """Text for a CSV cell that no spreadsheet runs as a formula: a cell starting with = + - @ (or a tab or return)
    gets a leading apostrophe, as OWASP's CSV-injection guidance recommends. Numbers we write are left alone."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def num(value: float) -> str:
    """Plain decimal, exact enough for points (6 decimals), no float noise: 3.0 -> '3', 2.5 -> '2.5'."""
    return f"{round(float(value), 6):.12g}"
