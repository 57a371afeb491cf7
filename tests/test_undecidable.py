"""A check whose run cannot decide it (`grader.api.Undecidable`) is neither failed nor passed: where no run that
could decide it failed it, it is held for the instructor with its sentence, no points until they decide; a run that
decided it and failed it still fails it, with that run's feedback; a run that passed it does not pass it alone
(grader/grading/engine.py `_combine`, grader/grading/run_plan.py `held_by_checks`). Hand-made snapshots, a check
swapped in for the lesson's own (as tests/test_check_faults.py does)."""

from __future__ import annotations

from grader.api import Undecidable
from grader.grading.engine import run_checks
from grader.grading.run_plan import held_by_checks, merged_holds
from tests.test_check_faults import ORACLES, reference, student, with_check

WHY = "along the tangent this file chose, this run's changes are too small to tell the methods apart."


def judged(verdicts: dict[str, str]):
    """A check whose verdict in each run is given: 'pass', 'fail' or 'undecidable'."""
    def check(run, oracle, settings):
        verdict = verdicts[run.scenario]
        if verdict == "undecidable":
            raise Undecidable(WHY)
        if verdict != "pass":
            raise AssertionError("The value is wrong.")
        return "right."
    return check


def test_undecidable_where_the_other_run_passes_is_held_with_its_sentence():
    (result,) = run_checks(with_check(judged({"variant": "undecidable", "baseline": "pass"})), student(), ORACLES,
                           reference=reference())
    assert result.score == 0 and not result.passed and result.held == WHY
    assert result.feedback == "Held for your instructor's review (no points until they decide): " + result.held
    hold = held_by_checks([result])
    assert hold is not None and hold["checks"] == ["runs.probe"] and result.held in hold["why"]


def test_a_run_that_decides_and_fails_wins_over_an_undecidable_one():
    (result,) = run_checks(with_check(judged({"variant": "undecidable", "baseline": "fail"})), student(), ORACLES,
                           reference=reference())
    assert result.score == 0 and not result.held and "The value is wrong." in result.feedback
    assert held_by_checks([result]) is None


def test_undecidable_everywhere_is_held_and_a_pass_is_a_pass():
    (held,) = run_checks(with_check(judged({"variant": "undecidable", "baseline": "undecidable"})), student(),
                         ORACLES, reference=reference())
    assert held.score == 0 and held.held
    (passed,) = run_checks(with_check(judged({"variant": "pass", "baseline": "pass"})), student(), ORACLES,
                           reference=reference())
    assert passed.passed and not passed.held and held_by_checks([passed]) is None


def test_a_check_hold_merges_with_a_statement_hold():
    (result,) = run_checks(with_check(judged({"variant": "undecidable", "baseline": "pass"})), student(), ORACLES,
                           reference=reference())
    statement = {"scenario": "variant", "statement": "line 3 raised AssertionError", "checks": ["gradients.x"]}
    merged = merged_holds(statement, held_by_checks([result]))
    assert merged is not None and merged["checks"] == ["gradients.x", "runs.probe"]
    assert "line 3 raised AssertionError" in merged["why"] and "no run's values could decide" in merged["why"]
