"""Scenario set-up for performance-05. Runs INSIDE the sandbox, before the student's file.

The framework ships this file's source into the child and calls the functions a scenario lists in
assignment.toml with the scenario's parameters (assignment.toml's [parameters], `seed`, `batch_seed`, and what
oracle.scenario_parameters derives from them in the trusted grader). Nothing here is trusted by the grader
afterwards: it only changes the world the student's code sees. Every replacement accepts exactly the call forms
the real API accepts, and if its own change ever failed it would answer as the real API does: the grader's code
can make a scenario less different, never make a student's call fail. (A failure reported from inside the run
could be forged by the student, so the grader never excuses anything on such a report; it cannot happen.)

Why the worlds differ. A method is credited only when the graded value follows a change that only that method
feels, in every scenario, so that a file cannot tell which run it is in and answer differently:

- `nudge_derivative_rules` changes JAX's derivative of tanh by tiny amounts the oracle knows: the first
  derivative by a factor (1 + delta_i) along the vector's index (autodiff of the objective follows it; a NumPy
  recurrence or a finite difference does not), the second derivative by a `curvature` term (second-order
  autodiff follows it; a finite difference of gradients or a NumPy HVP does not), and inside a `jax.checkpoint`-ed
  function by a different curvature (so the rematerialized objective's HVP differs from the ordinary one's).
  Values are untouched, first-order programs compile to the same buffers (the residual counts and the compiler's
  memory figures do not change), and the lesson's own assertions hold: the oracle sizes every change inside them.
- `offset_memory_analysis` / `vary_memory_analysis`: the compiler's byte figures are offset by amounts nobody can
  know in advance (equal figures stay equal), and in the variant one executable of each pair has no analysis.

`reported_memory` is pure and imported by the oracle in the grader too: the figures a run's compiler reports and
the figures the checks expect come from this one definition.
"""

import random

# Every field of jaxlib's CompiledMemoryStats that holds a byte count, in a fixed order (each gets its own band
# of values, so no two fields of an offset analysis can be equal).
BYTE_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes",
               "generated_code_size_in_bytes", "peak_memory_in_bytes", "host_argument_size_in_bytes",
               "host_output_size_in_bytes", "host_temp_size_in_bytes", "host_alias_size_in_bytes",
               "host_generated_code_size_in_bytes")
BAND = 1 << 16
_ORIGINALS: dict = {}    # JAX's own functions and rules, kept on the first change (calling a set-up twice changes from them)


def missing_position(memory_key):
    """Which executable of each pair (0: plain, 1: remat) reports no analysis in a scenario that hides one."""
    return random.Random("availability:%d" % memory_key).randrange(2)


