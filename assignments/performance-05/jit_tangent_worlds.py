"""Does an honest HVP along a tangent made inside `jit` get full credit in every world? (issue 67's done-when)

    .venv/bin/python assignments/performance-05/jit_tangent_worlds.py --worlds 40 --tangents 20

Writes the reference solution and `--tangents` honest variants of it whose HVP exercise builds its tangent inside
the jitted function that computes both HVPs (random normal or uniform from a key of the file's own, waves, a
random mix, each at its own scale, none of them kept in a variable the grader sees), then grades that folder with
`grader grade` in `--worlds` freshly drawn worlds (a random `--variant-seed` each, so each is a world `grader grade`
would draw). Prints, per world, the reference's score and how many jit-tangent files got hvp 20/20 with nothing
held, and exits 1 if any world fell short. Real grading (the sandbox, the replays): about 15 s a world on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "performance-05.py"
# the reference's HVP lines, replaced whole by each variant (the tangent then lives only inside the jitted function)
GIVEN = ("direction=jnp.linspace(-1.,1.,len(x))\n# Differentiate the objective to obtain `(_, hvp_plain)` via automatic "
         "differentiation.\n_,hvp_plain=jax.jvp(jax.grad(plain),(x,),(direction,))\n# Differentiate the objective to "
         "obtain `(_, hvp_remat)` via automatic differentiation.\n_,hvp_remat=jax.jvp(jax.grad(remat),(x,),(direction,))\n")
KINDS = [
    "jax.random.normal(jax.random.PRNGKey({key}), (16,))",
    "jax.random.uniform(jax.random.PRNGKey({key}), (16,), minval=-1.0, maxval=1.0)",
    "jnp.sin({a}*jnp.arange(16.0)+{b})",
    "jnp.cos({a}*jnp.arange(16.0))+{b}*jax.random.normal(jax.random.PRNGKey({key}), (16,))",
]
SCALES = [1.0, 0.05, 3.0, 0.3, 10.0]


def variant(index: int) -> str:
    """Honest HVP lines whose tangent is made inside `jit`, the index-th of a fixed family."""
    kind = KINDS[index % len(KINDS)].format(key=100 + index, a=0.7 + 0.37 * index, b=0.11 * index)
    scale = SCALES[index % len(SCALES)]
    return ("@jax.jit\ndef both_hvps(point):\n"
            f"    t={scale}*({kind})\n"
            "    return jax.jvp(jax.grad(plain),(point,),(t,))[1],jax.jvp(jax.grad(remat),(point,),(t,))[1]\n"
            "hvp_plain,hvp_remat=both_hvps(x)\n")


def write_class(folder: Path, tangents: int) -> list[str]:
    source = SOLUTION.read_text(encoding="utf-8")
    if source.count(GIVEN) != 1:
        sys.exit("jit_tangent_worlds: the reference's HVP lines changed; update GIVEN")
    (folder / "reference.py").write_text(source, encoding="utf-8")
    names = []
    for index in range(tangents):
        name = f"jit_tangent_{index:02d}"
        (folder / f"{name}.py").write_text(source.replace(GIVEN, variant(index)), encoding="utf-8")
        names.append(name)
    return names


def grade(folder: Path, out: Path, requested: int, cache: Path, workers: int) -> int:
    command = [sys.executable, "-m", "grader.cli.main", "grade", str(folder), "--out", str(out), "--regrade",
               "--no-similarity", "--workers", str(workers), "--variant-seed", str(requested)]
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "GRADER_CACHE_DIR": str(cache)},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=40)
    parser.add_argument("--tangents", type=int, default=20)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: a folder of this run's own")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jit-tangent-worlds-"))
    cache = options.cache_dir or work / "cache"
    folder = work / "class"
    folder.mkdir()
    names = write_class(folder, options.tangents)
    short = 0
    for number in range(options.worlds):
        requested = secrets.randbelow(2**31 - 2) + 1
        out = work / f"out-{number}"
        if grade(folder, out, requested, cache, options.workers) != 0:
            print(f"world {number}: grader grade failed (requested seed {requested})")
            short += 1
            continue
        reference = json.loads((out / "reference.json").read_text(encoding="utf-8"))
        credited, missed = 0, []
        for name in names:
            record = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
            if record["groups"]["hvp"]["score"] == record["groups"]["hvp"]["max_score"] and "review_hold" not in record:
                credited += 1
            else:
                missed.append(f"{name} hvp {record['groups']['hvp']['score']:g}"
                              + (" held" if "review_hold" in record else ""))
        full = reference["score"] == reference["max_score"] and "review_hold" not in reference
        short += (not full) + bool(missed)
        print(f"world {number} (variant seed {reference.get('variant_seed', requested)}): reference "
              f"{reference['score']:g}/{reference['max_score']:g}, jit tangents credited {credited}/{len(names)}"
              + (f"; missed: {', '.join(missed)}" if missed else ""), flush=True)
    print(f"{options.worlds} worlds, {len(names)} jit tangents each: {'all credited' if not short else f'{short} shortfalls'}"
          f" (records under {work})")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
