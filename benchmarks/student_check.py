"""Benchmark: a student's `grader check` from the student wheel against a bare `python <solution>.py`, same run.

    .venv/bin/python benchmarks/student_check.py [--repeats 5] [--group directional]

Builds the student wheel, installs it into a temporary folder (pip --target) and runs, from a folder with no
`assignments/` or `solutions/` above it, alternately: `python performance-05.py` (the solution, bare) and
`python -m grader.student.terminal check performance-05.py` (the whole file: both scenarios, full sandbox),
and `... check performance-05.py GROUP`. Each is a fresh process, timed wall-clock; medians over the repeats
and their ratios to bare are printed. The first check on a machine also warms the compilation cache with the
bundle's starter: it is timed and reported apart ("first check"), then left out of the medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.monotonic() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--group", default="directional")
    parser.add_argument("--assignment", default="performance-05")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from grader.authoring.student_wheel import write_student_wheel
    from grader.config.assignment import load

    assignment = load(args.assignment, ROOT)
    with tempfile.TemporaryDirectory(prefix="student-check-") as temp:
        temp_path = Path(temp)
        wheel = write_student_wheel(assignment, temp_path / "dist")
        site = temp_path / "site"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                        str(wheel)], check=True)
        work = temp_path / "work"
        work.mkdir()
        name = assignment.submission_filename
        shutil.copy(assignment.solution_path, work / name)
        env = {**os.environ, "PYTHONPATH": str(site)}
        bare_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        check = [sys.executable, "-m", "grader.student.terminal", "check", name]
        first, code = timed(check, work, env)
        print(f"first check (warms the compilation cache with the starter): {first:.2f} s, exit {code}")
        samples: dict[str, list[float]] = {"bare": [], "check": [], f"check {args.group}": []}
        for _ in range(args.repeats):
            samples["bare"].append(timed([sys.executable, name], work, bare_env)[0])
            seconds, code = timed(check, work, env)
            assert code == 0, "the solution must pass every visible check"
            samples["check"].append(seconds)
            samples[f"check {args.group}"].append(timed([*check, args.group], work, env)[0])
        bare = statistics.median(samples["bare"])
        for label, values in samples.items():
            median = statistics.median(values)
            spread = ", ".join(f"{v:.2f}" for v in values)
            print(f"{label:>20}: median {median:.2f} s ({spread}); ratio to bare {median / bare:.2f}x")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
