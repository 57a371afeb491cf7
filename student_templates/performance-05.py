"""Memory, rematerialization, and optimization tradeoffs — student starter.

A model runs out of memory during differentiation. Someone suggests checkpointing every layer. Will
that change the answer, and will it necessarily reduce this program’s memory? We will compare
gradients, inspect saved residuals and measure compiled estimates and timings before making that
decision.

The lesson's code is given, exactly as the lesson page prints it, its comments included. Each
exercise sits between `# BEGIN EXERCISE <name>` and `# END EXERCISE <name>`: replace every
`...` there with your code (the comments framed by `# ====` lines above each exercise say what to
compute). Run the file, then check it with `grader check performance-05.py` and submit it as
performance-05.py. The same starter exists as a notebook, performance-05.ipynb.
"""

# Step 1 — Define two differentiation policies: Both functions compute the same pure objective; only the...
import contextlib
import io
import time
import numpy as np
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import print_saved_residuals
# Draw pseudorandom samples for `rng` using the explicit RNG state.
rng=np.random.default_rng(18)
# Create device-backed JAX array `w`.
w=jnp.asarray((rng.normal(size=(16,16))*.1).astype(np.float32))
x=jnp.asarray(np.linspace(-.5,.5,16,dtype=np.float32))
def layer(v):return jnp.tanh(w@v)
def objective(v,rematerialize=False):
    operation=jax.checkpoint(layer) if rematerialize else layer
    for _ in range(4):v=operation(v)
    return jnp.sum(v*v)
plain=lambda v:objective(v,False)
remat=lambda v:objective(v,True)
def residual_report(fn):
    stream=io.StringIO()
    # Enter `contextlib.redirect_stdout(stream)` context block:
    with contextlib.redirect_stdout(stream):print_saved_residuals(fn,x)
    lines=[line for line in stream.getvalue().splitlines() if line.strip()]
    return lines
reports=[residual_report(plain),residual_report(remat)]

# ==================================================================================================
# EXERCISE memory — Read compiled memory estimates separately
#
# Compile the gradient for the same input contract and inspect memory_analysis. Argument, output,
# temporary and alias bytes answer different questions. Backend support and reporting conventions
# can vary, so record missing analysis as unavailable instead of substituting zero.
# ==================================================================================================
# Independent reverse recurrence through the same explicitly specified network.
host_w=np.asarray(w)
values=[np.asarray(x)]
for _ in range(4):values.append(np.tanh(host_w@values[-1]))
cotangent=2*values[-1]
for i in range(4,0,-1):cotangent=host_w.T@(cotangent*(1-values[i]**2))
for fn in (plain,remat):
    # Differentiate the objective to obtain gradients ``.
    np.testing.assert_allclose(jax.grad(fn)(x),cotangent,rtol=3e-5,atol=1e-7)
# Differentiate the objective to obtain gradients ``.
np.testing.assert_allclose(jax.grad(plain)(x),jax.grad(remat)(x),rtol=1e-6,atol=1e-7)
# Differentiate the objective to obtain `executables` via automatic differentiation.
executables=[jax.jit(jax.grad(fn)).lower(x).compile() for fn in (plain,remat)]
memory=[]
times=[]
for executable in executables:
    analysis=executable.memory_analysis()
    # BEGIN EXERCISE memory
    memory.append(...)  # TODO: the value to append to `memory`
    # END EXERCISE memory
    # Synchronize host execution until asynchronous device computation completes.
    # Synchronize host execution until asynchronous device computation completes.
    executable(x).block_until_ready()
    samples=[]
    for _ in range(5):
        # Synchronize host execution until asynchronous device computation completes.
        # Synchronize host execution until asynchronous device computation completes.
        # Synchronize host execution until asynchronous device computation completes.
        start=time.perf_counter()
        executable(x).block_until_ready()
        samples.append(time.perf_counter()-start)
    times.append(samples)
print('Saved residual descriptions:')
for name,lines in zip(['plain','remat'],reports):print(name,'\n'+'\n'.join(lines))
print('Compiler memory estimates:',memory)
print('Synchronized gradient samples:',times)
print('Independent reverse recurrence agrees with both gradients.')

# Inspect residual live tensors and compare compiler memory and wall-clock gradient samples:
for name, lines in zip(["plain", "remat"], reports):
    print(name, "\n" + "\n".join(lines))
print("Compiler memory estimates:", memory)
print("Synchronized gradient samples:", times)

