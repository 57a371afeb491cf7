"""Reading method evidence in checks: where the student's code evaluated a function, and which vectors it made.

A check gets a run's evidence from `run.evaluations(until=name)` and `run.sightings(until=name)` (everything the
run recorded up to the statement that made `name`'s graded binding; see grader/runs/evidence.py) and asks these
questions of it. The principle: a method is credited only when the graded value is what the recorded outputs of
that method give (e.g. a difference quotient of two recorded evaluations, each verified against the oracle's
value of the function at that point), never because a call of the right kind happened nearby. Nothing here knows
a lesson: bases, directions, widths and tolerances come from the check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from grader.runs.evidence import Evaluation, Sighting

SINGLE = float(np.finfo(np.float32).eps)     # 2^-23: the rounding unit of the float32 numbers JAX computes with
TINY = float(np.finfo(np.float32).tiny)
MAX_POINTS = 20000


@dataclass(frozen=True)
class PointValue:
    """A function's value at a point, as one recorded evaluation returned it."""

    stmt: int
    point: np.ndarray      # the argument (float64 copy of what the run passed)
    value: float           # the number returned there
    traced: bool           # reported by a compiled program as it ran


def point_values(evaluations: Iterable[Evaluation], width: int) -> list[PointValue]:
    """Every (point, number) pair the evaluations show: a real (width,) argument with one real number returned,
    or a (k, width) batch with k numbers returned (a vmapped or stacked evaluation)."""
    found: list[PointValue] = []
    for evaluation in evaluations:
        numbers = [r for r in evaluation.results if r.dtype.kind in "fiu" and r.ndim <= 1]
        for point in _point_arguments(evaluation, width):
            rows = point.reshape(-1, width)
            for result in numbers:
                if result.size != len(rows):
                    continue
                for row, value in zip(rows, result.reshape(-1)):
                    if np.isfinite(value) and np.all(np.isfinite(row)):
                        found.append(PointValue(evaluation.stmt, np.asarray(row, dtype=np.float64), float(value),
                                                evaluation.traced))
        if len(found) >= MAX_POINTS:
            break
    return found


def _point_arguments(evaluation: Evaluation, width: int) -> list[np.ndarray]:
    """An evaluation's real arguments that are points of `width` entries: one (width,) or a (k, width) batch."""
    return [a for a in evaluation.args if a.dtype.kind in "fiu" and a.shape[-1:] == (width,) and a.ndim in (1, 2)]


def argument_points(evaluations: Iterable[Evaluation], width: int) -> list[np.ndarray]:
    """Every point of `width` entries the evaluations were called at (each row of a batch), whatever they returned
    (float64 copies)."""
    return [np.asarray(row, dtype=np.float64) for evaluation in evaluations
            for a in _point_arguments(evaluation, width) for row in a.reshape(-1, width)]


def complex_points(evaluations: Iterable[Evaluation], width: int) -> int:
    """How many evaluations were made at complex points of this width (a complex-step derivative)."""
    return sum(1 for e in evaluations if any(a.dtype.kind == "c" and a.shape[-1:] == (width,) for a in e.args))


@dataclass
class Steps:
    """Evaluated points seen from a base point: steps s along a direction (base + s * direction), other nearby
    points, and points at the base itself."""

    along: list[tuple[float, PointValue]] = field(default_factory=list)
    off_line: list[PointValue] = field(default_factory=list)
    at_base: list[PointValue] = field(default_factory=list)
    rounding: float = 0.0      # how far float32 rounding alone moves a point off its place (max-norm)

    def opposite_pairs(self, rtol: float = 1e-2) -> list[tuple[float, PointValue, PointValue]]:
        """(h, value at base + h v, value at base - h v) for every step taken both ways (a central difference),
        smallest mismatch first; steps match to `rtol` or to the rounding of the points."""
        minus = [(s, p) for s, p in self.along if s < 0]
        pairs = []
        for s, plus in self.along:
            if s <= 0:
                continue
            for t, other in minus:
                if abs(s + t) <= rtol * s + 2 * self.rounding:
                    pairs.append((abs(s + t), (s - t) / 2, plus, other))
        pairs.sort(key=lambda item: item[0])
        return [(h, plus, other) for _, h, plus, other in pairs]

    @property
    def one_sided(self) -> str | None:
        """"forward" or "backward" when every step goes one way (with or without the base point)."""
        if not self.along or self.opposite_pairs():
            return None
        if all(s > 0 for s, _ in self.along):
            return "forward"
        if all(s < 0 for s, _ in self.along):
            return "backward"
        return None


