"""Method evidence, recorded INSIDE the sandbox: what each exercise value was computed from.

Two sources, both installed before the first student statement:

- The student's own functions. The harness compiles the student's file itself and decorates every `def` and
  `lambda` with `observe` (an AST rewrite that adds one decorator and keeps every line number), so each call of
  student code reports its arguments, result and context: helpers, closures, lambdas, methods, partials and
  notebook cells included.
- JAX's public transformations. `install` replaces `jax.grad`, `value_and_grad`, `jvp`, `vjp`, `linearize`,
  `jacfwd`, `jacrev`, `hessian`, `checkpoint`/`remat`, `jit` and `vmap` (and their aliases in `jax.ad_checkpoint`)
  by thin wrappers around the real ones, so every use reports which transformation ran and how deeply
  differentiation was nested when student code was traced. The real functions are captured first and handed to
  the grader's probes (`trusted`), so a student's later patch of `jax.grad` cannot change what a probe computes.
  The wrappers are in jax_wrappers.py; the per-thread call tree in call_tree.py.

What is sent: one `call` frame per *root* call (a call of student code or of a transformed function made when no
observed call is running, i.e. from the student's top-level statements), aggregating everything beneath it:

    stmt        the top-level statement it ran in
    kind/name   "student" (with the function's name, file and line), or the transformation ("grad", "jit", ...)
    concrete    False when it was called with JAX tracers (inside a transformation the recorder does not wrap)
    args/output small numeric arrays found in its arguments and its result (concrete roots only)
    autodiff    [kind, depth] for each transformation call beneath it; depth counts the differentiation levels
                already active (jvp of grad: grad runs at depth 1)
    student     [name, file, line, depth, under_checkpoint] for each student function traced or called beneath it
    checkpoint  depths at which a jax.checkpoint-ed function ran
    tangents    concrete tangents handed to jvp, to a linearized function, or cotangents to a vjp pullback
    evaluations concrete calls made outside any differentiation: arguments and result (small arrays)
    inherited   the features came (also) from an earlier trace: a cache hit of a jitted function, or a pullback
                / linearized function whose differentiation happened when vjp / linearize was called

Everything is bounded (calls per statement and per run, arrays per call, elements per array) and the
recorder never changes what student code computes: it calls the real function with the same arguments and
returns its result or re-raises its exception unchanged. Its own failures are swallowed. Being in the
student's process, it can be lied to by a determined student; the grader treats it as evidence, never proof.
"""

import functools
import threading

from call_tree import Frame, Root, relative
from encoding import SoftTimeLimit, encode_array
from jax_wrappers import wrap_jax

AUTODIFF_LEVELS = {"grad": 1, "value_and_grad": 1, "jvp": 1, "vjp": 1, "linearize": 1, "jacfwd": 1, "jacrev": 1,
                   "jacobian": 1, "hessian": 2}
EVALUATING_KINDS = ("student", "jit", "vmap", "checkpoint")   # concrete calls of these evaluate a function
OBSERVE_NAME = "__grader_observe__"


