"""The in-sandbox harness: runs one student file, statement by statement, and streams plain data out.

This file runs INSIDE the untrusted child process, as a standalone script (stdlib + numpy only, no
import of the `grader` package), so the sandbox can ship it without exposing the project. It reads one
JSON job from stdin and writes length-prefixed JSON frames to the channel fd:

  {"type": "statement", ...}   after every top-level statement (line, status, error with traceback)
  {"type": "value", ...}       a contract name whose value changed, encoded as plain data
  {"type": "probe", ...}       a probe result (the assignment's code called on the student's objects)
  {"type": "done", ...}        the file ended, or called sys.exit

Everything is streamed as it happens so that os._exit, a crash, or the parent's hard kill still leaves
what was computed before it. Values are encoded to JSON scalars/lists/dicts and `.npy` bytes (never
pickle). The parent trusts none of it beyond its schema.
"""

import ast
import base64
import hashlib
import inspect
import io
import json
import os
import signal
import struct
import sys
import time
import traceback

MAX_ITEMS = 1000
MAX_DEPTH = 8
MAX_STR = 20000
MAX_TRACEBACK = 6000


class SoftTimeLimit(BaseException):
    """Raised into the running statement when its time budget is spent (BaseException: `except Exception` keeps out)."""


class Channel:
    def __init__(self, fd):
        self.fd = fd

    def send(self, message):
        payload = json.dumps(message, allow_nan=True).encode("utf-8")
        data = struct.pack(">I", len(payload)) + payload
        try:
            while data:
                written = os.write(self.fd, data)
                data = data[written:]
        except OSError:
            pass


class ValueTooLarge(Exception):
    pass


class Encoder:
    """Plain-data encoding of arbitrary student objects, bounded in size and depth."""

    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self.used = 0

    def charge(self, n):
        self.used += n
        if self.used > self.max_bytes:
            raise ValueTooLarge()

    def encode(self, value, depth=0):
        if depth > MAX_DEPTH:
            return {"t": "other", "type": type(value).__name__, "repr": "(nested too deeply)"}
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
        if kind in (list, tuple):
            self.charge(8 * min(len(value), MAX_ITEMS))
            items = [self.encode(item, depth + 1) for item in list(value)[:MAX_ITEMS]]
            return {"t": "list" if kind is list else "tuple", "items": items, "length": len(value)}
        if kind is dict:
            items = []
            for key, item in list(value.items())[:MAX_ITEMS]:
                key_text = key if type(key) is str else repr(key)[:200]
                self.charge(len(key_text) + 8)
                items.append([key_text, self.encode(item, depth + 1)])
            return {"t": "dict", "items": items, "length": len(value)}
        array = self.as_numeric_array(value)
        if array is not None:
            self.charge(array.nbytes + 128)
            buffer = io.BytesIO()
            import numpy as np

            np.save(buffer, array, allow_pickle=False)
            return {"t": "array", "npy": base64.b64encode(buffer.getvalue()).decode("ascii"), "type": kind.__name__}
        if callable(value):
            return {"t": "callable", "type": kind.__name__, "repr": safe_repr(value)}
        return {"t": "other", "type": kind.__name__, "repr": safe_repr(value)}

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


def safe_repr(value):
    try:
        text = repr(value)
    except SoftTimeLimit:
        raise
    except BaseException:
        text = "<unrepresentable %s>" % type(value).__name__
    return text[:300]


def encode_value(value, max_bytes):
    try:
        return Encoder(max_bytes).encode(value)
    except ValueTooLarge:
        return {"t": "too_large", "type": type(value).__name__, "limit": max_bytes}
    except BaseException as error:  # SoftTimeLimit included: the value is reported as unreadable
        return {"t": "other", "type": type(value).__name__, "repr": "(could not be read: %s)" % type(error).__name__}


def holds_placeholder(node):
    """True when a statement still has a `...` in it (an unfinished TODO of the starter, e.g. `f(...)`)."""
    return any(isinstance(child, ast.Constant) and child.value is Ellipsis for child in ast.walk(node))


def bound_names(node):
    """Top-level names a statement may bind (for mapping a missing name to the statement that failed)."""
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
            names.add(child.id)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(child.name)
        elif isinstance(child, ast.alias):
            names.add((child.asname or child.name).split(".")[0])
    return sorted(names)


