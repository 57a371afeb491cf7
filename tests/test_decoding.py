"""Reading a run's frames never raises, never fails the record and never builds more than the frame paid for
(grader/runs/decoding.py, grader/runs/snapshot.py). Every frame here is one a student process could write to
the data channel itself (tests/assignments/performance-05/threats/channel_forgery.py shows how)."""

from __future__ import annotations

import base64
import io
import math
import struct
import sys

import numpy as np
import pytest

from grader.runs.decoding import MAX_ARRAY_BYTES, Opaque, decode, read_npy
from grader.runs.snapshot import build_snapshot
from grader.sandbox.child.encoding import MAX_ITEMS, encode_array
from grader.sandbox.raw_run import RawRun

HUGE = 10**400           # what json.loads gives for a 401-digit literal: float() of it raises OverflowError


def snap(*frames: dict):
    good = {"type": "value", "name": "kept", "stmt": 0, "value": {"t": "int", "v": 1}}
    return build_snapshot(RawRun(frames=[good, *frames], control=b'{"setup": "ok"}\n'), "baseline", 18)


@pytest.mark.parametrize("encoded, expected", [
    ({"t": "int", "v": 7}, 7),
    ({"t": "int", "v": 2**63 - 1}, 2**63 - 1),
    ({"t": "int", "v": 2**64}, float(2**64)),           # beyond int64: the float it rounds to
    ({"t": "int", "v": -(2**70)}, -float(2**70)),
    ({"t": "float", "v": "0.25"}, 0.25),
    ({"t": "float", "v": "1e999"}, math.inf),           # a float literal past the range is inf, as in Python
    ({"t": "float", "v": 1.5}, 1.5),
    ({"t": "bool", "v": True}, True),
    ({"t": "bool", "v": 1}, False),
    ({"t": "str", "v": "x" * 50_000}, "x" * 20_000),    # cut to the harness's own bound
])
def test_numbers_stay_within_float64(encoded, expected):
    value = decode(encoded)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("encoded, kind", [
    ({"t": "int", "v": HUGE}, "out_of_range"),
    ({"t": "int", "v": -HUGE}, "out_of_range"),
    ({"t": "float", "v": HUGE}, "out_of_range"),
    ({"t": "int", "v": "12"}, "invalid"),
    ({"t": "int", "v": 1.5}, "invalid"),
    ({"t": "float", "v": "1" * 100}, "invalid"),
    ({"t": "float", "v": [1]}, "invalid"),
    ({"t": "str", "v": ["not", "a", "string"]}, "invalid"),
    ({"t": "list", "items": [{"t": "int", "v": 1}] * (MAX_ITEMS + 1)}, "invalid"),
    ({"t": "list", "items": [1] * 1_000_000}, "invalid"),      # not one Opaque a stray item: refused whole
    ({"t": "dict", "items": "x"}, "invalid"),
    ({"t": "tuple", "items": [], "length": 5}, "too_large"),
    ({"t": "array", "npy": 12}, "invalid"),
    ({"t": "array", "npy": "!!"}, "invalid"),
    ({"t": "array", "npy": "A" * (MAX_ARRAY_BYTES * 2)}, "too_large"),    # refused on its length, not decoded
    ({"t": "callable", "type": ["x"] * 10, "repr": {"a": 1}}, "callable"),
])
def test_what_does_not_fit_is_opaque(encoded, kind):
    value = decode(encoded)
    assert isinstance(value, Opaque) and value.kind == kind


def test_nesting_past_the_bound_is_opaque():
    value: dict = {"t": "int", "v": 1}
    for _ in range(40):
        value = {"t": "list", "items": [value]}
    decoded = decode(value)
    depth = 0
    while isinstance(decoded, list):
        decoded, depth = decoded[0], depth + 1
    assert isinstance(decoded, Opaque) and depth <= 13


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool", "float16", "float32", ">f8", "<i4", ">i2", "complex64"])
def test_arrays_keep_their_dtype_in_native_byte_order(dtype):
    source = np.arange(12).reshape(3, 4).astype(dtype)
    array = decode(encode_array(source))
    assert type(array) is np.ndarray and array.dtype == source.dtype.newbyteorder("=")
    assert array.dtype.isnative and array.flags.writeable and np.array_equal(array, source)


