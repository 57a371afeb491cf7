"""`grader build`: everything generated from an assignment's reference solution, written into one folder.

The student starters (.py and .ipynb, see starter.py), the LMS autograder zip (autograder_zip.py) and the
student wheel (student_wheel.py: `grader check` and the notebook `check()` for students, without the solution
or hidden checks). Each product is one call here that returns the paths it wrote. The zip holds the reference
solution, so it may go to another folder than the starters (which are handed to students); the wheel goes
beside the zip.
"""

from __future__ import annotations

from pathlib import Path

from grader.authoring.starter import BuildError, write_starters
from grader.authoring.student_wheel import write_student_wheel
from grader.config.assignment import Assignment
from grader.lms.autograder_zip import OtterConfigError, write_autograder_zip

__all__ = ["BuildError", "build"]


def build(assignment: Assignment, out: Path, package_out: Path | None = None) -> list[Path]:
    """Render the starters into `out`, the autograder zip and the student wheel into `package_out` (default `out`);
    return the paths."""
    paths: list[Path] = []
    paths += write_starters(assignment, out)
    try:
        paths.append(write_autograder_zip(assignment, package_out or out))
    except OtterConfigError as error:
        raise BuildError(str(error)) from None
    paths.append(write_student_wheel(assignment, package_out or out))
    return paths
