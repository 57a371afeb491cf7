"""`grader build`: everything generated from an assignment's reference solution, written into one folder.

Today that is the student starter (.py and .ipynb, see starter.py). Each product is one call here that
returns the paths it wrote, so adding one (an autograder package, say) is adding one line.
"""

from __future__ import annotations

from pathlib import Path

from .assignment import Assignment
from .starter import BuildError, write_starters

__all__ = ["BuildError", "build"]


def build(assignment: Assignment, out: Path) -> list[Path]:
    """Render every generated file of `assignment` into `out`; return the written paths, in a stable order."""
    paths: list[Path] = []
    paths += write_starters(assignment, out)
    return paths
