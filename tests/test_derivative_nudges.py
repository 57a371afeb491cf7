"""performance-05's variant changes JAX's derivative rules (scenario_setup.nudge_derivative_rules) by amounts its
oracle sizes and models (oracle.scenario_parameters, oracle.hvp, oracle.autodiff_gradient). Real JAX, in a
subprocess (the changes are global to the process that makes them):

- the oracle's model is what every honest autodiff form returns, to float32 noise well inside the tolerances;
- the wrong forms the issue names land many tolerances away (a NumPy or exact value, plain's HVP for remat,
  jax.checkpoint around a gradient or an HVP function);
- nothing else changes: values, residual counts and the compiler's memory figures are those of JAX's own rules,
  and the lesson's own assertions still pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r'''
import contextlib, importlib.util, io, json, sys
from pathlib import Path
import numpy as np
ROOT = Path(sys.argv[1]); sys.path.insert(0, str(ROOT))
import jax, jax.numpy as jnp
from jax.ad_checkpoint import print_saved_residuals
from jax.experimental import jet
from grader.api.methods import relative_error
from grader.config.assignment import load
from grader.runs.jobs import setup_parameters

assignment = load("performance-05", ROOT)
s = assignment.settings
seed = next(n for n in range(1000, 2000) if assignment.oracle.suitable_seed(n, s))
scenario = assignment.scenarios["variant"]
parameters = setup_parameters(assignment, scenario, seed, seed)
oracle = assignment.oracle.build(seed, {}, scenario, parameters, seed)

def lesson():
    w = jnp.asarray(oracle.w, jnp.float32); x = jnp.asarray(oracle.x, jnp.float32)
    def layer(v): return jnp.tanh(w @ v)
    def objective(v, rematerialize=False):
        operation = jax.checkpoint(layer) if rematerialize else layer
        for _ in range(4): v = operation(v)
        return jnp.sum(v * v)
    plain = lambda v: objective(v, False); remat = lambda v: objective(v, True)
    return plain, remat, jax.checkpoint(plain), x

def facts(plain, remat, whole, x):
    counts = []
    for fn in (plain, remat, whole):
        stream = io.StringIO()
        with contextlib.redirect_stdout(stream): print_saved_residuals(fn, x)
        counts.append(len([l for l in stream.getvalue().splitlines() if l.strip()]))
    memory = []
    for fn in (plain, remat, whole):
        m = jax.jit(jax.grad(fn)).lower(x).compile().memory_analysis()
        memory.append([m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes, m.alias_size_in_bytes])
    return counts, memory, float(plain(x))

before = facts(*lesson())
spec = importlib.util.spec_from_file_location("setup", ROOT / "assignments/performance-05/scenario_setup.py")
setup = importlib.util.module_from_spec(spec); spec.loader.exec_module(setup)
setup.nudge_derivative_rules(**parameters)
jax.clear_caches()   # the "before" measurement traced JAX's own rules; a run changes them before anything is traced
plain, remat, whole, x = lesson()
after = facts(plain, remat, whole, x)
ones = jnp.ones_like(x); v = jnp.linspace(-1.0, 1.0, 16); V = np.asarray(v, np.float64)
scale = float(np.sum(np.abs(oracle.autodiff_gradient)))
automatic = {
    "vdot(grad)": float(jnp.vdot(jax.grad(plain)(x), ones)), "jvp": float(jax.jvp(plain, (x,), (ones,))[1]),
    "linearize": float(jax.linearize(plain, x)[1](ones)), "jet": float(jet.jet(plain, (x,), ((ones,),))[1][0]),
    "vjp": float(jnp.vdot(jax.vjp(plain, x)[1](jnp.ones(()))[0], ones)), "grad(remat)": float(jax.grad(remat)(x).sum()),
}
hvp = lambda f: jax.jvp(jax.grad(f), (x,), (v,))[1]
forms = {
    "jvp(grad)": hvp, "hessian": lambda f: jax.hessian(f)(x) @ v, "jacfwd(jacrev)": lambda f: jax.jacfwd(jax.jacrev(f))(x) @ v,
    "rev-rev": lambda f: jax.grad(lambda y: jnp.vdot(jax.grad(f)(y), v))(x), "linearize": lambda f: jax.linearize(jax.grad(f), x)[1](v),
    "vjp(grad)": lambda f: jax.vjp(jax.grad(f), x)[1](v)[0], "jit": lambda f: jax.jit(lambda t: jax.jvp(jax.grad(f), (x,), (t,))[1])(v),
}
honest = {}
for name, form in forms.items():
    honest[name + " plain"] = relative_error(np.asarray(form(plain), np.float64), oracle.hvp(V)) / s.hvp_tolerance
    honest[name + " remat"] = relative_error(np.asarray(form(remat), np.float64), oracle.hvp(V, True)) / s.hvp_tolerance
honest["jvp(grad) whole"] = relative_error(np.asarray(hvp(whole), np.float64), oracle.hvp(V, True)) / s.hvp_tolerance
honest["jet(grad) plain"] = relative_error(np.asarray(jet.jet(jax.grad(plain), (x,), ((v,),))[1][0], np.float64), oracle.hvp(V)) / s.hvp_tolerance
as_remat = {
    "plain": np.asarray(hvp(plain), np.float64),
    "checkpoint around grad(plain)": np.asarray(jax.jvp(jax.checkpoint(jax.grad(plain)), (x,), (v,))[1], np.float64),
    "checkpoint around the HVP function": np.asarray(jax.checkpoint(lambda y: jax.jvp(jax.grad(plain), (y,), (v,))[1])(x), np.float64),
    "plain + 0 * checkpoint(sin)": np.asarray(hvp(lambda y: plain(y) + 0.0 * jnp.sum(jax.checkpoint(jnp.sin)(y))), np.float64),
}
wrong_remat = {name: relative_error(value, oracle.hvp(V, True)) / s.hvp_tolerance for name, value in as_remat.items()}
grad = np.asarray(jax.grad(plain)(x), np.float64)
cotangent = oracle.gradient
finite = (float(plain(x + 1e-3 * ones)) - float(plain(x - 1e-3 * ones))) / 2e-3
lesson_asserts = {
    "grad vs cotangent": bool(np.all(np.abs(grad - cotangent) <= 3e-5 * np.abs(cotangent) + 1e-7)),
    "finite vs automatic": bool(abs(finite - automatic["vdot(grad)"]) <= 3e-3 * abs(automatic["vdot(grad)"]) + 1e-6),
    "hvp plain vs remat": bool(np.all(np.abs(np.asarray(hvp(plain)) - np.asarray(hvp(remat))) <= 3e-5 * np.abs(np.asarray(hvp(remat))) + 1e-7)),
}
print(json.dumps({
    "before": before, "after": after,
    "automatic": {k: abs(val - float(oracle.autodiff_gradient.sum())) / (s.automatic_tolerance * scale) for k, val in automatic.items()},
    "exact_slope": abs(float(oracle.gradient.sum()) - float(oracle.autodiff_gradient.sum())) / (s.automatic_tolerance * scale),
    "honest_hvp": honest, "wrong_remat": wrong_remat,
    "numpy_hvp": relative_error(oracle.true_hvp(V), oracle.hvp(V)) / s.hvp_tolerance,
    "lesson_asserts": lesson_asserts, "separation": s.separation,
}))
'''


@pytest.fixture(scope="module")
def measured():
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_values_residual_counts_and_memory_figures_are_unchanged(measured):
    assert measured["after"] == measured["before"]


def test_every_honest_autodiff_form_follows_the_oracle(measured):
    too_far = {form: used for form, used in {**measured["automatic"], **measured["honest_hvp"]}.items() if used > 0.5}
    assert not too_far, too_far


def test_wrong_methods_land_many_tolerances_away(measured):
    separation = measured["separation"]
    assert measured["exact_slope"] >= separation
    assert measured["numpy_hvp"] >= separation
    close = {form: apart for form, apart in measured["wrong_remat"].items() if apart < separation}
    assert not close, close


def test_the_lessons_own_assertions_still_pass(measured):
    assert all(measured["lesson_asserts"].values()), measured["lesson_asserts"]
