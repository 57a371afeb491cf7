"""Which runs each file of a graded class got, and why: how often one run graded a file, and how often a record
was held for the instructor's review (issue 54's one-run design, grading/run_plan.py).

    .venv/bin/python benchmarks/run_needs.py RESULTS_FOLDER [RESULTS_FOLDER ...] [--list]

Reads the records `grader grade` wrote (no grading here; several folders: the same class graded in several drawn
worlds) and counts, among the graded records: graded from one run, the others (with the first reason their record
gives, `runs_why`), and those held for review (`review_hold`: a statement of the file's own raised only under the
grader's hidden changes and checks failed only there). `--list` names each held record and what it holds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--list", action="store_true", help="name each held record")
    args = parser.parse_args()
    for folder in args.results:
        graded = [r for r in records(folder) if r.get("status") == "graded"]
        if not graded:
            print(f"no graded records in {folder}", file=sys.stderr)
            return 2
        one = [r for r in graded if len(r["runs"]) == 1]
        held = [r for r in graded if r.get("review_hold")]
        reasons = Counter(re.sub(r"^\d+ ", "N ", str(r.get("runs_why", "?")).split(": ", 1)[-1].split(" (")[0].split(";")[0])
                          for r in graded if len(r["runs"]) > 1)
        seconds = sum(run.get("seconds", 0.0) for r in graded for run in r["runs"].values())
        print(f"{folder}: {len(graded)} graded records; {len(one)} from one run ({len(one) / len(graded):.0%}), "
              f"{len(graded) - len(one)} from more; {len(held)} held for review ({len(held) / len(graded):.1%}); "
              f"{seconds:.0f} run seconds in all")
        for reason, count in reasons.most_common(8):
            print(f"  {count:4d}  {reason}")
        if args.list:
            for r in held:
                print(f"  held: {r['submission']} ({r['score']:g}/{r['max_score']:g}): {r['review_hold']['statement']} "
                      f"in the {r['review_hold']['scenario']} run; {', '.join(r['review_hold']['checks'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
