"""Caches that forget a bad moment (issue 56): a world the reference fell short in while its runs hit a limit or
waited for a busy CPU is judged again when next asked, never kept as rejected; a clean rejection is kept; the
reference's own run that did not complete is asked for again, a few times, instead of leaving the process without a
yardstick. The judging and the run are replaced by stand-ins that fail first and succeed after."""

from __future__ import annotations

from pathlib import Path

import pytest

import grader.grading.reference_runs as reference_runs
import grader.grading.warm_state as warm_state
from grader.common.user_cache import CACHE_DIR_ENV
from grader.config.assignment import load
from grader.grading.warm_state import WarmState
from grader.grading.world_check import WorldVerdict, judged_under

ROOT = Path(__file__).resolve().parent.parent
SHORT = ("hvp.plain_matches_oracle: 0/7: In the variant run: ...",)


@pytest.fixture(scope="module")
def assignment():
    return load("performance-05", ROOT)


def test_a_rejection_under_load_or_a_limit_is_not_worth_keeping_a_clean_one_is():
    loaded = WorldVerdict(5, 93, 100, SHORT, {}, ("the variant run waited 27.5 s for a busy CPU",))
    assert not loaded.worth_keeping
    assert WorldVerdict(5, 93, 100, SHORT, {}, ()).worth_keeping
    assert WorldVerdict(5, 100, 100, (), {}, ("the variant run waited 1 s for a busy CPU",)).worth_keeping
    assert WorldVerdict.from_payload(loaded.payload()) == loaded
    record = {"messages": [], "runs": {"variant": {"ending": "completed", "cpu_wait_allowance_seconds": 3.0},
                                       "baseline": {"ending": "killed_wall", "cpu_wait_allowance_seconds": 0.0}}}
    conditions = judged_under(record)
    assert any("waited 3 s" in c for c in conditions) and any("killed_wall" in c for c in conditions), conditions


def test_a_world_rejected_while_loaded_is_judged_again(assignment, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    verdicts = [WorldVerdict(77, 93, 100, SHORT, {}, ("the variant run waited 27.5 s for a busy CPU",)),
                WorldVerdict(77, 100, 100, (), {}, ())]
    judged = []

    def judge(assignment, facts, seed, runner):
        judged.append(seed)
        return verdicts[len(judged) - 1]

    monkeypatch.setattr(warm_state, "judge_world", judge)
    state = WarmState(assignment, public_source="x = 1\n")
    assert not state.world(77, facts={}).suitable
    assert state.world(77, facts={}).suitable and len(judged) == 2
    assert state.world(77, facts={}).suitable and len(judged) == 2   # a clean verdict is kept


def test_a_clean_rejection_is_kept(assignment, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    judged = []
    monkeypatch.setattr(warm_state, "judge_world",
                        lambda *args: judged.append(1) or WorldVerdict(78, 93, 100, SHORT, {}, ()))
    state = WarmState(assignment, public_source="x = 1\n")
    assert not state.world(78, facts={}).suitable and not state.world(78, facts={}).suitable
    assert len(judged) == 1


def test_the_references_run_that_did_not_complete_is_asked_for_again(assignment, monkeypatch):
    outcomes = [None, "snapshot"]
    calls = []

    def run(assignment, scenario, seed, runner, batch_seed):
        calls.append(scenario)
        return outcomes[min(len(calls) - 1, len(outcomes) - 1)]

    monkeypatch.setattr(reference_runs, "_run", run)
    ask = reference_runs.reference_runs(assignment, {"variant": 123456}, None, 654321)
    assert ask("variant") is None and ask("variant") == "snapshot" and ask("variant") == "snapshot"
    assert len(calls) == 2
    monkeypatch.setattr(reference_runs, "_run", lambda *args: calls.append("never") or None)
    never = reference_runs.reference_runs(assignment, {"variant": 999}, None, 111)
    assert [never("variant") for _ in range(5)] == [None] * 5
    assert calls.count("never") == reference_runs.ATTEMPTS
