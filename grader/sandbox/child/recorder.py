"""Method evidence, recorded INSIDE the sandbox: what the student's code evaluated, and the arrays it made.

Checks never credit a method because a call of the right kind happened nearby. They ask whether the graded value
is what recorded outputs give (a difference quotient of two recorded evaluations) or follow changes of JAX's
derivative rules that only the right method feels (see the assignment's scenario set-up). This recorder supplies
the first kind of evidence, in two streams, both installed before the first student statement:

- evaluations: every call of the student's own functions (the harness decorates each `def` and `lambda` with
  `observe`) and of jitted functions (`jax.jit` returns a JitProxy) made with concrete arrays, with its array
  arguments (keyword arguments too) and results. A call of student code being traced by `jit`, `vmap` or
  `lax.map` outside any differentiation (a central difference inside `jit` with the step traced) gets a
  `jax.debug.callback` that reports its concrete arguments and result each time the compiled program runs, cache
  hits included. Calls under differentiation are not evaluations and are not recorded. Nested calls are kept
  when they evaluate a new point and return a scalar per point (`plain(x+e*v)` inside a helper `cd(e)`), never
  the layers of an evaluation already recorded.
- sightings: every small real array a student expression produced (the harness wraps the student's calls and
  arithmetic in `seen`), so a check can find the tangent an HVP was computed along however it was made (a
  local in `main()`, an argument written inline, a closure variable).

Bounds: per top-level statement the first half of its events is streamed at once and the last half kept in a
ring, sent when the statement ends (a flood in the middle cannot push out the exercise's own evaluations); a
total per run; identical events are sent once. What is left out is counted and reported with the statement.
The recorder never changes what student code computes (it returns the same objects) and its own failures are
swallowed and noted. Being in the student's process it can be lied to; checks verify every evaluation against
the oracle (the value must be the function's at that point), so a forged one can only repeat the truth.
"""

import collections
import functools
import hashlib
import threading

from encoding import SoftTimeLimit, encode_array
from evidence_stream import Stream
from jax_hooks import checkpoint_transform, jit_transform

OBSERVE_NAME = "__grader_observe__"
SEEN_NAME = "__grader_seen__"
MAX_LEAVES = 8             # arrays kept from one call's arguments, and from its result
MAX_WALK = 64              # containers walked looking for them
DIFFERENTIATING = ("JVPTracer", "LinearizeTracer", "JetTracer", "JaxprTracer")


def residual_api():
    """JAX's saved_residuals (what print_saved_residuals prints, as data), taken before student code runs: a probe
    asks it about the student's own functions, and a file that later replaces it changes only its own calls."""
    try:
        from jax_internals import find

        found = find("saved_residuals")
    except BaseException:
        return {}
    return {"saved_residuals": found} if callable(found) else {}


class Frame:
    __slots__ = ("kind", "ids", "recording")

    def __init__(self, kind, ids, recording):
        self.kind = kind            # "student" or "jit"
        self.ids = ids              # ids of its array arguments (a nested call at the same point is the same evaluation)
        self.recording = recording  # its own evaluation is recorded (concrete)


