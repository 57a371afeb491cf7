"""`grader worlds [ASSIGNMENT] --count N`: the reference solution graded in N batch worlds drawn as `grader grade`
draws them, through the real sandbox, runs and checks: how often it scores full marks, and which checks fall short.

Every lesson needs this before its tolerances are trusted (a batch refuses a world its reference falls short in,
and draws another); a lesson's own margins tools build on grader/authoring/calibration.py."""

from __future__ import annotations

import argparse
from collections import Counter

from grader.authoring.calibration import draw_seed, grade_reference
from grader.config.assignment import Assignment


def add_worlds_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=10, help="how many batch worlds (default 10)")
    parser.add_argument("--seed", type=int, action="append", help="grade in this batch seed (repeatable) instead")


def worlds_command(assignment: Assignment, args: argparse.Namespace) -> int:
    """Exit 0 when the reference scored full marks in every world graded, 1 otherwise."""
    seeds = list(args.seed or [draw_seed(assignment) for _ in range(max(1, args.count))])
    short: Counter[str] = Counter()
    full = 0
    for number, seed in enumerate(seeds, start=1):
        verdict = grade_reference(assignment, seed).verdict
        full += verdict.suitable
        short.update(line.split(":", 1)[0] for line in verdict.shortfalls)
        print(f"world {number}/{len(seeds)}: batch seed {seed}: reference {verdict.score:g}/{verdict.max_score:g}"
              + "".join(f"\n  {line}" for line in verdict.shortfalls), flush=True)
    print(f"{full} of {len(seeds)} worlds: the reference scored full marks."
          + "".join(f"\n  {check}: short in {count}" for check, count in short.most_common()))
    return 0 if full == len(seeds) else 1