def parse_prefix(source, filename):
    """Parse the file; on a syntax error, keep the longest prefix of whole lines that still parses."""
    try:
        return ast.parse(source, filename), None
    except SyntaxError as error:
        problem = {"line": error.lineno, "message": "%s: %s" % (type(error).__name__, error.msg)}
        lines = source.splitlines(True)
        end = max(0, (error.lineno or 1) - 1)
        for _ in range(200):
            try:
                return ast.parse("".join(lines[:end]), filename), problem
            except SyntaxError as inner:
                end = min(end - 1, max(0, (inner.lineno or 1) - 1))
                if end <= 0:
                    break
        return ast.parse("", filename), problem
    except (ValueError, RecursionError, MemoryError) as error:
        return ast.parse("", filename), {"line": None, "message": "%s: %s" % (type(error).__name__, error)}


class Timer:
    """Soft time limit: an overall budget, then a short grace per statement once it is spent."""

    def __init__(self, soft_seconds, grace_seconds):
        self.deadline = time.monotonic() + soft_seconds
        self.grace = grace_seconds
        self.expired = False
        self.active = False
        signal.signal(signal.SIGALRM, self._fire)

    def _fire(self, signum, frame):
        if self.active:  # a signal landing after disarm() began must not escape into harness code
            self.active = False
            self.expired = True
            raise SoftTimeLimit()

    def arm(self, seconds=None):
        """Arm for the rest of the soft budget (or `seconds`); once it is spent, each call gets the grace."""
        budget = self.deadline - time.monotonic() if seconds is None else seconds
        if budget <= 0:
            self.expired = True
            budget = self.grace
        self.active = True
        signal.setitimer(signal.ITIMER_REAL, max(budget, 0.01))

    def disarm(self):
        self.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def format_error(error, filename):
    frames = traceback.extract_tb(error.__traceback__)
    student_frames = [frame for frame in frames if frame.filename == filename]
    line = student_frames[-1].lineno if student_frames else None
    # Drop the harness's own frames: the student sees their file (and library frames below it).
    keep = frames[next((i for i, f in enumerate(frames) if f.filename == filename), 0):]
    text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(keep))
    text += "".join(traceback.format_exception_only(type(error), error))
    if len(text) > MAX_TRACEBACK:
        text = text[:1000] + "\n...\n" + text[-(MAX_TRACEBACK - 1000):]
    try:
        message = str(error)[:2000]
    except BaseException:
        message = "(unprintable)"
    return {"type": type(error).__name__, "message": message, "line": line, "traceback": text}


def notebook_display(*objects, **_):
    """Stand-in for IPython's `display` in a graded notebook: print what would have been shown."""
    for item in objects:
        print(item)


