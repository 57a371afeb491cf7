"""Coercions that check authors use on decoded student values: they fail with a sentence a student understands.

Every helper here is total over whatever a run can send: a value that is huge, NaN, infinite, nested, empty,
wrongly shaped or of the wrong type fails the check (AssertionError with a sentence naming the value), and
nothing else escapes. That matters beyond the message: an exception other than an assertion is, to the engine,
a question about the check itself (grader/grading/engine.py), so no student value may reach one here. Sizes are
checked on the value as it is, before any copy or list is made of it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grader.api.comparisons import RELATIVE, compared
from grader.runs.snapshot import Missing, Opaque

__all__ = ["Missing", "Opaque", "as_number", "as_vector", "close_vectors", "describe", "fmt", "plain_data",
           "json_safe"]

MAX_VECTOR_ELEMENTS = 1 << 20     # as_vector without a length: 8 MiB once in float64
MAX_PLAIN_NUMBERS = 100_000       # plain_data: numbers turned into Python lists for one comparison
MAX_PLAIN_DEPTH = 32
MAX_SHOWN_DIGITS = 30             # a longer integer is described by its number of digits


def describe(value: Any) -> str:
    """A short, student-facing description of what a value is. Never raises."""
    try:
        return _describe(value)
    except Exception:  # noqa: BLE001 -- a description must not be the thing that fails a check
        return "a value the grader could not describe"


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, Opaque):
        return _describe_opaque(value)
    if isinstance(value, (bool, np.bool_)):
        return f"the boolean {bool(value)}"
    if isinstance(value, (int, np.integer)):
        return _describe_int(int(value))
    if isinstance(value, (float, np.floating)):
        return f"the number {float(value)!r}"
    if isinstance(value, (complex, np.complexfloating)):
        return f"the complex number {complex(value)!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"the string {shown!r}"
    if isinstance(value, np.ndarray):
        return _describe_array(value)
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return f"a {kind} of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        keys = sorted(str(key)[:40] for key in list(value)[:1000])
        return f"a dict with keys {keys[:6]}" if value else "an empty dict"
    return f"a {type(value).__name__}"


def _describe_opaque(value: Opaque) -> str:
    if value.kind == "todo":
        return "`...` (an unfinished TODO)"
    if value.kind == "callable":
        return f"a function ({value.type_name})"
    if value.kind == "too_large":
        return f"a {value.type_name} too large to read"
    if value.kind == "out_of_range":
        return "a number outside the range of a 64-bit float"
    return f"a {value.type_name} object"


def _describe_int(value: int) -> str:
    digits = int(abs(value).bit_length() * math.log10(2)) + 1
    if digits > MAX_SHOWN_DIGITS:
        return f"a whole number of about {digits} digits"
    return f"the number {value!r}"


def _describe_array(value: np.ndarray) -> str:
    if value.dtype.kind == "b":
        return f"a boolean array of shape {value.shape}" if value.shape else f"the boolean {bool(value)}"
    if value.dtype.kind == "c":
        return f"a complex array of shape {value.shape}"
    if value.dtype.kind not in "iuf":
        return f"an array of {value.dtype.name} of shape {value.shape}"
    return f"an array of shape {value.shape}"


def _real(value: Any) -> float | None:
    """A real scalar (a Python number or a one-element integer/float array) as a float; None for anything else,
    bool, complex and integers beyond float64 included."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return None
    try:
        if isinstance(value, (int, float, np.integer, np.floating)):
            return float(value)
        if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf":
            return float(value.reshape(()))
    except (OverflowError, ValueError, TypeError):
        return None
    return None


def as_number(value: Any, label: str, finite: bool = True) -> float:
    """A real scalar: Python number, 0-d or one-element array. Complex, bool, out-of-range and anything else fail;
    so do NaN and infinities unless `finite=False`."""
    number = _real(value)
    if number is None:
        raise AssertionError(f"{label} should be a single real number; found {describe(value)}.")
    if finite and not math.isfinite(number):
        raise AssertionError(f"{label} should be a finite number; found {number!r}.")
    return number


def _is_real_scalar(value: Any) -> bool:
    """A Python number or a one-element real array (how a list of NumPy scalars decodes)."""
    return _real(value) is not None


def as_vector(value: Any, label: str, length: int | None = None, finite: bool = True,
              column: bool = False) -> np.ndarray:
    """A real 1-D float64 vector (from an array or a list of numbers), optionally of a given length; entries that
    are NaN or infinite fail unless `finite=False`. With `column=True` a column or row vector ((n, 1) or (1, n), a
    student's convention) is read as the same vector."""
    if isinstance(value, (list, tuple)) and value and len(value) <= MAX_VECTOR_ELEMENTS:
        numbers = [_real(item) for item in value]
        if all(number is not None for number in numbers):
            value = np.asarray(numbers, dtype=np.float64)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
        raise AssertionError(f"{label} should be a real vector; found {describe(value)}.")
    if column and value.ndim == 2 and 1 in value.shape:
        value = value.reshape(-1)
    if value.ndim != 1 or (length is not None and value.shape != (length,)):
        expected = f"({length},)" if length is not None else "one-dimensional"
        raise AssertionError(f"{label} should have shape {expected}; found shape {value.shape}.")
    if value.size > MAX_VECTOR_ELEMENTS:
        raise AssertionError(f"{label} has {value.size} entries, more than the grader reads ({MAX_VECTOR_ELEMENTS}).")
    with np.errstate(all="ignore"):
        vector = value.astype(np.float64)
    if finite and not np.all(np.isfinite(vector)):
        first = int(np.flatnonzero(~np.isfinite(vector))[0])
        raise AssertionError(f"{label} contains NaN or Inf (entry {first} is {float(vector[first])!r}).")
    return vector


