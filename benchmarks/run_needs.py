"""Which files of a graded class need more than one run: the measurement behind issue 54's one-run design.

    .venv/bin/python benchmarks/run_needs.py RESULTS_FOLDER [--list]

Reads the records `grader grade` wrote into RESULTS_FOLDER (no grading here) and counts, among the graded records:
- full marks: every check passed in every world, so a design that judges each check in the variant world first
  would grade these from that one run;
- the review-hold candidates: the variant run failed (or stopped at) more of the file's statements than the
  baseline run did: a statement of the student's own that raised only under the grader's hidden changes, the case
  such a design holds for the instructor's review instead of docking or crediting it;
- the rest: a check failed, so the baseline run would explain it ("wrong in both worlds" or "right only in the
  lesson's world").
Run time per world comes from the records' runs (each run's own seconds), so the share of grading time a one-run
design would keep is printed too. `--list` names the review-hold candidates with their endings and counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

STOPPED = ("syntax_error", "sys_exit", "killed_wall", "exited_early", "lost")


def records(folder: Path) -> list[dict]:
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and "submission" in record and "runs" in record:
            found.append(record)
    return found


def held(record: dict) -> bool:
    """The variant run failed or stopped where the baseline run did not."""
    runs = record.get("runs", {})
    baseline, variant = runs.get("baseline"), runs.get("variant")
    if not baseline or not variant:
        return False
    stopped = variant["ending"] in STOPPED and baseline["ending"] not in STOPPED
    return stopped or variant["failed_statements"] > baseline["failed_statements"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--list", action="store_true", help="name each review-hold candidate")
    args = parser.parse_args()
    graded = [r for r in records(args.results) if r.get("status") == "graded"]
    if not graded:
        print(f"no graded records in {args.results}", file=sys.stderr)
        return 2
    full = [r for r in graded if r["score"] >= r["max_score"] - 1e-9]
    holds = [r for r in graded if held(r)]
    seconds = sum(run.get("seconds", 0.0) for r in graded for run in r["runs"].values())
    one_run = sum(r["runs"]["variant"]["seconds"] for r in full if "variant" in r["runs"]) + \
        sum(run.get("seconds", 0.0) for r in graded if r not in full for run in r["runs"].values())
    print(f"{len(graded)} graded records in {args.results}")
    print(f"  full marks (one run would do):            {len(full)} ({len(full) / len(graded):.0%})")
    print(f"  variant failed or stopped where baseline did not (review-hold candidates): {len(holds)} "
          f"({len(holds) / len(graded):.1%})")
    print(f"  a check failed (baseline explains it):    {len(graded) - len(full)}")
    if seconds:
        print(f"  run seconds kept if full-marks files ran only the variant: {one_run / seconds:.0%} of {seconds:.0f} s")
    if args.list:
        for r in holds:
            runs = r["runs"]
            print(f"  {r['submission']}: {r['score']:g}/{r['max_score']:g}; baseline {runs['baseline']['ending']} "
                  f"({runs['baseline']['failed_statements']} failed), variant {runs['variant']['ending']} "
                  f"({runs['variant']['failed_statements']} failed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
