"""The class-level files describe exactly the records beside them: one results folder holds one class, and the
class average is one number, defined once, everywhere it is shown. Hand-made records; no JAX run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import grader.cli.main
from grader.config.assignment import load
from grader.outputs.reports import class_context, write_reports
from grader.outputs.results_folder import OWNER_FILE, ResultsFolderTaken, claim, record_names
from grader.outputs.summary import class_average, summary_table


def record(submission: str, score: float, status: str = "graded") -> dict:
    return {"submission": submission, "file": f"{submission}.py", "assignment": "performance-05", "title": "T",
            "status": status, "score": score, "max_score": 100.0, "groups": {"runs": {"score": score, "max_score": 100.0}},
            "checks": [], "messages": [], "environment": {}, "variant_seed": 1}


def write_records(out: Path, *names: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        (out / f"{name}.json").write_text(json.dumps(record(name, 50.0)))
        (out / f"{name}.feedback.md").write_text("feedback")


# ---- one class average ---------------------------------------------------------------------------------------

def test_the_terminal_and_the_report_give_the_same_class_average_and_say_errors_count_as_zero():
    records = [record("a", 100.0), record("b", 60.0), record("c", 75.0), record("d", 0.0, "error")]
    average = class_average(records)
    assert (average.mean, average.median, average.errors) == (58.75, 67.5, 1)
    table = summary_table(records, {"runs": {"points": 100}})
    assert "total                       100    58.8 (median 67.5; over 4 submission(s), the 1 that could not be " \
           "run counting as 0)" in table
    context = class_context(records, load("performance-05"), {})
    assert context["average"] == average


def test_a_record_the_grader_failed_on_is_left_out_of_the_average_and_said_not_graded():
    fault = {**record("e", 0.0, "error"), "grader_error": "the grader could not prepare the run"}
    records = [record("a", 100.0), record("b", 60.0), record("c", 75.0), record("d", 0.0, "error"), fault]
    average = class_average(records)
    assert (average.mean, average.submissions, average.grader_faults) == (58.75, 4, 1)
    table = summary_table(records, {"runs": {"points": 100}})
    assert "NOT GRADED: 1 submission(s) could not be graded through the grader's own fault (e)" in table
    assert "e" in table and "grader_error" in table


def test_report_html_shows_that_same_average(tmp_path):
    records = [record("a", 100.0), record("b", 60.0), record("c", 75.0), record("d", 0.0, "error")]
    write_reports(tmp_path, records, load("performance-05"), {}, {})
    page = (tmp_path / "report.html").read_text()
    assert "Mean <strong>58.8 / 100</strong>" in page and "median 67.5" in page
    assert "over 4 submission(s), the 1 that could not be run counting as 0" in page


# ---- one class per results folder -----------------------------------------------------------------------------

def test_a_sibling_folders_results_are_never_mixed_with_this_one(tmp_path):
    out = tmp_path / "results"
    claim(out, tmp_path / "hw1", "performance-05", ["alice", "bob"])
    write_records(out, "alice", "bob")
    for ids in (["carol"], ["alice"]):     # other students, or the same names in another class: both refused
        with pytest.raises(ResultsFolderTaken, match=r"holds the results of .*hw1 .*--out DIR"):
            claim(out, tmp_path / "hw2", "performance-05", ids)
    assert record_names(out) == ["alice", "bob"]
    with pytest.raises(ResultsFolderTaken):      # the same folder under another assignment is another class too
        claim(out, tmp_path / "hw1", "other-lesson", ["alice", "bob"])


def test_a_submission_that_left_the_folder_takes_its_record_out_of_the_class_files(tmp_path):
    out = tmp_path / "results"
    claim(out, tmp_path / "hw1", "performance-05", ["alice", "bob", "carol"])
    write_records(out, "alice", "bob", "carol")
    (out / "gradescope").mkdir()
    (out / "gradescope" / "carol.json").write_text("{}")
    [note] = claim(out, tmp_path / "hw1", "performance-05", ["alice", "bob"])
    assert "1 record(s) of submissions no longer in the submissions folder moved to" in note and "carol" in note
    assert record_names(out) == ["alice", "bob"]
    [moved] = (out / "removed").iterdir()
    assert sorted(p.name for p in moved.iterdir()) == ["carol.feedback.md", "carol.json", "gradescope-carol.json"]


def test_a_folder_of_records_from_before_the_owner_file_is_adopted_only_when_they_are_all_this_classs(tmp_path):
    out = tmp_path / "results"
    write_records(out, "alice", "bob")
    with pytest.raises(ResultsFolderTaken, match=r"records of submissions that are not in this folder: 1 record\(s\) \(bob\)"):
        claim(out, tmp_path / "hw1", "performance-05", ["alice"])
    assert claim(out, tmp_path / "hw1", "performance-05", ["alice", "bob"]) == []
    assert json.loads((out / OWNER_FILE).read_text())["submissions"] == str((tmp_path / "hw1").resolve())


def test_grading_an_empty_folder_writes_nothing_and_says_so(tmp_path, capsys):
    empty, out = tmp_path / "empty", tmp_path / "results"
    empty.mkdir()
    write_records(out, "alice")
    assert grader.cli.main.main(["grade", str(empty), "--assignment", "performance-05"]) == 2
    assert "no submissions in" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["alice.feedback.md", "alice.json"]      # no header-only CSV


def test_grade_refuses_the_default_results_folder_of_a_sibling_before_grading_anyone(tmp_path, capsys):
    out = tmp_path / "results"
    claim(out, tmp_path / "section-a", "performance-05", ["alice"])
    write_records(out, "alice")
    section_b = tmp_path / "section-b"
    section_b.mkdir()
    (section_b / "zoe.py").write_text("x = 1\n")
    assert grader.cli.main.main(["grade", str(section_b), "--assignment", "performance-05"]) == 2
    error = capsys.readouterr().err
    assert f"{out} holds the results of {tmp_path / 'section-a'}" in error and "--out DIR" in error
    assert record_names(out) == ["alice"] and not (out / "grades.csv").exists()
