"""How much of each tolerance in assignment.toml honest JAX solutions use, and how far apart the variant's changes
put the methods, over many variant worlds.

    .venv/bin/python assignments/performance-05/calibrate_tolerances.py [--seeds 100] [--first 1] [--jobs 1]

Each world is a variant seed oracle.suitable_seed accepts, the changes oracle.scenario_parameters sizes for it,
applied in a fresh process exactly as a run applies them (scenario_setup.nudge_derivative_rules and
nudge_objective_values). Each graded quantity is computed the honest ways students write it (`automatic`: grad . v,
jvp, vjp, linearize, jet, jacfwd, value_and_grad, jit, vmap, remat, column vectors, jax.nn.tanh, lax.tanh, float64
mode; the HVPs: jvp of grad, hessian, jacfwd/jacrev, reverse over reverse, linearize, vjp, jit, vmap, jet of grad,
column vectors, jax.remat, policies, a jitted layer reused inside a checkpoint, scan, fori_loop, the whole objective
checkpointed; `finite`: float32 and float64 central differences at every sensible step, written inline, jitted,
vmapped, from value_and_grad, with the final sum of squares in NumPy, a Python loop, a column product, cumsum, a
norm or einsum) and the script prints, per tolerance, the largest fraction of it any honest form used,
and the smallest separation (in tolerances) between the right value and every wrong method's. It also checks that
honest code keeps passing the lesson's own assertions in every world. Keep the first numbers well below 1 and the
separations at or above `separation`; the comments in assignment.toml quote the last run.

Each world runs in its own process (the changes are global to the process that makes them).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WORLD = r'''
import contextlib, importlib.util, io, json, re, sys
from pathlib import Path
import numpy as np
ROOT = Path(sys.argv[1]); sys.path.insert(0, str(ROOT)); seed = int(sys.argv[2])
from grader.authoring.calibration import lesson, world_parameters
assignment = lesson("performance-05", ROOT)
s = assignment.settings
scenario = assignment.scenarios["variant"]
parameters = world_parameters(assignment, "variant", seed)
oracle = assignment.oracle.build(seed, {}, scenario, parameters, seed)
plain_oracle = assignment.oracle.build(seed, {}, assignment.scenarios["baseline"], {}, seed)
import jax, jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import print_saved_residuals
from jax.experimental import jet

def facts():
    """What a file can read that the changes must leave alone: residual texts, compiled memory figures, names."""
    w = jnp.asarray(oracle.w, jnp.float32); x = jnp.asarray(oracle.x, jnp.float32)
    def layer(v): return jnp.tanh(w @ v)
    def objective(v, rematerialize=False):
        op = jax.checkpoint(layer) if rematerialize else layer
        for _ in range(4): v = op(v)
        return jnp.sum(v * v)
    fns = (lambda v: objective(v, False), lambda v: objective(v, True))
    fns = fns + (jax.checkpoint(fns[0]),)
    texts, memory = [], []
    for fn in fns:
        stream = io.StringIO()
        with contextlib.redirect_stdout(stream): print_saved_residuals(fn, x)
        texts.append(stream.getvalue())
        m = jax.jit(jax.grad(fn)).lower(x).compile().memory_analysis()
        memory.append([m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes, m.alias_size_in_bytes])
    names = [id(jnp.tanh), id(jax.nn.tanh), id(lax.tanh), id(jax.checkpoint), id(jax.remat), id(jax.grad), id(jax.jit),
             sorted(vars(jax.checkpoint)) if hasattr(jax.checkpoint, "__dict__") else []]
    # the programs a file can print: jaxprs and lowered text of the lesson's derivatives, constants masked
    tangent = jnp.linspace(-1.0, 1.0, x.shape[0])
    programs = {"grad": lambda fn: jax.grad(fn), "hvp": lambda fn: lambda p: jax.jvp(jax.grad(fn), (p,), (tangent,))[1],
                "value": lambda fn: fn, "directional": lambda fn: lambda p: jax.jvp(fn, (p,), (jnp.ones_like(p),))[1]}
    shown = []
    for fn in fns:
        for form in programs.values():
            shown.append(masked(str(jax.make_jaxpr(form(fn))(x))))
            shown.append(masked(jax.jit(form(fn)).lower(x).as_text()))
    return {"texts": texts, "memory": memory, "names": names, "programs": shown}

def masked(text):
    """A program's text with its numeric constants masked: what differs between the worlds are amounts, never shape."""
    text = re.sub(r"dense<[^>]*>", "dense<#>", text)
    return re.sub(r"(?<![\w.])-?\d+\.\d*(?:e[-+]?\d+)?|(?<![\w.])\d+e[-+]?\d+", "#", text)

