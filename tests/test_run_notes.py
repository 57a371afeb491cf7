"""What a student is told about how their run went: every failed statement accounted for, the line Python's own
traceback names, messages cut at a word, a syntax error first and never called a completed run. Hand-built
snapshots (no JAX run); the corpus cases error_inside_loop, many_failing_statements and syntax_error_at_top show the
same through the sandbox."""

from __future__ import annotations

import pytest

import grader.config.assignment
from grader.api.builtin_checks import no_statement_failed
from grader.common.text import clip
from grader.grading.engine import RunView
from grader.grading.grade import run_messages, run_summary
from grader.runs.places import failure_place
from grader.runs.snapshot import Snapshot, Statement, build_snapshot
from grader.sandbox.process import RawRun

ASSERTION = ("\nNot equal to tolerance rtol=3e-05, atol=1e-07\n\nMismatched elements: 16 / 16 (100%)\n"
             "Max absolute difference among violations: 0.01354\nMax relative difference among violations: 0.9921\n")


@pytest.fixture(scope="module")
def assignment():
    return grader.config.assignment.load("performance-05")


def failed(index: int, line: int, end_line: int | None = None, error_line: int | None = None, message: str = "boom",
           cell: int | None = None, error_cell: int | None = None) -> Statement:
    error = {"type": "ValueError", "message": message, "line": error_line or line, "cell": error_cell if cell else None,
             "traceback": "", "grader_fault": False, "through_setup": False}
    return Statement(index=index, line=line, end_line=end_line or line, assigns=[], status="error", error=error,
                     cell=cell)


def snapshot(*statements: Statement, scenario: str = "baseline", **fields) -> Snapshot:
    return Snapshot(scenario=scenario, seed=18, ending="completed", statements=list(statements), **fields)


def test_every_failed_statement_is_listed_or_counted(assignment):
    snap = snapshot(*[failed(i, 100 + i, message=f"failure {i}") for i in range(10)])
    [note] = [m for m in run_messages(assignment, "baseline", snap) if "raised an error" in m]
    assert note.startswith("In the baseline run, 10 statement(s) raised an error")
    assert "line 104: ValueError: failure 4; and 5 more)." in note and "failure 5" not in note
    exactly = snapshot(*[failed(i, 100 + i) for i in range(5)])
    [note] = [m for m in run_messages(assignment, "baseline", exactly) if "raised an error" in m]
    assert "more" not in note


def test_an_error_inside_a_block_cites_the_line_that_raised():
    loop = failed(0, 50, end_line=66, error_line=63)
    assert failure_place(loop) == "line 63"
    elsewhere = failed(1, 172, error_line=20)          # raised in a function defined at line 20
    assert failure_place(elsewhere) == "line 20 (called from line 172)"
    in_a_cell = failed(2, 1, end_line=5, error_line=4, cell=8, error_cell=8)
    assert failure_place(in_a_cell) == "In [8], line 4"
    helper_cell = failed(3, 2, error_line=3, cell=9, error_cell=2)
    assert failure_place(helper_cell) == "In [2], line 3 (called from In [9], line 2)"


def test_the_runs_check_and_the_notes_name_the_same_line(assignment):
    snap = snapshot(failed(0, 50, end_line=66, error_line=63))
    with pytest.raises(AssertionError, match=r"The statement at line 63 raised ValueError"):
        no_statement_failed(RunView(snap), None, None)
    assert any("(line 63: ValueError: boom)" in m for m in run_messages(assignment, "baseline", snap))


def test_an_assertion_message_is_cut_at_a_word_never_inside_one(assignment):
    snap = snapshot(failed(0, 239, message=ASSERTION))
    [note] = [m for m in run_messages(assignment, "baseline", snap) if "raised an error" in m]
    quoted = note[note.index("ValueError: ") + len("ValueError: "):note.rindex(").")]
    assert quoted.endswith("…") and len(quoted) <= 160
    words = set(ASSERTION.split())
    assert all(word in words for word in quoted.rstrip("…").split())       # whole words only
    assert "\n" not in note


@pytest.mark.parametrize("text, limit, expected", [
    ("short", 10, "short"), ("one two three four", 12, "one two…"), ("a\n\nb   c", 20, "a b c"),
    ("Max relative difference", 20, "Max relative…"), ("unbreakableword", 6, "unbre…")])
def test_clip(text, limit, expected):
    assert clip(text, limit) == expected


def test_a_syntax_error_in_a_script_comes_first_once_and_is_not_a_completed_run(assignment):
    frames = [{"type": "syntax_error", "line": 2, "cell": None, "message": "SyntaxError: '(' was never closed"},
              {"type": "done", "kind": "completed"}]
    raw = RawRun(frames=frames, control=b'{"setup": "ok"}\n')
    baseline, variant = build_snapshot(raw, "baseline", 18), build_snapshot(raw, "variant", 7)
    assert baseline.ending == variant.ending == "syntax_error" and run_summary(baseline)["ending"] == "syntax_error"
    notes = run_messages(assignment, "baseline", baseline) + run_messages(assignment, "variant", variant, baseline)
    assert [n for n in notes if "syntax error" in n] == [
        "Your file has a syntax error at line 2 (SyntaxError: '(' was never closed): Python could not read it past that "
        "line, so only the statements before it ran and every value assigned after it is missing. Fix it first."]
    view = RunView(baseline)
    with pytest.raises(Exception, match=r"`w` is not defined: your file has a syntax error at line 2"):
        view.value("w")


def test_a_syntax_error_in_a_notebook_cell_skips_only_that_cell(assignment):
    frames = [{"type": "syntax_error", "line": 3, "cell": 4, "message": "SyntaxError: invalid syntax"},
              {"type": "done", "kind": "completed"}]
    snap = build_snapshot(RawRun(frames=frames, control=b'{"setup": "ok"}\n'), "baseline", 18)
    assert snap.ending == "completed"
    assert "In [4], line 3 has a syntax error (SyntaxError: invalid syntax); that cell did not run (the other cells " \
           "did)." in run_messages(assignment, "baseline", snap)