def header(descr: str, shape: str) -> bytes:
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({shape}), }}"
    text += " " * (63 - len(text) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin-1")


@pytest.mark.parametrize("data", [
    header("<f8", "999999999, 999999999, 999999999,") + b"\x00" * 8,   # a shape whose product wraps int64
    header("<f8", "4294967296, 4294967296,"),                          # 2**64 elements: wraps to 0 in int64
    header("|i1", f"{MAX_ARRAY_BYTES + 1},") + b"\x00" * 16,          # sized from the header, not the body
    header("<f3", "2,") + b"\x00" * 6,                                  # no such dtype
    header("|O8", "1,") + b"\x00" * 8,                                  # objects (pickles) are never read
    header("<f8", "2,") + b"\x00" * 8,                                  # body shorter than the header says
    b"\x93NUMPY\x09\x00" + b"\x00" * 20,
])
def test_hostile_npy_is_refused(data):
    with pytest.raises((ValueError, TypeError)):
        read_npy(data)
    value = decode({"t": "array", "npy": base64.b64encode(data).decode()})
    assert isinstance(value, Opaque) and value.kind == "invalid"


def test_the_largest_array_costs_its_own_bytes_once():
    source = np.ones(MAX_ARRAY_BYTES, dtype=np.int8)
    array = decode(encode_array(source))
    assert array.dtype == np.int8 and array.nbytes == MAX_ARRAY_BYTES    # not 8x as float64


# ---- whole frames: a malformed field never fails the record ---------------------------------------------

FORGED = [
    {"type": "statement", "index": 0, "line": 1, "status": "ok", "seconds": HUGE},
    {"type": "statement", "index": HUGE, "line": -HUGE, "end_line": HUGE, "status": HUGE, "calls_omitted": HUGE},
    {"type": "statement", "index": 0, "line": 1, "status": ["x"] * 1000, "seconds": math.nan, "cell": HUGE},
    {"type": "statement", "index": 0, "line": 1, "status": "error",
     "error": {"type": HUGE, "message": ["m"] * 1000, "line": HUGE, "file": HUGE, "traceback": {"a": 1}}},
    {"type": "value", "name": "finite", "stmt": HUGE, "value": {"t": "int", "v": HUGE}},
    {"type": "value", "name": "x" * 10_000, "stmt": 0, "value": {"t": "int", "v": 1}},
    {"type": "value", "name": ["finite"], "value": {"t": "int", "v": 1}},
    {"type": "probe", "name": "grad_plain", "stmt": HUGE, "inputs": {"x": HUGE},
     "value": {"t": "float", "v": HUGE}},
    {"type": "probe", "name": "grad_plain", "error": {"type": "E", "message": HUGE, "line": HUGE}},
    {"type": "syntax_error", "line": HUGE, "cell": -HUGE, "message": HUGE},
    {"type": "call", "stmt": HUGE, "kind": HUGE, "student": [[HUGE, HUGE, HUGE, HUGE, True]], "autodiff": [["grad", HUGE]],
     "checkpoint": [HUGE], "args": [{"t": "array", "npy": "!!"}], "evaluations": [{"kind": HUGE, "args": HUGE}]},
    {"type": "evidence_problem", "message": HUGE},
    {"type": "done", "kind": "completed", "code": HUGE, "line": HUGE, "cell": HUGE, "soft_limit_hit": HUGE,
     "evidence": {"calls": HUGE, "omitted": -HUGE, "problem": HUGE}},
    {"type": "done", "kind": "sys_exit", "code": "x" * 100_000},
]


@pytest.mark.parametrize("frame", FORGED, ids=range(len(FORGED)))
def test_a_forged_frame_never_fails_the_record(frame):
    snapshot = snap(frame)
    assert snapshot.values["kept"] == 1
    for statement in snapshot.statements:
        assert math.isfinite(statement.seconds) and statement.seconds >= 0
        assert abs(statement.index) < 2**63 and len(statement.status) <= 20
    assert snapshot.exit_code is None or (isinstance(snapshot.exit_code, str) and len(snapshot.exit_code) <= 200) \
        or abs(snapshot.exit_code) < 2**63
    assert all(len(name) <= 200 for name in snapshot.values)


def test_every_forged_frame_together_still_makes_one_snapshot():
    snapshot = snap(*FORGED)
    assert snapshot.values["kept"] == 1 and snapshot.ending in ("completed", "sys_exit")
    assert sys.getsizeof(snapshot.values.get("finite")) < 1000