spec = importlib.util.spec_from_file_location("setup", ROOT / "assignments/performance-05/scenario_setup.py")
setup = importlib.util.module_from_spec(spec); spec.loader.exec_module(setup)
# "before": the same machinery with every amount zero, as the baseline world installs it; what a file can read must
# not tell the two worlds apart
zero = world_parameters(assignment, "baseline", seed)
setup.nudge_derivative_rules(**zero); setup.nudge_objective_values(**zero)
jax.clear_caches()
before = facts()
setup.nudge_derivative_rules(**parameters); setup.nudge_objective_values(**parameters)
jax.clear_caches()   # "before" traced the zero world's rules; a run changes them before anything is traced
out = {"used": {}, "apart": {}, "asserts": [], "unchanged": before == facts()}
def used(name, fraction): out["used"][name] = max(out["used"].get(name, 0.0), float(fraction))
def apart(name, value): out["apart"][name] = min(out["apart"].get(name, float("inf")), float(value))

W, X = jnp.asarray(oracle.w, jnp.float32), jnp.asarray(oracle.x, jnp.float32)
def lesson(tanh=jnp.tanh, ckpt=jax.checkpoint, w=W):
    def layer(v): return tanh(w @ v)
    def objective(v, rematerialize=False):
        op = ckpt(layer) if rematerialize else layer
        for _ in range(4): v = op(v)
        return jnp.sum(v * v)
    return (lambda v: objective(v, False)), (lambda v: objective(v, True))
plain, remat = lesson()
x, ones = X, jnp.ones_like(X)
g = oracle.autodiff_gradient; scale = float(np.sum(np.abs(g))); expected = float(g.sum())
col = lambda c: lesson()[0](c)
automatic = {
    "vdot(grad)": lambda: jnp.vdot(jax.grad(plain)(x), ones), "jvp": lambda: jax.jvp(plain, (x,), (ones,))[1],
    "vjp": lambda: jnp.vdot(jax.vjp(plain, x)[1](jnp.ones(()))[0], ones), "linearize": lambda: jax.linearize(plain, x)[1](ones),
    "jet": lambda: jet.jet(plain, (x,), ((ones,),))[1][0], "jacfwd": lambda: jax.jacfwd(plain)(x) @ ones,
    "value_and_grad": lambda: jax.value_and_grad(plain)(x)[1].sum(), "jit(grad)": lambda: jax.jit(jax.grad(plain))(x).sum(),
    "vmap(grad)": lambda: jax.vmap(jax.grad(plain))(jnp.stack([x, x]))[1].sum(), "grad(remat)": lambda: jax.grad(remat)(x).sum(),
    "grad(whole)": lambda: jax.grad(jax.checkpoint(plain))(x).sum(), "column": lambda: jnp.sum(jax.grad(col)(x[:, None])),
    "jax.nn.tanh": lambda: jax.grad(lesson(tanh=jax.nn.tanh)[0])(x).sum(), "lax.tanh": lambda: jax.grad(lesson(tanh=lax.tanh)[0])(x).sum(),
}
for name, fn in automatic.items():
    used(f"automatic_tolerance ({name})", abs(float(fn()) - expected) / oracle.automatic_tolerance(s))
apart("automatic: exact slope vs autodiff", abs(float(oracle.gradient.sum()) - expected) / oracle.automatic_tolerance(s))
apart("automatic: central difference (eps 1e-3) vs autodiff", min(abs(c - expected) for c in oracle.central_differences(1e-3)) / oracle.automatic_tolerance(s))

