"""How much room the reference solution has in the worlds batches use: the issue-34 calibration.

    .venv/bin/python assignments/performance-05/world_margins.py --worlds 300      # in one process, fast
    .venv/bin/python assignments/performance-05/world_margins.py --batches 40      # real grading, as `grader grade`

`--worlds N`: N variant worlds drawn as `grader grade` draws them (oracle.suitable_seed), each installed in this process
exactly as a run installs it (scenario_setup.nudge_derivative_rules and nudge_objective_values with the parameters
oracle.scenario_parameters derives, JAX's caches cleared between worlds, the runs' XLA flags), and in each the
reference solution's own computations of the graded values (as solutions/performance-05.py writes them) compared
with the oracle and the checks' tolerances. A margin is 1 - (what the value used of its tolerance): 1 is exact, 0 is
the edge, below 0 the reference fails that check there.

`--batches N`: N batch worlds drawn as `grader grade` draws them, in each the reference solution graded through the
real sandbox, runs, oracle and checks (the verdict a batch needs before it keeps records; `grader worlds` gives the
same verdicts for any lesson), printing how many scored full marks, and the smallest margin of its values there.
From the framework this imports only grader.authoring.calibration (what a lesson's tools may use).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"   # as grader/sandbox/process.py


def margins(oracle, settings, automatic: float, finite: float, eps: float, hvp_plain, hvp_remat, direction,
            cotangent) -> dict:
    """Each graded value's margin inside the tolerance its check gives it in this world."""
    import numpy as np

    gradient = oracle.autodiff_gradient
    auto_tol = oracle.automatic_tolerance(settings)
    units = settings.finite_noise_float32
    finite_tol = oracle.finite_noise(eps, units, float(np.finfo(np.float32).eps))
    v = np.asarray(direction, dtype=np.float64)
    recurrence = oracle.gradient

    def hvp_error(value, checkpointed: bool) -> float:
        return float(np.max(np.abs(np.asarray(value, np.float64) - oracle.hvp(v, checkpointed))))

    def hvp_allowed(checkpointed: bool) -> float:   # what the HVP checks allow along v (oracle.hvp_allowances)
        return float(oracle.hvp_allowances(oracle.hessian(checkpointed), v, settings.hvp_tolerance, settings)[0])
    cotangent_error = np.max(np.abs(np.asarray(cotangent, np.float64) - recurrence)) / np.max(np.abs(recurrence))
    return {
        "cotangent": 1 - float(cotangent_error) / oracle.cotangent_share(settings),
        "automatic": 1 - abs(automatic - float(gradient.sum())) / auto_tol,
        "finite": 1 - min(abs(finite - c) for c in oracle.central_differences(eps)) / finite_tol,
        "hvp_plain": 1 - hvp_error(hvp_plain, False) / hvp_allowed(False),
        "hvp_remat": 1 - hvp_error(hvp_remat, True) / hvp_allowed(True),
    }


def lesson_cotangent(w, x):
    """The lesson's reverse recurrence as its script writes it: NumPy, float32."""
    import numpy as np

    host_w = np.asarray(w, np.float32)
    values = [np.asarray(x, np.float32)]
    for _ in range(4):
        values.append(np.tanh(host_w @ values[-1]))
    cotangent = 2 * values[-1]
    for i in range(4, 0, -1):
        cotangent = host_w.T @ (cotangent * (1 - values[i] ** 2))
    return cotangent


