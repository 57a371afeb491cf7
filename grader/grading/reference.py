"""What the reference solution produces on the installed JAX, measured by running it, never written down.

- facts: the names in `[assignment] reference_facts` from its baseline run without set-up functions (residual
  counts, compiled memory: they change with the JAX version, and the oracle applies a scenario's changes itself);
- figures: the figure value named by `[report] figure`, per scenario, drawn beside each student's own.

Both come from the assignment's warm state (grader/grading/warm_state.py): measured once per installation,
grader code and versions, and kept in the cache folder `cache` (default: the user's cache folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.config.assignment import Assignment
from grader.grading.warm_state import WarmState
from grader.runs.jobs import Runner


def reference_facts(assignment: Assignment, cache: Path | None = None) -> dict[str, Any]:
    return WarmState(assignment, cache).facts()


def encoded_facts(assignment: Assignment, cache: Path | None = None) -> dict[str, Any]:
    """The reference facts as the run streamed them (plain JSON): what a student bundle ships."""
    return WarmState(assignment, cache).encoded_facts()


def reference_figures(assignment: Assignment, cache: Path | None = None, seeds: dict[str, int] | None = None,
                      runner: Runner | None = None, batch_seed: int | None = None) -> dict[str, Any]:
    """Scenario -> the reference solution's figure (JSON-safe), or {} when the assignment names no figure.

    With `seeds` (scenario -> seed, as the batch graded) and `batch_seed` (the grading run's), each scenario's
    figure is the reference's in the same world (the variant's compiler answers depend on the seed, a scenario's
    other changes on the batch seed); without, every scenario at the lesson's seed."""
    return WarmState(assignment, cache).figures(seeds, batch_seed, runner, scenarios=tuple(assignment.scenarios))
