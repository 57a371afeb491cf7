"""What a student is told about how their run went: every failed statement accounted for, the line Python's own
traceback names, messages cut at a word, a syntax error first and never called a completed run. Hand-built
snapshots (no JAX run); the corpus cases error_inside_loop, many_failing_statements and syntax_error_at_top show the
same through the sandbox."""

from __future__ import annotations

import pytest

import grader.config.assignment
from grader.api.builtin_checks import no_statement_failed
from grader.common.text import clip
from grader.grading.engine import RunView, _combine, evaluate, scenario_notes
from grader.grading.grade import run_messages, run_summary
from grader.model.verdicts import read_first_heading, stopped_early
from grader.runs.places import failure_place
from grader.runs.snapshot import Snapshot, Statement, build_snapshot
from grader.sandbox.raw_run import RawRun

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
    assert any(m.startswith("In [4], line 3 has a syntax error (SyntaxError: invalid syntax); that cell did not run "
                            "(the other cells did") for m in run_messages(assignment, "baseline", snap))


# ---- feedback that is true of the run it describes ---------------------------------------------------

def _skipped_cell_run() -> Snapshot:
    frames = [{"type": "syntax_error", "line": 5, "cell": 9, "message": "SyntaxError: '(' was never closed"},
              {"type": "done", "kind": "completed"}]
    return build_snapshot(RawRun(frames=frames, control=b'{"setup": "ok"}\n'), "baseline", 18)


def _spec(assignment, check_id: str):
    return next(spec for spec in assignment.checks if spec.id == check_id)


def test_a_skipped_notebook_cell_is_what_every_check_missing_its_names_says(assignment):
    """dave.ipynb: a cell with a syntax error is skipped as in Jupyter; nothing says the file "stopped", the runs
    checks name the syntax error, and the record says which cell did not run."""
    snap = _skipped_cell_run()
    view = RunView(snap)
    for check_id in ("runs.no_errors", "runs.reached_end", "hvp.plain_matches_oracle"):
        spec = _spec(assignment, check_id)
        fraction, feedback = evaluate(assignment.check_function(spec.function), spec, view, None, assignment.settings)
        assert fraction == 0.0
        assert "In [9], line 5" in feedback and "syntax error" in feedback, (check_id, feedback)
        assert "stopped before" not in feedback, (check_id, feedback)
    with pytest.raises(Exception, match=r"the cell at In \[9\], line 5 has a syntax error .* did not run, so names it "
                                        r"would have defined are missing"):
        view.value("hvp_plain")
    summary = run_summary(snap)
    assert summary["ending"] == "completed" and summary["skipped"] == ["In [9], line 5: SyntaxError: '(' was never closed"]
    record = {"runs": {"baseline": summary}, "messages": ["x"]}
    assert stopped_early(record) and read_first_heading(record) == "Read this first: part of your notebook did not run"


def test_the_runs_check_names_the_statements_that_raised_before_any_todo(assignment):
    """The untouched starter: `eps = ...` is a TODO, but runs.no_errors is about the statements that raised."""
    placeholder = Statement(index=3, line=210, end_line=210, assigns=["automatic"], status="error", placeholder=True,
                            error={"type": "TypeError", "message": "unsupported operand", "line": 210, "cell": None,
                                   "traceback": "", "grader_fault": False, "through_setup": False})
    view = RunView(snapshot(placeholder))
    spec = _spec(assignment, "runs.no_errors")
    fraction, feedback = evaluate(assignment.check_function(spec.function), spec, view, None, assignment.settings)
    assert fraction == 0.0 and feedback.startswith("The statement at line 210 raised TypeError"), feedback
    assert "`eps`" in feedback                        # the unfinished names are still listed, after the reason


def test_a_failure_in_the_variant_run_is_labelled_and_the_variant_described_once(assignment):
    spec = _spec(assignment, "memory.recorded_as_dicts")
    snaps = {"baseline": snapshot(), "variant": snapshot(scenario="variant")}
    outcomes = [("baseline", 1.0, "fine"), ("variant", 0.0, "`memory` has no dict for the plain executable.")]
    result = _combine(assignment, spec, outcomes, snaps, {})
    description = assignment.scenarios["variant"].description
    assert result.feedback.startswith("In the variant run: `memory` has no dict") and description not in result.feedback
    other = _combine(assignment, _spec(assignment, "memory.figures_match_compiler"), outcomes, snaps, {})
    assert scenario_notes(assignment, [result, other]) == [f"About the variant run: {description}."]


def test_the_memory_feedback_says_the_graders_figures_are_shifted(assignment):
    """The grader's runs (baseline too) offset the compiler's figures: a failing memory check says to read them from
    memory_analysis(), and a passing one says nothing of it."""
    spec = _spec(assignment, "memory.figures_match_compiler")
    snaps = {"baseline": snapshot(), "variant": snapshot(scenario="variant")}
    failing = _combine(assignment, spec, [("baseline", 0.0, "not the compiler's"), ("variant", 1.0, "ok")], snaps, {})
    assert "shifted by amounts only the grader knows" in failing.feedback and "memory_analysis()" in failing.feedback
    passing = _combine(assignment, spec, [("baseline", 1.0, "ok"), ("variant", 1.0, "ok")], snaps, {})
    assert "shifted" not in passing.feedback