class Recorder:
    def __init__(self, send, max_evaluations=4000, max_evaluations_per_statement=400, max_sightings=4000,
                 max_sightings_per_statement=400, max_elements=1024):
        self.lock = threading.Lock()
        self.send = self._locked(send)
        self.max_elements = max_elements
        self.evaluations = Stream(self.send, "evaluation", max_evaluations, max_evaluations_per_statement)
        self.sightings = Stream(self.send, "sighting", max_sightings, max_sightings_per_statement)
        self.local = threading.local()
        self.statement = -1
        self.enabled = False
        self.problem = None
        self.digests = set()
        self.callbacks = False         # a traced evaluation was given a callback: flush effects at statement end
        self.np = None
        self.jax = None
        self.array_types = ()
        self.tracer_type = type(None)
        self.checkpoint_depth = threading.local()

    def _locked(self, send):
        lock = self.lock

        def locked(event):
            with lock:
                send(event)

        return locked

    # ---- the harness's controls ---------------------------------------------------------------------------

    def set_statement(self, index):
        self.statement = index

    def end_statement(self):
        """Finish the statement: wait for callbacks of compiled programs it ran, send the rings; (evaluations,
        sightings) left out."""
        if self.callbacks and self.jax is not None:
            try:
                self.jax.effects_barrier()
            except SoftTimeLimit:
                raise
            except BaseException as error:
                self._note(error)
        return self.evaluations.end_statement(), self.sightings.end_statement()

    def paused(self):
        """Context: nothing the grader itself runs (probes, value encoding) is recorded."""
        recorder = self

        class Pause:
            def __enter__(self):
                self.was = recorder.enabled
                recorder.enabled = False

            def __exit__(self, *exc):
                recorder.enabled = self.was

        return Pause()

    def summary(self):
        return {"evaluations": self.evaluations.sent, "sightings": self.sightings.sent,
                "omitted": self.evaluations.omitted_total + self.sightings.omitted_total, "problem": self.problem}

    # ---- installing ---------------------------------------------------------------------------------------

    def install(self):
        """Make `jax.jit` return JitProxy and learn JAX's array and tracer types; return the real transformations
        (captured first, for the grader's probes, which a student's later patch of `jax.grad` cannot reach)."""
        import jax
        import jax.ad_checkpoint
        import numpy as np

        self.np, self.jax = np, jax
        self.tracer_type = jax.core.Tracer
        self.array_types = (np.ndarray, type(jax.numpy.zeros(1)))
        real = {name: getattr(jax, name) for name in ("grad", "jvp", "vjp", "jit", "hessian", "value_and_grad",
                                                      "checkpoint") if hasattr(jax, name)}
        real.update(residual_api())
        real["stop_gradient"] = jax.lax.stop_gradient   # what a replay's probe builds a changed function with
        self.enabled = True
        if not self.records_evaluations:   # sightings only: JAX's own functions stay in place, untouched
            return real
        jit = jit_transform(self, real["jit"])
        checkpoint = checkpoint_transform(self, real["checkpoint"])
        for module in (jax, jax.ad_checkpoint):
            for name, value in list(vars(module).items()):
                if value is real["jit"]:
                    setattr(module, name, jit)
                elif value is real["checkpoint"]:
                    setattr(module, name, checkpoint)
        return real

    @property
    def records_evaluations(self):
        """An assignment that sets max_evaluations = 0 records no evaluations: no function of the student's or of
        JAX is wrapped, and only sightings are kept."""
        return self.evaluations.total > 0

    # ---- evaluations --------------------------------------------------------------------------------------

    def observe(self, function):
        """The decorator added to every student `def` and `lambda`."""
        if not callable(function):
            return function
        try:
            code = function.__code__
            name = "%s:%d" % (str(getattr(function, "__qualname__", "") or code.co_name)[:120], code.co_firstlineno)
        except BaseException:
            return function
        recorder = self

        def observed(*args, **kwargs):
            return recorder.call("student", name, function, args, kwargs)

        try:
            functools.update_wrapper(observed, function)   # signature, name and doc stay the student's own
        except BaseException:
            pass
        return observed

    def call(self, kind, name, function, args, kwargs):
        local = self.local
        if not self.enabled or getattr(local, "busy", False):
            return function(*args, **kwargs)
        stack = getattr(local, "stack", None)
        if stack is None:
            stack = local.stack = []
        local.busy = True
        frame = leaves = None
        traced = False
        try:
            leaves = self._leaves((args, kwargs))
            mode = self._mode(leaves)
            enclosing = stack[-1] if stack else None
            ids = frozenset(id(leaf) for leaf in leaves)
            if mode == "concrete":
                frame = Frame(kind, ids, enclosing is None or not (ids and ids <= enclosing.ids))
            elif mode == "traced":
                traced = self._traced_wanted(kind, enclosing)
                frame = Frame(kind, ids, False)
            else:
                frame = Frame(kind, ids, False)
        except SoftTimeLimit:
            local.busy = False
            raise
        except BaseException as error:   # the recorder's own failure: note it, run the student's code untouched
            self._note(error)
            frame = None
        local.busy = False
        if frame is None:
            return function(*args, **kwargs)
        stack.append(frame)
        try:
            result = function(*args, **kwargs)
        finally:
            stack.pop()
        if frame.recording or traced:
            local.busy = True
            try:
                if frame.recording:
                    self._record(kind, name, leaves, result, nested=bool(stack))
                else:
                    self._traced(kind, name, leaves, result, nested=bool(stack))
            except SoftTimeLimit:
                raise
            except BaseException as error:
                self._note(error)
            finally:
                local.busy = False
        return result

    def _traced_wanted(self, kind, enclosing):
        """A traced call becomes a callback unless it is the jitted function itself (its JitProxy records the call)
        or runs inside a checkpointed function (effects there would change what the checkpoint saves)."""
        if getattr(self.checkpoint_depth, "value", 0):
            return False
        return not (enclosing is not None and enclosing.kind == "jit" and enclosing.recording)

    def _record(self, kind, name, leaves, result, nested):
        results = self._leaves(result)
        if nested and not self._scalar_per_point(leaves, results):
            return
        arrays = [self._array(leaf) for leaf in leaves]
        outputs = [self._array(leaf) for leaf in results]
        self._emit_evaluation(kind, name, [a for a in arrays if a is not None], [o for o in outputs if o is not None],
                              False)

    def _traced(self, kind, name, leaves, result, nested):
        results = self._leaves(result)
        if nested and not self._scalar_per_point(leaves, results):
            return
        small = [leaf for leaf in leaves if self._small(leaf)]
        outputs = [leaf for leaf in results if self._small(leaf)]
        if not outputs:
            return
        counts = (len(small), len(outputs))

        def report(*values):
            if not self.enabled:
                return
            try:
                arrays = [self.np.array(value) for value in values]
                self._emit_evaluation(kind, name, arrays[:counts[0]], arrays[counts[0]:], True)
            except BaseException as error:
                self._note(error)

        self.jax.debug.callback(report, *small, *outputs)
        self.callbacks = True

    def _emit_evaluation(self, kind, name, arrays, outputs, traced):
        if not outputs:
            return
        digest = hashlib.sha256(repr((kind, name, [(a.shape, str(a.dtype), a.tobytes()) for a in arrays + outputs]))
                                .encode()).digest()
        with self.lock:
            if digest in self.digests:
                return
            if len(self.digests) < 200000:
                self.digests.add(digest)
        self.evaluations.add({"type": "evaluation", "stmt": self.statement, "kind": kind, "name": name,
                              "args": [encode_array(a) for a in arrays], "result": [encode_array(o) for o in outputs],
                              "traced": traced})

    def _scalar_per_point(self, leaves, results):
        """A call worth recording inside another evaluation: one number per point it was given (an objective
        evaluated at a new point), not a layer's vector."""
        rows = [self._shape(leaf)[0] if len(self._shape(leaf)) == 2 else 1 for leaf in leaves if len(self._shape(leaf)) in (1, 2)]
        sizes = [self._size(leaf) for leaf in results]
        return bool(rows) and bool(sizes) and all(size in rows or size == 1 for size in sizes)

    # ---- sightings ----------------------------------------------------------------------------------------

    def seen(self, value):
        """The hook around each student call and arithmetic result: note a small real array, return it as it is."""
        if type(value) in self.array_types and self.enabled and not getattr(self.local, "busy", False):
            self.local.busy = True
            try:
                self._sight(value)
            except SoftTimeLimit:
                raise
            except BaseException as error:
                self._note(error)
            finally:
                self.local.busy = False
        return value

    def _sight(self, value):
        shape = self._shape(value)
        if not 1 <= len(shape) <= 2 or not 1 < self._size(value) <= self.max_elements:
            return
        array = self._array(value)
        if array is None or array.dtype.kind not in "fiu":
            return
        digest = hashlib.sha256(repr((array.shape, str(array.dtype))).encode() + array.tobytes()).digest()
        with self.lock:
            if digest in self.digests:
                return
            if len(self.digests) < 200000:
                self.digests.add(digest)
        self.sightings.add({"type": "sighting", "stmt": self.statement, "array": encode_array(array)})

    # ---- helpers ------------------------------------------------------------------------------------------

    def _leaves(self, value):
        """Arrays, tracers and real numbers found in `value` (a few levels of tuples, lists and dicts), bounded."""
        found = []
        queue = collections.deque([(value, 0)])
        walked = 0
        while queue and len(found) < MAX_LEAVES and walked < MAX_WALK:
            item, depth = queue.popleft()
            walked += 1
            kind = type(item)
            if kind in (tuple, list) and depth < 3:
                queue.extend((child, depth + 1) for child in item[:16])
            elif kind is dict and depth < 3:
                queue.extend((child, depth + 1) for child in list(dict.values(item))[:16])
            elif kind is float or (kind is int and abs(item) < 2**53):
                found.append(item)
            elif kind in self.array_types or isinstance(item, self.tracer_type) or isinstance(item, self._scalar_types()):
                found.append(item)
        return found

    def _scalar_types(self):
        return (self.np.generic,) if self.np is not None else ()

    def _mode(self, leaves):
        """"concrete" (no tracer), "traced" (traced by jit/vmap/lax.map, not differentiated) or "differentiated"."""
        mode = "concrete"
        for leaf in leaves:
            if not isinstance(leaf, self.tracer_type):
                continue
            mode = "traced"
            value = leaf
            for _ in range(16):
                if type(value).__name__ in DIFFERENTIATING:
                    return "differentiated"
                inner = getattr(value, "val", None) if type(value).__name__ == "BatchTracer" else None
                if inner is None:
                    break
                value = inner
        return mode

    def _shape(self, value):
        shape = getattr(value, "shape", ())
        return tuple(shape) if isinstance(shape, tuple) else ()

    def _size(self, value):
        size = 1
        for n in self._shape(value):
            size *= int(n)
        return size

    def _small(self, value):
        return self._size(value) <= self.max_elements and getattr(getattr(value, "dtype", None), "kind", "f") in "fiuc"

    def _array(self, value):
        """A small numeric array copied to the host (real or complex), else None."""
        if not self._small(value) or isinstance(value, self.tracer_type):
            return None
        array = self.np.array(value, copy=True)
        return array if array.dtype.kind in "biufc" else None

    def _note(self, error):
        self.problem = self.problem or "recorder failed: %s" % type(error).__name__