v = jnp.linspace(-1.0, 1.0, 16); V = np.asarray(v, np.float64)
def hvp_allowed(hessian):   # what the HVP checks allow along the lesson's tangent (oracle.hvp_allowances)
    return float(oracle.hvp_allowances(hessian, V, s.hvp_tolerance, s)[0])
def max_error(value, target): return float(np.max(np.abs(np.asarray(value, np.float64).reshape(-1) - target)))
wj = W
jlayer = jax.jit(lambda u: jnp.tanh(wj @ u)); jlayer(x)
def obj_jit_ckpt(u):
    for _ in range(4): u = jax.checkpoint(jlayer)(u)
    return jnp.sum(u * u)
def obj_policy(u):
    for _ in range(4): u = jax.checkpoint(lambda q: jnp.tanh(wj @ q), policy=jax.checkpoint_policies.dots_saveable)(u)
    return jnp.sum(u * u)
def obj_scan(u):
    u, _ = lax.scan(lambda c, _: (jax.checkpoint(lambda q: jnp.tanh(wj @ q))(c), None), u, None, length=4)
    return jnp.sum(u * u)
def obj_fori(u):
    u = lax.fori_loop(0, 4, lambda i, q: jax.checkpoint(lambda r: jnp.tanh(wj @ r))(q), u)
    return jnp.sum(u * u)
def hvp_forms(f):
    return {
        "jvp(grad)": lambda: jax.jvp(jax.grad(f), (x,), (v,))[1], "hessian @ v": lambda: jax.hessian(f)(x) @ v,
        "jacfwd(jacrev) @ v": lambda: jax.jacfwd(jax.jacrev(f))(x) @ v, "jacrev(jacrev) @ v": lambda: jax.jacrev(jax.jacrev(f))(x) @ v,
        "reverse over reverse": lambda: jax.grad(lambda y: jnp.vdot(jax.grad(f)(y), v))(x),
        "linearize(grad)": lambda: jax.linearize(jax.grad(f), x)[1](v), "vjp(grad)": lambda: jax.vjp(jax.grad(f), x)[1](v)[0],
        "jit(jvp(grad))": lambda: jax.jit(lambda t: jax.jvp(jax.grad(f), (x,), (t,))[1])(v),
        "vmap(jvp(grad))": lambda: jax.vmap(lambda t: jax.jvp(jax.grad(f), (x,), (t,))[1])(jnp.stack([v, -v]))[0],
        "column": lambda: jax.jvp(jax.grad(lambda c: f(c.reshape(-1))), (x[:, None],), (v[:, None],))[1],
    }
for checkpointed, f, extra in ((False, plain, {"jax.nn.tanh": lesson(tanh=jax.nn.tanh)[0], "lax.tanh": lesson(tanh=lax.tanh)[0]}),
                               (True, remat, {"jax.remat + jax.nn.tanh": lesson(tanh=jax.nn.tanh, ckpt=jax.remat)[1],
                                              "jitted layer reused in a checkpoint": obj_jit_ckpt, "policy": obj_policy,
                                              "scan": obj_scan, "fori_loop": obj_fori, "whole objective": jax.checkpoint(plain)})):
    target = oracle.hvp(V, checkpointed)
    allowed = hvp_allowed(oracle.hessian(checkpointed))
    forms = hvp_forms(f)
    if not checkpointed:
        forms["jet(grad)"] = lambda: jet.jet(jax.grad(f), (x,), ((v,),))[1][0]
    forms.update({name: (lambda h=h: jax.jvp(jax.grad(h), (x,), (v,))[1]) for name, h in extra.items()})
    for name, fn in forms.items():
        used(f"hvp_tolerance ({'remat' if checkpointed else 'plain'}: {name})", max_error(fn(), target) / allowed)
