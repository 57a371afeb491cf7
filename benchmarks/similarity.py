"""How long the similarity report takes for a class of N submissions, beyond grading (`grader similar OUT`).

The class is generated cheaply, not graded: each submission is an honest corpus case, disguised (renamed with
its own names, sometimes reordered, reformatted or made a notebook) with a few random statements of its own,
and random exercise values (most students the lesson's eps, some an odd one; some wrong values). So every
corpus case has about N/55 disguised copies in the class: more shared code than a real class, which makes it a
hard case for the pair count. Records and OUT/similarity/ sidecars are written as a batch writes them; then
`similarity_for` is timed (load, tokenise, fingerprint, index, score, regions) and the CSV and the report
section are written.

    .venv/bin/python benchmarks/similarity.py --sizes 50 100 200 400

On a shared, loaded machine absolute seconds are inflated; the growth from one size to the next is the figure.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from similarity_planting import disguise  # noqa: E402
from test_similarity import _script, honest_cases  # noqa: E402

from grader.config.assignment import load  # noqa: E402
from grader.grading.engine import CheckResult  # noqa: E402
from grader.grading.grade import assemble  # noqa: E402
from grader.intake.discovery import discover  # noqa: E402
from grader.outputs.reports import write_class_report  # noqa: E402
from grader.outputs.similarity_view import write_similarity_csv  # noqa: E402
from grader.outputs.writers import write_result  # noqa: E402
from grader.similarity.report import settings_for, similarity_for  # noqa: E402
from grader.similarity.store import write_sidecar  # noqa: E402

OPERATORS = ["+", "-", "*", "/", "@"]
CALLS = ["np.sin", "jnp.cos", "np.abs", "jnp.tanh", "float", "np.sum", "jnp.mean"]


def random_statement(rng: random.Random, depth: int = 3) -> str:
    def expression(level: int) -> str:
        if level == 0:
            return rng.choice(["x", "w", "eps", "1.5", "cotangent", "direction"])
        kind = rng.random()
        if kind < 0.4:
            return f"{rng.choice(CALLS)}({expression(level - 1)})"
        if kind < 0.8:
            return f"({expression(level - 1)} {rng.choice(OPERATORS)} {expression(level - 1)})"
        return f"[{expression(level - 1)}, {expression(level - 1)}]"
    return f"extra_{rng.randrange(10**6)} = {expression(depth)}"


def make_class(folder: Path, out: Path, size: int, seed: int, assignment) -> None:
    rng = random.Random(seed)
    sources = {name: _script(path) for name, path in honest_cases().items() if path.is_file()}
    names = sorted(sources)
    for number in range(size):
        source = sources[names[number % len(names)]]
        extra = "\n".join(random_statement(rng) for _ in range(rng.randrange(2, 7)))
        ways = ["rename"] + [way for way in ("reorder", "reformat", "notebook") if rng.random() < 0.3]
        text, suffix = disguise(source + "\n" + extra + "\n", ways, tuple(assignment.contract), salt=str(number))
        (folder / f"student{number:04d}{suffix}").write_text(text)
    settings = settings_for(assignment)
    for submission in discover(folder, assignment.submission_filename, assignment.max_submission_bytes):
        wrong = {name for name in settings.values if rng.random() < 0.15}
        eps = 1e-3 if rng.random() < 0.6 else rng.choice([1e-4, 1e-2, 5e-3, round(rng.uniform(1e-4, 3e-2), 5)])
        values = {"eps": eps, "finite": 0.4321 if "finite" not in wrong else round(rng.uniform(0, 1), 4),
                  "direction": [round(rng.uniform(-1, 1), 3) for _ in range(16)] if rng.random() < 0.1
                  else [-1 + 2 * i / 15 for i in range(16)],
                  "hvp_plain": [0.5 + i for i in range(16)] if "hvp_plain" not in wrong
                  else [rng.random() for _ in range(16)]}
        failed = {check for name in wrong for check in settings.values[name]}
        checks = [CheckResult(s.id, s.group, 0.0 if s.id in failed else s.points, s.points, s.visibility, "")
                  for s in assignment.checks]
        write_result(out, assemble(assignment, submission, "graded", checks, [], 1))
        write_sidecar(out, submission, values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 400])
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    assignment = load("performance-05", ROOT)
    print(f"{'N':>5} {'report s':>9} {'+ csv/html s':>13} {'pairs sharing':>14} {'flagged':>8} {'s per N':>8}")
    previous = None
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as scratch:
            folder, out = Path(scratch) / "submissions", Path(scratch) / "results"
            folder.mkdir()
            make_class(folder, out, size, args.seed, assignment)
            started = time.perf_counter()
            report = similarity_for(out, assignment)
            built = time.perf_counter() - started
            write_similarity_csv(out, report)
            write_class_report(out, [], assignment, {}, report)
            total = time.perf_counter() - started
        growth = f"  (x{total / previous[1]:.2f} for x{size / previous[0]:.2f} N)" if previous else ""
        print(f"{size:>5} {built:>9.2f} {total:>13.2f} {report.compared_pairs:>14} {report.flagged:>8} "
              f"{total / size:>8.4f}{growth}")
        previous = (size, total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