def worlds(count: int, chosen: list[int] | None = None) -> None:
    os.environ["XLA_FLAGS"] = XLA_FLAGS
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import importlib.util

    import jax
    import jax.numpy as jnp

    from grader.authoring.calibration import draw_seed, lesson, world

    assignment = lesson("performance-05", ROOT)
    settings = assignment.settings
    spec = importlib.util.spec_from_file_location("performance_05_setup", assignment.folder / "scenario_setup.py")
    assert spec and spec.loader
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    worst: dict[str, tuple[float, int]] = {}
    failing = []
    for number in range(count):
        seed = chosen[number] if chosen else draw_seed(assignment)
        drawn = world(assignment, seed)
        parameters, oracle = drawn.parameters, drawn.oracle
        setup.nudge_derivative_rules(**parameters)
        setup.nudge_objective_values(**parameters)
        jax.clear_caches()
        w = jnp.asarray(oracle.w, jnp.float32)
        x = jnp.asarray(oracle.x, jnp.float32)

        def layer(v, w=w):
            return jnp.tanh(w @ v)

        def objective(v, rematerialize=False):
            operation = jax.checkpoint(layer) if rematerialize else layer
            for _ in range(4):
                v = operation(v)
            return jnp.sum(v * v)

        def plain(v):
            return objective(v, False)

        def remat(v):
            return objective(v, True)

        ones = jnp.ones_like(x)
        eps = .001
        finite = (float(plain(x + eps * ones)) - float(plain(x - eps * ones))) / (2 * eps)
        automatic = float(jnp.vdot(jax.grad(plain)(x), ones))
        if chosen:
            print(f"seed {seed}: automatic {automatic!r}, expected {float(oracle.autodiff_gradient.sum())!r}")
        tangent = jnp.linspace(-1., 1., len(x))
        _, hvp_plain = jax.jvp(jax.grad(plain), (x,), (tangent,))
        _, hvp_remat = jax.jvp(jax.grad(remat), (x,), (tangent,))
        found = margins(oracle, settings, automatic, finite, eps, hvp_plain, hvp_remat, tangent,
                        lesson_cotangent(oracle.w, oracle.x))
        for name, margin in found.items():
            if name not in worst or margin < worst[name][0]:
                worst[name] = (margin, seed)
        if min(found.values()) < 0:
            failing.append((seed, {k: round(v, 3) for k, v in found.items()}))
        print(f"world {number + 1}/{count}: seed {seed}: smallest margin {min(found.values()):.3f}", flush=True)
    print(f"\n{count} variant worlds drawn as `grader grade` draws them; the reference solution's values inside every "
          f"tolerance in {count - len(failing)} of them.")
    for name, (margin, seed) in sorted(worst.items()):
        print(f"  {name:12s} smallest margin {margin:.3f} (seed {seed})")
    for seed, found in failing:
        print(f"  FAILS in seed {seed}: {found}")


def batches(count: int) -> None:
    import numpy as np

    from grader.authoring.calibration import draw_seed, grade_reference, lesson

    assignment = lesson("performance-05", ROOT)
    full = 0
    smallest: tuple[float, int | None, str] = (float("inf"), None, "")
    for number in range(count):
        seed = draw_seed(assignment)
        graded = grade_reference(assignment, seed)
        verdict, oracle, values = graded.verdict, graded.oracle, graded.values
        found = margins(oracle, assignment.settings, float(values["automatic"]), float(values["finite"]),
                        float(values["eps"]), values["hvp_plain"], values["hvp_remat"],
                        np.asarray(values["direction"], dtype=np.float64),   # the run's tangent, float32 as it was
                        values["cotangent"])
        name, margin = min(found.items(), key=lambda item: item[1])
        if margin < smallest[0]:
            smallest = (margin, seed, name)
        full += verdict.suitable
        print(f"batch {number + 1}/{count}: seed {seed}: reference {verdict.score:g}/{verdict.max_score:g}, smallest "
              f"margin {margin:.3f} ({name})", flush=True)
    print(f"\n{full} of {count} batch worlds: the reference solution scored full marks; smallest margin "
          f"{smallest[0]:.3f} ({smallest[2]}, seed {smallest[1]}).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, default=0, help="variant worlds measured in this process")
    parser.add_argument("--batches", type=int, default=0, help="batch worlds graded through the real sandbox")
    parser.add_argument("--seed", type=int, action="append", help="measure these variant seeds (in this process)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.seed:
        worlds(len(args.seed), args.seed)
    if args.worlds:
        worlds(args.worlds)
    if args.batches:
        batches(args.batches)


if __name__ == "__main__":
    main()