apart("hvp: plain vs remat", max_error(oracle.hvp(V, False), oracle.hvp(V, True)) / max(hvp_allowed(oracle.hessian(c)) for c in (False, True)))
apart("hvp: exact (NumPy) vs autodiff", max_error(oracle.true_hvp(V), oracle.hvp(V)) / max(hvp_allowed(oracle.hessian(False)), hvp_allowed(oracle.true_hessian)))
not_remat = {
    "checkpoint(grad(plain))": lambda: jax.jvp(jax.checkpoint(jax.grad(plain)), (x,), (v,))[1],
    "checkpoint around the HVP function": lambda: jax.checkpoint(lambda y: jax.jvp(jax.grad(plain), (y,), (v,))[1])(x),
    "plain + 0 * checkpoint(sin)": lambda: jax.jvp(jax.grad(lambda y: plain(y) + 0.0 * jnp.sum(jax.checkpoint(jnp.sin)(y))), (x,), (v,))[1],
}
for name, fn in not_remat.items():
    apart(f"hvp: {name} vs remat", max_error(fn(), oracle.hvp(V, True)) / hvp_allowed(oracle.hessian(True)))

single, double = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)
vplain = jax.vmap(plain)
for eps in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2):
    tolerance = oracle.finite_noise(eps, s.finite_noise_float32, single)
    candidates = oracle.central_differences(eps)
    up, down = plain(x + eps * ones), plain(x - eps * ones)
    both = vplain(jnp.stack([x + eps * ones, x - eps * ones]))
    jitted = jax.jit(lambda e: (plain(x + e * ones) - plain(x - e * ones)) / (2 * e))(eps)
    vg = (jax.value_and_grad(plain)(x + eps * ones)[0] - jax.value_and_grad(plain)(x - eps * ones)[0]) / (2 * eps)
    h64 = np.asarray(x, np.float64)
    host = (float(plain(h64 + eps)) - float(plain(h64 - eps))) / (2 * eps)
    col = (float(lesson()[0](x[:, None] + eps)) - float(lesson()[0](x[:, None] - eps))) / (2 * eps)
    def inline(p):
        for _ in range(4): p = jnp.tanh(W @ p)
        return float(p @ p)
    written_out = (inline(x + eps * ones) - inline(x - eps * ones)) / (2 * eps)
    def layers(p):
        for _ in range(4): p = jnp.tanh(W @ p)
        return p
    hu, hd = layers(x + eps * ones), layers(x - eps * ones)
    cu, cd = layers((x + eps * ones)[:, None]), layers((x - eps * ones)[:, None])
    elsewhere = {   # the layers in JAX, the final sum of squares anywhere (issue 35)
        "NumPy sum of squares": (float(np.sum(np.asarray(hu) ** 2)) - float(np.sum(np.asarray(hd) ** 2))) / (2 * eps),
        "Python loop": (sum(float(t) ** 2 for t in hu) - sum(float(t) ** 2 for t in hd)) / (2 * eps),
        "column h.T @ h": float(((cu.T @ cu)[0, 0] - (cd.T @ cd)[0, 0]) / (2 * eps)),
        "cumsum": float((jnp.cumsum(hu * hu)[-1] - jnp.cumsum(hd * hd)[-1]) / (2 * eps)),
        "norm squared": float((jnp.linalg.norm(hu) ** 2 - jnp.linalg.norm(hd) ** 2) / (2 * eps)),
        "einsum": float((jnp.einsum("i,i->", hu, hu) - jnp.einsum("i,i->", hd, hd)) / (2 * eps)),
    }
    honest = {**elsewhere, "float64 quotient": (float(up) - float(down)) / (2 * eps), "float32 quotient": float((up - down) / (2 * eps)),
              "vmap over both points": float((both[0] - both[1]) / (2 * eps)), "jit with traced step": float(jitted),
              "value_and_grad values": float(vg), "float64 host points": host, "column points": col,
              "inline forward pass, h @ h": written_out}
    for name, value in honest.items():
        used(f"finite_noise_float32 ({name})", min(abs(value - c) for c in candidates) / tolerance)
    out["asserts"].append(("finite vs automatic (lesson rtol 3e-3)", eps, max(abs(val - expected) / (s.lesson_directional_rtol * abs(expected) + s.lesson_directional_atol) for val in honest.values())))
    apart("finite: float32 central difference vs nearest slope (every sensible step)", assignment.oracle.finite_separation(oracle, eps, s))
    forward = oracle.one_sided_differences(eps)["forward"]
    apart(f"finite: forward difference vs central (eps {eps:g}, float32 tolerances)", min(abs(forward - c) for c in candidates) / tolerance)
    if s.eps_discernible <= eps <= s.eps_max / 3:
        # what a value shows wherever it was computed (issue 67): a difference at 3 eps inside one jitted function, and
        # the sixteen coordinate-axis differences summed inside a jitted vmap, each measured in this world's JAX: it
        # is where the oracle says (within float32 rounding) and `separation` tolerances from both honest readings
        wide = float(jax.jit(lambda e: (plain(x + e * ones) - plain(x - e * ones)) / (2 * e))(3 * eps))
        axes = jnp.eye(x.shape[0], dtype=x.dtype)
        pairs = jax.jit(lambda e: jax.vmap(lambda a: (plain(x + e * a) - plain(x - e * a)) / (2 * e))(axes))(eps)
        summed = float(jnp.sum(pairs))
        wide_noise = oracle.finite_noise(3 * eps, s.finite_noise_float32, single)
        used(f"finite_noise_float32 (jitted difference at 3 eps, as the oracle predicts it)",
             min(abs(wide - c) for c in oracle.central_differences(3 * eps)) / wide_noise)
        used(f"finite_noise_float32 (coordinate sum in a jitted vmap, as the oracle predicts it)",
             abs(summed - oracle.coordinate_sum(eps)) / (oracle.coordinate_noise * tolerance))
        out["steps_shown"] = min(out.get("steps_shown", float("inf")), oracle.from_honest(wide, eps, s),
                                 oracle.from_honest(summed, eps, s))
