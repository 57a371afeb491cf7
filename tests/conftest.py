"""Session-wide fixtures: each assignment's reference solution measured once, with its warmed compilation cache.

A batch keeps what it measured in `OUT/.grader-cache/` (reference facts and figures, compiled programs, warm
markers). A fresh output folder would measure them again: a dozen seconds of JAX runs, paid by every test module
that grades. `reference_cache.seed(out)` copies this session's measurement into `out` before the test grades, so
the session pays once. Each output folder gets its own copy: what a batch adds (figures and warm markers for its
variant seed) stays its own, and the measuring itself is still exercised, here, by the real code.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import grader.config.assignment
from grader.authoring.starter import public_code
from grader.grading.reference import reference_facts, reference_figures
from grader.runs import compile_cache
from grader.runs.jobs import scenario_seed

DEFAULT_ASSIGNMENT = "performance-05"


class ReferenceCache:
    """Per assignment, a folder measured once per session; `seed` copies it to where a batch looks."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folders: dict[tuple[str, Path | None], Path] = {}

    def folder(self, assignment_id: str = DEFAULT_ASSIGNMENT, root: Path | None = None) -> Path:
        """`root`: the project holding the assignment (default: this one), as `grader.config.assignment.load` takes it."""
        if (assignment_id, root) not in self.folders:
            assignment = grader.config.assignment.load(assignment_id, root)
            folder = self.root / f"{assignment_id}-{len(self.folders)}"
            reference_facts(assignment, folder)   # the facts and the unseeded figures
            # Scenarios without a fresh seed run with the lesson's seed in every batch: warm them now.
            lesson = {name: assignment.lesson_seed for name, s in assignment.scenarios.items() if not s.fresh_seed}
            compile_cache.warm(assignment, folder, lesson, public_code(assignment))
            self.folders[(assignment_id, root)] = folder
        return self.folders[(assignment_id, root)]

    def seed(self, out: Path, assignment_id: str = DEFAULT_ASSIGNMENT, variant_seed: int | None = None,
             root: Path | None = None) -> Path:
        """Copy the measurement into `out/.grader-cache` (grade_folder's cache); return that folder.

        With the `variant_seed` a test passes to grade_folder, the cache is also warmed, and the reference's
        figures drawn, for that seed (once per session: several modules grade with the same fixed seed)."""
        folder = self.folder(assignment_id, root)
        if variant_seed is not None:
            assignment = grader.config.assignment.load(assignment_id, root)
            seeds = {name: scenario_seed(assignment, s, variant_seed) for name, s in assignment.scenarios.items()}
            compile_cache.warm(assignment, folder, seeds, public_code(assignment))
            reference_figures(assignment, folder, seeds, batch_seed=variant_seed)
        target = Path(out) / ".grader-cache"
        shutil.copytree(folder, target, symlinks=True, dirs_exist_ok=True)
        return target


@pytest.fixture(scope="session")
def reference_cache(tmp_path_factory) -> ReferenceCache:
    return ReferenceCache(tmp_path_factory.mktemp("reference-cache"))
