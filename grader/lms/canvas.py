"""Canvas: a gradebook import CSV that lands in the right column and the right rows, with every mismatch named.

The column. Canvas's import reads a header `Name (123)` as "the assignment with id 123" and a bare header as
"the assignment with this exact name"; anything else creates a new assignment. So the header is
`<title> (<canvas_assignment_id>)` when `[lms] canvas_assignment_id` (a number) is set in assignment.toml, else
`[lms] canvas_assignment_name` (default: the assignment's title) alone, which must equal the Canvas assignment's
name.

The rows. Canvas's "Download submissions" names each file `<name>_[LATE_]<user id>_<submission id>_<file>`
(a resubmission adds `-1`, `-2` to the file). That is parsed into the student's name part, Canvas user id and
late flag. With a roster (Canvas's own gradebook export: `Student`, `ID`, `SIS User ID`, `SIS Login ID`,
`Section`), a submission matches the student whose `ID` is that user id, else whose `SIS Login ID`,
`SIS User ID` or `ID` equals the submission id (submissions named by login). Every submission that matches
no student, and every student without a submission, is listed in the warnings (printed by `grader grade` and
kept in `canvas-warnings.txt`); a late submission says so in grades.csv and its record.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from grader.lms.otter_csv import num, safe_cell
from grader.model.record import Record, held_checks
from grader.model.verdicts import grader_fault

STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "    Points Possible"     # as Canvas writes it in its own exports
ROSTER_KEYS = ("SIS Login ID", "SIS User ID", "ID")
DOWNLOAD_NAME = re.compile(r"(?P<name>[^_/]+?)_(?P<late>LATE_)?(?P<user_id>\d+)_(?P<submission_id>\d+)_(?P<file>.+)")


@dataclass(frozen=True)
class DownloadName:
    """What a Canvas download's file name says about who submitted it."""

    name: str
    user_id: str
    submission_id: str
    late: bool
    file: str


def parse_download_name(entry: str) -> DownloadName | None:
    """`smithjane_LATE_12345_67890_lesson.py` -> its parts; None for a name Canvas did not make."""
    match = DOWNLOAD_NAME.fullmatch(entry.split("/")[0])
    if not match:
        return None
    return DownloadName(match["name"], match["user_id"], match["submission_id"], bool(match["late"]), match["file"])


def column_header(assignment) -> str:
    lms = assignment.config.get("lms", {})
    name = str(lms.get("canvas_assignment_name") or assignment.title)
    canvas_id = lms.get("canvas_assignment_id")
    return f"{name} ({canvas_id})" if canvas_id is not None else name


@dataclass
class Roster:
    students: list[dict]

    @classmethod
    def load(cls, path: Path) -> Roster:
        with open(path, newline="", encoding="utf-8-sig") as stream:
            rows = list(csv.DictReader(stream))
        students = [{name: (row.get(name) or "").strip() for name in STUDENT_COLUMNS} for row in rows
                    if (row.get("Student") or "").strip() not in ("Points Possible", "")]
        return cls(students)

    def find(self, record: Record) -> dict | None:
        download = parse_download_name(record.get("file", ""))
        if download is not None:
            found = next((s for s in self.students if s["ID"] == download.user_id), None)
            if found is not None:
                return found
        for key in ROSTER_KEYS:   # in order of preference: a login match wins over an id match
            found = next((s for s in self.students if s[key] and s[key] == record["submission"]), None)
            if found is not None:
                return found
        return None


def canvas_rows(records: list[Record], roster: Roster | None) -> tuple[list[tuple[dict, Record]], list[str]]:
    """(student, record) per row, and the warnings: submissions without a student, students without one."""
    rows, warnings, matched = [], [], set()
    for record in sorted(records, key=lambda r: r["submission"]):
        student = roster.find(record) if roster else None
        if student is None:
            if roster is not None:
                warnings.append(f"{record['file']}: matches no student of the roster; its row uses the submission id.")
            download = parse_download_name(record.get("file", ""))
            student = {"Student": record["submission"], "SIS Login ID": record["submission"],
                       "ID": download.user_id if download else ""}
        else:
            matched.add(id(student))
        rows.append((student, record))
    if roster is not None:
        warnings += [f"{s['Student']} ({s['SIS Login ID'] or s['ID']}): no submission." for s in roster.students
                     if id(s) not in matched]
    warnings += [f"{record['file']}: held for your review ({', '.join(held)}): its row is left empty until you decide "
                 "with `grader adjust`." for record in records if (held := held_checks(record))]
    return rows, warnings


def canvas_csv(records: list[Record], header: str, points_possible: float, roster: Roster | None = None) -> tuple[str, list[str]]:
    """The Canvas gradebook import, and the warnings about who was (not) matched."""
    rows, warnings = canvas_rows(records, roster)
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([*STUDENT_COLUMNS, safe_cell(header)])
    writer.writerow([POINTS_POSSIBLE, "", "", "", "", num(points_possible)])
    for student, record in rows:   # a record the grader failed on, or held for review: an empty cell, which a Canvas
        score = "" if grader_fault(record) or held_checks(record) else num(record["score"])   # import leaves alone
        writer.writerow([*(safe_cell(student.get(name, "")) for name in STUDENT_COLUMNS), score])
    return stream.getvalue(), warnings


def late(record: Record) -> bool:
    download = parse_download_name(record.get("file", ""))
    return bool(download and download.late)
