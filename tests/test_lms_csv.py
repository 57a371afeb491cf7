"""otter's final_grades.csv and the Canvas import CSV, read back with the csv module."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.cli.main import main
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

TINY = Path(__file__).with_name("fixtures") / "tiny_project"
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
    assert students["Smith, Jane"]["ID"] == "12345" and students["Smith, Jane"]["Lesson (4242)"] == "3"
    assert any("carol.py: matches no student" in w for w in warnings)
    assert any("erin.py: matches no student" in w for w in warnings)
    assert any("Quiet, Quinn" in w and "no submission" in w for w in warnings)
    assert not any("Lee, Alice" in w or "Smith, Jane" in w for w in warnings)
    # `bob` is Bob's SIS User ID, not his login: matched only when --roster-key names that field; a submission that
    # matches no student gets no row (issue 65: Canvas would match its id to whoever has it)
    assert "Ng, Bob" not in students and set(students) == {"Lee, Alice", "Smith, Jane"}
    assert any("bob/performance-05.py: matches no student of the roster by its SIS Login ID ('bob'" in w
               for w in warnings), warnings
    text, warnings = canvas_csv(records, "Lesson (4242)", 14.5, Roster.load(export, key="SIS User ID"))
    students = {row["Student"]: row for row in list(csv.DictReader(io.StringIO(text)))[1:]}
    assert students["Ng, Bob"]["SIS Login ID"] == "bng" and "Lee, Alice" not in students   # `alice` is no SIS User ID


def test_roster_matches_a_plain_id_by_the_named_field_only(tmp_path):
    export = tmp_path / "export.csv"
    export.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nFirst,alice,,x1,\nSecond,2,,alice,\n")
    alice = {"submission": "alice", "file": "alice.py"}
    assert Roster.load(export).find(alice)["Student"] == "Second"              # the login, by default
    assert Roster.load(export, key="ID").find(alice)["Student"] == "First"
    assert Roster.load(export, key="SIS User ID").find(alice) is None


# ---- one row per student (issue 65): a file named after a classmate never takes or shares the classmate's row --------

BOB_DOWNLOAD = "ngbob_1002_777_performance-05.py"      # Bob's own file, as Canvas's download named it


def canvas_rows_of(records: list[dict], roster: Roster | None) -> tuple[list[dict], list[str]]:
    text, warnings = canvas_csv(records, "Lesson", 14.5, roster)
    return list(csv.DictReader(io.StringIO(text)))[1:], warnings


def full(submission: str, file: str | None = None) -> dict:
    return record(submission, {"runs.no_errors": 3.0, "hvp.secret": 9.0, "directional.eps": 2.5}, file=file)


def test_a_classmates_login_beside_the_classmates_own_download_leaves_both_rows_out(tmp_path):
    """Two submissions match Bob (his download by its user id, `bng.py` by his login): neither row is written."""
    write_export(tmp_path / "export.csv")
    bob_own = record("ngbob_1002_777_performance-05", {"runs.no_errors": 3.0}, file=BOB_DOWNLOAD)
    parsed, warnings = canvas_rows_of([full("bng"), bob_own, full("alice")], Roster.load(tmp_path / "export.csv"))
    assert [row["Student"] for row in parsed] == ["Lee, Alice"], parsed
    named = [w for w in warnings if "Ng, Bob" in w]
    assert len(named) == 1 and "bng.py" in named[0] and BOB_DOWNLOAD in named[0] and "2 submissions" in named[0]
    assert not any("no submission" in w and "Ng, Bob" in w for w in warnings)


def test_a_classmates_canvas_id_matches_them_only_when_that_field_is_named(tmp_path):
    """`1002.py` (Bob's Canvas user id) beside Bob's own download: by default (SIS Login ID) it matches nobody and
    Bob's one row holds his own score; with --roster-key ID both match Bob and both rows are left out."""
    write_export(tmp_path / "export.csv")
    bob_own = record("ngbob_1002_777_performance-05", {"runs.no_errors": 3.0}, file=BOB_DOWNLOAD)
    parsed, warnings = canvas_rows_of([full("1002"), bob_own], Roster.load(tmp_path / "export.csv"))
    bobs = [row for row in parsed if row["ID"] == "1002" or row["Student"] == "Ng, Bob"]
    assert [row["Lesson"] for row in bobs] == ["3"], parsed
    assert any("1002.py: matches no student of the roster by its SIS Login ID" in w for w in warnings), warnings
    parsed, warnings = canvas_rows_of([full("1002"), bob_own], Roster.load(tmp_path / "export.csv", key="ID"))
    assert parsed == [] and any("Ng, Bob" in w and "1002.py" in w and BOB_DOWNLOAD in w for w in warnings)


def test_a_file_named_after_a_classmate_who_did_not_submit_gets_no_row_of_theirs(tmp_path):
    write_export(tmp_path / "export.csv")
    parsed, warnings = canvas_rows_of([full("1002")], Roster.load(tmp_path / "export.csv"))     # Bob's Canvas id
    assert parsed == [], parsed
    assert any("1002.py: matches no student" in w and "SIS Login ID" in w for w in warnings), warnings
    assert any("Ng, Bob" in w and "no submission" in w for w in warnings)
    # Bob's login, with the SIS User ID named: no student matches, and no row carries `bng` for Canvas to match
    parsed, warnings = canvas_rows_of([full("bng")], Roster.load(tmp_path / "export.csv", key="SIS User ID"))
    assert not any("bng" in row.values() or row["Student"] == "Ng, Bob" for row in parsed), parsed
    assert any("bng.py: matches no student of the roster by its SIS User ID" in w for w in warnings), warnings


def test_without_a_roster_two_files_of_one_canvas_user_leave_both_rows_out():
    first = full("smithjane_12345_67890_performance-05", file="smithjane_12345_67890_performance-05.py")
    second = full("smithjane_12345_67891_performance-05-1", file="smithjane_12345_67891_performance-05-1.py")
    parsed, warnings = canvas_rows_of([first, second, full("alice")], None)
    assert [row["SIS Login ID"] for row in parsed] == ["alice"], parsed
    assert any("Canvas user 12345" in w and first["file"] in w and second["file"] in w for w in warnings), warnings


def test_the_roster_key_is_one_of_the_three_fields():
    with pytest.raises(ValueError, match="SIS Login ID"):
        Roster([], key="Student")


def test_grade_writes_no_row_twice_and_passes_the_roster_key(tmp_path, capsys):
    """Through `grader grade` on the tiny lesson: Bob's Canvas download, `bng.py` (Bob's login) and `1009.py` (the Canvas
    user id of Quinn, who did not submit)."""
    root = tmp_path / "project"
    shutil.copytree(TINY, root)
    submissions = root / "submissions"
    submissions.mkdir()
    correct = (TINY / "solutions" / "tiny.py").read_text()
    (submissions / "ngbob_1002_777_tiny.py").write_text(correct)
    (submissions / "bng.py").write_text("import math\nradius = 2.0\narea = math.pi * radius\nside = 1.0\n")
    (submissions / "1009.py").write_text(correct)
    export = tmp_path / "export.csv"
    write_export(export)
    out = root / "results"

    def grade(*extra: str) -> tuple[int, list[dict], str]:
        code = main(["grade", str(submissions), "--root", str(root), "--assignment", "tiny", "--out", str(out),
                     "--workers", "2", "--no-similarity", "--roster", str(export), *extra])
        printed = capsys.readouterr().out
        return code, list(csv.DictReader(io.StringIO((out / "canvas.csv").read_text())))[1:], printed

    code, parsed, printed = grade()
    assert code == 0, printed
    assert not any(row["Student"] in ("Ng, Bob", "Quiet, Quinn") or row["ID"] in ("1002", "1009") for row in parsed)
    kept = (out / "canvas-warnings.txt").read_text()
    assert "Ng, Bob" in kept and "bng.py" in kept and "ngbob_1002_777_tiny.py" in kept
    assert "1009.py: matches no student of the roster by its SIS Login ID" in kept
    assert "canvas: " in printed and "Ng, Bob" in printed
    code, parsed, printed = grade("--roster-key", "SIS User ID")      # `bng` is no SIS User ID: Bob's download alone
    assert code == 0, printed
    assert [(row["Student"], row["Circle area"]) for row in parsed] == [("Ng, Bob", "3")], parsed
