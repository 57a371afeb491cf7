"""Benchmark: grading a class on a Dask cluster against grading it locally, with the same cores, in one run.

    .venv/bin/python benchmarks/cluster.py [--class-size 20] [--workers 2]

The class: `--class-size` distinct honest files (benchmarks/throughput.py's ways of writing the exercises). Measured,
in this order, in one process, each batch with a fresh variant seed (so each compiles its variant world, as any
batch does):
1. `grade_folder` locally with `--workers` threads;
2. a `distributed.LocalCluster` of `--workers` worker processes of one thread each on this machine (its start-up
   timed apart), and `grade_folder(..., scheduler=client)`: every worker process warms up for itself (reads the
   warm state, starts its own fork server) before its first run.
The ratio is local seconds per submission over cluster seconds per submission (above 1: the cluster path is faster).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import honest_variant  # noqa: E402

from grader.cli.batch import grade_folder  # noqa: E402
from grader.config.assignment import load  # noqa: E402
from grader.runs.jobs import fresh_variant_seed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class-size", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    assignment = load("performance-05", ROOT)
    solution = assignment.solution_path.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / "submissions"
        folder.mkdir()
        for index in range(args.class_size):
            (folder / f"s{index:03d}.py").write_text(honest_variant(solution, index), encoding="utf-8")
        quiet = {"progress": lambda line: None, "regrade": True}
        local = grade_folder(assignment, folder, Path(temp) / "local", workers=args.workers,
                             variant_seed=fresh_variant_seed(assignment), **quiet)
        started = time.monotonic()
        with LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1, memory_limit=0,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            start_up = time.monotonic() - started
            remote = grade_folder(assignment, folder, Path(temp) / "cluster", variant_seed=fresh_variant_seed(assignment),
                                  scheduler=client, **quiet)
    n = args.class_size
    assert len(local.records) == len(remote.records) == n
    assert all(r["status"] == "graded" and r["score"] == r["max_score"] for r in local.records + remote.records)
    print(f"{n} honest submissions, {args.workers} core(s)' worth of workers:")
    print(f"  local   ({args.workers} threads):            {local.seconds:6.1f} s, {local.seconds / n:.2f} s per submission")
    print(f"  cluster ({args.workers} worker processes):   {remote.seconds:6.1f} s, {remote.seconds / n:.2f} s per submission "
          f"(cluster start-up {start_up:.1f} s apart)")
    print(f"  ratio local/cluster: {local.seconds / remote.seconds:.2f}x")


if __name__ == "__main__":
    main()