# `cotangent`: the reverse recurrence written out, as students write it (float32 and float64, NumPy and JAX)
def recurrence(tanh, transpose_product, dtype):
    hw = np.asarray(W, dtype) if dtype else W
    values = [np.asarray(x, dtype) if dtype else x]
    for _ in range(4): values.append(tanh(hw @ values[-1]))
    c = 2 * values[-1]
    for i in range(4, 0, -1): c = transpose_product(hw, c * (1 - values[i] * values[i]))
    return np.asarray(c, np.float64)
def jitted():
    @jax.jit
    def run(hw, p):
        values = [p]
        for _ in range(4): values.append(jnp.tanh(hw @ values[-1]))
        c = 2 * values[-1]
        for i in range(4, 0, -1): c = (c * (1 - values[i] ** 2)) @ hw
        return c
    return np.asarray(run(W, x), np.float64)
cotangents = {"NumPy float32 (the lesson)": recurrence(np.tanh, lambda a, b: a.T @ b, np.float32),
              "NumPy float64": recurrence(np.tanh, lambda a, b: a.T @ b, np.float64),
              "einsum float32": recurrence(np.tanh, lambda a, b: np.einsum("ij,i->j", a, b), np.float32),
              "jnp eager": recurrence(jnp.tanh, lambda a, b: a.T @ b, None), "jnp jitted": jitted()}
scale = float(np.max(np.abs(oracle.gradient)))
for name, value in cotangents.items():
    used(f"cotangent_tolerance ({name})", float(np.max(np.abs(value - oracle.gradient))) / (oracle.cotangent_share(s) * scale))
apart("cotangent: autodiff vs the recurrence", oracle.cotangent_separation(s))
# the lesson's own assertions hold in this world
cot = plain_oracle.gradient
for f in (plain, remat):
    out["asserts"].append(("grad vs cotangent (rtol 3e-5)", 0, float(np.max(np.abs(np.asarray(jax.grad(f)(x), np.float64) - cot) / (3e-5 * np.abs(cot) + 1e-7)))))
