"""Scenario set-up for performance-05. Runs INSIDE the sandbox, before the student's file.

The framework ships this file's source into the child and calls the functions a scenario lists in
assignment.toml with the scenario's parameters (assignment.toml's [parameters], `seed`, `batch_seed`, and what
oracle.scenario_parameters derives from them in the trusted grader). Nothing here is trusted by the grader
afterwards: it only changes the world the student's code sees. A change that cannot be installed fails the set-up
(the grader's fault, never the student's); once installed, every change answers every call the real JAX answers.

Why the worlds differ. A method is credited only when the graded value follows a change that only that method
feels, made where every spelling of the same math meets (JAX's primitives and their rules, never a Python name),
and leaving no name, identity, attribute, residual text or compiled buffer changed:

- `nudge_derivative_rules` changes the derivative rule of the tanh primitive by tiny amounts the oracle knows:
  the first derivative by (1 + delta(h)), a smooth function of the primitive's output (autodiff of the objective
  follows it; a NumPy recurrence, a formula or a finite difference does not), the second derivative by a
  curvature term (second-order autodiff follows it; a finite difference of gradients or a NumPy HVP does not),
  and, through the rematerialization primitive's own rule, a different curvature for a tanh inside a
  rematerialized function being differentiated (so the rematerialized objective's HVP differs from the ordinary
  one's, whichever way it was checkpointed).
- `nudge_objective_values` changes what evaluating the objective returns, near the lesson's point, by an amount
  no derivative rule contains, in the result of the one nonlinear primitive every evaluation passes through (tanh,
  on the last layer's pre-activations near their path): a central difference of real evaluations follows it,
  wherever its final sum runs (JAX, NumPy, a Python loop, a column product); the exact slope, autodiff, a Taylor
  model or a re-implementation of the layers in NumPy does not.
- `offset_memory_analysis` / `vary_memory_analysis`: the compiler's byte figures are offset by amounts nobody can
  know in advance (equal figures stay equal), and in the variant one executable of each pair has no analysis.

Every change is sized by the oracle inside a share of the lesson's own assertions, so honest code keeps passing
them.

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


def nudge_derivative_rules(slope_terms, tanh_curvature, checkpoint_curvature, **_):
    """Change JAX's derivative rule of the tanh primitive, and the rule of its rematerialization primitive (see the
    module docstring); oracle.Rules models exactly this.

    First derivative: (1 - h^2)(1 + delta(h)), delta(h) = sum c cos(w h + p) over `slope_terms`, a function of the
    primitive's output only, so every shape, batch and spelling (jnp.tanh, jax.nn.tanh, lax.tanh, inside jit, vmap,
    scan, ...) meets the same rule. Second derivative: the rule's factor carries (1 + bend * vanish(h)), where
    vanish is a primitive that is zero with derivative one: it folds away in a first-order program and adds bend
    times the factor to the second. bend is `tanh_curvature`, or `tanh_curvature + checkpoint_curvature` for a tanh
    inside a rematerialized function being differentiated: the remat primitive's differentiation rule hands its
    body to JAX's own rule with each tanh primitive in it (nested jaxprs too: jit, scan, cond, checkpoint) swapped
    for one of the same name and results whose rule has that bend. So jax.checkpoint, jax.remat, policies and a
    jitted layer traced outside a checkpoint all meet it; jax.checkpoint around a gradient function does not (its
    body's derivative was taken before the checkpoint is differentiated). jax.experimental.jet follows the same
    rules. The rule is built like JAX's own, (g + g h) * (a - h a): the residuals saved, their text and the
    compiled buffers are those of JAX's rule, and no Python name, identity or attribute changes."""
    import functools
    import sys
    import weakref

    import jax
    from jax import lax
    find = _jax_internals().find   # the grader's one adapter to JAX's internals

    _exclude_own_frames(sys._getframe().f_code.co_filename)
    terms = [(float(c), float(w), float(p)) for c, w, p in slope_terms]
    tanh_p, remat_p = find("tanh_p"), find("remat_p")
    primitive_jvps, jet_rules, Zero = find("primitive_jvps"), find("jet_rules"), find("Zero")
    register_lowering, lower_fun, lowerings = find("register_lowering"), find("lower_fun"), find("lowerings")
    ClosedJaxpr, Jaxpr, AccuracyMode = find("ClosedJaxpr"), find("Jaxpr"), find("AccuracyMode")
    const, one = find("const"), find("one")
    originals = _ORIGINALS.setdefault("rules", {"remat": primitive_jvps[remat_p], "taylor": jet_rules[tanh_p]})

    vanish_p = find("Primitive")("vanish")
    vanish_p.def_impl(lambda value: lax.full_like(value, 0))
    vanish_p.def_abstract_eval(lambda aval: find("ShapedArray")(aval.shape, aval.dtype))
    register_lowering(vanish_p, lower_fun(lambda value: lax.full_like(value, 0), multiple_results=False))
    instantiate_zeros = find("instantiate_zeros")
    primitive_jvps[vanish_p] = lambda primals, tangents: (vanish_p.bind(primals[0]), instantiate_zeros(tangents[0]))
    find("primitive_batchers")[vanish_p] = lambda args, dims: (vanish_p.bind(args[0]), dims[0])
    jet_rules[vanish_p] = lambda primals_in, series_in, **_: (vanish_p.bind(primals_in[0]), list(series_in[0]))

    def changed(value):
        return str(value.dtype) in ("float32", "float64")

    def slope(h):
        delta = 0.0
        for c, w, p in terms:
            delta = delta + c * lax.cos(w * h + p)
        return 1.0 + delta

    def slope_derivative(h):
        total = 0.0
        for c, w, p in terms:
            total = total - (c * w) * lax.sin(w * h + p)
        return total

    def amplification(h, bend):
        return slope(h) * (1 + bend * vanish_p.bind(h))

    def jvp_rule(primitive, bend):
        # One compiled program for the factor (a run differentiating outside jit loads one program, not a dozen).
        factor = jax.jit(functools.partial(amplification, bend=bend))

        def tanh_jvp(primals, tangents, **params):
            x, = primals
            g, = tangents
            ans = primitive.bind(x, **params)
            if type(g) is Zero:
                return ans, find("p2tz")(ans)
            highest = params.get("accuracy") is AccuracyMode.HIGHEST
            a = factor(ans) if changed(ans) else None
            if highest:   # JAX's own form for this accuracy, times the factor
                two = const(x, 2)
                local = lax.mul(const(x, 4), lax.mul(
                    lax.logistic(lax.mul(two, x), accuracy=params["accuracy"]),
                    lax.logistic(lax.mul(lax.neg(two), x), accuracy=params["accuracy"])))
                return ans, lax.mul(g, local if a is None else lax.mul(local, a))
            if a is None:
                return ans, lax.mul(lax.add(g, lax.mul(g, ans)), lax.sub(one(x), ans))
            return ans, lax.mul(lax.add(g, lax.mul(g, ans)), lax.sub(a, lax.mul(ans, a)))

        return tanh_jvp

    def taylor_rule(bend):
        def tanh_taylor(primals_in, series_in, **params):
            x, = primals_in
            terms_in, = series_in
            y0 = tanh_p.bind(x, **params)
            if not terms_in or not changed(y0):
                return originals["taylor"](primals_in, series_in, **params)
            s = slope(y0)
            first = (1 - y0 * y0) * s
            bent = -2.0 * y0 * s + (1 - y0 * y0) * (slope_derivative(y0) + s * bend)
            out = [first * terms_in[0]]
            if len(terms_in) > 1:
                out.append(first * terms_in[1] + 0.5 * bent * first * terms_in[0] * terms_in[0])
            if len(terms_in) > 2:
                out += list(originals["taylor"](primals_in, series_in, **params)[1][2:])
            return y0, out

        return tanh_taylor

    tanh_remat_p = find("standard_unop")(find("float_dtypes") | find("complex_dtypes"), "tanh")
    register_lowering(tanh_remat_p, lowerings[tanh_p].rule)
    _ORIGINALS["tanh_twins"] = [tanh_remat_p]   # nudge_objective_values changes what evaluating it returns too
    pp_eqn_rules = find("pp_eqn_rules")
    if tanh_p in pp_eqn_rules:
        pp_eqn_rules[tanh_remat_p] = pp_eqn_rules[tanh_p]
    plain_bend = float(tanh_curvature)
    remat_bend = float(tanh_curvature) + float(checkpoint_curvature)
    guarded = _jax_internals().guarded   # a fault of these rules is the grader's, whatever JAX's traceback shows
    primitive_jvps[tanh_p] = guarded(jvp_rule(tanh_p, plain_bend))
    primitive_jvps[tanh_remat_p] = guarded(jvp_rule(tanh_remat_p, remat_bend))
    jet_rules[tanh_p] = guarded(taylor_rule(plain_bend))
    jet_rules[tanh_remat_p] = guarded(taylor_rule(remat_bend))

    swapped = weakref.WeakKeyDictionary()

    def swap_jaxpr(jaxpr):
        """The jaxpr with every tanh primitive (nested jaxprs too) swapped for tanh_remat_p; the same object for the
        same jaxpr, so JAX's caches keyed on it keep working."""
        found = swapped.get(jaxpr)
        if found is not None:
            return found
        eqns, touched = [], False
        for eqn in jaxpr.eqns:
            params = {name: swap_param(value) for name, value in eqn.params.items()}
            primitive = tanh_remat_p if eqn.primitive is tanh_p else eqn.primitive
            if primitive is not eqn.primitive or any(params[name] is not eqn.params[name] for name in params):
                eqn = eqn.replace(primitive=primitive, params=params)
                touched = True
            eqns.append(eqn)
        result = jaxpr.replace(eqns=eqns) if touched else jaxpr
        swapped[jaxpr] = result
        return result

    closed = weakref.WeakKeyDictionary()

    def swap_param(value):
        if isinstance(value, Jaxpr):
            return swap_jaxpr(value)
        if isinstance(value, ClosedJaxpr):
            found = closed.get(value)
            if found is None:
                inner = swap_jaxpr(value.jaxpr)
                found = value if inner is value.jaxpr else ClosedJaxpr(inner, value.consts)
                closed[value] = found
            return found
        if isinstance(value, tuple) and value:
            items = tuple(swap_param(item) for item in value)
            return value if all(a is b for a, b in zip(items, value)) else items
        return value

    def remat_jvp(primals, tangents, *, jaxpr, **params):
        return originals["remat"](primals, tangents, jaxpr=swap_jaxpr(jaxpr), **params)

    primitive_jvps[remat_p] = guarded(remat_jvp)


def nudge_objective_values(center, path, lift, scale, span, across, contrast=0.0, log_center=0.0, log_span=1.0,
                           aside_gain=0.0, **_):
    """Change what evaluating the objective returns, by an amount no derivative rule contains (see the module
    docstring); oracle.Rules models exactly this.

    The tanh primitive's result (its lowering, so eager, jit, vmap, scan and every rematerialized copy alike) on a
    16-entry vector z of pre-activations near the last layer's at the lesson's point, z* = `center`, is
    tanh(z) + scale * t * mu(t) * window * lift, where t = <z - z*, path> / |path|^2 is the position along the path z*
    + t * path that the last layer's pre-activations follow when x moves along (1,...,1), mu(t) = 1 + contrast *
    clip((ln|t| - log_center) / log_span, -1, 1) makes the amount depend on how far the evaluation is, and a factor 1
    + aside_gain * min(rho, 1), rho = |z - z*|'s part across the path over its part along it, on how far off the
    path it lies (so a difference at another step, or along other directions, moves by another amount), `lift` turns
    that into a change of scale * t * mu(t) * (that factor) of the objective's sum of squares however it is summed afterwards (in JAX, NumPy, a Python loop, a
    column product), and the window (zero far from that path) keeps every other tanh exact. At the lesson's point
    itself t = 0: every derivative taken there is JAX's own, and the derivative rules never see the change, so only
    a difference quotient of real evaluations of the objective follows it (oracle.ValueChange models it)."""
    import functools
    import sys

    import numpy as np
    from jax import lax
    find = _jax_internals().find   # the grader's one adapter to JAX's internals

    _exclude_own_frames(sys._getframe().f_code.co_filename)
    register_lowering, lower_fun, hlo = find("register_lowering"), find("lower_fun"), find("hlo")
    center64 = np.asarray(center, dtype=np.float64)
    path64 = np.asarray(path, dtype=np.float64)
    lift64 = np.asarray(lift, dtype=np.float64)
    width = len(center64)
    path_norm2, center_norm2 = float(path64 @ path64), float(center64 @ center64)
    scale, span2, across2 = float(scale), float(span) ** 2, float(across) ** 2
    contrast, log_center, log_span, aside_gain = float(contrast), float(log_center), float(log_span), float(aside_gain)
    tanh_p = find("tanh_p")
    original = _ORIGINALS.setdefault("tanh_lowering", find("lowerings")[tanh_p].rule)

    def change(z, *, axis):
        """What evaluating tanh adds to z's result: each vector of 16 entries along `axis` (a row, a column, or the
        vectors of a batch, wherever vmap put the batch) is one vector of pre-activations."""
        dtype = z.dtype
        order = tuple(d for d in range(z.ndim) if d != axis) + (axis,)
        y = z if order == tuple(range(z.ndim)) else lax.transpose(z, order)
        last = (y.ndim - 1,)

        def total(value):
            return lax.reduce_sum_p.bind(value, axes=last, out_sharding=None)

        d = lax.sub(y, lax.broadcast_in_dim(center64.astype(dtype), y.shape, last))
        t = lax.mul(total(lax.mul(d, lax.broadcast_in_dim(path64.astype(dtype), y.shape, last))),
                    np.asarray(1.0 / path_norm2, dtype))
        n2 = total(lax.mul(d, d))
        off = lax.div(lax.sub(n2, lax.mul(lax.mul(t, t), np.asarray(path_norm2, dtype))), np.asarray(center_norm2, dtype))
        one, zero = np.asarray(1.0, dtype), np.asarray(0.0, dtype)
        along = lax.max(lax.sub(one, lax.mul(lax.mul(t, t), np.asarray(1.0 / span2, dtype))), zero)
        aside = lax.max(lax.sub(one, lax.mul(off, np.asarray(1.0 / across2, dtype))), zero)
        window = lax.mul(lax.mul(lax.mul(along, along), along), lax.mul(lax.mul(aside, aside), aside))
        # mu(t) = 1 + contrast * clip((ln|t| - log_center) / log_span, -1, 1); |t| kept off 0 (t * mu is 0 there anyway)
        size = lax.max(lax.abs(t), np.asarray(np.finfo(dtype).tiny, dtype))
        ratio = lax.mul(lax.sub(lax.log(size), np.asarray(log_center, dtype)), np.asarray(1.0 / log_span, dtype))
        ratio = lax.clamp(np.asarray(-1.0, dtype), ratio, np.asarray(1.0, dtype))
        profile = lax.add(one, lax.mul(ratio, np.asarray(contrast, dtype)))
        # ...times 1 + aside_gain * min(rho, 1), rho = |offset across the path| / |offset along it|
        across_path = lax.sqrt(lax.max(lax.sub(n2, lax.mul(lax.mul(t, t), np.asarray(path_norm2, dtype))), zero))
        along_path = lax.max(lax.mul(lax.abs(t), np.asarray(np.sqrt(path_norm2), dtype)), np.asarray(np.finfo(dtype).tiny, dtype))
        rho = lax.div(across_path, along_path)   # kept finite where t is 0 (the amount is 0 there anyway)
        gain = lax.add(one, lax.mul(lax.min(rho, one), np.asarray(aside_gain, dtype)))
        amount = lax.mul(lax.mul(lax.mul(lax.mul(t, profile), gain), window), np.asarray(scale, dtype))
        shift = lax.mul(lax.broadcast_in_dim(amount, y.shape, tuple(range(y.ndim - 1))),
                        lax.broadcast_in_dim(lift64.astype(dtype), y.shape, last))
        if order == tuple(range(z.ndim)):
            return shift
        return lax.transpose(shift, tuple(order.index(d) for d in range(z.ndim)))

    def changed_dtype(aval):
        return str(aval.dtype) in ("float32", "float64")

    def lowering(ctx, x, **params):
        out = original(ctx, x, **params)
        aval = ctx.avals_in[0]
        shape = tuple(int(n) for n in aval.shape)
        axes = [d for d, n in enumerate(shape) if n == width]
        if not changed_dtype(aval) or not axes:
            return out
        axis = axes[-1]   # vmap's batch axes come first (front_batcher): the vector is the last axis of its length
        extra = lower_fun(functools.partial(change, axis=axis), multiple_results=False)(ctx, x)
        return [hlo.add(out[0], extra[0] if isinstance(extra, (list, tuple)) else extra)]

    def front_batcher(primitive):
        """vmap of tanh with its batch axis moved first: a batch of 16 vectors of 16 entries, however vmap laid it
        out, reaches the lowering as (batch, ..., vector), so each evaluation is changed as one vector."""
        def batch(args, dims, **params):
            operand, dim = args[0], dims[0]
            if dim is None:
                return primitive.bind(operand, **params), dim
            if dim != 0:
                operand = lax.transpose(operand, (dim,) + tuple(d for d in range(operand.ndim) if d != dim))
            return primitive.bind(operand, **params), 0
        return _jax_internals().guarded(batch)

    lowering = _jax_internals().guarded(lowering)   # its faults are the grader's (see jax_internals.guarded)
    batchers = find("primitive_batchers")
    for primitive in [tanh_p, *_ORIGINALS.get("tanh_twins", [])]:   # twins: the tanh a remat's derivative evaluates
        register_lowering(primitive, lowering)
        batchers[primitive] = front_batcher(primitive)


def _jax_internals():
    """The grader's one adapter to JAX's internals: beside this file in a run, the framework's copy elsewhere (the
    calibration scripts and tests apply these changes in a plain process)."""
    try:
        import jax_internals  # type: ignore[import-not-found]
    except ImportError:
        from grader.sandbox.child import jax_internals
    return jax_internals


def _exclude_own_frames(filename):
    """JAX names a value by the innermost frame outside JAX (print_saved_residuals' "from <file>:<line> (layer)")
    and hides its own frames from tracebacks: this file's frames count as JAX's, so texts stay the student's."""
    if filename not in _ORIGINALS.setdefault("excluded", set()):
        _ORIGINALS["excluded"].add(filename)
        find = _jax_internals().find
        find("exclude_from_source_info")(filename)
        find("exclude_from_tracebacks")(filename)


def offset_memory_analysis(batch_seed, width, layers, **_):
    """Behave like a backend with its own reporting conventions: `Compiled.memory_analysis()` returns the real
    analysis with every byte figure offset by an amount nobody can know before the run (reported_memory)."""
    _replace_memory_analysis(batch_seed, False, width, layers)


def vary_memory_analysis(seed, width, layers, **_):
    """Behave like a backend whose memory analysis is partial and unfamiliar: `Compiled.memory_analysis()`
    returns None for one of the lesson's two gradient programs and, for the other, figures unlike the real ones
    (reported_memory). Which is which is decided by what the executable computes (`lesson_position`), never by when
    its analysis was asked for: an extra analysis of another program, in any order, changes nothing."""
    _replace_memory_analysis(seed, True, width, layers)


def lesson_position(compiled, width, layers):
    """Which of the lesson's pair an executable is, read from its own program: 0, a gradient (one vector of `width`
    entries out) that evaluates tanh once per layer (the ordinary objective's); 1, one that evaluates some tanh
    again (a rematerialized objective's); None, any other program (a forward pass, an HVP, ...), which is never
    the hidden one."""
    import re

    import jax

    leaves = jax.tree_util.tree_leaves(compiled.out_info)
    if len(leaves) != 1 or int(getattr(leaves[0], "size", 0)) != width:
        return None
    count = len(re.findall(r"\btanh\(", compiled.as_text() or ""))
    if count < layers:
        return None
    return 0 if count == layers else 1


def _replace_memory_analysis(memory_key, hide_one, width, layers):
    import jax.stages

    original = jax.stages.Compiled.memory_analysis
    answers = {}       # id of an analysed executable -> (the executable, kept alive so its id stays its, answer)

    def memory_analysis(self, *args, **kwargs):
        real = original(self, *args, **kwargs)
        try:
            return reported(self, real)
        except Exception:
            return real

    def reported(self, real):
        known = answers.get(id(self))
        if known is not None and known[0] is self:
            return known[1]
        try:
            position = lesson_position(self, width, layers)
        except Exception:
            position = None
        figures = None
        if real is not None:
            counts = {name: getattr(real, name) for name in BYTE_FIELDS if isinstance(getattr(real, name, None), int)}
            figures = reported_memory(counts, memory_key, 2 if position is None else position,
                                      hide_one and position is not None)
        answer = None if figures is None else ReportedMemory(figures, getattr(real, "serialized_buffer_assignment_proto", b""))
        answers[id(self)] = (self, answer)
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
