"""Coercions that check authors use on decoded student values: they fail with a sentence a student understands."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grader.runs.snapshot import Opaque


def describe(value: Any) -> str:
    """A short, student-facing description of what a value is."""
    if value is None:
        return "None"
    if isinstance(value, Opaque):
        if value.kind == "todo":
            return "`...` (an unfinished TODO)"
        if value.kind == "callable":
            return f"a function ({value.type_name})"
        if value.kind == "too_large":
            return f"a {value.type_name} too large to read"
        return f"a {value.type_name} object"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return f"the string {text!r}"
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "b":
            return f"a boolean array of shape {value.shape}" if value.shape else f"the boolean {bool(value)}"
        return f"an array of shape {value.shape}"
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return f"a {kind} of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"a dict with keys {sorted(value)[:6]}"
    return f"a {type(value).__name__}"


def as_number(value: Any, label: str) -> float:
    """A real scalar: Python number, 0-d or one-element array. Complex, bool and anything else fail."""
    if isinstance(value, bool) or value is None:
        raise AssertionError(f"{label} should be a single real number; found {describe(value)}.")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf":
        return float(value.reshape(()))
    raise AssertionError(f"{label} should be a single real number; found {describe(value)}.")


def _is_real_scalar(value: Any) -> bool:
    """A Python number or a one-element real array (how a list of NumPy scalars decodes)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf"


def as_vector(value: Any, label: str, length: int | None = None) -> np.ndarray:
    """A real 1-D float64 vector (from an array or a list of numbers), optionally of a given length."""
    if isinstance(value, (list, tuple)) and value and all(_is_real_scalar(v) for v in value):
        value = np.asarray([float(np.reshape(v, ())) for v in value], dtype=np.float64)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
        raise AssertionError(f"{label} should be a real vector; found {describe(value)}.")
    if value.ndim != 1 or (length is not None and value.shape != (length,)):
        expected = f"({length},)" if length is not None else "one-dimensional"
        raise AssertionError(f"{label} should have shape {expected}; found shape {value.shape}.")
    return value


def close_vectors(actual: np.ndarray, expected: np.ndarray, rtol: float, atol_scale: float) -> tuple[bool, float]:
    """Elementwise |a - e| <= rtol*|e| + atol_scale*max|e|; also returns the worst error relative to max|e|."""
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    error = np.abs(actual - expected)
    ok = bool(np.all(np.isfinite(actual)) and np.all(error <= rtol * np.abs(expected) + atol_scale * scale))
    worst = float(np.max(error) / scale) if scale > 0 and np.all(np.isfinite(actual)) else float("inf")
    return ok, worst


def plain_data(value: Any) -> Any:
    """Arrays become (nested) lists and tuples lists, so `==` compares contents and never raises."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [plain_data(item) for item in value]
    if isinstance(value, dict):
        return {key: plain_data(item) for key, item in value.items()}
    return value


def fmt(value: float) -> str:
    return f"{value:.8g}"


def json_safe(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """Plain data that `json.dumps(allow_nan=False)` accepts: arrays to lists, NaN/inf to None, anything the
    grader will not interpret (a function, an object) to its short description; capped in depth and size so a
    student's value cannot bloat a record."""
    budget = [20000] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0 or depth > 12:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if value is None or isinstance(value, (bool, str)):
        return value[:2000] if isinstance(value, str) else value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, complex):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [json_safe(item, depth + 1, budget) for item in value[:2000]]
    if isinstance(value, dict):
        return {str(key)[:200]: json_safe(item, depth + 1, budget) for key, item in list(value.items())[:2000]}
    return repr(value)[:200]
