"""How much of each tolerance in assignment.toml honest float32 JAX solutions use, and how far apart the
scenarios' derivative-rule changes put the methods, over many seeds.

    .venv/bin/python assignments/performance-05/calibrate_tolerances.py [--seeds 100] [--first 1]

For each seed this draws the variant's world (the seed's weights, and the derivative-rule changes
oracle.scenario_parameters sizes for it), applies the changes in this process exactly as the runs do
(scenario_setup.nudge_derivative_rules), computes each graded quantity the honest ways students do (grad . v,
jvp, vjp, linearize and jet for `automatic`; jvp-of-grad, hessian, jacfwd/jacrev, reverse-over-reverse, linearize,
vjp and jitted forms for the HVPs; float64 and float32 arithmetic for the central difference) and prints, per
tolerance, the largest fraction of it any honest form used. It also prints the smallest separation the changes
gave (how many tolerances a wrong method's value lands away). Keep the first numbers well below 1 and the
separations well above it; the comments in assignment.toml quote the last run.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import jet

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.api.methods import PointValue, central_quotients, relative_error, rounding_units  # noqa: E402
from grader.config.assignment import load  # noqa: E402

SINGLE = float(np.finfo(np.float32).eps)


def setup_module():
    path = Path(__file__).with_name("scenario_setup.py")
    spec = importlib.util.spec_from_file_location("calibration_scenario_setup", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lesson_functions(w64, x64):
    w, x = jnp.asarray(w64, dtype=jnp.float32), jnp.asarray(x64, dtype=jnp.float32)

    def layer(v):
        return jnp.tanh(w @ v)

    def objective(v, rematerialize=False):
        operation = jax.checkpoint(layer) if rematerialize else layer
        for _ in range(4):
            v = operation(v)
        return jnp.sum(v * v)

    return (lambda v: objective(v, False)), (lambda v: objective(v, True)), x


def automatic_forms(plain, x, ones):
    return {
        "vdot(grad)": float(jnp.vdot(jax.grad(plain)(x), ones)),
        "jvp": float(jax.jvp(plain, (x,), (ones,))[1]),
        "vjp": float(jnp.vdot(jax.vjp(plain, x)[1](jnp.ones(()))[0], ones)),
        "linearize": float(jax.linearize(plain, x)[1](ones)),
        "jet": float(jet.jet(plain, (x,), ((ones,),))[1][0]),
        "jit(grad).sum": float(jax.jit(jax.grad(plain))(x).sum()),
    }


def hvp_forms(function, x, direction):
    return {
        "jvp(grad)": jax.jvp(jax.grad(function), (x,), (direction,))[1],
        "hessian @ v": jax.hessian(function)(x) @ direction,
        "jacfwd(jacrev) @ v": jax.jacfwd(jax.jacrev(function))(x) @ direction,
        "jacrev(jacrev) @ v": jax.jacrev(jax.jacrev(function))(x) @ direction,
        "reverse over reverse": jax.grad(lambda y: jnp.vdot(jax.grad(function)(y), direction))(x),
        "linearize(grad)": jax.linearize(jax.grad(function), x)[1](direction),
        "vjp(grad)": jax.vjp(jax.grad(function), x)[1](direction)[0],
        "jit(jvp(grad))": jax.jit(lambda t: jax.jvp(jax.grad(function), (x,), (t,))[1])(direction),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--first", type=int, default=1)
    args = parser.parse_args()
    assignment = load("performance-05", ROOT)
    s = assignment.settings
    setup = setup_module()
    oracle_module = assignment.oracle
    worst: dict[str, float] = {}
    closest: dict[str, float] = {}

    def used(name: str, fraction: float) -> None:
        worst[name] = max(worst.get(name, 0.0), fraction)

    def apart(name: str, separation: float) -> None:
        closest[name] = min(closest.get(name, float("inf")), separation)

    seeds = [seed for seed in range(args.first, args.first + args.seeds) if oracle_module.suitable_seed(seed, s)]
    for seed in seeds:
        parameters = oracle_module.scenario_parameters("variant", seed, seed, s)
        setup.nudge_derivative_rules(width=s.width, **parameters)
        jax.clear_caches()   # JAX caches traced derivative rules: the new ones must be traced afresh
        oracle = oracle_module.build(seed, {}, assignment.scenarios["variant"], parameters)
        plain, remat, x = lesson_functions(oracle.w, oracle.x)
        ones = jnp.ones_like(x)
        scale = float(np.sum(np.abs(oracle.autodiff_gradient)))
        expected, exact = float(oracle.autodiff_gradient.sum()), float(oracle.gradient.sum())
        for form, value in automatic_forms(plain, x, ones).items():
            used(f"automatic_tolerance ({form})", abs(value - expected) / (s.automatic_tolerance * scale))
        apart("automatic: exact slope vs autodiff", abs(exact - expected) / (s.automatic_tolerance * scale))
        direction = jnp.linspace(-1.0, 1.0, len(x))
        v = np.asarray(direction, dtype=np.float64)
        for checkpointed, function in ((False, plain), (True, remat)):
            target = oracle.hvp(v, checkpointed)
            for form, hvp in hvp_forms(function, x, direction).items():
                used(f"hvp_tolerance ({form})", relative_error(np.asarray(hvp, np.float64), target) / s.hvp_tolerance)
        apart("hvp: plain vs remat", relative_error(oracle.hvp(v, False), oracle.hvp(v, True)) / s.hvp_tolerance)
        apart("hvp: exact (NumPy) vs autodiff", relative_error(oracle.true_hvp(v), oracle.hvp(v)) / s.hvp_tolerance)
        for eps in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2):
            up, down = plain(x + eps * ones), plain(x - eps * ones)
            plus = PointValue(0, np.asarray(x + eps * ones, np.float64), float(up), False)
            minus = PointValue(0, np.asarray(x - eps * ones, np.float64), float(down), False)
            for point in (plus, minus):
                noise = s.evaluation_rounding * SINGLE * (abs(oracle.value_at(point.point)) + scale * float(np.max(np.abs(point.point))))
                used("evaluation_rounding (objective in float32)", abs(point.value - oracle.value_at(point.point)) / noise)
            honest = [(float(up) - float(down)) / (2 * eps), float((up - down) / (2 * eps)), float((up - down) / 2 / eps),
                      float(jnp.float32(up - down) * (0.5 / eps))]
            candidates = central_quotients(plus, minus, eps)
            for finite in honest:
                used("finite_rounding_units (float32/64 quotients)",
                     min(rounding_units(finite, q) for q in candidates) / s.finite_rounding_units)
            apart(f"finite: exact slope vs quotient (eps {eps:g})",
                  min(rounding_units(exact, q) for q in candidates) / s.finite_rounding_units)
    print(f"{len(seeds)} suitable seeds of {args.seeds} from {args.first}.")
    print("largest fraction of each tolerance an honest form used:")
    for name, fraction in sorted(worst.items()):
        print(f"  {name:52s} {fraction:.3f}")
    print("smallest separation, in tolerances, between a wrong method's value and the right one:")
    for name, separation in sorted(closest.items()):
        print(f"  {name:52s} {separation:.1f}")


if __name__ == "__main__":
    main()
