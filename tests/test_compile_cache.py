"""The compiled programs every run reads come from public code only (grader/runs/compile_cache.py, warm_state.py).

A run can list the cache and read every entry: an entry's name is the program's name (`jit_vdot`) and its content
carries the program's metadata (the transformations applied, the source lines). Warmed by the reference
solution, it would tell every run how the reference computed the exercises, unless the lesson itself shows the
solution ([assignment] solution_is_public, as performance-05's page does: the tests below make it private). The warm state's programs are the
public starter's; the reference solution's runs (facts, figures) never write any, and nothing but the starter's
parts is linked into the view the runs read."""

from __future__ import annotations

import copy
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from seeded_zip import SEED

import grader.config.assignment
import grader.grading.warm_state
import grader.grading.warm_up as warm_up
from grader.authoring.starter import public_code
from grader.common.user_cache import CACHE_DIR_ENV
from grader.grading.warm_state import REFERENCE, WarmState, warm_key
from grader.runs import compile_cache
from grader.runs.jobs import run_scenario
from grader.sandbox.child.encoding import encode_value


def entries(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir() if path.is_file()}


def program_name(entry: str) -> str:
    """`jit_vdot-<hash>-cache` -> `jit_vdot`: what a program's entry says of it before its hash."""
    return entry.split("-", 1)[0]


@pytest.fixture(scope="module")
def assignment():
    """performance-05 as if its solution were private (its lesson page prints it, so it says solution_is_public):
    the starter alone warms the cache."""
    loaded = grader.config.assignment.load("performance-05")
    config = copy.deepcopy(loaded.config)
    config["assignment"]["solution_is_public"] = False
    return replace(loaded, config=config)


def test_a_public_solution_warms_the_cache_and_a_private_one_never_does(assignment):
    public = grader.config.assignment.load("performance-05")
    assert public.solution_is_public and public_code(public) == public.solution_path.read_text(encoding="utf-8")
    assert not assignment.solution_is_public
    starter = public_code(assignment)
    assert starter and starter != assignment.solution_path.read_text(encoding="utf-8")
    assert "jax.jvp(jax.grad(plain)" not in starter       # the HVP exercise is a TODO in what every student gets


def test_the_method_sampler_follows_a_public_solution_only(assignment):
    """A large batch warms the cache with the sampler after the public solution (issue 29); it names methods, so a
    private solution's lesson never gets it."""
    public = grader.config.assignment.load("performance-05")
    sampler = public.method_sampler()
    assert sampler and "jax.hessian" in sampler
    sampled = public_code(public, with_sampler=True)
    assert sampled.startswith(public.solution_path.read_text(encoding="utf-8")) and sampled.endswith(sampler)
    assert assignment.method_sampler() == "" and public_code(assignment, with_sampler=True) == public_code(assignment)
    assert public.method_sampler_min_submissions >= 2


@pytest.mark.slow
def test_the_programs_hold_none_only_the_reference_solution_compiles(assignment, tmp_path):
    if not compile_cache.can_cache():
        pytest.skip("without bubblewrap no programs are kept (there is no fork server to read them)")
    state = WarmState(assignment, public_source=public_code(assignment))   # the session's warm state
    starter = state.starter()
    assert starter is not None and starter.folder is not None
    public = entries(starter.folder)
    # What the reference solution compiles, starting from the starter's programs (a trusted run that may write a copy).
    solved = tmp_path / "solved"
    shutil.copytree(starter.folder, solved)
    run_scenario(assignment, assignment.scenarios["baseline"], assignment.lesson_seed,
                 assignment.solution_path.read_text(encoding="utf-8"), assignment.submission_filename,
                 compile_cache.filling_runner(solved))
    only_the_solution = entries(solved) - public
    assert public, "the public starter compiled nothing"
    assert only_the_solution, "the solution compiles nothing of its own: this test would mean nothing"
    assert any(name.startswith("jit_vdot") for name in only_the_solution)   # its method, by name
    # A batch's variant world (its programs start from the starter's): none of the solution's methods either.
    methods = {program_name(name) for name in only_the_solution} - {program_name(name) for name in public}
    variant = state.seed(SEED, SEED, starter)
    assert variant is not None and variant.folder is not None and entries(variant.folder) > public
    assert not {program_name(name) for name in entries(variant.folder)} & methods
    # The facts and figures parts hold no files at all.
    assert state.read_reference() is not None and state.read_reference().folder is None


class RecordingStart:
    """Stands in for the fork server's start: keeps the folder the runs would read."""
    folders: list[Path | None] = []

    def __init__(self, compile_cache: Path | None, note, ready=None):
        RecordingStart.folders.append(compile_cache)

    def runner(self):
        return None

    def close(self):
        pass


def test_only_the_starters_programs_reach_the_view_runs_read(assignment, tmp_path, monkeypatch):
    """A facts part holding files (as the reference solution's runs once left them) is never linked into a
    command's view; the public starter's part is."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(compile_cache, "can_cache", lambda: True)
    monkeypatch.setattr(warm_up, "ServerStart", RecordingStart)
    state = WarmState(assignment, public_source="x = 1\n")
    names = assignment.config["assignment"]["reference_facts"]

    def solution_programs(staging):
        (staging / "jit_vdot-0123-cache").write_bytes(b"the solution's method")
        return {"facts": {name: encode_value(0, 10**6) for name in names}}

    def starter_programs(staging):
        (staging / "jit_objective-4567-cache").write_bytes(b"the lesson's given code")
        return {}

    state.store.build(REFERENCE, solution_programs, True)
    state.store.build(state._starter_name(), starter_programs, True)
    RecordingStart.folders = []
    with warm_up.warmed_up(assignment, {"baseline": assignment.lesson_seed}, lambda text: None, warm_fresh_seeds=False,
                           public_source="x = 1\n") as warm:
        view = RecordingStart.folders[0]
        assert view is not None and entries(view) == {"jit_objective-4567-cache"}
        assert set(warm.facts) == set(names)


def test_a_warm_state_warmed_another_way_is_never_used(assignment, monkeypatch):
    """Entries keyed before programs came from public code only (when the reference solution warmed them) have
    another key: they are never read, let alone shown to a run."""
    key = warm_key(assignment)
    monkeypatch.setattr(grader.grading.warm_state.compile_cache, "WARMED_BY", "the reference solution")
    assert warm_key(assignment) != key
