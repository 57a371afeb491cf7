"""otter's final_grades.csv and the Canvas import CSV, read back with the csv module."""

from __future__ import annotations

import csv
import io

from grader.lms_csv import (CANVAS_POINTS_POSSIBLE, CANVAS_STUDENT_COLUMNS, POINTS_POSSIBLE_LABEL, canvas_column,
                            canvas_csv, final_grades_csv, load_roster)

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
    assert [row[0] for row in table[2:]] == ["alice.py", "bob/performance-05.py", "carol.py", "erin.py"]


def test_final_grades_round_trip():
    parsed = list(csv.DictReader(io.StringIO(final_grades_csv(RECORDS, CHECKS))))
    by_file = {row["file"]: row for row in parsed[1:]}
    for original in RECORDS:
        row = by_file[original["file"]]
        for check in original["checks"]:
            assert float(row[check["id"]]) == round(check["score"], 6)
        assert float(row["total_points_earned"]) == round(original["score"], 6)
        assert float(row["percent_correct"]) == round(original["score"] / original["max_score"], 4)
    assert by_file["alice.py"]["grading_status"] == "Completed"
    assert by_file["erin.py"]["grading_status"] == "erin.py is empty."
    assert by_file["bob/performance-05.py"]["hvp.secret"] == "0.333333"
    assert by_file["alice.py"]["percent_correct"] == "1"


def test_canvas_without_roster_uses_the_submission_id_as_login():
    column = canvas_column("Memory, rematerialization, and optimization tradeoffs", "performance-05")
    text = canvas_csv(RECORDS, column, 14.5)
    table = rows(text)
    assert table[0] == [*CANVAS_STUDENT_COLUMNS, "Memory, rematerialization, and optimization tradeoffs (performance-05)"]
    assert table[1] == [CANVAS_POINTS_POSSIBLE, "", "", "", "", "14.5"]
    parsed = list(csv.DictReader(io.StringIO(text)))[1:]
    assert [row["SIS Login ID"] for row in parsed] == ["alice", "bob", "carol", "erin"]
    assert [row["Student"] for row in parsed] == ["alice", "bob", "carol", "erin"]
    assert all(row["ID"] == row["SIS User ID"] == row["Section"] == "" for row in parsed)
    assert [float(row[column]) for row in parsed] == [14.5, round(1 / 3, 6), 10.0, 0.0]


def test_canvas_with_a_canvas_export_as_roster(tmp_path):
    export = tmp_path / "export.csv"
    with open(export, "w", newline="", encoding="utf-8-sig") as stream:   # Canvas exports carry a BOM
        writer = csv.writer(stream)
        writer.writerow([*CANVAS_STUDENT_COLUMNS, "Quiz 1 (101)"])
        writer.writerow(["    Points Possible", "", "", "", "", "10"])
        writer.writerow(["Lee, Alice", "1001", "S-1", "alice", "Sec A", "7"])
        writer.writerow(["Ng, Bob", "1002", "bob", "bng", "Sec B", "8"])    # matched by SIS User ID
        writer.writerow(["Diaz, Carol", "carol", "", "", "Sec A", ""])      # matched by Canvas ID
    roster = load_roster(export)
    column = canvas_column("Lesson", "4242")
    parsed = list(csv.DictReader(io.StringIO(canvas_csv(RECORDS, column, 14.5, roster))))
    assert parsed[0]["Student"] == CANVAS_POINTS_POSSIBLE
    students = {row["Student"]: row for row in parsed[1:]}
    assert students["Lee, Alice"] == {"Student": "Lee, Alice", "ID": "1001", "SIS User ID": "S-1",
                                      "SIS Login ID": "alice", "Section": "Sec A", "Lesson (4242)": "14.5"}
    assert students["Ng, Bob"]["SIS Login ID"] == "bng" and students["Ng, Bob"]["ID"] == "1002"
    assert students["Diaz, Carol"]["ID"] == "carol" and students["Diaz, Carol"]["Lesson (4242)"] == "10"
    assert students["erin"]["SIS Login ID"] == "erin"        # not on the roster: submission id as login
    assert "    Points Possible" not in roster and "Points Possible" not in roster


def test_roster_prefers_a_login_match_over_an_id_match(tmp_path):
    export = tmp_path / "export.csv"
    export.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nFirst,alice,,x1,\nSecond,2,,alice,\n")
    assert load_roster(export)["alice"]["Student"] == "Second"
