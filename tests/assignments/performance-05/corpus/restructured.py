"""performance-05, my version: same computations as the lesson, organised into small helpers."""

# %% Imports ---------------------------------------------------------------------------------------
import contextlib, io, time

import numpy as np
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import print_saved_residuals


# %% The network ------------------------------------------------------------------------------------
rng = np.random.default_rng(18)
w = jnp.asarray((rng.normal(size=(16, 16)) * 0.1).astype(np.float32))
x = jnp.asarray(np.linspace(-0.5, 0.5, 16, dtype=np.float32))
print("w:", w.shape, w.dtype, " x:", x.shape, x.dtype)


def plain(v):
    # `objective` is defined further down; it exists by the time plain is called.
    return objective(v, False)


def remat(v):
    return objective(v, True)


def layer(v):
    return jnp.tanh(w @ v)


def objective(v, rematerialize=False):
    operation = jax.checkpoint(layer) if rematerialize else layer
    for _ in range(4):
        v = operation(v)
    return jnp.sum(v * v)


def residual_report(fn):
    stream = io.StringIO()
    with contextlib.redirect_stdout(stream):
        print_saved_residuals(fn, x)
    return [line for line in stream.getvalue().splitlines() if line.strip()]


reports = [residual_report(fn) for fn in (plain, remat)]
print("residual counts:", [len(lines) for lines in reports])


# %% Independent reverse pass -----------------------------------------------------------------------
def reverse_recurrence(weights, point, layers=4):
    host_w = np.asarray(weights)
    values = [np.asarray(point)]
    for _ in range(layers):
        values.append(np.tanh(host_w @ values[-1]))
    g = 2 * values[-1]
    for i in range(layers, 0, -1):
        g = host_w.T @ (g * (1 - values[i] ** 2))
    return g


cotangent = reverse_recurrence(w, x)
for fn in (plain, remat):
    np.testing.assert_allclose(jax.grad(fn)(x), cotangent, rtol=3e-5, atol=1e-7)
print("gradients agree with the recurrence")


# %% Compiled memory and timings --------------------------------------------------------------------
FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes")


def memory_figures(executable):
    analysis = executable.memory_analysis()
    if analysis is None:
        return None          # unavailable, not zero bytes
    return {field: getattr(analysis, field) for field in FIELDS}


def warm_samples(executable, repeats=5):
    executable(x).block_until_ready()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        executable(x).block_until_ready()
        samples.append(time.perf_counter() - start)
    return samples


executables = [jax.jit(jax.grad(fn)).lower(x).compile() for fn in (plain, remat)]
memory = [memory_figures(executable) for executable in executables]
times = [warm_samples(executable) for executable in executables]
print("memory:", memory)
print("times:", times)


# %% Figure data ------------------------------------------------------------------------------------
def memory_panel(memory):
    labels = ["ordinary", "layer remat"]
    if all(m is not None for m in memory):
        return {"kind": "bar", "title": "Compiler memory estimate", "labels": labels,
                "ylabel": "estimated temporary bytes",
                "series": [{"label": "compiler temporaries", "y": [m["temp_size_in_bytes"] for m in memory]}]}
    return {"kind": "bar", "title": "Compiler memory analysis unavailable", "labels": labels,
            "ylabel": "analysis available (1=yes)",
            "series": [{"label": "availability, not byte count", "y": [int(m is not None) for m in memory]}]}


panels = [
    {"kind": "bar", "title": "Autodiff residual descriptions", "labels": ["ordinary", "layer remat"],
     "ylabel": "saved entries (not bytes)",
     "series": [{"label": "residual descriptions", "y": [len(r) for r in reports]}]},
    memory_panel(memory),
]
visual_data = {"kind": "panels", "panels": panels}


# %% Whole-objective boundary -----------------------------------------------------------------------
whole = jax.checkpoint(plain)
np.testing.assert_allclose(jax.grad(whole)(x), cotangent, rtol=3e-5, atol=1e-7)
print("Whole-objective residuals:", residual_report(whole))


# %% Make it yours: directional derivative ----------------------------------------------------------
def central_difference(f, point, v, step):
    return (float(f(point + step * v)) - float(f(point - step * v))) / (2 * step)


direction = jnp.ones_like(x)
eps = 1e-3
finite = central_difference(plain, x, direction, eps)
automatic = float(jnp.vdot(jax.grad(plain)(x), direction))
print(f"finite = {finite:.8f}   automatic = {automatic:.8f}   (eps = {eps})")
assert abs(finite - automatic) <= 3e-3 * abs(automatic) + 1e-6


# %% Transfer: Hessian-vector products --------------------------------------------------------------
def hvp(f, point, v):
    return forward_over_reverse(f)(point, v)     # helper defined just below, before hvp is called


def forward_over_reverse(f):
    return lambda point, v: jax.jvp(jax.grad(f), (point,), (v,))[1]


direction = jnp.linspace(-1.0, 1.0, len(x))
hvp_plain = hvp(plain, x, direction)
hvp_remat = hvp(remat, x, direction)
print("hvp_plain:", hvp_plain)
print("hvp_remat:", hvp_remat)
assert jnp.allclose(hvp_plain, hvp_remat, rtol=1e-4, atol=1e-6)
assert bool(jnp.all(jnp.isfinite(hvp_plain)))
print("done")
