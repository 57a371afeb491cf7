"""The compilation cache every run reads holds programs of public code only (grader/runs/compile_cache.py).

A run can list the cache and read every entry: an entry's name is the program's name (`jit_vdot`) and its content
carries the program's metadata (the transformations applied, the source lines). Warmed by the reference
solution, it would tell every run how the reference computed the exercises. It is warmed by the public starter."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import grader.config.assignment
from grader.authoring.starter import public_code
from grader.runs import compile_cache
from grader.runs.jobs import make_job
from grader.sandbox.isolation import Bubblewrap, strongest_available
from grader.sandbox.process import run_job


def entries(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir() if path.is_file()}


@pytest.mark.slow
def test_the_cache_holds_no_program_only_the_reference_solution_compiles(reference_cache, tmp_path):
    if not isinstance(strongest_available(), Bubblewrap):
        pytest.skip("without bubblewrap no cache is warmed (there is no fork server to read it)")
    assignment = grader.config.assignment.load("performance-05")
    warmed = compile_cache.cache_folder(reference_cache.folder("performance-05").absolute())
    public = entries(warmed)
    # What the reference solution compiles, starting from the warmed cache (a trusted run that may write a copy).
    solved = tmp_path / "solved"
    shutil.copytree(warmed, solved)
    job = make_job(assignment, assignment.scenarios["baseline"], assignment.lesson_seed,
                   assignment.solution_path.read_text(encoding="utf-8"), assignment.submission_filename)
    job["compilation_cache_dir"] = compile_cache.SANDBOX_PATH
    run_job(job, assignment.limits, strongest_available().with_writable(solved, compile_cache.SANDBOX_PATH), own_uid=False)
    only_the_solution = entries(solved) - public
    assert public, "the public starter warmed nothing"
    assert only_the_solution, "the solution compiles nothing of its own: this test would mean nothing"
    assert any(name.startswith("jit_vdot") for name in only_the_solution)   # its method, by name
    # The warm-up itself, once more, into an empty folder: the same programs, none of the solution's.
    again = compile_cache.warm(assignment, tmp_path / "again", {"baseline": assignment.lesson_seed}, public_code(assignment))
    assert entries(again) == public and not entries(again) & only_the_solution


def test_a_cache_warmed_by_a_solution_is_never_used(tmp_path):
    """Caches warmed before this rule, by the reference solution (folder `compiled-<hash of the environment>`, in
    every `OUT/.grader-cache/` and user cache), are left where they are and never shown to a run again."""
    import hashlib
    import json

    from grader.common.environment import environment

    old = tmp_path / f"compiled-{hashlib.sha256(json.dumps(environment(), sort_keys=True).encode()).hexdigest()[:12]}"
    assert compile_cache.cache_folder(tmp_path).parent == tmp_path
    assert compile_cache.cache_folder(tmp_path) != old
