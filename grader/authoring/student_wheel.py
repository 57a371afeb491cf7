"""The student bundle: one wheel a student installs with pip to get `grader check` and the notebook `check()`.

`<id>_student-<version>-py3-none-any.whl`, written by `grader build` beside the autograder zip, holds:

    grader/                                   the framework, whole (it is not secret)
    grader_bundles/assignments/<id>/          assignment.toml and checks.py cut down to the visible checks
                                              (visible_subset.py), oracle.py, scenario_setup.py, probes.py
    grader_bundles/assignments/<id>/bundle.json   the reference facts measured on the JAX installed here (the
                                              course's pinned JAX), those versions, the public starter, and the
                                              facts program: the starter with only `[assignment] fact_exercises`
                                              filled in (where the lesson page prints them), which a check runs to
                                              measure the facts on the student's own JAX

and never the rest of the solution, a hidden check, the rest of the assignment folder (tolerance calibration scripts hold
honest solutions) or `[lms]` (the grading seed). It is written by hand as a zip (PEP 427: dist-info with
METADATA, WHEEL, entry_points.txt, RECORD), every entry with a fixed time and mode, names sorted: no network,
no build backend, and a rebuild is byte-identical.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import tomllib
import zipfile
from pathlib import Path

from grader import PACKAGE_DIR, __version__
from grader.authoring.starter import fact_source, render
from grader.authoring.visible_subset import (
    toml_text,
    visible_checks_source,
    visible_config,
    visible_specs,
)
from grader.common.environment import environment
from grader.common.files import atomic_write
from grader.common.user_cache import user_cache_dir
from grader.config.assignment import Assignment
from grader.config.bundle import FORMAT, INFO, PACKAGE
from grader.grading.reference import encoded_facts
from grader.lms.autograder_zip import FIXED_TIME, _files_under

SHIPPED = ("oracle.py", "scenario_setup.py", "probes.py")     # besides assignment.toml and checks.py
# What a check imports (pytest: assertion rewriting), and IPython, whose input transformer reads a notebook's cells;
# ml_dtypes (imported by JAX) for the project's bound on it, which makes a student's every check start faster.
REQUIREMENTS = ("jax", "jaxlib", "ml_dtypes", "numpy", "pytest", "ipython",
                "nbclient", "ipykernel")   # the starter notebook runs its own check() cell (Jupyter, nbconvert --execute)
ENTRY_POINT = "grader.student.terminal:main"


def distribution(assignment: Assignment) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", f"{assignment.id}-student").lower()


def wheel_name(assignment: Assignment) -> str:
    return f"{distribution(assignment)}-{__version__}-py3-none-any.whl"


def assignment_files(assignment: Assignment, cache_dir: Path | None) -> dict[str, bytes]:
    """Relative name in the assignment folder -> content, for students."""
    header = (f"# {assignment.id}, as shipped to students by `grader build`: the visible checks only "
              "(generated, do not edit).\n")
    checks = (assignment.folder / "checks.py").read_text(encoding="utf-8")
    files = {
        "assignment.toml": toml_text(visible_config(assignment), header).encode(),
        "checks.py": visible_checks_source(checks, [spec.function for spec in visible_specs(assignment)]).encode(),
    }
    for name in SHIPPED:
        if (assignment.folder / name).is_file():
            files[name] = (assignment.folder / name).read_bytes()
    info = {"format": FORMAT, "assignment": assignment.id, "environment": environment(),
            "facts": encoded_facts(assignment, cache_dir), "starter": render(assignment).python,
            "fact_source": fact_source(assignment)}
    files[INFO] = (json.dumps(info, indent=1, sort_keys=True) + "\n").encode()
    return files


def requirements() -> list[str]:
    """Requires-Dist: the check's imports, with the project's version bounds where the checkout has them."""
    pyproject = PACKAGE_DIR.parent / "pyproject.toml"
    specs = tomllib.loads(pyproject.read_text())["project"]["dependencies"] if pyproject.is_file() else []
    found = {re.split(r"[^A-Za-z0-9._-]", spec.strip(), maxsplit=1)[0].lower(): spec for spec in specs}
    return [found.get(name, name) for name in REQUIREMENTS]


def members(assignment: Assignment, cache_dir: Path | None) -> dict[str, bytes]:
    """Archive name -> content of every file of the wheel but RECORD."""
    entries = {"grader/" + p.relative_to(PACKAGE_DIR).as_posix(): p.read_bytes() for p in _files_under(PACKAGE_DIR)}
    folder = f"{PACKAGE}/assignments/{assignment.id}/"
    entries.update({folder + name: content for name, content in assignment_files(assignment, cache_dir).items()})
    info = f"{distribution(assignment)}-{__version__}.dist-info/"
    metadata = [
        "Metadata-Version: 2.1", f"Name: {distribution(assignment)}", f"Version: {__version__}",
        f"Summary: Check your work on {assignment.title} before you submit it (grader check / check()).",
        "Requires-Python: >=3.11", *[f"Requires-Dist: {spec}" for spec in requirements()],
    ]
    entries[info + "METADATA"] = ("\n".join(metadata) + "\n").encode()
    entries[info + "WHEEL"] = b"Wheel-Version: 1.0\nGenerator: grader build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries[info + "entry_points.txt"] = f"[console_scripts]\ngrader = {ENTRY_POINT}\n".encode()
    entries[info + "top_level.txt"] = f"grader\n{PACKAGE}\n".encode()
    return entries


def _record(entries: dict[str, bytes], record_name: str) -> bytes:
    lines = []
    for name, content in sorted(entries.items()):
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(content)}")
    lines.append(f"{record_name},,")
    return ("\n".join(lines) + "\n").encode()


def build_wheel_bytes(assignment: Assignment, cache_dir: Path | None) -> bytes:
    entries = members(assignment, cache_dir)
    record = f"{distribution(assignment)}-{__version__}.dist-info/RECORD"
    entries[record] = _record(entries, record)
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w") as archive:
        for name, content in sorted(entries.items()):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.create_system = 3
            info.external_attr = (0o100000 | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content)
    return stream.getvalue()


def write_student_wheel(assignment: Assignment, out_dir: Path, cache_dir: Path | None = None) -> Path:
    """Write the student wheel into `out_dir` atomically (the reference facts are measured, or read from the
    cache, first); returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / wheel_name(assignment)
    atomic_write(path, build_wheel_bytes(assignment, cache_dir or user_cache_dir()), mode=0o644)
    return path