def reported_memory(real, memory_key, index, hide_one):
    """What the scenario's compiler reports for the `index`-th executable analysed: None for the hidden one of each
    pair when `hide_one`, else the real figures moved by amounts nobody can know before the run.

    The offsets depend on the field and the key only, so figures that are equal for the two executables stay
    equal (the lesson's point: both policies report the same temporary bytes). Only the position within a pair
    counts (index % 2): the lesson's script analyses the [plain, remat] pair twice and gets the same answers."""
    position = index % 2
    if hide_one and position == missing_position(memory_key):
        return None
    world = "partial" if hide_one else "whole"      # the two scenarios' figures differ even for one key
    base = 16 * random.Random("base:%s:%d" % (world, memory_key)).randrange(1 << 12, 1 << 20)
    moved = {}
    for name, value in real.items():
        rank = BYTE_FIELDS.index(name) if name in BYTE_FIELDS else len(BYTE_FIELDS) + sorted(real).index(name)
        jitter = 16 * random.Random("jitter:%s:%d:%s" % (world, memory_key, name)).randrange(BAND // 64)
        moved[name] = int(value) + base + rank * BAND + jitter
    return moved


def replace_lesson_seed(lesson_seed, seed, **_):
    """Make every usual way of seeding NumPy with the lesson's seed draw from a fresh one instead.

    Covers `np.random.default_rng(18)` (positional or `seed=`, an int, a NumPy integer, `[18]` or a
    `SeedSequence(18)`) and `np.random.PCG64(...)` with any of those (so `Generator(PCG64(seed=18))` too):
    honest variants of the given line follow the variant, and copied numbers do not."""
    import functools

    import numpy as np

    def is_lesson_seed(requested):
        if isinstance(requested, np.random.SeedSequence):
            requested = requested.entropy
        if isinstance(requested, (list, tuple)) and len(requested) == 1:
            requested = requested[0]
        if isinstance(requested, np.ndarray) and requested.size == 1 and requested.dtype.kind in "iu":
            requested = requested.reshape(()).item()
        return isinstance(requested, (int, np.integer)) and not isinstance(requested, bool) and int(requested) == lesson_seed

    def swapped(args, kwargs):
        """The same call with the lesson's seed (first positional, or `seed=`) replaced by the fresh one, or None."""
        try:
            if args and is_lesson_seed(args[0]):
                return (seed,) + tuple(args[1:]), kwargs
            if not args and is_lesson_seed(kwargs.get("seed")):
                return args, {**kwargs, "seed": seed}
        except Exception:
            pass
        return None

    original_default_rng = np.random.default_rng

    @functools.wraps(original_default_rng)
    def default_rng(*args, **kwargs):
        changed = swapped(args, kwargs)
        if changed is not None:
            try:
                return original_default_rng(*changed[0], **changed[1])
            except Exception:
                pass
        return original_default_rng(*args, **kwargs)

    np.random.default_rng = default_rng

    original_pcg64 = np.random.PCG64

    class PCG64(original_pcg64):
        def __init__(self, *args, **kwargs):
            changed = swapped(args, kwargs)
            if changed is not None:
                try:
                    super().__init__(*changed[0], **changed[1])
                    return
                except Exception:
                    pass
            super().__init__(*args, **kwargs)

    PCG64.__name__ = PCG64.__qualname__ = "PCG64"
    PCG64.__module__ = original_pcg64.__module__
    PCG64.__doc__ = original_pcg64.__doc__
    np.random.PCG64 = PCG64


def nudge_derivative_rules(tanh_slope_cosines, tanh_curvature, checkpoint_curvature, width, **_):
    """Change JAX's derivative rules for tanh (see the module docstring); the oracle models exactly this.

    First derivative: (1 - h^2) (1 + delta_i), delta_i = sum_k c_k cos(pi k (i + 1/2) / width) along the last
    axis when it has `width` entries (computed from an iota, never a stored constant: a constant would be saved as
    a residual). Second derivative: the (1 - h) factor of the rule carries `1 + curvature * z(h)`, where z is a
    primitive that is zero with derivative one: it folds away in a first-order program and contributes
    curvature * (1 - h^2)^2 (1 + delta)^2 to the second derivative. Inside a function wrapped by jax.checkpoint,
    tanh uses `tanh_curvature + checkpoint_curvature` (unless the checkpointed function differentiates it itself, as
    jax.checkpoint around a gradient function does: only an objective rematerialized *inside* the differentiation
    feels it). jax.experimental.jet follows the same first and second derivatives."""
    import contextlib
    import functools
    import math
    import threading

    import jax
    import jax.ad_checkpoint
    import jax.numpy as jnp
    from jax import lax
    from jax._src import core
    from jax._src.interpreters import ad, batching, mlir

    cosines = [float(c) for c in tanh_slope_cosines]
    curvature, extra = float(tanh_curvature), float(checkpoint_curvature)
    width = int(width)

    vanishing_p = core.Primitive("zero_with_unit_derivative")
    vanishing_p.def_impl(lambda value: lax.full_like(value, 0))
    vanishing_p.def_abstract_eval(lambda aval: core.ShapedArray(aval.shape, aval.dtype))
    mlir.register_lowering(vanishing_p, mlir.lower_fun(lambda value: lax.full_like(value, 0), multiple_results=False))
    ad.primitive_jvps[vanishing_p] = lambda primals, tangents: (
        vanishing_p.bind(primals[0]), ad.instantiate_zeros(tangents[0]))
    batching.primitive_batchers[vanishing_p] = lambda args, dims: (vanishing_p.bind(args[0]), dims[0])

    def floating(value):
        return jnp.issubdtype(value.dtype, jnp.floating)

    def slope(ans):
        if not ans.shape or ans.shape[-1] != width or not floating(ans):
            return 1.0
        index = lax.broadcasted_iota(ans.dtype, ans.shape, ans.ndim - 1)
        delta = 0.0
        for k, c in enumerate(cosines):
            delta = delta + c * lax.cos((math.pi * k / width) * (index + 0.5))
        return 1.0 + delta

    def factor_of(ans, bend):
        factor = (1 - ans) * slope(ans)
        if floating(ans):
            factor = factor * (1 + bend * vanishing_p.bind(ans))
        return factor

    # One program for the rule's factor instead of a dozen operations run one by one: a run differentiating
    # outside jit (as the lesson does) would otherwise load a compiled program for each of them.
    jitted_factor = jax.jit(factor_of, static_argnums=1)

    def tangent(g, ans, bend):
        return (g + g * ans) * jitted_factor(ans, bend)

    state = threading.local()

    ad.defjvp2(lax.tanh_p, lambda g, ans, x, **params: tangent(g, ans, curvature))
    real_tanh = _ORIGINALS.setdefault("tanh", jnp.tanh)

    @jax.custom_jvp
    def tanh_in_checkpoint(x):
        return real_tanh(x)

    @tanh_in_checkpoint.defjvp
    def _tanh_in_checkpoint_jvp(primals, tangents):
        ans = real_tanh(primals[0])
        return ans, tangent(tangents[0], ans, curvature + extra)

    def differentiated_inside(value):
        """The checkpointed function itself differentiates this value (jax.checkpoint around a gradient or an HVP
        function): its tanh is not part of a rematerialized objective being differentiated from outside."""
        for _ in range(16):
            name = type(value).__name__
            if name in ("JVPTracer", "LinearizeTracer", "JaxprTracer", "JetTracer"):
                return True
            if name != "BatchTracer":
                return False
            value = value.val
        return False

    @functools.wraps(real_tanh)
    def tanh(x, *args, **kwargs):
        if getattr(state, "depth", 0) and not args and not kwargs and not differentiated_inside(x):
            with contextlib.suppress(Exception):
                return tanh_in_checkpoint(x)
        return real_tanh(x, *args, **kwargs)

    jnp.tanh = tanh

    def inside(fun):
        @functools.wraps(fun)
        def function(*args, **kwargs):
            state.depth = getattr(state, "depth", 0) + 1
            try:
                return fun(*args, **kwargs)
            finally:
                state.depth -= 1

        return function

    real_checkpoint = _ORIGINALS.setdefault("checkpoint", jax.checkpoint)

    @functools.wraps(real_checkpoint)
    def checkpoint(fun=None, *args, **kwargs):
        if fun is None:
            return lambda f: checkpoint(f, *args, **kwargs)
        try:
            wrapped = inside(fun)
        except Exception:
            wrapped = fun
        return real_checkpoint(wrapped, *args, **kwargs)

    checkpoint.nudged = True
    for module in (jax, jax.ad_checkpoint):
        for name in ("checkpoint", "remat"):
            current = getattr(module, name, None)
            if current is real_checkpoint or getattr(current, "nudged", False):
                setattr(module, name, checkpoint)
    try:
        from jax.experimental import jet
    except Exception:
        return
    original_taylor = _ORIGINALS.setdefault("taylor", jet.jet_rules[lax.tanh_p])
    jet.jet_rules[vanishing_p] = lambda primals_in, series_in, **_: (vanishing_p.bind(primals_in[0]), list(series_in[0]))

    def tanh_taylor(primals_in, series_in, **params):
        _, series = original_taylor(primals_in, series_in, **params)
        y0 = lax.tanh(primals_in[0])   # jet's own primal (through the logistic) is less accurate in float32
        terms, = series_in
        if not series or not floating(y0):
            return y0, series
        first = (1 - y0 * y0) * slope(y0)
        second = first * slope(y0) * (-2.0 * y0 + curvature * (1 - y0 * y0))
        out = list(series)
        out[0] = first * terms[0]
        if len(out) > 1:
            out[1] = first * terms[1] + 0.5 * second * terms[0] * terms[0]
        return y0, out

    jet.jet_rules[lax.tanh_p] = tanh_taylor


def offset_memory_analysis(batch_seed, **_):
    """Behave like a backend with its own reporting conventions: `Compiled.memory_analysis()` returns the real
    analysis with every byte figure offset by an amount nobody can know before the run (reported_memory)."""
    _replace_memory_analysis(batch_seed, hide_one=False)


def vary_memory_analysis(seed, **_):
    """Behave like a backend whose memory analysis is partial and unfamiliar: `Compiled.memory_analysis()`
    returns None for one executable of each pair and, for the other, figures unlike the real ones
    (reported_memory). Executables are numbered in the order their analysis is first asked for; asking again gives
    the same answer."""
    _replace_memory_analysis(seed, hide_one=True)


def _replace_memory_analysis(memory_key, hide_one):
    import jax.stages

    original = jax.stages.Compiled.memory_analysis
    analysed = []      # executables in order of first request, kept alive so identity stays meaningful
    answers = []

    def memory_analysis(self, *args, **kwargs):
        real = original(self, *args, **kwargs)
        try:
            return reported(self, real)
        except Exception:
            return real

    def reported(self, real):
        for index, known in enumerate(analysed):
            if known is self:
                return answers[index]
        index = len(analysed)
        analysed.append(self)
        figures = None
        if real is not None:
            counts = {name: getattr(real, name) for name in BYTE_FIELDS if isinstance(getattr(real, name, None), int)}
            figures = reported_memory(counts, memory_key, index, hide_one)
        answer = None if figures is None else ReportedMemory(figures, getattr(real, "serialized_buffer_assignment_proto", b""))
        answers.append(answer)
        return answer

    memory_analysis.__name__ = "memory_analysis"
    memory_analysis.__qualname__ = "Compiled.memory_analysis"
    memory_analysis.__doc__ = original.__doc__
    jax.stages.Compiled.memory_analysis = memory_analysis


class ReportedMemory:
    """A memory analysis as the compiler returns one: the byte counts as attributes."""

    def __init__(self, figures, proto=b""):
        for name, value in figures.items():
            setattr(self, name, value)
        self.serialized_buffer_assignment_proto = proto

    def __repr__(self):
        fields = ", ".join("%s=%d" % (name, getattr(self, name)) for name in BYTE_FIELDS if hasattr(self, name))
        return "CompiledMemoryStats(%s)" % fields


ReportedMemory.__name__ = ReportedMemory.__qualname__ = "CompiledMemoryStats"


def hide_memory_analysis(**_):
    """Behave like a backend without memory analysis: `Compiled.memory_analysis()` returns None."""
    import jax.stages

    jax.stages.Compiled.memory_analysis = lambda self: None
