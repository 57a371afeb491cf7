"""How much of each tolerance in assignment.toml honest float32 JAX solutions use, over many seeds.

    .venv/bin/python assignments/performance-05/calibrate_tolerances.py [--seeds 200] [--first 1]

The variant scenario draws a random seed, so a tolerance must hold for every seed, not just 18. For each
seed this builds the lesson's network in JAX, computes each quantity the honest ways students do (central
differences at several steps, jvp / hessian / jacfwd / reverse-over-reverse HVPs, grad . v and jvp for the
directional derivative) and prints, per tolerance, the largest fraction of the allowance any of them used.
Keep every number well below 1; the comments in assignment.toml quote the last run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.config.assignment import load  # noqa: E402


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


def vector_fraction(actual, expected, rtol, atol_scale):
    actual = np.asarray(actual, dtype=np.float64)
    allowed = rtol * np.abs(expected) + atol_scale * np.max(np.abs(expected))
    return float(np.max(np.abs(actual - expected) / allowed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first", type=int, default=1)
    args = parser.parse_args()
    assignment = load("performance-05", ROOT)
    s = assignment.settings
    worst: dict[str, float] = {}

    def record(name: str, fraction: float) -> None:
        worst[name] = max(worst.get(name, 0.0), fraction)

    for seed in range(args.first, args.first + args.seeds):
        oracle = assignment.oracle.build(seed, {})
        plain, remat, x = lesson_functions(oracle.w, oracle.x)
        ones = jnp.ones_like(x)
        gradient_l1 = float(np.sum(np.abs(oracle.gradient)))
        for eps in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2):
            finite = (float(plain(x + eps * ones)) - float(plain(x - eps * ones))) / (2 * eps)
            scale = abs(oracle.value) + gradient_l1 * (float(np.max(np.abs(oracle.x))) + eps)
            allowed = s.finite_rounding_factor * 2.0**-23 * scale / eps
            record("finite_rounding_factor (central differences)", abs(finite - oracle.differences(oracle.ones, eps)["central"]) / allowed)
        expected = oracle.directional_derivative(oracle.ones)
        for automatic in (float(jnp.vdot(jax.grad(plain)(x), ones)), float(jax.jvp(plain, (x,), (ones,))[1])):
            record("directional_rtol (grad . v, jvp)", abs(automatic - expected) / (s.directional_rtol * gradient_l1))
        for function in (plain, remat):
            record("gradient tolerances (jax.grad)", vector_fraction(jax.grad(function)(x), oracle.gradient,
                                                                     s.gradient_rtol, s.gradient_atol_scale))
        direction = jnp.linspace(-1.0, 1.0, len(x))
        exact = oracle.hvp(np.asarray(direction, dtype=np.float64))
        hvps = {
            "jvp": jax.jvp(jax.grad(plain), (x,), (direction,))[1],
            "jvp remat": jax.jvp(jax.grad(remat), (x,), (direction,))[1],
            "hessian": jax.hessian(plain)(x) @ direction,
            "jacfwd": jax.jacfwd(jax.jacfwd(plain))(x) @ direction,
            "reverse over reverse": jax.grad(lambda y: jnp.vdot(jax.grad(plain)(y), direction))(x),  # noqa: B023 (called here)
        }
        for hvp in hvps.values():
            record("hvp tolerances (autodiff HVPs)", vector_fraction(hvp, exact, s.hvp_rtol, s.hvp_atol_scale))
        reference = np.asarray(hvps["jvp"], dtype=np.float64)
        for hvp in hvps.values():
            record("hvp_pair tolerances (two autodiff HVPs)", vector_fraction(hvp, reference, s.hvp_pair_rtol, s.hvp_pair_atol_scale))
    print(f"largest fraction of each allowance used over seeds {args.first}..{args.first + args.seeds - 1}:")
    for name, fraction in sorted(worst.items()):
        print(f"  {name:48s} {fraction:.3f}")


if __name__ == "__main__":
    main()