class Recorder:
    def __init__(self, send, max_calls_per_statement=200, max_calls=3000, max_arrays=16, max_elements=4096,
                 max_evaluations=64):
        self.send = send
        self.max_calls_per_statement = max_calls_per_statement
        self.max_calls = max_calls
        self.max_arrays = max_arrays
        self.max_elements = max_elements
        self.max_evaluations = max_evaluations
        self.local = threading.local()
        self.statement = -1
        self.sent = 0
        self.sent_in_statement = 0
        self.omitted = 0
        self.omitted_in_statement = 0
        self.enabled = False
        self.tracer_type = None
        self.trusted = {}
        self.problem = None

    # ---- the harness's controls ---------------------------------------------------------------------------

    def set_statement(self, index):
        self.statement = index
        self.sent_in_statement = 0
        self.omitted_in_statement = 0

    def take_omitted(self):
        """Root calls of the current statement left out at the bounds (the parent then trusts values alone)."""
        count, self.omitted_in_statement = self.omitted_in_statement, 0
        return count

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

    # ---- installing the wrappers --------------------------------------------------------------------------

    def install(self):
        """Wrap JAX's public transformations; return the real ones (for the probes). Needs `import jax` to work."""
        real = wrap_jax(self)
        self.trusted = dict(real)
        self.enabled = True
        return real

    def observe(self, function):
        """The decorator added to every student `def` and `lambda`."""
        if not callable(function):
            return function
        try:
            code = function.__code__
            name = (str(getattr(function, "__qualname__", "") or code.co_name)[:120], code.co_filename[:200],
                    code.co_firstlineno)
        except BaseException:
            return function
        recorder = self

        @functools.wraps(function)
        def observed(*args, **kwargs):
            return recorder.call("student", function, args, kwargs, name=name)

        return observed

    # ---- one observed call --------------------------------------------------------------------------------

    def call(self, kind, function, args, kwargs, name=None, tangents=(), scan=None, features_box=None,
             replay=None, owner=None):
        if not self.enabled or getattr(self.local, "busy", False):
            return function(*args, **kwargs)
        stack = self._stack()
        root = evaluation = before = None
        depth = 0
        points = ()
        levels = AUTODIFF_LEVELS.get(kind, 0)
        self.local.busy = True
        try:
            concrete = not self._has_tracer(args if scan is None else scan) and not self._has_tracer(kwargs.values())
            depth = sum(frame.levels for frame in stack)
            under_checkpoint = any(frame.checkpoint for frame in stack)
            if not stack:
                root = Root(self.statement, kind, name, concrete)
                self.local.root = root
                if concrete and self.sent_in_statement < self.max_calls_per_statement:
                    root.args = self._arrays(args if scan is None else scan, limit=4)
            current = self.local.root
            if kind == "student" and name is not None:
                current.student.add(name + (depth, under_checkpoint))
            elif levels:
                current.autodiff.add((kind, depth))
            elif kind == "checkpoint":
                current.checkpoint.add(depth)
            if tangents and concrete:
                current.tangents.extend(self._arrays(tangents, limit=4))
            points = ()
            if concrete and depth == 0 and kind in EVALUATING_KINDS:
                points = frozenset(id(arg) for arg in args if hasattr(arg, "shape"))
                inside = next((frame.points for frame in reversed(stack) if frame.points), frozenset())
                # plain(p) -> objective(p) -> layer(p): one evaluation at p, not three
                if (not points or not points <= inside) and len(current.evaluations) < self.max_evaluations:
                    evaluation = {"kind": kind, "name": list(name) if name else None, "args": self._arrays(args, limit=4)}
                    current.evaluations.append(evaluation)
            if owner is not None or features_box is not None or replay:
                before = current.features()
        except SoftTimeLimit:
            if root is not None:
                self.local.root = None
            raise
        except BaseException as error:   # the recorder's own failure: note it, run the student's code untouched
            self.problem = self.problem or "recorder failed: %s" % type(error).__name__
            if root is not None:
                self.local.root = None
            return function(*args, **kwargs)
        finally:
            self.local.busy = False
        pushed = False
        try:
            stack.append(Frame(kind, levels, kind == "checkpoint", points))
            pushed = True
            result = function(*args, **kwargs)
        except BaseException:
            if pushed:
                self._leave(stack, root, None, False, before, depth, owner, features_box, replay, evaluation)
            elif root is not None:
                self.local.root = None
            raise
        self._leave(stack, root, result, True, before, depth, owner, features_box, replay, evaluation)
        return result

    def _leave(self, stack, root, result, ok, before, depth, owner, features_box, replay, evaluation):
        stack.pop()
        try:
            self.local.busy = True
            current = self.local.root
            if current is None:
                return
            if before is not None:
                gained = relative(current.features(), before, depth)
                if owner is not None:   # a jitted function: remember what its trace showed, replay on cache hits
                    if any(gained):
                        owner._grader_features = gained
                    elif getattr(owner, "_grader_features", None):
                        current.add_features(owner._grader_features, depth)
                        current.inherited = True
                if features_box is not None:
                    features_box.append(gained)
                if replay:
                    current.add_features(replay[0], depth)
                    current.inherited = True
            if ok and evaluation is not None:
                evaluation["result"] = self._arrays((result,), limit=2)
            if root is not None:
                if ok and root.concrete and self.sent_in_statement < self.max_calls_per_statement:
                    root.output = self._arrays((result,), limit=self.max_arrays)
                self.local.root = None
                self._emit(root, ok)
        except SoftTimeLimit:
            raise
        except BaseException as error:
            self.problem = self.problem or "recorder failed: %s" % type(error).__name__
        finally:
            self.local.busy = False

    def _emit(self, root, ok):
        if self.sent >= self.max_calls or self.sent_in_statement >= self.max_calls_per_statement:
            self.omitted += 1
            self.omitted_in_statement += 1
            return
        self.sent += 1
        self.sent_in_statement += 1
        self.send({
            "type": "call", "stmt": root.stmt, "kind": root.kind, "name": list(root.name) if root.name else None,
            "concrete": root.concrete, "ok": ok, "args": root.args, "output": root.output,
            "autodiff": sorted([kind, depth] for kind, depth in root.autodiff)[:64],
            "student": sorted([list(item) for item in root.student])[:64],
            "checkpoint": sorted(root.checkpoint)[:16], "tangents": root.tangents[:8],
            "evaluations": root.evaluations, "inherited": root.inherited,
        })

    # ---- helpers ------------------------------------------------------------------------------------------

    def _stack(self):
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
            self.local.root = None
        return stack

    def _has_tracer(self, values, depth=0):
        if self.tracer_type is None:
            return False
        for value in values:
            if isinstance(value, self.tracer_type):
                return True
            if depth < 2 and isinstance(value, (tuple, list)) and self._has_tracer(value, depth + 1):
                return True
            if depth < 2 and isinstance(value, dict) and self._has_tracer(list(value.values()), depth + 1):
                return True
        return False

    def _arrays(self, values, limit):
        """Small numeric arrays found in `values` (a few levels of tuples, lists and dicts), encoded."""
        import numpy as np

        found = []

        def visit(value, depth):
            if len(found) >= limit or depth > 3:
                return
            if isinstance(value, (tuple, list)):
                for item in value[:16]:
                    visit(item, depth + 1)
                return
            if isinstance(value, dict):
                for item in list(value.values())[:16]:
                    visit(item, depth + 1)
                return
            if self.tracer_type is not None and isinstance(value, self.tracer_type):
                return
            if isinstance(value, (bool, str)) or value is None:
                return
            size = getattr(value, "size", 1)
            if not isinstance(size, int) or size > self.max_elements:
                return
            if not (isinstance(value, (int, float, np.ndarray, np.generic)) or hasattr(type(value), "__array__")):
                return
            array = np.asarray(value)
            if array.dtype.kind in "biuf" and array.size <= self.max_elements:
                found.append(encode_array(np.array(array, dtype=np.float64, copy=True, order="C")))

        for value in values:
            visit(value, 0)
        return found