class Harness:
    def __init__(self, job, channel):
        self.job = job
        self.channel = channel
        self.filename = job["filename"]
        self.contract = job["contract"]
        self.max_value_bytes = job["value_max_bytes"]
        self.sent = {}
        self.probe_inputs = {}
        self.probes = {}
        self.failed_probes = set()
        self.timer = Timer(job["soft_seconds"], job["statement_grace_seconds"])
        self.namespace = {"__name__": "__main__", "__file__": os.path.abspath(self.filename), "__builtins__": __builtins__}
        if job.get("notebook"):
            self.namespace["display"] = notebook_display  # IPython's builtin, used freely in notebooks

    def guarded(self, function, *args):
        """Run `function` under the soft timer; return (result, error dict or None, timed out)."""
        self.timer.arm()
        try:
            return function(*args), None, False
        except SoftTimeLimit as error:
            return None, format_error(error, self.filename), True
        finally:
            self.timer.disarm()

    def run_setup(self):
        module = {"__name__": "scenario_setup", "__builtins__": __builtins__}
        exec(compile(self.job["setup_source"], "scenario_setup.py", "exec"), module)
        for name, params in self.job["setup_calls"]:
            module[name](**params)
        probes = {"__name__": "probes", "__builtins__": __builtins__}
        exec(compile(self.job["probes_source"], "probes.py", "exec"), probes)
        for name, value in probes.items():
            if inspect.isfunction(value) and value.__module__ == "probes" and not name.startswith("_"):
                self.probes[name] = (value, list(inspect.signature(value).parameters))

    def stream_values(self, index):
        for name in self.contract:
            if name in self.namespace:
                self.timer.arm(self.timer.grace)  # a student __repr__/__array__ that never returns
                try:
                    encoded = encode_value(self.namespace[name], self.max_value_bytes)
                finally:
                    self.timer.disarm()
                digest = hashlib.sha256(json.dumps(encoded, sort_keys=True).encode()).hexdigest()
                if self.sent.get(name) != digest:
                    self.sent[name] = digest
                    self.channel.send({"type": "value", "name": name, "stmt": index, "value": encoded})
            elif name in self.sent:
                del self.sent[name]
                self.channel.send({"type": "value", "name": name, "stmt": index, "deleted": True})

    def run_probes(self, index, retry_failed=False):
        """Call each probe whose inputs changed; at the end, retry those that failed (a helper defined later)."""
        for name, (function, params) in self.probes.items():
            if not all(p in self.namespace and self.namespace[p] is not Ellipsis for p in params):
                continue
            key = tuple((p, id(self.namespace[p]), self.sent.get(p)) for p in params)
            if self.probe_inputs.get(name) == key and not (retry_failed and name in self.failed_probes):
                continue
            self.probe_inputs[name] = key
            args = [self.namespace[p] for p in params]

            def call():
                try:
                    return function(*args), None
                except SoftTimeLimit:
                    raise
                except BaseException as error:  # the student's function failed (even sys.exit) under the probe
                    return None, format_error(error, self.filename)

            outcome, error, timed_out = self.guarded(call)
            message = {"type": "probe", "name": name, "stmt": index}
            self.failed_probes.discard(name)
            if timed_out or outcome[1] is not None:
                self.failed_probes.add(name)
            if timed_out:
                message["error"] = {"type": "SoftTimeLimit", "message": "the probe ran out of time", "line": None, "traceback": ""}
            elif outcome[1] is not None:
                message["error"] = outcome[1]
            else:
                message["value"] = encode_value(outcome[0], self.max_value_bytes)
            self.channel.send(message)

    def run(self, source):
        tree, syntax_problem = parse_prefix(source, self.filename)
        if syntax_problem:
            self.channel.send({"type": "syntax_error", **syntax_problem})
        try:
            _, error, timed_out = self.guarded(self.run_setup)
        except BaseException as setup_error:
            error, timed_out = {"type": type(setup_error).__name__, "message": str(setup_error)[:2000]}, False
        if error or timed_out:
            self.channel.send({"type": "setup_error", "message": "%s: %s" % (error["type"], error["message"])})
            return {"kind": "setup_failed"}
        for index, node in enumerate(tree.body):
            started = time.monotonic()
            record = {"type": "statement", "index": index, "line": node.lineno,
                      "end_line": getattr(node, "end_lineno", node.lineno), "assigns": bound_names(node),
                      "placeholder": holds_placeholder(node)}
            exit_request = None
            self.timer.arm()
            try:
                code = compile(ast.Module(body=[node], type_ignores=[]), self.filename, "exec")
                exec(code, self.namespace)
                record["status"] = "ok"
            except SoftTimeLimit as error:
                record["status"] = "timeout"
                record["error"] = format_error(error, self.filename)
            except SystemExit as error:
                record["status"] = "exit"
                exit_request = error.code
            except BaseException as error:
                record["status"] = "error"
                record["error"] = format_error(error, self.filename)
            finally:
                self.timer.disarm()
            record["seconds"] = round(time.monotonic() - started, 4)
            self.channel.send(record)
            self.stream_values(index)
            self.run_probes(index)
            if record["status"] == "exit":
                self.run_probes(index, retry_failed=True)
                code = exit_request if isinstance(exit_request, (int, type(None))) else str(exit_request)[:200]
                return {"kind": "sys_exit", "code": code, "line": node.lineno}
        self.run_probes(len(tree.body), retry_failed=True)
        return {"kind": "completed"}


def use_compilation_cache(path):
    """Let JAX reuse (and add to) compiled programs in `path`: every compile, however fast, is cached."""
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


def main():
    serve(json.loads(sys.stdin.read()))


def serve(job):
    """Run one job in this process and end it (the fork server calls this in each isolated child)."""
    channel = Channel(job["channel_fd"])
    if job.get("compilation_cache_dir"):
        use_compilation_cache(job["compilation_cache_dir"])
    harness = Harness(job, channel)
    sys.argv = [job["filename"]]
    sys.path.insert(0, os.getcwd())
    outcome = harness.run(job["source"])
    outcome["soft_limit_hit"] = harness.timer.expired
    channel.send({"type": "done", **outcome})
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(0)


if __name__ == "__main__":
    main()
