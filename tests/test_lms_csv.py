"""otter's final_grades.csv and the Canvas import CSV, read back with the csv module."""

from __future__ import annotations

import csv
import io
from types import SimpleNamespace

from grader.lms.canvas import POINTS_POSSIBLE as CANVAS_POINTS_POSSIBLE
from grader.lms.canvas import STUDENT_COLUMNS as CANVAS_STUDENT_COLUMNS
from grader.lms.canvas import (
    Roster,
    canvas_csv,
    column_header,
    late,
    parse_download_name,
)
from grader.lms.otter_csv import POINTS_POSSIBLE_LABEL, final_grades_csv

CHECKS = [("runs.no_errors", 3.0), ("hvp.secret", 9.0), ("directional.eps", 2.5)]


def record(submission: str, scores: dict[str, float], status: str = "graded", file: str | None = None,
           messages: list[str] | None = None) -> dict:
    checks = [{"id": name, "score": scores.get(name, 0.0), "max_score": points} for name, points in CHECKS]
    return {"submission": submission, "file": file or f"{submission}.py", "status": status,
            "score": sum(c["score"] for c in checks), "max_score": sum(p for _, p in CHECKS),
            "checks": checks, "messages": messages or []}


RECORDS = [
    record("carol", {"runs.no_errors": 3.0, "hvp.secret": 4.5, "directional.eps": 2.5}),
    record("alice", {"runs.no_errors": 3.0, "hvp.secret": 9.0, "directional.eps": 2.5}),
    record("erin", {}, status="error", messages=["erin.py is empty.", "Isolation used: none."]),
    record("bob", {"hvp.secret": 1.0 / 3.0}, file="bob/performance-05.py"),
]


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_final_grades_has_otters_layout():
    table = rows(final_grades_csv(RECORDS, CHECKS))
    assert table[0] == ["file", "directional.eps", "hvp.secret", "runs.no_errors",   # questions sorted, as otter
                        "total_points_earned", "percent_correct", "grading_status"]
    assert table[1] == [POINTS_POSSIBLE_LABEL, "2.5", "9", "3", "14.5", "1", "--"]
    # the entry's name in the submissions folder, as otter writes it: a folder's name, never a path inside it
    assert [row[0] for row in table[2:]] == ["alice.py", "bob", "carol.py", "erin.py"]


def test_final_grades_round_trip():
    parsed = list(csv.DictReader(io.StringIO(final_grades_csv(RECORDS, CHECKS))))
    by_file = {row["file"]: row for row in parsed[1:]}
    for original in RECORDS:
        row = by_file[original["file"].split("/")[0]]
        for check in original["checks"]:
            assert float(row[check["id"]]) == round(check["score"], 6)
        assert float(row["total_points_earned"]) == round(original["score"], 6)
        assert float(row["percent_correct"]) == round(original["score"] / original["max_score"], 4)
    assert by_file["alice.py"]["grading_status"] == "Completed"
    assert by_file["erin.py"]["grading_status"] == "erin.py is empty."
    assert by_file["bob"]["hvp.secret"] == "0.333333"
    assert by_file["alice.py"]["percent_correct"] == "1"


def assignment(**lms):
    return SimpleNamespace(title="Memory, rematerialization, and optimization tradeoffs", id="performance-05",
                           config={"lms": lms})


def test_canvas_header_is_one_canvas_can_match():
    """Canvas reads `Name (123)` as assignment 123 and a bare name as the assignment of that name."""
    assert column_header(assignment(canvas_assignment_id=4242)) == "Memory, rematerialization, and optimization tradeoffs (4242)"
    assert column_header(assignment()) == "Memory, rematerialization, and optimization tradeoffs"
    assert column_header(assignment(canvas_assignment_name="Lesson 5")) == "Lesson 5"


def test_canvas_without_roster_uses_the_submission_id_as_login():
    text, warnings = canvas_csv(RECORDS, "Lesson 5", 14.5)
    table = rows(text)
    assert table[0] == [*CANVAS_STUDENT_COLUMNS, "Lesson 5"]
    assert table[1] == [CANVAS_POINTS_POSSIBLE, "", "", "", "", "14.5"]
    parsed = list(csv.DictReader(io.StringIO(text)))[1:]
    assert [row["SIS Login ID"] for row in parsed] == ["alice", "bob", "carol", "erin"]
    assert [float(row["Lesson 5"]) for row in parsed] == [14.5, round(1 / 3, 6), 10.0, 0.0]
    assert warnings == []


def test_canvas_download_names_are_parsed():
    name = parse_download_name("smithjane_LATE_12345_67890_performance-05.py")
    assert (name.name, name.user_id, name.submission_id, name.late, name.file) == (
        "smithjane", "12345", "67890", True, "performance-05.py")
    on_time = parse_download_name("leealice_1001_555_performance-05-1.ipynb")
    assert on_time.user_id == "1001" and not on_time.late and on_time.file == "performance-05-1.ipynb"
    assert parse_download_name("alice.py") is None
    assert late({"file": "smithjane_LATE_12345_67890_performance-05.py"}) and not late({"file": "alice.py"})


def write_export(path):
    with open(path, "w", newline="", encoding="utf-8-sig") as stream:   # Canvas exports carry a BOM
        writer = csv.writer(stream)
        writer.writerow([*CANVAS_STUDENT_COLUMNS, "Quiz 1 (101)"])
        writer.writerow(["    Points Possible", "", "", "", "", "10"])
        writer.writerow(["Lee, Alice", "1001", "S-1", "alice", "Sec A", "7"])
        writer.writerow(["Ng, Bob", "1002", "bob", "bng", "Sec B", "8"])      # matched by SIS User ID
        writer.writerow(["Smith, Jane", "12345", "S-3", "jsmith", "Sec B", ""])  # matched by the download's user id
        writer.writerow(["Quiet, Quinn", "1009", "S-9", "qq", "Sec A", ""])      # submitted nothing


def test_canvas_with_a_roster_matches_download_names_and_warns_about_the_rest(tmp_path):
    export = tmp_path / "export.csv"
    write_export(export)
    roster = Roster.load(export)
    records = RECORDS + [record("smithjane_LATE_12345_67890_performance-05", {"runs.no_errors": 3.0},
                                file="smithjane_LATE_12345_67890_performance-05.py")]
    text, warnings = canvas_csv(records, "Lesson (4242)", 14.5, roster)
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert parsed[0]["Student"] == CANVAS_POINTS_POSSIBLE
    students = {row["Student"]: row for row in parsed[1:]}
    assert students["Lee, Alice"] == {"Student": "Lee, Alice", "ID": "1001", "SIS User ID": "S-1",
                                      "SIS Login ID": "alice", "Section": "Sec A", "Lesson (4242)": "14.5"}
    assert students["Ng, Bob"]["SIS Login ID"] == "bng"
    assert students["Smith, Jane"]["ID"] == "12345" and students["Smith, Jane"]["Lesson (4242)"] == "3"
    assert any("carol.py: matches no student" in w for w in warnings)
    assert any("erin.py: matches no student" in w for w in warnings)
    assert any("Quiet, Quinn" in w and "no submission" in w for w in warnings)
    assert not any("Lee, Alice" in w or "Smith, Jane" in w for w in warnings)


def test_roster_prefers_a_login_match_over_an_id_match(tmp_path):
    export = tmp_path / "export.csv"
    export.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nFirst,alice,,x1,\nSecond,2,,alice,\n")
    assert Roster.load(export).find({"submission": "alice", "file": "alice.py"})["Student"] == "Second"
