"""Every comparison a check makes, recorded for the instructor's `grader explain` (never a student's page).

A check compares a student's value with an expected one: `close_vectors` (grader.api.values) and `within` here do
so and, while the engine grades, each appends one `Comparison` to the check's record for that world: the student's
value and the expected one (a short summary of an array: shape, first entries, norm), the distance as the check
measured it and how, the tolerance with how it is sized and its unit, and whether it passed. A method check that
credits a value because it follows a change only the method feels says, with `unchanged=`, what a value that does
not follow the change gives, so the record also shows how many tolerances the change moved it (the separation).
Recording never changes what the comparison returns; outside grading (no `recording()`) it records nothing.

Bounded: at most MAX_COMPARISONS a check a world are kept (the first ones, and then the rest counted), each a few
hundred characters of plain JSON data.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MAX_COMPARISONS = 8
SHOWN_ENTRIES = 4
MAX_LABEL = 200

ABSOLUTE = "absolute"
RELATIVE = "relative to max|expected|"


@dataclass(frozen=True)
class Comparison:
    """One comparison a check made in one world: what it compared, both values, the distance and the tolerance."""

    what: str                  # what was compared with what, in words
    student: Any               # the student's value (summarised)
    expected: Any              # the value it was compared with (summarised)
    distance: float | None     # as the check measured it (`measure`); None where it could not be measured
    measure: str               # how `distance` is measured, e.g. "|student − expected|"
    tolerance: float           # the largest distance that passes
    tolerance_kind: str        # how the tolerance is sized, e.g. "absolute" or "relative to max|expected|"
    unit: str                  # the unit of distance and tolerance ("" for a pure number)
    passed: bool
    unchanged: Any = None      # a method check: what a value that does not follow the world's change gives
    separation: float | None = None   # ...and how many tolerances the change moves the expected value from it

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None or key == "distance"}


class _Recorded(list):
    """The comparisons of one check in one world, and how many were left out past MAX_COMPARISONS."""

    left_out = 0


_RECORDER: ContextVar[_Recorded | None] = ContextVar("grader_comparisons", default=None)


@contextmanager
def recording() -> Iterator[_Recorded]:
    """Collect the comparisons made inside the block (the engine wraps each check call in one)."""
    recorded = _Recorded()
    token = _RECORDER.set(recorded)
    try:
        yield recorded
    finally:
        _RECORDER.reset(token)


def recorded_dicts(recorded: list) -> list[dict[str, Any]]:
    """What `recording` collected, as plain data for the record (a last entry counting any left out)."""
    entries = [comparison.as_dict() for comparison in recorded]
    left_out = getattr(recorded, "left_out", 0)
    return entries + ([{"what": f"... {left_out} more comparison(s) not kept"}] if left_out else [])


def record(comparison: Comparison) -> None:
    """Append one comparison to the running check's record, if one is being kept (never raises)."""
    recorded = _RECORDER.get()
    if recorded is None:
        return
    if len(recorded) >= MAX_COMPARISONS:
        recorded.left_out += 1
        return
    recorded.append(comparison)


def compared(what: str, student: Any, expected: Any, distance: float, tolerance: float, passed: bool, *,
             measure: str, tolerance_kind: str = ABSOLUTE, unit: str = "", unchanged: Any = None) -> bool:
    """Record a comparison a check decided itself (`passed`), and return `passed` unchanged. With `unchanged` (a
    scalar or a vector: what a method that does not feel the world's change gives), the separation is the distance
    between `expected` and it, in tolerances (max-norm for vectors)."""
    if _RECORDER.get() is None:
        return passed
    try:
        separation = None
        if unchanged is not None and tolerance > 0:
            apart = _max_difference(expected, unchanged)
            separation = apart / tolerance if apart is not None else None
        record(Comparison(what=str(what)[:MAX_LABEL], student=summary(student), expected=summary(expected),
                          distance=_number(distance), measure=measure, tolerance=float(tolerance),
                          tolerance_kind=tolerance_kind, unit=unit, passed=bool(passed),
                          unchanged=summary(unchanged) if unchanged is not None else None,
                          separation=_number(separation) if separation is not None else None))
    except Exception:  # noqa: BLE001 -- recording must never be what fails a check
        pass
    return passed


def within(student: float, expected: float, tolerance: float, *, what: str, unit: str = "",
           tolerance_kind: str = ABSOLUTE, unchanged: float | None = None) -> bool:
    """|student - expected| <= tolerance for two real numbers, recorded; exactly that comparison's result."""
    distance = abs(student - expected)
    passed = distance <= tolerance
    return compared(what, student, expected, distance, tolerance, passed, measure="|student − expected|",
                    tolerance_kind=tolerance_kind, unit=unit, unchanged=unchanged)


def equal(student: Any, expected: Any, *, what: str, unit: str = "") -> bool:
    """`student == expected` as one truth value (arrays: same shape and entries), recorded with the largest difference
    where both are numbers; exactly what `np.array_equal` (arrays) or `==` (anything else) says."""
    if isinstance(student, np.ndarray) or isinstance(expected, np.ndarray):
        passed = bool(np.array_equal(student, expected))
    else:
        passed = bool(student == expected)
    distance = 0.0 if passed else _max_difference(student, expected)
    return compared(what, student, expected, distance if distance is not None else math.nan, 0.0, passed,
                    measure="largest |student − expected| entry", tolerance_kind="exact: equal or not", unit=unit)


def in_range(value: float, low: float, high: float, *, what: str, unit: str = "") -> bool:
    """low <= value <= high, recorded with how far outside the range the value lies (0 inside it)."""
    passed = low <= value <= high
    distance = 0.0 if passed else (low - value if value < low else value - high)
    return compared(what, value, f"in [{low:g}, {high:g}]", distance, 0.0, passed,
                    measure="how far outside the range", tolerance_kind="a range: inside or not", unit=unit)


def _max_difference(a: Any, b: Any) -> float | None:
    try:
        with np.errstate(all="ignore"):
            x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            if x.shape != y.shape or not x.size:
                return None
            value = float(np.max(np.abs(x - y)))
        return value if math.isfinite(value) else None
    except (TypeError, ValueError, OverflowError):
        return None


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def summary(value: Any) -> Any:
    """A value as the instructor reads it beside another: a real number as it is (8 significant digits kept), an
    array by its shape, first entries and norm; anything else by its short repr. JSON-safe and short."""
    try:
        if isinstance(value, str):
            return value[:MAX_LABEL]
        if value is None or isinstance(value, bool | np.bool_):
            return None if value is None else bool(value)
        if isinstance(value, int | float | np.integer | np.floating):
            number = float(value)
            return float(f"{number:.8g}") if math.isfinite(number) else repr(number)
        array = np.asarray(value)
        if array.dtype.kind in "iuf" and array.ndim >= 1:
            flat = array.ravel()
            with np.errstate(all="ignore"):
                norm = float(np.linalg.norm(flat.astype(np.float64)))
            first = ", ".join(f"{float(item):.8g}" for item in flat[:SHOWN_ENTRIES])
            more = ", ..." if flat.size > SHOWN_ENTRIES else ""
            return f"shape {array.shape}, [{first}{more}], norm {norm:.8g}"
        if array.dtype.kind in "iuf" and array.ndim == 0:
            return summary(float(array))
        return repr(value)[:MAX_LABEL]
    except Exception:  # noqa: BLE001 -- a summary never fails a check
        return "(a value the grader could not summarise)"
