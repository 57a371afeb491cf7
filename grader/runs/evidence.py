"""Method evidence as plain data in the parent: what a run evaluated and which arrays it made (see
grader/sandbox/child/recorder.py).

- `Evaluation`: one call of the student's code (or of a jitted function) with concrete arrays, outside any
  differentiation: its array arguments and results, and whether it was reported from inside a compiled program.
- `Sighting`: a small real array one of the student's expressions produced (a tangent, a direction, a point).

Every list is bounded and every array decoded by the snapshot's strict reader. This is evidence from the
student's own process, never proof: a check uses it only through what it cannot fake (an evaluation's result
must be the function's value at that point, which the oracle recomputes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.runs.decoding import text

MAX_ARRAYS = 8


@dataclass(frozen=True)
class Evaluation:
    stmt: int                       # the top-level statement it ran in
    kind: str                       # "student" (a function of the student's) or "jit" (a jitted function)
    name: str                       # the function's name and first line, as the run reported it (not trusted)
    args: tuple[np.ndarray, ...]    # its numeric arguments (keyword arguments too), as arrays
    results: tuple[np.ndarray, ...]  # the numbers and arrays it returned
    traced: bool = False            # reported by a compiled program (jit, vmap, lax.map) as it ran


@dataclass(frozen=True)
class Sighting:
    stmt: int
    array: np.ndarray


@dataclass
class EvidenceSummary:
    """How complete a run's evidence is: what it sent, what was left out at the bounds, the recorder's trouble."""

    evaluations: int = 0
    sightings: int = 0
    omitted: int = 0
    problem: str | None = None
    installed: bool = False     # the harness says so before the first statement (an assignment may record none)


def decode_evaluation(frame: dict, decode_array: Any) -> Evaluation:
    """An `evaluation` frame; malformed parts are dropped, never trusted."""
    return Evaluation(stmt=_int(frame.get("stmt")), kind=text(frame.get("kind"), 20),
                      name=text(frame.get("name"), 200), args=_arrays(frame.get("args"), decode_array),
                      results=_arrays(frame.get("result"), decode_array), traced=frame.get("traced") is True)


def decode_sighting(frame: dict, decode_array: Any) -> Sighting | None:
    arrays = _arrays([frame.get("array")], decode_array)
    return Sighting(_int(frame.get("stmt")), arrays[0]) if arrays else None


def _arrays(items: Any, decode_array: Any) -> tuple[np.ndarray, ...]:
    found = []
    for item in items[:MAX_ARRAYS] if isinstance(items, list) else []:
        array = decode_array(item) if isinstance(item, dict) else None
        if isinstance(array, np.ndarray) and array.dtype.kind in "biufc":
            found.append(array)
    return tuple(found)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**31 else -1
