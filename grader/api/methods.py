"""Reading method evidence in checks: where functions were evaluated and how deeply they were differentiated.

Check authors get a run's calls from `run.calls_for(name)` (the calls made by the statements that produced that
name's graded value) and ask these questions of them. Nothing here knows a lesson: points, bases, directions
and widths come from the check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from grader.runs.evidence import CallEvent


def _rows(array: np.ndarray, width: int) -> list[np.ndarray]:
    """A (width,) array as one point, a (k, width) array as k points (a vmapped batch), anything else as none."""
    if array.ndim == 1 and array.shape[0] == width:
        return [array]
    if array.ndim == 2 and array.shape[1] == width and array.shape[0] <= 64:
        return list(array)
    return []


def evaluation_points(calls: Iterable[CallEvent], width: int) -> list[np.ndarray]:
    """Points at which a function was evaluated outside any differentiation (student code, jit, vmap)."""
    points = []
    for call in calls:
        for evaluation in call.evaluations:
            for arg in evaluation.args:
                points += _rows(arg, width)
    return points


def differentiated_points(calls: Iterable[CallEvent], width: int, order: int = 1) -> list[np.ndarray]:
    """Points at which a root call of exactly `order` differentiation levels was evaluated (e.g. `grad(f)(p)`)."""
    points = []
    for call in calls:
        if call.concrete and call.autodiff and call.order == order:
            for arg in call.args:
                points += _rows(arg, width)
    return points


@dataclass
class Steps:
    """Evaluation points seen from a base point: steps along a direction, elsewhere nearby, or at the base."""

    along: list[float] = field(default_factory=list)      # s for points base + s * direction
    elsewhere: list[np.ndarray] = field(default_factory=list)   # nearby points off that line (the offsets)
    at_base: bool = False

    def symmetric(self, rtol: float = 1e-2) -> list[float]:
        """Step sizes h with both +h and -h present (a central difference)."""
        positive = [s for s in self.along if s > 0]
        negative = [-s for s in self.along if s < 0]
        return sorted({h for h in positive if any(abs(h - m) <= rtol * h for m in negative)})

    @property
    def one_sided(self) -> str | None:
        """"forward" or "backward" when the steps go one way only (with or without the base point)."""
        if not self.along or self.symmetric():
            return None
        if all(s > 0 for s in self.along):
            return "forward"
        if all(s < 0 for s in self.along):
            return "backward"
        return None


def steps_from(points: Iterable[np.ndarray], base: np.ndarray, direction: np.ndarray, radius: float,
               rtol: float = 1e-2) -> Steps:
    """Classify points within `radius` (max-norm) of `base` by how they lie relative to `base + s * direction`."""
    steps = Steps()
    direction = np.asarray(direction, dtype=np.float64)
    norm2 = float(direction @ direction)
    scale = float(np.max(np.abs(base))) if base.size else 1.0
    for point in points:
        offset = np.asarray(point, dtype=np.float64) - base
        size = float(np.max(np.abs(offset))) if offset.size else 0.0
        if size <= 1e-6 * max(scale, 1e-30):
            steps.at_base = True
            continue
        if size > radius or norm2 == 0:
            continue
        s = float(offset @ direction) / norm2
        residual = float(np.max(np.abs(offset - s * direction)))
        if residual <= rtol * abs(s) * float(np.max(np.abs(direction))) + 1e-7 * scale:
            steps.along.append(s)
        else:
            steps.elsewhere.append(offset)
    return steps


def deepest(calls: Iterable[CallEvent]) -> int:
    """The most differentiation levels any of the calls reached (0: none)."""
    return max((call.order for call in calls if call.differentiates), default=0)


def matching_output(calls: Iterable[CallEvent], value: np.ndarray, rtol: float = 1e-5) -> list[CallEvent]:
    """The calls that returned (an array equal to) `value`: which of several computations produced it."""
    found = []
    for call in calls:
        for output in call.outputs:
            if output.shape == value.shape and np.allclose(output, value, rtol=rtol, atol=rtol * float(np.max(np.abs(value)) or 1)):
                found.append(call)
                break
    return found


def tangents(calls: Iterable[CallEvent], width: int) -> list[np.ndarray]:
    """The (width,) tangents the calls were handed (jvp tangents, linearized or pullback inputs), in order."""
    found: list[np.ndarray] = []
    for call in calls:
        for tangent in call.tangents:
            if tangent.ndim == 1 and tangent.shape[0] == width and not any(np.array_equal(tangent, t) for t in found):
                found.append(tangent)
    return found