def close_vectors(actual: Any, expected: Any, rtol: float, atol_scale: float, what: str = "") -> tuple[bool, float]:
    """Elementwise |a - e| <= rtol*|e| + atol_scale*max|e|; also returns the worst error relative to max|e|.

    Arrays of different shapes, or that are not real numbers (complex ones included: their imaginary part would
    be dropped), are not close (False, inf): never an error. While grading, the comparison is recorded for `grader
    explain` (`what`: what was compared with what, in words; grader.api.comparisons)."""
    ok, worst = _closeness(actual, expected, rtol, atol_scale)
    kind = (RELATIVE if not rtol else f"elementwise {rtol:g}·|expected| + {atol_scale:g}·max|expected|, so at most "
            f"{rtol + atol_scale:g} of max|expected|")
    compared(what or "vectors compared", actual, expected, worst, atol_scale if not rtol else rtol + atol_scale, ok,
             measure="max|student − expected| / max|expected|", tolerance_kind=kind)
    return ok, worst


def _closeness(actual: Any, expected: Any, rtol: float, atol_scale: float) -> tuple[bool, float]:
    try:
        with np.errstate(all="ignore"):
            a, e = np.asarray(actual), np.asarray(expected)
            if a.dtype.kind not in "iuf" or e.dtype.kind not in "iuf" or a.shape != e.shape:
                return False, math.inf
            a, e = a.astype(np.float64), e.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        return False, math.inf
    with np.errstate(all="ignore"):
        scale = float(np.max(np.abs(e))) if e.size else 0.0
        error = np.abs(a - e)
        finite = bool(np.all(np.isfinite(a)))
        ok = bool(finite and np.all(error <= rtol * np.abs(e) + atol_scale * scale))
        worst = float(np.max(error) / scale) if scale > 0 and finite and error.size else math.inf
    return ok, worst if math.isfinite(worst) else math.inf


def plain_data(value: Any, label: str = "This value") -> Any:
    """Arrays become (nested) lists and tuples lists, so `==` compares contents and never raises. A value holding
    more than MAX_PLAIN_NUMBERS numbers, or nested deeper than MAX_PLAIN_DEPTH, fails (no list is built first)."""
    budget = [MAX_PLAIN_NUMBERS]
    return _plain(value, label, budget, 0)


def _plain(value: Any, label: str, budget: list[int], depth: int) -> Any:
    if depth > MAX_PLAIN_DEPTH:
        raise AssertionError(f"{label} is nested too deeply for the grader to compare.")
    if isinstance(value, np.ndarray):
        budget[0] -= value.size
        if budget[0] < 0:
            raise AssertionError(f"{label} is too large for the grader to compare (more than {MAX_PLAIN_NUMBERS} numbers).")
        return value.tolist()
    if isinstance(value, (list, tuple, dict)):
        budget[0] -= len(value)
        if budget[0] < 0:
            raise AssertionError(f"{label} is too large for the grader to compare (more than {MAX_PLAIN_NUMBERS} items).")
        if isinstance(value, dict):
            return {key: _plain(item, label, budget, depth + 1) for key, item in value.items()}
        return [_plain(item, label, budget, depth + 1) for item in value]
    return value


def fmt(value: Any) -> str:
    """A number with 8 significant digits; anything else as describe() says it. Never raises."""
    number = _real(value)
    return f"{number:.8g}" if number is not None else describe(value)


def json_safe(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """Plain data that `json.dumps(allow_nan=False)` accepts: arrays to lists, NaN/inf to None, anything the
    grader will not interpret (a function, an object) to its short description; capped in depth and size so a
    student's value cannot bloat a record. An array larger than what is left of the budget becomes None before
    any list is made of it."""
    budget = [20000] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0 or depth > 12:
        return None
    if isinstance(value, np.ndarray):
        if value.size > budget[0]:
            budget[0] = -1
            return None
        value = value.tolist()
    if value is None or isinstance(value, (bool, str)):
        return value[:2000] if isinstance(value, str) else value
    if isinstance(value, int):
        return value if abs(value) < 2**63 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, complex):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [json_safe(item, depth + 1, budget) for item in value[:2000]]
    if isinstance(value, dict):
        return {str(key)[:200]: json_safe(item, depth + 1, budget) for key, item in list(value.items())[:2000]}
    return repr(value)[:200]