# Step 1 — Define two differentiation policies: Both functions compute the same pure objective; only the...
import contextlib
import io
import time
import numpy as np
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import print_saved_residuals
# Draw pseudorandom samples for `rng` using the explicit RNG state.
rng=np.random.default_rng(18)
# Create device-backed JAX array `w`.
w=jnp.asarray((rng.normal(size=(16,16))*.1).astype(np.float32))
x=jnp.asarray(np.linspace(-.5,.5,16,dtype=np.float32))
def layer(v):return jnp.tanh(w@v)
def objective(v,rematerialize=False):
    operation=jax.checkpoint(layer) if rematerialize else layer
    for _ in range(4):v=operation(v)
    return jnp.sum(v*v)
plain=lambda v:objective(v,False)
remat=lambda v:objective(v,True)
def residual_report(fn):
    stream=io.StringIO()
    # Enter `contextlib.redirect_stdout(stream)` context block:
    with contextlib.redirect_stdout(stream):print_saved_residuals(fn,x)
    lines=[line for line in stream.getvalue().splitlines() if line.strip()]
    return lines
reports=[residual_report(plain),residual_report(remat)]

# ==================================================================================================
# EXERCISE memory (again) — the lesson runs this code a second time: fill in the same TODO as above.
# ==================================================================================================
# Independent reverse recurrence through the same explicitly specified network.
host_w=np.asarray(w)
values=[np.asarray(x)]
for _ in range(4):values.append(np.tanh(host_w@values[-1]))
cotangent=2*values[-1]
for i in range(4,0,-1):cotangent=host_w.T@(cotangent*(1-values[i]**2))
for fn in (plain,remat):
    # Differentiate the objective to obtain gradients ``.
    np.testing.assert_allclose(jax.grad(fn)(x),cotangent,rtol=3e-5,atol=1e-7)
# Differentiate the objective to obtain gradients ``.
np.testing.assert_allclose(jax.grad(plain)(x),jax.grad(remat)(x),rtol=1e-6,atol=1e-7)
# Differentiate the objective to obtain `executables` via automatic differentiation.
executables=[jax.jit(jax.grad(fn)).lower(x).compile() for fn in (plain,remat)]
memory=[]
times=[]
for executable in executables:
    analysis=executable.memory_analysis()
    # BEGIN EXERCISE memory
    memory.append(...)  # TODO: the value to append to `memory`
    # END EXERCISE memory
    # Synchronize host execution until asynchronous device computation completes.
    # Synchronize host execution until asynchronous device computation completes.
    executable(x).block_until_ready()
    samples=[]
    for _ in range(5):
        # Synchronize host execution until asynchronous device computation completes.
        # Synchronize host execution until asynchronous device computation completes.
        # Synchronize host execution until asynchronous device computation completes.
        start=time.perf_counter()
        executable(x).block_until_ready()
        samples.append(time.perf_counter()-start)
    times.append(samples)
print('Saved residual descriptions:')
for name,lines in zip(['plain','remat'],reports):print(name,'\n'+'\n'.join(lines))
print('Compiler memory estimates:',memory)
print('Synchronized gradient samples:',times)
print('Independent reverse recurrence agrees with both gradients.')

# ==================================================================================================
# EXERCISE availability_panel — Changed autodiff storage does not guarantee changed compiled buffers
#
# The lower panel reports compiler-estimated temporary bytes when that analysis is supported.
# If a backend lacks memory analysis, the plot explicitly substitutes a labeled availability panel
# rather than treating missing bytes as zero.
# ==================================================================================================
# Compute figure data for: Changed autodiff storage does not guarantee changed compiled buffers
panels=[{'kind':'bar','title':'Autodiff residual descriptions','labels':['ordinary','layer remat'],'ylabel':'saved entries (not bytes)','series':[{'label':'residual descriptions','y':[len(r) for r in reports]}]}]
if all(m is not None for m in memory):
    panels.append({'kind':'bar','title':'Compiler memory estimate','labels':['ordinary','layer remat'],'ylabel':'estimated temporary bytes','series':[{'label':'compiler temporaries','y':[m['temp_size_in_bytes'] for m in memory]}]})
# BEGIN EXERCISE availability_panel
else:
    panels.append(...)  # TODO: the value to append to `panels`
# END EXERCISE availability_panel
visual_data={'kind':'panels','panels':panels}

# Experiment — Move the boundary to the entire objective: Correctness is necessary but does not choose the best policy.
whole=jax.checkpoint(plain)
# Differentiate the objective to obtain gradients ``.
np.testing.assert_allclose(jax.grad(whole)(x),cotangent,rtol=3e-5,atol=1e-7)
print('Whole-objective residuals:',residual_report(whole))
# Differentiate the objective to obtain `whole_executable` via automatic differentiation.
whole_executable=jax.jit(jax.grad(whole)).lower(x).compile()
print('Whole-objective memory estimate:',whole_executable.memory_analysis())