def steps_from(pairs: Iterable[PointValue], base: np.ndarray, direction: np.ndarray, radius: float) -> Steps:
    """Classify the points within `radius` (max-norm) of `base` by how they lie relative to base + s * direction.

    A point counts as on the line when it is there to the float32 rounding of `base + s * direction` (as a run
    computes it), and at the base only when it is the base itself."""
    base = np.asarray(base, dtype=np.float64)
    direction = np.asarray(direction, dtype=np.float64)
    norm2 = float(direction @ direction)
    rounding = 2 * SINGLE * (float(np.max(np.abs(base))) if base.size else 1.0)
    steps = Steps(rounding=rounding)
    for pair in pairs:
        offset = pair.point - base
        size = float(np.max(np.abs(offset))) if offset.size else 0.0
        if size <= 1e-12 * max(rounding, 1e-300):
            steps.at_base.append(pair)
            continue
        if size > radius or norm2 == 0:
            continue
        s = float(offset @ direction) / norm2
        residual = float(np.max(np.abs(offset - s * direction)))
        if residual <= rounding + 1e-3 * abs(s) * float(np.max(np.abs(direction))):
            steps.along.append((s, pair))
        else:
            steps.off_line.append(pair)
    return steps


def central_quotients(plus: PointValue, minus: PointValue, step: float) -> list[float]:
    """(plus - minus) / (2 step) as a student's code may have computed it from these two returned numbers: in
    float64, and in float32 in the usual orders (a difference divided by 2*step, by 2 then step, or multiplied by
    1/(2 step); step as given or first rounded to float32)."""
    f32 = np.float32
    difference = f32(f32(plus.value) - f32(minus.value))
    found = [(plus.value - minus.value) / (2.0 * step)] if step > 0 else []
    for s in (step, float(f32(step))):
        if not s > 0:                          # a denormal step is zero in float32: no such quotient exists
            continue
        found += [float(difference / f32(2.0 * s)), float(difference / f32(2.0) / f32(s)),
                  float(difference * f32(1.0 / (2.0 * s))), float(f32(plus.value / f32(2.0 * s)) - f32(minus.value / f32(2.0 * s)))]
    return found


def rounding_units(a: float, b: float) -> float:
    """|a - b| in units of float32 rounding at b's size (how many last digits of a float32 number apart)."""
    unit = SINGLE * max(abs(b), TINY)
    return abs(a - b) / unit


def vectors(sightings: Iterable[Sighting], width: int, limit: int = 4000) -> list[np.ndarray]:
    """The distinct real vectors of `width` entries the run's expressions produced, in order (float64 copies; a
    column or row vector, (width, 1) or (1, width), read as the same vector), at most `limit` of them: one linear
    pass."""
    found: list[np.ndarray] = []
    seen: set[bytes] = set()
    for sighting in sightings:
        if len(found) >= limit:
            break
        array = sighting.array
        if array.dtype.kind not in "fiu" or array.size != width or array.ndim not in (1, 2):
            continue
        vector = np.asarray(array, dtype=np.float64).reshape(width)
        key = vector.tobytes()
        if key not in seen and np.isfinite(vector).all():
            seen.add(key)
            found.append(vector)
    return found


def batch_rows(sightings: Iterable[Sighting], width: int, max_rows: int = 64, limit: int = 4000) -> list[np.ndarray]:
    """The vectors of `width` entries inside the small batches the run's expressions produced: each row of a real
    (k, width) array and each column of a (width, k) one, 2 <= k <= `max_rows` (a square batch read both ways: which
    axis holds the points is the run's choice), at most `limit` in all (float64 copies)."""
    found: list[np.ndarray] = []
    for sighting in sightings:
        array = sighting.array
        if len(found) >= limit:
            break
        if array.dtype.kind not in "fiu" or array.ndim != 2 or array.size == width:
            continue
        rows, columns = array.shape
        batch = np.asarray(array, dtype=np.float64)
        if columns == width and 2 <= rows <= max_rows:
            found += [row for row in batch if np.isfinite(row).all()]
        if rows == width and 2 <= columns <= max_rows:
            found += [column for column in batch.T if np.isfinite(column).all()]
    return found[:limit]


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max|actual - expected| / max|expected| (inf when expected is all zeros and actual is not)."""
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    error = float(np.max(np.abs(np.asarray(actual, dtype=np.float64) - expected))) if expected.size else 0.0
    if scale == 0.0:
        return 0.0 if error == 0.0 else float("inf")
    return error / scale