hp, hr = (np.asarray(jax.jvp(jax.grad(f), (x,), (v,))[1], np.float64) for f in (plain, remat))
out["asserts"].append(("hvp_plain vs hvp_remat (rtol 3e-5)", 0, float(np.max(np.abs(hp - hr) / (3e-5 * np.abs(hr) + 1e-7)))))
jax.config.update("jax_enable_x64", True)   # last: float64 mode, x itself cast to float64
x64 = jnp.asarray(oracle.x, jnp.float64)
for eps in (1e-6, 1e-4, 1e-3):
    value = (float(plain(x64 + eps)) - float(plain(x64 - eps))) / (2 * eps)
    tolerance = oracle.finite_noise(eps, s.finite_noise_float64, double)
    used("finite_noise_float64 (x64 mode)", min(abs(value - c) for c in oracle.central_differences(eps)) / tolerance)
    apart("finite: float64 central difference vs nearest slope", assignment.oracle.finite_separation(oracle, eps, s, double))
used("automatic_tolerance (x64 mode, jvp)", abs(float(jax.jvp(plain, (x64,), (jnp.ones_like(x64),))[1]) - expected) / oracle.automatic_tolerance(s))
print(json.dumps(out))
'''


def measure_world(seed: int) -> dict:
    """One variant world measured in a fresh process (see the module docstring)."""
    done = subprocess.run([sys.executable, "-c", WORLD, str(ROOT), str(seed)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"seed {seed}: the world failed\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100, help="how many suitable variant worlds")
    parser.add_argument("--first", type=int, default=1, help="the first candidate seed")
    parser.add_argument("--jobs", type=int, default=1, help="worlds measured side by side (each its own process)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from grader.authoring.calibration import lesson

    assignment = lesson("performance-05", ROOT)
    seeds: list[int] = []
    candidate = args.first
    while len(seeds) < args.seeds:
        if assignment.oracle.suitable_seed(candidate, assignment.settings):
            seeds.append(candidate)
        candidate += 1
    worst: dict[str, float] = {}
    closest: dict[str, float] = {}
    asserts: dict[str, float] = {}
    changed, failed = [], []

    def measured(seed: int) -> dict | RuntimeError:
        try:
            return measure_world(seed)
        except RuntimeError as error:
            return error

    pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
    for seed, result in zip(seeds, pool.map(measured, seeds)):   # in seed order, printed as each is done
        if isinstance(result, RuntimeError):
            print(result)
            failed.append(seed)
            continue
        if not result["unchanged"]:
            changed.append(seed)
        print(f"seed {seed}: largest share used {max(result['used'].values()):.3f}, smallest separation "
              f"{min(v for k, v in result['apart'].items() if not k.startswith('finite: forward')):.1f}, "
              f"unchanged {result['unchanged']}", flush=True)
        for name, fraction in result["used"].items():
            worst[name] = max(worst.get(name, 0.0), fraction)
        for name, separation in result["apart"].items():
            closest[name] = min(closest.get(name, float("inf")), separation)
        for name, _, fraction in result["asserts"]:
            asserts[name] = max(asserts.get(name, 0.0), fraction)
    pool.shutdown()
    print(f"{len(seeds)} suitable variant worlds (seeds {seeds[0]}..{seeds[-1]}), each in a fresh process; "
          f"{len(failed)} failed to measure{': ' + str(failed) if failed else ''}.")
    print("residual texts, compiled memory figures and JAX's names unchanged in every world:", not changed, changed or "")
    print("largest fraction of each tolerance an honest form used:")
    for name, fraction in sorted(worst.items()):
        print(f"  {name:78s} {fraction:.3f}")
    print("smallest separation, in tolerances, between a wrong method's value and the right one:")
    for name, separation in sorted(closest.items()):
        print(f"  {name:78s} {separation:.1f}")
    print("largest fraction of the lesson's own assertion tolerances honest code used in these worlds:")
    for name, fraction in sorted(asserts.items()):
        print(f"  {name:78s} {fraction:.3f}")


if __name__ == "__main__":
    main()
