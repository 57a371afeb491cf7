"""Plain values from a run's tagged JSON: the trust boundary between a student's process and the grader.

Everything here is total: whatever a frame holds (a forged one included), decoding returns a value or an
`Opaque` marker and never raises, and never builds more than the frame itself could pay for:

- numbers stay within float64's range: an integer beyond int64 becomes a float, one beyond float64 an
  `Opaque("out_of_range")` (`float(10**400)` would raise OverflowError in whichever check touched it);
- arrays are read by a strict `.npy` parser (no pickle, no eval), sized on bytes from the header before any
  copy, and keep their own numeric dtype in native byte order (an int8 array stays 1 byte an element);
- containers hold at most the harness's own bound of items (a longer one was not sent by the harness);
- strings and the text fields of frames are cut to fixed lengths before anything is built from them, and hold
  valid Unicode (a lone surrogate, which JSON carries and no writer accepts, becomes U+FFFD).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.common.text import clean
from grader.sandbox.child.encoding import MAX_ITEMS, MAX_STR

MAX_DEPTH = 12                      # nesting the parent reads (the harness sends at most 8)
MAX_ARRAY_BYTES = 16 * 1024 * 1024  # one decoded array, from its header, before its body is touched
INT64 = 2**63


class Missing(Exception):
    """A contract name the check needs is absent, still a TODO, or was never computed."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"`{name}` {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class Opaque:
    """A value the grader will not interpret (a function, an object, a number out of range), kept only as its kind,
    type and a short repr."""

    kind: str          # todo | callable | too_large | out_of_range | invalid | other
    type_name: str
    text: str = ""

    def __str__(self) -> str:
        return f"<{self.type_name}>"

    def __repr__(self) -> str:  # what a student reads when a check shows the compared values
        return "..." if self.kind == "todo" else f"<{self.type_name}>"


UNFINISHED = Opaque("todo", "ellipsis", "...")  # a student placeholder `...` left in the file
INVALID = Opaque("invalid", "invalid")


def text(value: Any, limit: int) -> str:
    """A frame's text field, cut to `limit`: a string as it is, a JSON scalar as its str, anything else empty
    (str() of a forged 8 MiB list would cost before the cut); a lone surrogate becomes U+FFFD."""
    if isinstance(value, str):
        return clean(value[:limit])
    if value is None or isinstance(value, (bool, float)) or (isinstance(value, int) and -INT64 <= value < INT64):
        return str(value)[:limit]
    return ""


def whole(value: Any, default: int = -1) -> int:
    """A frame's integer field (an index, a line, a count) within int64, else `default`."""
    if isinstance(value, int) and not isinstance(value, bool) and -INT64 <= value < INT64:
        return value
    return default


def seconds(value: Any) -> float:
    """A frame's duration: a finite non-negative float, else 0.0 (`float(10**400)` raises, inf and NaN mislead)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    number = _float_or_none(value)
    return number if number is not None and number >= 0 else 0.0


def _float_or_none(value: int | float) -> float | None:
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def decode_int(value: Any) -> int | float | Opaque:
    """An int64 as an int; a larger integer as the float it rounds to, or out_of_range beyond float64."""
    if isinstance(value, bool) or not isinstance(value, int):
        return Opaque("invalid", "int")
    if -INT64 <= value < INT64:
        return value
    number = _float_or_none(value)
    return number if number is not None else Opaque("out_of_range", "int", f"an integer of {len(str(value))} digits")


def decode_float(value: Any) -> float | Opaque:
    """The harness sends repr(float) ("0.1", "inf", "nan"); a forged frame may send anything."""
    if isinstance(value, str) and len(value) <= 64:
        try:
            return float(value)
        except ValueError:
            return Opaque("invalid", "float")
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        number = _float_or_none(value)
        return number if number is not None else Opaque("out_of_range", "float")
    return Opaque("invalid", "float")


def decode(encoded: Any, depth: int = 0) -> Any:
    """Plain Python/NumPy values from the harness's tagged encoding (unknown shapes become Opaque)."""
    if not isinstance(encoded, dict) or depth > MAX_DEPTH:
        return INVALID
    tag = encoded.get("t")
    if tag == "none":
        return None
    if tag == "ellipsis":
        return UNFINISHED
    if tag == "bool":
        return encoded.get("v") is True
    if tag == "int":
        return decode_int(encoded.get("v"))
    if tag == "float":
        return decode_float(encoded.get("v"))
    if tag == "str":
        value = encoded.get("v", "")
        return clean(value[:MAX_STR]) if isinstance(value, str) else Opaque("invalid", "str")
    if tag in ("list", "tuple", "dict"):
        return _decode_container(str(tag), encoded, depth)
    if tag == "array":
        return decode_array(encoded)
    if tag == "callable":
        return Opaque("callable", text(encoded.get("type"), 100) or "function", text(encoded.get("repr"), 300))
    if tag == "too_large":
        return Opaque("too_large", text(encoded.get("type"), 100) or "?")
    return Opaque("other", text(encoded.get("type"), 100) or "?", text(encoded.get("repr"), 300))


def _decode_container(tag: str, encoded: dict, depth: int) -> Any:
    items = encoded.get("items")
    if not isinstance(items, list):
        return Opaque("invalid", tag)
    if len(items) > MAX_ITEMS:                 # the harness sends at most MAX_ITEMS and the true length beside them
        return Opaque("invalid", tag)
    if whole(encoded.get("length")) > len(items):
        return Opaque("too_large", tag)
    if tag == "dict":
        return {text(pair[0], 200): decode(pair[1], depth + 1) for pair in items
                if isinstance(pair, list) and len(pair) == 2}
    values = [decode(item, depth + 1) for item in items]
    return values if tag == "list" else tuple(values)


NPY_HEADER = re.compile(r"\{'descr': '(?P<descr>[<>|=]?[biufc]\d{1,2})', 'fortran_order': (?P<fortran>True|False), "
                        r"'shape': \((?P<shape>(\d{1,9}, ?)*(\d{1,9})?)\), \} *\n")


def read_npy(data: bytes) -> np.ndarray:
    """An `.npy` file's array, for the numeric dtypes only, read by a strict parser (no pickle, no eval), as a
    read-only view of `data`. Its size in bytes is known from the header before the body is looked at.

    np.load parses each header with ast.literal_eval; a run sends hundreds of small arrays, and this is the
    trust boundary, so the header must match one exact shape or the array is refused."""
    if data[:6] != b"\x93NUMPY" or len(data) < 10:
        raise ValueError("not an npy file")
    major = data[6]
    if major == 1:
        length, start = int.from_bytes(data[8:10], "little"), 10
    elif major in (2, 3):
        length, start = int.from_bytes(data[8:12], "little"), 12
    else:
        raise ValueError("unknown npy version")
    header = data[start:start + length].decode("latin-1")
    match = NPY_HEADER.fullmatch(header)
    if not match:
        raise ValueError("unexpected npy header")
    shape = tuple(int(n) for n in match.group("shape").replace(" ", "").split(",") if n)
    dtype = np.dtype(match.group("descr"))
    count = math.prod(shape)                   # Python ints: a hostile shape cannot wrap around
    if count * dtype.itemsize > MAX_ARRAY_BYTES:
        raise ValueError("array too large")
    body = memoryview(data)[start + length:]
    if len(body) != count * dtype.itemsize:
        raise ValueError("npy body has the wrong size")
    array = np.frombuffer(body, dtype=dtype, count=count)
    return array.reshape(shape, order="F" if match.group("fortran") == "True" else "C")


def decode_array(encoded: dict) -> np.ndarray | Opaque:
    """A base ndarray of the array's own numeric dtype in native byte order (bool, int, uint, float, complex)."""
    npy = encoded.get("npy")
    if not isinstance(npy, str) or len(npy) > (MAX_ARRAY_BYTES + 4096) * 4 // 3 + 4:
        return Opaque("too_large" if isinstance(npy, str) else "invalid", "array")
    try:
        array = read_npy(base64.b64decode(npy, validate=True))
    except (ValueError, TypeError, binascii.Error):
        return Opaque("invalid", "array")
    if array.dtype.kind not in "biufc":
        return Opaque("invalid", "array")
    return np.array(array, dtype=array.dtype.newbyteorder("="), copy=True, order="K")
