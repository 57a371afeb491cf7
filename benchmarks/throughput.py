"""Benchmark: class throughput of `grader grade` against running the same files bare, one after another, same run.

    .venv/bin/python benchmarks/throughput.py [--sizes 20 100 400] [--bare 6] [--workers N]

For each size N it generates N distinct honest submissions (the reference solution written other ways: other
steps, directions, HVP methods, spacing and comments, so every file and hash differs), grades them through
the real batch path (both scenarios, full sandbox, fork server; the one-off reference measurement and cache
warming happen first and are timed apart), and prints submissions/min, CPU seconds per submission, the peak
memory of one run and of the fork server, and the ratio against bare `python file.py` runs of M of the same
files, timed sequentially in the same process run. Linear time shows as a constant seconds-per-submission.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.authoring.starter import public_code  # noqa: E402
from grader.cli.batch import grade_folder  # noqa: E402
from grader.config.assignment import load  # noqa: E402
from grader.grading.reference import reference_facts  # noqa: E402
from grader.runs import compile_cache  # noqa: E402
from grader.runs.jobs import fresh_variant_seed, scenario_seed  # noqa: E402

EPS = [".001", ".002", ".005", ".01", ".0005", "1e-3", "2.5e-3"]
DIRECTIONS = ["jnp.linspace(-1.,1.,len(x))", "jnp.arange(len(x),dtype=jnp.float32)/len(x)-.4",
              "jnp.asarray(np.random.default_rng(7).normal(size=len(x)).astype(np.float32))",
              "jnp.cos(jnp.arange(16.))"]
HVPS = [None,  # the solution's jvp of grad
        "hvp_plain=jax.hessian(plain)(x)@direction\nhvp_remat=jax.hessian(remat)(x)@direction",
        "hvp_plain=jax.jvp(jax.grad(plain),(x,),(direction,))[1]\nhvp_remat=jax.jvp(jax.grad(remat),(x,),(direction,))[1]",
        "hvp_plain=jax.linearize(jax.grad(plain),x)[1](direction)\nhvp_remat=jax.linearize(jax.grad(remat),x)[1](direction)"]


def honest_variant(solution: str, index: int) -> str:
    """One honest way of writing the exercises; every file differs."""
    chooser = random.Random(index)
    text = solution.replace("eps=.001", f"eps={chooser.choice(EPS)}")
    text = text.replace("direction=jnp.linspace(-1.,1.,len(x))", f"direction={chooser.choice(DIRECTIONS)}")
    hvp = chooser.choice(HVPS)
    if hvp:
        start = text.index("_,hvp_plain=jax.jvp")
        end = text.index("\n", text.index("_,hvp_remat=jax.jvp"))
        text = text[:start] + hvp + text[end:]
    return f"# student {index:04d}: {chooser.random():.6f}\n" + text


def bare_seconds(files: list[Path], cwd: Path) -> list[float]:
    seconds = []
    for path in files:
        started = time.perf_counter()
        subprocess.run([sys.executable, str(path)], cwd=cwd, capture_output=True, check=True)
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 100, 400])
    parser.add_argument("--bare", type=int, default=10, help="files run bare for the baseline (M)")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    assignment = load("performance-05", ROOT)
    solution = assignment.solution_path.read_text()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        cache = scratch / "cache"
        seed = fresh_variant_seed(assignment)
        started = time.perf_counter()
        reference_facts(assignment, cache)
        seeds = {name: scenario_seed(assignment, s, seed) for name, s in assignment.scenarios.items()}
        compile_cache.warm(assignment, cache, seeds, public_code(assignment))
        print(f"one-off, before grading: reference measurement and cache warming {time.perf_counter() - started:.1f} s")

        biggest = max(args.sizes)
        pool = scratch / "all"
        pool.mkdir()
        for index in range(biggest):
            (pool / f"s{index:04d}.py").write_text(honest_variant(solution, index))
        # The bare sample is spread evenly over the smallest class (a subset of every class), so it has the same
        # mix of ways of writing the exercises as the classes it is compared with.
        smallest = sorted(pool.iterdir())[: min(args.sizes)]
        step = max(1, len(smallest) // args.bare)
        bare = bare_seconds(smallest[::step][: args.bare], scratch)
        bare_per_file = statistics.mean(bare)
        print(f"bare `python file.py`, sequential: {bare_per_file:.2f} s per file (n={len(bare)}, "
              f"min {min(bare):.2f}, max {max(bare):.2f}) = {60 / bare_per_file:.1f} files/min")

        for size in args.sizes:
            folder = scratch / f"class-{size}"
            folder.mkdir()
            for path in sorted(pool.iterdir())[:size]:
                (folder / path.name).write_bytes(path.read_bytes())
            out = scratch / f"out-{size}"
            (out / ".grader-cache").mkdir(parents=True)
            for cached in cache.rglob("*"):
                target = out / ".grader-cache" / cached.relative_to(cache)
                if cached.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                else:
                    target.write_bytes(cached.read_bytes())
            started = time.perf_counter()
            result = grade_folder(assignment, folder, out, workers=args.workers, variant_seed=seed,
                                  progress=lambda line: None)
            elapsed = time.perf_counter() - started
            runs = [run for record in result.records for run in record.get("runs", {}).values()]
            cpu = sum(run.get("cpu_seconds") or 0 for run in runs) / size
            rss = max((run.get("max_rss_bytes") or 0 for run in runs), default=0) / 2**20
            full = sum(1 for r in result.records if r["score"] == r["max_score"])
            per = elapsed / size
            print(f"N={size:>4}: {elapsed:6.1f} s, {per:.3f} s per submission, {60 / per:6.1f} submissions/min, "
                  f"{cpu:.2f} CPU s per submission (both runs), peak run memory {rss:.0f} MiB, "
                  f"ratio to bare sequential {bare_per_file / per:.1f}x; {full}/{size} scored full marks")


if __name__ == "__main__":
    main()
