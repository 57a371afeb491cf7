"""Along which tangents do drawn worlds tell the HVP methods apart? The measurement behind issue 67's open part.

    .venv/bin/python assignments/performance-05/tangent_separation.py --worlds 40
    .venv/bin/python assignments/performance-05/tangent_separation.py --worlds 40 --proportional 1.8e-5 2.7e-5

An HVP check credits a pair only where this world's changes move it `separation` allowances away from what a
shortcut gives (checks._revealed_jointly; a vector the file made is credited without that test today):
  - the curvature change: `hvp_plain` against the unchanged objective's HVP (a NumPy or written-down Hessian);
  - the rematerialized change: `hvp_remat` against the ordinary HVP (a copy of `hvp_plain`).
For worlds drawn as `grader grade` draws them, this prints the share of tangents of each family a file may choose
(the lesson's, linspace's other ends, coordinate axes, waves, random normals) along which both changes separate.

`--proportional K...` asks what the ideal rematerialized change, H_remat = (1 + K) H (a rule that scales the
checkpointed objective's whole Hessian), would do: the share separated, and the share whose change stays inside
`remat_share` of the lesson's own `assert_allclose(hvp_plain, hvp_remat, rtol, atol)` (else a student's honest pair
fails their own assertion in the variant run). A K that separates needs K >= separation * hvp_tolerance; the budget
allows K <= remat_share * lesson_hvp_rtol plus what atol adds for small products: the window the constants leave.
Oracle only (NumPy): no run, no JAX.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def families(width: int) -> dict[str, np.ndarray]:
    """Tangents a file may choose, by family (rows)."""
    steps = np.arange(width, dtype=np.float64)
    rng = np.random.default_rng(20261207)
    return {"lesson linspace(-1, 1)": np.linspace(-1.0, 1.0, width)[None],
            "ones": np.ones(width)[None],
            "linspace(0, 1)": np.linspace(0.0, 1.0, width)[None],
            "coordinate axes": np.eye(width),
            "waves": np.stack([np.sin(steps), np.cos(steps), np.sin(3 * steps) + 0.3 * np.cos(steps)]),
            "random normal": rng.normal(size=(500, width)),
            "random normal x10": 10 * rng.normal(size=(200, width))}


def separated(oracle, settings, tangents: np.ndarray, remat: np.ndarray) -> np.ndarray:
    """Per tangent: both changes move the pair `separation` allowances (as _revealed_jointly measures them)."""
    ordinary, unchanged = oracle.hessian(False), oracle.true_hessian
    allowance = np.maximum(oracle.hvp_allowances(ordinary, tangents, settings.hvp_tolerance, settings),
                           oracle.hvp_allowances(remat, tangents, settings.hvp_tolerance, settings))
    apart = settings.separation * allowance
    return ((np.max(np.abs(tangents @ (remat - ordinary).T), axis=1) >= apart)
            & (np.max(np.abs(tangents @ (ordinary - unchanged).T), axis=1) >= apart))


def inside_budget(oracle, settings, tangents: np.ndarray, remat: np.ndarray) -> np.ndarray:
    """Per tangent: the change stays inside `remat_share` of the lesson's assertion in every entry."""
    plain = tangents @ oracle.hessian(False).T
    change = np.abs(tangents @ remat.T - plain)
    return np.all(change <= settings.remat_share * (settings.lesson_hvp_rtol * np.abs(plain) + settings.lesson_hvp_atol),
                  axis=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, default=40)
    parser.add_argument("--proportional", type=float, nargs="*", default=[])
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from grader.authoring.calibration import draw_seed, lesson, world

    assignment = lesson("performance-05", ROOT)
    settings = assignment.settings
    # 'today': the world's own rematerialized rule; K: the ideal H_remat = (1 + K) H in the same worlds
    kinds = ["today", *args.proportional]
    counts = {kind: {name: np.zeros(3, dtype=int) for name in families(16)} for kind in kinds}
    for _ in range(args.worlds):
        oracle = world(assignment, draw_seed(assignment), facts={}).oracle
        for name, tangents in families(len(oracle.x)).items():
            for kind in kinds:
                remat = oracle.hessian(True) if kind == "today" else (1.0 + float(kind)) * oracle.hessian(False)
                tally = counts[kind][name]
                tally += [int(separated(oracle, settings, tangents, remat).sum()),
                          int(inside_budget(oracle, settings, tangents, remat).sum()), len(tangents)]
    print(f"{args.worlds} worlds; separation {settings.separation} x hvp_tolerance {settings.hvp_tolerance:g} "
          f"= {settings.separation * settings.hvp_tolerance:.2g}; remat_share {settings.remat_share} x lesson rtol "
          f"{settings.lesson_hvp_rtol:g} = {settings.remat_share * settings.lesson_hvp_rtol:.2g}")
    for kind in kinds:
        print("today's rematerialized rule" if kind == "today" else f"H_remat = (1 + {float(kind):g}) H")
        for name, (apart, inside, total) in counts[kind].items():
            print(f"  {name:24s} separated {apart / total:6.1%}   inside the lesson's assertion budget "
                  f"{inside / total:6.1%}   ({total} tangent-worlds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
