"""A student bundle's assignment: found where the student wheel installed it, and what the build measured.

The wheel (grader/authoring/student_wheel.py) installs `grader_bundles/assignments/<id>/` beside the grader
package: the assignment folder with only its visible checks, plus `bundle.json` (the reference facts measured
on the course's JAX, that JAX's versions, the public starter and, where the lesson prints the solution, the facts
program that measures the facts again on the student's own JAX). `grader_bundles` is a namespace package, so
wheels of several lessons install side by side into one folder that `config.assignment.load` reads as a
project root. There is no `solutions/` there: facts come from bundle.json instead of a reference run.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE = "grader_bundles"
INFO = "bundle.json"
FORMAT = 1


@dataclass(frozen=True)
class Bundle:
    """What `grader build` measured and wrote for students (never the solution, hidden checks or seeds)."""
    environment: dict[str, str]       # versions the reference facts were measured with (the course's JAX)
    facts: dict[str, Any]             # [assignment] reference_facts, encoded as the run streamed them
    starter: str                      # the public starter; trusted code that warms the compilation cache
    fact_source: str = ""             # the starter with the fact exercises filled in: the facts measured on the
                                      # student's own JAX ("" when the solution is not public: `facts` are used)


def bundled_root() -> Path | None:
    """The installed `grader_bundles` folder holding `assignments/`, or None when no bundle is installed."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "assignments").is_dir():
            return Path(location)
    return None


def read_bundle(folder: Path) -> Bundle | None:
    """The bundle.json of an assignment folder (None for an instructor's folder, which has none)."""
    path = folder / INFO
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: bundle format {data.get('format')!r}, this grader reads {FORMAT}; reinstall the bundle")
    return Bundle(environment=dict(data["environment"]), facts=dict(data["facts"]), starter=str(data.get("starter", "")),
                  fact_source=str(data.get("fact_source", "")))
