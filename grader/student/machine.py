"""What a student's check needs from the student's machine, and what it says about it in the student's terms.

A check from the student bundle runs each file in the Python environment its `grader` runs in
(sandbox/shared_python.py), by bubblewrap where that works strongly, else the portable strategy (plain
subprocesses, on Linux, macOS and Windows alike); `prepare_runs` says which in one line. When a run cannot start
at all, `start_failure` names the Python it tried, the import that failed and the command that fixes it. `accelerator_note` says that the check ran
on CPU, as the grader does, where JAX has an accelerator backend installed.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

from grader.common.jax_range import PIP_RANGE
from grader.sandbox.isolation import reach_line
from grader.sandbox.portable import student_strategy
from grader.sandbox.shared_python import share

MISSING_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")
# Distributions that give JAX a backend other than the CPU (PJRT plugins and the TPU runtime).
ACCELERATOR_DISTRIBUTIONS = re.compile(r"^(libtpu.*|jax[-_](cuda\d+|rocm\d*)[-_](plugin|pjrt)|jax[-_]metal|jax[-_]tpu)$")


def prepare_runs() -> str:
    """Runs of this process use its own Python's packages; the one line that says how they start (on any system:
    where no sandbox works, Windows included, by the portable strategy)."""
    share()
    return reach_line(student_strategy())


def start_failure(detail: str) -> str | None:
    """The student's sentence for a run that could not import a package (None for any other fault)."""
    found = MISSING_MODULE.search(detail or "")
    if found is None:
        return None
    module = found.group(1).split(".")[0]
    package = f"'jax{PIP_RANGE}'" if module in ("jax", "jaxlib") else module
    return (f"The check could not start a run of your file: Python {sys.executable} could not import {module} in "
            f"it. Your file was not graded. Install {module} into that Python: {sys.executable} -m pip install "
            f"{package}")


def accelerator_backends() -> list[str]:
    """The installed distributions that give JAX a non-CPU backend (no JAX import: a name lookup)."""
    names = set()
    try:
        for distribution in metadata.distributions():
            name = (distribution.metadata["Name"] or "").lower()
            if ACCELERATOR_DISTRIBUTIONS.match(name):
                names.add(name)
    except Exception:  # noqa: BLE001 -- a broken metadata folder of some package never stops a check
        return []
    return sorted(names)


def accelerator_note() -> str | None:
    backends = accelerator_backends()
    if not backends:
        return None
    return (f"This machine has JAX accelerator support ({', '.join(backends)}); the check ran on CPU, as the grader "
            "does, so its numbers are the ones your grade is computed from.")
