"""Plain-data encoding of arbitrary student objects, used INSIDE the sandbox (stdlib + numpy only).

Every value that leaves a run (contract names, probe results, method evidence) goes through `encode_value`:
tagged JSON scalars, lists and dicts, and arrays as `.npy` bytes in base64 (never pickle), bounded in size and
depth. Containers are read through the base types' own methods (`dict.items(d)`, `tuple.__getitem__`), so a
subclass that overrides `items`, `__iter__` or `__eq__` cannot change what is sent; any other mapping or
sequence (a `MappingProxyType`, a `deque`, a user `Mapping`) is read as plain data under the soft time limit.
The parent decodes only this schema and coerces everything again: nothing here is trusted, it only has to be
readable.
"""

import base64
import collections.abc
import io

MAX_ITEMS = 1000
MAX_DEPTH = 8
MAX_STR = 20000


class SoftTimeLimit(BaseException):
    """Raised into the running statement when its time budget is spent (BaseException: `except Exception` keeps out)."""


class ValueTooLarge(Exception):
    pass


def safe_repr(value):
    try:
        text = repr(value)
    except SoftTimeLimit:
        raise
    except BaseException:
        text = "<unrepresentable %s>" % type(value).__name__
    return text[:300]


def type_name(value):
    try:
        return str(type(value).__name__)[:100]
    except BaseException:
        return "object"


class Encoder:
    """Encodes one value, charging every byte against `max_bytes`."""

    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self.used = 0

    def charge(self, n):
        self.used += n
        if self.used > self.max_bytes:
            raise ValueTooLarge()

    def encode(self, value, depth=0):
        if depth > MAX_DEPTH:
            return {"t": "other", "type": type_name(value), "repr": "(nested too deeply)"}
        kind = type(value)
        if value is None:
            return {"t": "none"}
        if value is Ellipsis:
            return {"t": "ellipsis"}
        if kind is bool:
            return {"t": "bool", "v": value}
        if kind is int:
            self.charge(32)
            if abs(value) > 2**63:
                return {"t": "float", "v": float(value)}
            return {"t": "int", "v": value}
        if kind is float:
            self.charge(32)
            return {"t": "float", "v": repr(value)}
        if kind is str:
            self.charge(len(value))
            return {"t": "str", "v": value[:MAX_STR], "truncated": len(value) > MAX_STR}
        if isinstance(value, dict):
            return self.encode_items(dict.items(value), dict.__len__(value), depth)
        if isinstance(value, list):
            return self.encode_sequence("list", [list.__getitem__(value, i) for i in range(min(list.__len__(value), MAX_ITEMS))],
                                        list.__len__(value), depth)
        if isinstance(value, tuple):
            return self.encode_sequence("tuple", [tuple.__getitem__(value, i) for i in range(min(tuple.__len__(value), MAX_ITEMS))],
                                        tuple.__len__(value), depth)
        array = self.as_numeric_array(value)
        if array is not None:
            self.charge(array.nbytes + 128)
            return encode_array(array, type_name(value))
        if isinstance(value, collections.abc.Mapping):
            keys = []
            for key in value.keys():
                keys.append(key)
                if len(keys) >= MAX_ITEMS:
                    break
            return self.encode_items([(key, value[key]) for key in keys], len(value), depth)
        if isinstance(value, (collections.abc.Sequence, collections.abc.Set)) and not isinstance(value, (str, bytes, bytearray)):
            items = []
            for item in value:
                items.append(item)
                if len(items) >= MAX_ITEMS:
                    break
            return self.encode_sequence("list", items, len(value), depth)
        if callable(value):
            encoded = {"t": "callable", "type": type_name(value), "repr": safe_repr(value)}
            return encoded
        return {"t": "other", "type": type_name(value), "repr": safe_repr(value)}

    def encode_items(self, pairs, length, depth):
        items = []
        for key, item in list(pairs)[:MAX_ITEMS]:
            key_text = key if type(key) is str else safe_repr(key)[:200]
            self.charge(len(key_text) + 8)
            items.append([key_text, self.encode(item, depth + 1)])
        return {"t": "dict", "items": items, "length": length}

    def encode_sequence(self, tag, items, length, depth):
        self.charge(8 * len(items))
        return {"t": tag, "items": [self.encode(item, depth + 1) for item in items], "length": length}

    @staticmethod
    def as_numeric_array(value):
        """numpy/JAX arrays and scalars, and Python number subclasses, as a plain numeric ndarray."""
        try:
            import numpy as np

            if isinstance(value, (int, float, complex)) or hasattr(type(value), "__array__") or isinstance(value, np.generic):
                array = np.array(np.asarray(value), copy=True, order="C")
                if array.dtype.kind in "biufc":
                    return array
        except SoftTimeLimit:
            raise  # out of time: encode_value reports the value as unreadable
        except BaseException:  # a hostile __array__ must not stop the harness
            return None
        return None


def encode_array(array, kind="ndarray"):
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return {"t": "array", "npy": base64.b64encode(buffer.getvalue()).decode("ascii"), "type": kind}


def encode_value(value, max_bytes):
    try:
        return Encoder(max_bytes).encode(value)
    except ValueTooLarge:
        return {"t": "too_large", "type": type_name(value), "limit": max_bytes}
    except BaseException as error:  # SoftTimeLimit included: the value is reported as unreadable
        return {"t": "other", "type": type_name(value), "repr": "(could not be read: %s)" % type(error).__name__}


# Values that cannot change in place (exact types: no student class passes), and encodings that hold a whole value.
IMMUTABLE_TYPES = frozenset({int, float, complex, bool, str, bytes, type(None)})
EXACT_ENCODINGS = ("array", "int", "float", "bool", "str", "none")


def array_types():
    """Exact types of values that cannot change in place beyond the builtins: JAX's arrays and NumPy's scalars,
    where they are installed."""
    found = set()
    try:
        import numpy
        found |= {numpy.float16, numpy.float32, numpy.float64, numpy.int32, numpy.int64, numpy.bool_}
        import jax.numpy
        found.add(type(jax.numpy.zeros(())))
    except Exception:   # no JAX (an assignment without it), or a backend that cannot start: builtins only
        pass
    return frozenset(found)
