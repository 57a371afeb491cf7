"""The next batch's world compiled after a batch returns (grader/cli/world_ahead.py), for real: a large batch leaves
a detached process that builds the programs of the seed the next batch takes from the stock; the next batch finds
them published and compiles none; a small batch, a batch with a given seed and $GRADER_PREPARE_AHEAD=0 leave none.

The assignment's large-batch threshold (`method_sampler_min_submissions`) is lowered on the loaded object so that a
batch of one file counts as large (with the method sampler, as a class would be graded).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.authoring.starter import public_code
from grader.cli import world_ahead
from grader.cli.batch import grade_folder
from grader.config.assignment import load
from grader.grading.seed_stock import SeedStock
from grader.grading.warm_state import WarmState
from grader.runs import jobs

BUILT_BEFORE = "were built before this command"


@pytest.fixture(autouse=True)
def drawn_worlds(monkeypatch):
    """These tests are about drawing worlds: the session's one world (conftest.py, $GRADER_VARIANT_SEED) is not theirs."""
    monkeypatch.delenv(jobs.VARIANT_SEED_ENV, raising=False)


@pytest.fixture
def large_from_one(monkeypatch):
    """performance-05 with every batch of one file or more counted as large."""
    assignment = load("performance-05")
    assignment.config["assignment"]["method_sampler_min_submissions"] = 1
    monkeypatch.setenv(world_ahead.ENABLED_ENV, "1")
    return assignment


def _one_file(tmp_path: Path, assignment, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(assignment.solution_path, folder / "reference.py")
    return folder


@pytest.mark.slow
def test_a_large_batch_leaves_the_next_world_compiled_and_the_next_batch_compiles_none(large_from_one, tmp_path):
    assignment, cache = large_from_one, tmp_path / "cache"
    first_log: list[str] = []
    first = grade_folder(assignment, _one_file(tmp_path, assignment, "a"), tmp_path / "out-a", cache=cache,
                         progress=first_log.append)
    assert first.records[0]["score"] == assignment.max_score
    assert not any(BUILT_BEFORE in line for line in first_log)   # a first batch compiles its own world
    assert first.preparing is not None, "a large batch with a drawn seed leaves its successor's world compiling"
    assert first.preparing.wait(timeout=600) == 0
    state = WarmState(assignment, cache, public_code(assignment, with_sampler=True))
    if not state.compiled:
        pytest.skip("compiled programs cannot be kept on this machine (no bubblewrap): nothing is prepared ahead")
    prepared = SeedStock(state.folder, lambda seed: True).peek()
    assert prepared is not None and prepared != first.variant_seed
    assert state.read_seed(prepared, prepared) is not None, "the stock's next seed has its programs published"
    verdict = state.read_world(prepared)
    assert verdict is not None and verdict.suitable, "and the reference's verdict in its primary run"

    second_log: list[str] = []
    second = grade_folder(assignment, _one_file(tmp_path, assignment, "b"), tmp_path / "out-b", cache=cache,
                          progress=second_log.append)
    try:
        assert second.variant_seed == prepared
        assert any(BUILT_BEFORE in line for line in second_log)
        assert not any("beside the first runs" in line for line in second_log)   # nothing compiled for its world
        assert not any("graded in this batch's world" in line for line in second_log)   # nor judged
        assert second.records[0]["score"] == assignment.max_score
    finally:
        if second.preparing is not None:   # it left the third batch's: nothing outlives the test
            assert second.preparing.wait(timeout=600) == 0


@pytest.mark.slow
def test_no_preparation_when_turned_off_or_small_or_seeded(tmp_path, monkeypatch):
    """Off by the variable; a small batch and one graded with a given seed leave none (nothing of theirs is a
    class's next batch); no process is started in either case."""
    assignment = load("performance-05")
    monkeypatch.setenv(world_ahead.ENABLED_ENV, "0")
    assert world_ahead.start(assignment, tmp_path / "cache", with_sampler=True) is None
    monkeypatch.setenv(world_ahead.ENABLED_ENV, "1")
    started: list[object] = []
    monkeypatch.setattr("grader.cli.batch.start_preparing", lambda *args, **kwargs: started.append(args))
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "empty.py").write_text("")
    result = grade_folder(assignment, folder, tmp_path / "out")   # one file: small (the session's warm state)
    assert result.preparing is None and not started
    assignment.config["assignment"]["method_sampler_min_submissions"] = 1
    result = grade_folder(assignment, folder, tmp_path / "out", regrade=True, variant_seed=12345)
    assert result.preparing is None and not started


def test_the_preparation_builds_nothing_without_a_kept_seed_and_fails_quietly(tmp_path, monkeypatch):
    """The detached process's own entry point: a cache it cannot use ends with status 1 and no output."""
    assert world_ahead.main(["--root", str(tmp_path), "--assignment", "nothing-here", "--cache",
                             str(tmp_path / "cache")]) == 1
