"""Class grade files for an LMS: otter's `final_grades.csv` layout, and a Canvas gradebook import CSV.

`final_grades.csv` is laid out exactly as `otter grade` writes it: `file`, one column per question (here
a question is a check, as in the results.json and in the GradingResults our otter plugin hands otter),
sorted by name, then `total_points_earned`, `percent_correct` (a fraction 0-1 rounded to 4 digits, as
otter writes it) and `grading_status` ("Completed", or the reason the file could not be graded). The
first row is `points-per-question`, rows are sorted by file.

`canvas.csv` is what Canvas's gradebook import reads: `Student`, `ID`, `SIS User ID`, `SIS Login ID`,
`Section`, then one column `<title> (<id>)` holding the score in points, after a `Points Possible` row.
Canvas matches a row to a student by `ID`, else `SIS User ID`, else `SIS Login ID`. The grader only
knows submission ids, so without a roster a row has the submission id as `Student` and as
`SIS Login ID` (right when submissions are named by login). A roster (Canvas's own gradebook export,
or any CSV with those five columns) fills all five from the row whose `SIS Login ID`, `SIS User ID` or
`ID` equals the submission id. The id in the column title is `[lms] canvas_assignment_id` from the
assignment config when set (Canvas then updates that assignment), else the assignment id.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

POINTS_POSSIBLE_LABEL = "points-per-question"      # otter.grade.utils.POINTS_POSSIBLE_LABEL
COMPLETED = "Completed"
CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_POSSIBLE = "    Points Possible"     # as Canvas writes it in its own exports
ROSTER_KEYS = ("SIS Login ID", "SIS User ID", "ID")


def final_grades_csv(records: list[dict], checks: list[tuple[str, float]]) -> str:
    """otter's final_grades.csv. `checks`: (check id, points) for every check of the assignment."""
    questions = sorted(checks)
    total = sum(points for _, points in questions)
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["file", *(name for name, _ in questions), "total_points_earned", "percent_correct", "grading_status"])
    writer.writerow([POINTS_POSSIBLE_LABEL, *(_num(points) for _, points in questions), _num(total), "1", "--"])
    for record in sorted(records, key=lambda r: (r["file"], r["submission"])):
        scores = {check["id"]: check["score"] for check in record["checks"]}
        graded = record["status"] == "graded"
        status = COMPLETED if graded else (record["messages"][0] if record["messages"] else "not graded")
        fraction = round(record["score"] / record["max_score"], 4) if record["max_score"] else 0.0
        writer.writerow([safe_cell(record["file"]), *(_num(scores.get(name, 0.0)) for name, _ in questions),
                         _num(record["score"]), _num(fraction), safe_cell(status)])
    return stream.getvalue()


def canvas_column(title: str, column_id: str) -> str:
    return f"{title} ({column_id})"


def canvas_csv(records: list[dict], column: str, points_possible: float, roster: dict[str, dict] | None = None) -> str:
    """Canvas gradebook import: the five student columns, then `column` with each record's score."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([*CANVAS_STUDENT_COLUMNS, column])
    writer.writerow([CANVAS_POINTS_POSSIBLE, "", "", "", "", _num(points_possible)])
    for record in sorted(records, key=lambda r: r["submission"]):
        student = (roster or {}).get(record["submission"])
        if student is None:
            student = {"Student": record["submission"], "SIS Login ID": record["submission"]}
        writer.writerow([*(safe_cell(student.get(name, "")) for name in CANVAS_STUDENT_COLUMNS), _num(record["score"])])
    return stream.getvalue()


def load_roster(path: Path) -> dict[str, dict]:
    """Roster rows keyed by every non-empty `SIS Login ID`, `SIS User ID` and `ID` (a Canvas export works)."""
    with open(path, newline="", encoding="utf-8-sig") as stream:
        rows = list(csv.DictReader(stream))
    students = [{name: (row.get(name) or "").strip() for name in CANVAS_STUDENT_COLUMNS} for row in rows
                if (row.get("Student") or "").strip() != "Points Possible"]
    roster: dict[str, dict] = {}
    for key in ROSTER_KEYS:  # in order of preference: a login match wins over an id match
        for student in students:
            if student[key]:
                roster.setdefault(student[key], student)
    return roster


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def safe_cell(value: object) -> str:
    """Text for a CSV cell that no spreadsheet runs as a formula: a cell starting with = + - @ (or a tab or return)
    gets a leading apostrophe, as OWASP's CSV-injection guidance recommends. Numbers we write are left alone."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _num(value: float) -> str:
    """Plain decimal, exact enough for points (6 decimals), no float noise: 3.0 -> '3', 2.5 -> '2.5'."""
    return f"{round(float(value), 6):.12g}"
