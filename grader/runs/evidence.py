"""Method evidence as plain data in the parent: what a run's root calls did (see grader/child/recorder.py).

A `CallEvent` is one root call of student code or of a JAX transformation, made by one top-level statement,
decoded from the run's channel with every list bounded and every array coerced to float64. The questions a
check asks of it are here, in the lesson's vocabulary-free terms:

- `order`: how many differentiation levels were active when student code ran (1: a gradient, 2: a
  Hessian-vector product), or when the transformations ran where no student code showed;
- `rematerialized_at(order)`: whether a jax.checkpoint-ed function ran at that order or deeper;
- `evaluations`: concrete calls outside any differentiation, with their arguments and result;
- `tangents` and `outputs`: the vectors it was handed as tangents and the arrays it returned.

This is evidence from the student's own process, never proof: checks combine it with the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_CALL_ITEMS = 64


@dataclass(frozen=True)
class StudentFunction:
    """A student function that ran beneath a root call, and at which differentiation depth."""

    name: str
    file: str
    line: int
    depth: int
    under_checkpoint: bool


@dataclass(frozen=True)
class Evaluation:
    """A concrete call outside any differentiation: a student function, jit(f), vmap(f) or checkpoint(f)."""

    kind: str
    name: str | None
    args: tuple[np.ndarray, ...]
    result: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class CallEvent:
    stmt: int
    kind: str
    name: str | None
    concrete: bool
    ok: bool
    args: tuple[np.ndarray, ...] = ()
    outputs: tuple[np.ndarray, ...] = ()
    autodiff: tuple[tuple[str, int], ...] = ()
    student: tuple[StudentFunction, ...] = ()
    checkpoint: tuple[int, ...] = ()
    tangents: tuple[np.ndarray, ...] = ()
    evaluations: tuple[Evaluation, ...] = ()
    inherited: bool = False

    @property
    def order(self) -> int:
        """Differentiation levels active when student code ran (else the deepest transformation nesting)."""
        if self.student:
            return max(item.depth for item in self.student)
        levels = {"hessian": 2}
        return max((depth + levels.get(kind, 1) for kind, depth in self.autodiff), default=0)

    def rematerialized_at(self, order: int) -> bool:
        """A jax.checkpoint-ed function ran with at least `order` differentiation levels active."""
        return any(depth >= order for depth in self.checkpoint) or any(
            item.under_checkpoint and item.depth >= order for item in self.student)

    @property
    def differentiates(self) -> bool:
        return bool(self.autodiff) or self.order > 0


@dataclass
class EvidenceSummary:
    """How complete a run's evidence is: calls sent, calls left out at the bounds, the recorder's own trouble."""

    calls: int = 0
    omitted: int = 0
    problem: str | None = None
    installed: bool = False     # the harness says so before the first statement (an assignment may record none)



def decode_call(frame: dict, decode_array: Any) -> CallEvent:
    """A `call` frame as a CallEvent; malformed parts are dropped, never trusted."""
    def arrays(items: Any, limit: int = 16) -> tuple[np.ndarray, ...]:
        found = []
        for item in _list(items)[:limit]:
            array = decode_array(item) if isinstance(item, dict) else None
            if isinstance(array, np.ndarray) and array.dtype.kind in "fc":
                found.append(array)
        return tuple(found)

    student = []
    for item in _list(frame.get("student"))[:MAX_CALL_ITEMS]:
        if isinstance(item, list) and len(item) == 5:
            student.append(StudentFunction(str(item[0])[:120], str(item[1])[:200], _int(item[2]), _int(item[3]),
                                           item[4] is True))
    autodiff = tuple((str(item[0])[:40], _int(item[1])) for item in _list(frame.get("autodiff"))[:MAX_CALL_ITEMS]
                     if isinstance(item, list) and len(item) == 2)
    evaluations = []
    for item in _list(frame.get("evaluations"))[:MAX_CALL_ITEMS]:
        if isinstance(item, dict):
            name = item.get("name")
            evaluations.append(Evaluation(str(item.get("kind", ""))[:40], _name(name), arrays(item.get("args"), 4),
                                          arrays(item.get("result"), 2)))
    return CallEvent(
        stmt=_int(frame.get("stmt")), kind=str(frame.get("kind", ""))[:40], name=_name(frame.get("name")),
        concrete=frame.get("concrete") is True, ok=frame.get("ok") is True, args=arrays(frame.get("args"), 4),
        outputs=arrays(frame.get("output")),
        autodiff=autodiff, student=tuple(student),
        checkpoint=tuple(_int(d) for d in _list(frame.get("checkpoint"))[:16]),
        tangents=arrays(frame.get("tangents"), 8), evaluations=tuple(evaluations),
        inherited=frame.get("inherited") is True)


def _name(value: Any) -> str | None:
    if isinstance(value, list) and value:
        return str(value[0])[:120]
    return None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else -1
