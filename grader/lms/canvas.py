"""Canvas: a gradebook import CSV that lands in the right column and the right rows, with every mismatch named.

The column. Canvas's import reads a header `Name (123)` as "the assignment with id 123" and a bare header as
"the assignment with this exact name"; anything else creates a new assignment. So the header is
`<title> (<canvas_assignment_id>)` when `[lms] canvas_assignment_id` (a number) is set in assignment.toml, else
`[lms] canvas_assignment_name` (default: the assignment's title) alone, which must equal the Canvas assignment's
name.

The rows. Canvas's "Download submissions" names each file `<name>_[LATE_]<user id>_<submission id>_<file>`
(a resubmission adds `-1`, `-2` to the file). That is parsed into the student's name part, Canvas user id and
late flag. With a roster (Canvas's own gradebook export: `Student`, `ID`, `SIS User ID`, `SIS Login ID`,
`Section`), a download name matches the student whose `ID` is its user id; any other submission matches only the
student whose roster field `key` (`--roster-key`: `SIS Login ID` by default, `SIS User ID` or `ID`) equals the
submission id. A plain name is whatever whoever named the file chose, so it is read as that one field only: a file
named after a classmate's Canvas id (`2001.py`) is no login and matches nobody. With a roster only its students get
rows (a submission matching none gets no row, which Canvas could match by its id to whoever has it). One student
never has two rows: when two or more submissions match one student (or, without a roster, one Canvas user id), none
of their rows is written and the warnings name the student and the files, as `grader release` refuses to send
either page. Every submission that matches no student, and every student without a submission, is listed in the
warnings too (printed by `grader grade` and kept in `canvas-warnings.txt`); a late submission says so in grades.csv
and its record.
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
ROSTER_KEYS = ("SIS Login ID", "SIS User ID", "ID")   # what `--roster-key` may name for a plain submission id
DEFAULT_ROSTER_KEY = "SIS Login ID"     # the login: what a plain folder is named by, and never a classmate's Canvas id
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
    key: str = DEFAULT_ROSTER_KEY    # the field a plain submission id is matched against (one of ROSTER_KEYS)

    def __post_init__(self) -> None:
        if self.key not in ROSTER_KEYS:
            raise ValueError(f"the roster key {self.key!r} is none of {', '.join(ROSTER_KEYS)}")

    @classmethod
    def load(cls, path: Path, key: str = DEFAULT_ROSTER_KEY) -> Roster:
        with open(path, newline="", encoding="utf-8-sig") as stream:
            rows = list(csv.DictReader(stream))
        students = [{name: (row.get(name) or "").strip() for name in STUDENT_COLUMNS} for row in rows
                    if (row.get("Student") or "").strip() not in ("Points Possible", "")]
        return cls(students, key)

    def find(self, record: Record) -> dict | None:
        """The student a record is: a Canvas download name's by its user id (Canvas made the name), any other by the
        roster's `key` field alone (whoever named the file chose it: a classmate's other ids never match)."""
        download = parse_download_name(record.get("file", ""))
        if download is not None:
            return next((s for s in self.students if s["ID"] == download.user_id), None)
        submission = str(record["submission"])
        return next((s for s in self.students if s[self.key] and s[self.key] == submission), None)

    def how(self, record: Record) -> str:
        """How `find` looked for the record's student, in words."""
        download = parse_download_name(record.get("file", ""))
        if download is not None:
            return f"by the Canvas user id {download.user_id} of its download name"
        return f"by its {self.key} ({record['submission']!r}; --roster-key names the field)"


def student_name(student: dict) -> str:
    return f"{student.get('Student', '')} ({student.get('SIS Login ID') or student.get('ID') or '?'})"


def canvas_rows(records: list[Record], roster: Roster | None) -> tuple[list[tuple[dict, Record]], list[str]]:
    """(student, record) per row, and the warnings: submissions without a student, students without one, and students
    two or more submissions match (none of whose rows is written: one student, one row, and which is theirs is the
    instructor's call). With a roster only its students get rows; without one, each row is the submission id as
    SIS Login ID, with the Canvas user id of a download name as ID."""
    warnings: list[str] = []
    claims: dict[object, list[tuple[dict, Record]]] = {}
    for record in sorted(records, key=lambda r: r["submission"]):
        download = parse_download_name(record.get("file", ""))
        if roster is not None:
            student = roster.find(record)
            if student is None:
                warnings.append(f"{record['file']}: matches no student of the roster {roster.how(record)}: no row is "
                                "written for it.")
                continue
            who: object = id(student)
        else:
            student = {"Student": record["submission"], "SIS Login ID": record["submission"],
                       "ID": download.user_id if download else ""}
            who = ("ID", student["ID"]) if student["ID"] else ("SIS Login ID", student["SIS Login ID"])
        claims.setdefault(who, []).append((student, record))
    rows = []
    for pairs in claims.values():
        if len(pairs) == 1:
            rows.append(pairs[0])
            continue
        student = pairs[0][0]
        whom = student_name(student) if roster is not None else f"Canvas user {student['ID']}"
        files = ", ".join(str(record["file"]) for _, record in pairs)
        warnings.append(f"{whom}: {len(pairs)} submissions match this student ({files}): none of their rows is in "
                        "canvas.csv; keep the one that is theirs in the submissions folder and run `grader grade` "
                        "again, or enter their score in Canvas by hand.")
    rows.sort(key=lambda row: row[1]["submission"])
    if roster is not None:
        warnings += [f"{student_name(s)}: no submission." for s in roster.students if id(s) not in claims]
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
