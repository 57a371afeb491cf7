"""Every text a run can make long is cut to a documented length before it reaches a record (grading/record_limits.py),
and the record says what was cut: the record, its pages and the class report stay small whatever a run sends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.config.assignment import load
from grader.grading.engine import CheckResult
from grader.grading.grade import assemble
from grader.grading.record_limits import FEEDBACK_CHARS, MESSAGE_CHARS, MESSAGES, RECORD_BYTES, bounded_figure
from grader.intake.discovery import load_single
from grader.lms.gradescope import results_json
from grader.model.record import record_to_json
from grader.model.verdicts import limit_notes
from grader.outputs.summary import summary_table
from grader.outputs.writers import feedback_markdown

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def assignment():
    return load("performance-05", ROOT)


def amplified_record(assignment, tmp_path):
    """A record whose every check quotes a 2-million-character value and whose run wrote 500 long messages."""
    path = tmp_path / "amplifier.py"
    path.write_text("x = 1\n", encoding="utf-8")
    submission = load_single(path, "performance-05.py", 1 << 20)
    huge = "['yyyy', " * 200_000
    checks = [CheckResult(id=spec.id, group=spec.group, score=0.0, max_score=spec.points, visibility=spec.visibility,
                          feedback=f"found y = {huge}") for spec in assignment.checks]
    messages = [f"statement {i} raised: {'z' * 50_000}" for i in range(500)]
    return assemble(assignment, submission, "graded", checks, messages, 7)


def test_an_amplified_record_and_its_pages_stay_small(assignment, tmp_path):
    record = amplified_record(assignment, tmp_path)
    assert len(record_to_json(record).encode()) <= RECORD_BYTES
    assert len(feedback_markdown(record).encode()) <= RECORD_BYTES
    assert len(json.dumps(results_json(record)).encode()) <= RECORD_BYTES
    for check in record["checks"]:
        assert len(check["feedback"]) <= FEEDBACK_CHARS + 40
        assert check["feedback"].endswith(f"… cut, {len('found y = ') + 9 * 200_000 - FEEDBACK_CHARS} characters")
    assert len(record["messages"]) == MESSAGES + 1 and record["messages"][-1].startswith("… and 460 more messages")
    assert all(len(m) <= MESSAGE_CHARS + 40 for m in record["messages"])


def test_the_record_and_the_summary_name_what_was_cut(assignment, tmp_path):
    record = amplified_record(assignment, tmp_path)
    assert record["capped"] == [f"feedback of {c.id}" for c in assignment.checks] + ["messages"]
    assert any(note.startswith("Cut to the record's limits") for note in limit_notes(record))
    table = summary_table([record], assignment.groups)
    assert "CAPPED: 1 record(s)" in table and "amplifier" in table


def test_an_honest_record_is_not_capped(assignment, tmp_path):
    path = tmp_path / "honest.py"
    path.write_text("x = 1\n", encoding="utf-8")
    checks = [CheckResult(id=spec.id, group=spec.group, score=spec.points, max_score=spec.points,
                          visibility=spec.visibility, feedback="Matches.") for spec in assignment.checks]
    record = assemble(assignment, load_single(path, "performance-05.py", 1 << 20), "graded", checks, ["In the variant run, all went well."], 7)
    assert "capped" not in record and record["checks"][0]["feedback"] == "Matches."
    assert "CAPPED" not in summary_table([record], assignment.groups)


def test_figure_data_too_large_is_not_kept():
    small = {"kind": "panels", "panels": [{"y": [1, 2]}]}
    assert bounded_figure(small) is small
    large = {"kind": "panels", "panels": [{"y": ["yyyy"] * 100_000}]}
    kept = bounded_figure(large)
    assert isinstance(kept, str) and kept.startswith("(not kept: ")


def test_escaping_cannot_outgrow_the_record_size(assignment, tmp_path):
    """Control characters and non-ASCII text grow up to six-fold once written as JSON: the last guard (`fit`) cuts
    every text until the written record fits, and says so."""
    from grader.grading.record_limits import fit

    record = amplified_record(assignment, tmp_path)
    for check in record["checks"]:
        check["feedback"] = "\x01\u00e9" * 2000
    record["explanations"] = {c["id"]: {"baseline": {"feedback": "\x02" * 2000, "values": {"x": "\x03" * 400}}}
                              for c in record["checks"]}
    assert len(record_to_json(record).encode()) > RECORD_BYTES
    fit(record, lambda kept: len(record_to_json(kept).encode()))
    assert len(record_to_json(record).encode()) <= RECORD_BYTES
    assert "every text, to fit the record's size" in record["capped"]


def test_the_output_kept_is_its_beginning_and_its_end():
    from grader.grading.record_limits import OUTPUT_CHARS, bounded_output

    printed = "".join(f"line {n}\n" for n in range(10_000))
    head, tail = bounded_output(printed, "", False)
    assert printed.startswith(head) and printed.endswith(tail) and len(head) == len(tail) == OUTPUT_CHARS
    short = "a" * (OUTPUT_CHARS + 10)
    assert bounded_output(short, "", False) == (short[:OUTPUT_CHARS], short[OUTPUT_CHARS:])
    assert bounded_output("HEAD" * 10_000, "TAIL" * 10_000, True) == (("HEAD" * 10_000)[:OUTPUT_CHARS],
                                                                       ("TAIL" * 10_000)[-OUTPUT_CHARS:])