# ==================================================================================================
# EXERCISE directional — Make it yours
#
# Use the direction $v=(1,\ldots,1)$ and central differences to independently check a directional
# derivative of the original objective at the existing input. Compare it with the gradient dot
# direction and report the perturbation.
#
# Key functions & syntax to use:
# - `jnp.allclose(actual, expected, rtol=..., atol=...)` — Checks that two arrays match elementwise
#   within floating-point tolerance.
# - `jax.grad(loss_fn)(params, ...)` — Transforms a scalar-output function into a function returning
#   the gradient PyTree with the same structure as `params`.
#
# Step-by-step implementation plan:
# 1. Differentiate the objective to obtain `automatic` via automatic differentiation.
# ==================================================================================================
# BEGIN EXERCISE directional
# Exercise solution: Use the direction v=(1,\ldots,1) and central differences to...
direction = jnp.ones_like(...)  # TODO: compute direction
eps = ...  # TODO: compute eps
finite = ...  # TODO: compute finite
# Differentiate the objective to obtain `automatic` via automatic differentiation.
automatic = float(...)  # TODO: compute automatic
np.testing.assert_allclose(finite, automatic, rtol=3e-3, atol=1e-6)
print('Directional derivative finite/automatic:', finite, automatic, 'epsilon', eps)
# END EXERCISE directional

# ==================================================================================================
# EXERCISE hvp — Check higher-order differentiation (Transfer)
#
# Compare Hessian-vector products of the ordinary and rematerialized objectives along a nonuniform
# direction. Explain why equal first derivatives alone would be a weaker test.
#
# Key functions & syntax to use:
# - `jnp.linspace(start, stop, num)` — Creates `num` evenly spaced float points across the closed
#   interval `[start, stop]`.
# - `jnp.allclose(actual, expected, rtol=..., atol=...)` — Checks that two arrays match elementwise
#   within floating-point tolerance.
# - `jnp.isfinite(x)` — Returns a boolean mask verifying that no element is `NaN` or `Inf`.
# - `jax.grad(loss_fn)(params, ...)` — Transforms a scalar-output function into a function returning
#   the gradient PyTree with the same structure as `params`.
#
# Step-by-step implementation plan:
# 1. Differentiate the objective to obtain `(_, hvp_plain)` via automatic differentiation.
# 2. Differentiate the objective to obtain `(_, hvp_remat)` via automatic differentiation.
# 3. Confirm that all computed values remain finite (no NaN or Inf).
#
# Hint: Apply jvp to each gradient function with the same primal point and tangent.
# ==================================================================================================
# BEGIN EXERCISE hvp
# Check higher-order differentiation (Transfer): Recomputation should preserve the differentiable function in...
direction = jnp.linspace(...)  # TODO: compute direction
# Differentiate the objective to obtain `(_, hvp_plain)` via automatic differentiation.
_, hvp_plain = jax.jvp(...)  # TODO: compute hvp_plain
# Differentiate the objective to obtain `(_, hvp_remat)` via automatic differentiation.
_, hvp_remat = jax.jvp(...)  # TODO: compute hvp_remat
np.testing.assert_allclose(hvp_plain, hvp_remat, rtol=3e-5, atol=1e-7)
# Confirm that all computed values remain finite (no NaN or Inf).
assert np.isfinite(np.asarray(hvp_plain)).all()
print('Higher-order directional derivatives agree.')
# END EXERCISE hvp

# The lesson's closing line. "Run all" reaches it whatever failed above, so it says PASS only once no exercise's
# value is still `...` (or not computed at all), and otherwise which exercises' TODOs remain.
def _still_todo(value, depth=0):
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return value is ... or (depth < 4 and any(_still_todo(item, depth + 1) for item in items))
_unfinished = [_exercise for _exercise, _names in {
    'memory': ['memory'],
    'availability_panel': ['panels'],
    'directional': ['direction', 'eps', 'finite', 'automatic'],
    'hvp': ['direction', 'hvp_plain', 'hvp_remat'],
}.items() if any(_still_todo(globals().get(_name, ...)) for _name in _names)]
if _unfinished:
    print("Not finished: the TODOs of exercise(s)", ", ".join(_unfinished), "remain (a value is still `...`).")
else:
    print('PASS: performance-05')
