"""One MLIR context for the programs a run lowers, made once in the fork server before it forks.

Why: JAX makes a new MLIR context for every program it lowers (about 3 ms of CPU each, 25 ms for the first, which
imports the dialects), even when the compiled program then comes from the compilation cache. A run of the lesson
lowers about 40 programs, so a run spent about 0.13 CPU-s making contexts it threw away. Made in the fork server,
the context is memory every run starts with (copy-on-write), and each run's lowerings reuse it.

What stays as JAX does it:
- the lowered programs are the same text, so the compilation cache's keys and hits are unchanged;
- only the thread that made the context (the server's only thread, which is each run's main thread) reuses it: any
  other thread of the student's gets a fresh context of its own, as before (two threads never build IR in one
  context at once);
- a lowering that does not come through `lower_jaxpr_to_module` (an export, a shape refinement) gets a fresh one;
- memory stays bounded: a context keeps every constant and type made in it for as long as it lives, which a fresh
  context per lowering frees with its module. So the shared context is set aside for good (JAX's own behaviour
  from then on) before it would hold more than SHARED_CONSTANT_BYTES of the lowered programs' constants, or after
  SHARED_LOWERINGS lowerings (what else a lowering leaves, its types and locations, is under 1 KiB for the
  lesson's programs).

Nothing here reads student data: it only counts the bytes of the constants of each program being lowered.
"""

import threading

SHARED_LOWERINGS = 1000
SHARED_CONSTANT_BYTES = 16 * 2**20
MAX_EQUATIONS = 200_000     # a program larger than this is not measured: it gets a fresh context
INSTALLED = None            # the SharedLoweringContext in use in this process, if any


class SharedLoweringContext:
    """Installed over `mlir.make_ir_context` and `mlir.lower_jaxpr_to_module` (see the module docstring)."""

    def __init__(self, mlir, core):
        self.mlir, self.core = mlir, core
        self.fresh = mlir.make_ir_context
        self.lower = mlir.lower_jaxpr_to_module
        self.context = self.fresh()
        self.owner = threading.get_ident()
        self.local = threading.local()
        self.lowerings = 0
        self.constant_bytes = 0

    def install(self):
        mlir = self.mlir
        mlir.make_ir_context = self.make_ir_context
        mlir.lower_jaxpr_to_module = self.lower_jaxpr_to_module
        return self

    @property
    def retired(self):
        return self.context is None

    def lower_jaxpr_to_module(self, *args, **kwargs):
        """JAX's function; the size of the program's constants is known to `make_ir_context` while it runs."""
        outer = getattr(self.local, "pending", None)
        self.local.pending = None
        if not self.retired and threading.get_ident() == self.owner:
            try:
                self.local.pending = constant_bytes(args[1] if len(args) > 1 else kwargs.get("jaxpr"), self.core)
            except Exception:   # never the student's failure: this lowering just gets a fresh context
                self.local.pending = None
        try:
            return self.lower(*args, **kwargs)
        finally:
            self.local.pending = outer

    def make_ir_context(self):
        """The shared context when this lowering may use it, else a fresh one as JAX makes it."""
        pending = getattr(self.local, "pending", None)
        self.local.pending = None            # one context per lowering: a second request inside it gets a fresh one
        if pending is None or self.retired or threading.get_ident() != self.owner:
            return self.fresh()
        if self.lowerings >= SHARED_LOWERINGS or self.constant_bytes + pending > SHARED_CONSTANT_BYTES:
            self.context = None              # set aside: its memory goes with the last module made in it
            return self.fresh()
        self.lowerings += 1
        self.constant_bytes += pending
        return self.context


def constant_bytes(closed, core):
    """Bytes of the constants a program carries (its own, its literals, those of every program nested in it), or
    None when it cannot be measured cheaply."""
    if not isinstance(closed, core.ClosedJaxpr):
        return None
    total, equations, seen, stack = 0, 0, set(), [closed]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, core.ClosedJaxpr):
            total += sum(_nbytes(value) for value in item.consts)
            if core.ClosedJaxpr is not core.Jaxpr:   # JAX >= 0.12 merged the two: the equations are this item's
                stack.append(item.jaxpr)
                continue
        for atom in item.outvars:
            if isinstance(atom, core.Literal):
                total += _nbytes(atom.val)
        for equation in item.eqns:
            equations += 1
            if equations > MAX_EQUATIONS:
                return None
            for atom in equation.invars:
                if isinstance(atom, core.Literal):
                    total += _nbytes(atom.val)
            for value in equation.params.values():
                for part in value if isinstance(value, (tuple, list)) else (value,):
                    if isinstance(part, (core.Jaxpr, core.ClosedJaxpr)):
                        stack.append(part)
    return total


def _nbytes(value):
    size = getattr(value, "nbytes", None)
    return size if isinstance(size, int) else 8


def install():
    """In the fork server, after JAX is imported and before any fork: returns the installed sharer, or None."""
    import types

    from jax_internals import find

    global INSTALLED
    find("exclude_from_tracebacks")(__file__)   # a student's traceback shows JAX's frames here, not ours
    core = types.SimpleNamespace(**{name: find(name) for name in ("ClosedJaxpr", "Jaxpr", "Literal")})
    INSTALLED = SharedLoweringContext(find("mlir_module"), core).install()
    return INSTALLED
