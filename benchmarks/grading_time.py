"""Benchmark: seconds per graded submission against a bare `python file.py` run of the same files, same run.

    .venv/bin/python benchmarks/grading_time.py [--copies 6] [--workers 1 2] [--isolation fork-server bubblewrap unshare]

Grades N distinct copies of the reference solution (a comment line makes each file, and so each hash,
distinct) through the real batch path, both scenarios, full sandbox, and runs the same files bare, one
after another. Prints wall seconds per submission for each, and the ratio grading/bare. Grading runs two
scenarios per file, so a ratio near 2 with one worker means the harness itself costs little. With several
`--isolation` strategies it grades the same files under each, so their costs compare within one run:
`fork-server` is what `grader grade` uses; the others start a fresh sandboxed interpreter per run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grader.grading.warm_up  # noqa: E402
import grader.sandbox.process  # noqa: E402
from grader.cli.batch import grade_folder  # noqa: E402
from grader.common.user_cache import use_cache_dir  # noqa: E402
from grader.config.assignment import load  # noqa: E402
from grader.grading.reference import reference_facts  # noqa: E402
from grader.runs.runners import ServerStart  # noqa: E402
from grader.sandbox.isolation import Bubblewrap, ProcessGroup, Unshare, allow_weak_isolation  # noqa: E402

STRATEGIES = {"fork-server": Bubblewrap, "bubblewrap": Bubblewrap, "unshare": Unshare, "process-group": ProcessGroup}


class NoForkServer:
    """Stands in for ServerStart: every run starts its own sandboxed interpreter."""

    def __init__(self, *args, **kwargs):
        pass

    def runner(self):
        return None

    def close(self):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--isolation", nargs="+", choices=sorted(STRATEGIES), default=["fork-server", "bubblewrap", "unshare"])
    args = parser.parse_args()
    assignment = load("performance-05", ROOT)
    source = assignment.solution_path.read_text()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "submissions"
        folder.mkdir()
        for i in range(args.copies):
            (folder / f"student{i:03d}.py").write_text(f"# copy {i}\n{source}")
        use_cache_dir(Path(scratch) / "cache")
        reference_facts(assignment)  # the warm state measured once, outside the timing (every later batch reuses it)

        bare = []
        for path in sorted(folder.iterdir()):
            started = time.perf_counter()
            subprocess.run([sys.executable, str(path)], cwd=scratch, capture_output=True, check=True)
            bare.append(time.perf_counter() - started)
        bare_per_file = statistics.mean(bare)
        print(f"bare python run: {bare_per_file:.2f} s per file (median {statistics.median(bare):.2f}, n={len(bare)})")

        for round_, (strategy, workers) in enumerate([(s, w) for s in args.isolation for w in args.workers]):
            isolation = STRATEGIES[strategy]()
            grader.sandbox.process.strongest_available = lambda isolation=isolation: isolation
            allow_weak_isolation(not isolation.strong)   # weak strategies: asked for by name, as an instructor would
            grader.grading.warm_up.ServerStart = ServerStart if strategy == "fork-server" else NoForkServer
            out = Path(scratch) / f"out-{round_}-{strategy}-{workers}"
            started = time.perf_counter()
            result = grade_folder(assignment, folder, out, workers=workers, regrade=True, progress=lambda line: None)
            elapsed = time.perf_counter() - started
            scores = sorted({r["score"] for r in result.records})
            per = elapsed / args.copies
            print(f"grader, {strategy}, {workers} worker(s): {per:.2f} s per submission (both scenarios), "
                  f"{60 / per:.1f} submissions/min, ratio to one bare run {per / bare_per_file:.2f}; scores {scores}")


if __name__ == "__main__":
    main()
