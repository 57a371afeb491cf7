"""`grader similar OUT`: the instructor's similarity report of an existing results folder, without grading again,
and the similarity options `grader grade` takes. Writes OUT/similarity.csv and redraws OUT/report.html with the
section; touches no record, grade or student file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.model.record import Record, record_from_json
from grader.outputs.reports import write_class_report
from grader.outputs.results_folder import owner_of
from grader.outputs.similarity_view import write_similarity_csv
from grader.similarity.report import SimilarityOptions, similarity_for


def _threshold(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("a score between 0 (excluded) and 1, e.g. 0.6")
    return value


def add_similarity_options(parser: argparse.ArgumentParser, on_grade: bool) -> None:
    if on_grade:
        switch = parser.add_mutually_exclusive_group()
        switch.add_argument("--similarity", dest="similarity", action="store_true", default=None,
                            help="build the instructor's similarity report (default: [similarity] enabled, true)")
        switch.add_argument("--no-similarity", dest="similarity", action="store_false",
                            help="skip it (`grader similar OUT` builds it later)")
    parser.add_argument("--threshold", dest="similarity_threshold", type=_threshold, default=None,
                        help="flag pairs scoring at least this (default: [similarity] threshold, 0.6)")
    parser.add_argument("--earlier", action="append", type=Path, default=[], metavar="DIR",
                        help="an earlier term's results folder or submissions folder to compare against (repeatable)")


def options_from(args: argparse.Namespace) -> SimilarityOptions:
    return SimilarityOptions(getattr(args, "similarity", None), args.similarity_threshold, list(args.earlier))


def similar_command(assignment, args: argparse.Namespace) -> int:
    out: Path = args.out
    if not out.is_dir():
        print(f"grader: {out} is not a folder (give the results folder `grader grade` wrote)", file=sys.stderr)
        return 2
    missing = [str(folder) for folder in args.earlier if not folder.is_dir()]
    if missing:
        print(f"grader: earlier term(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    refused = own_class_among(args.earlier, out)
    if refused:
        print(f"grader: {refused}", file=sys.stderr)
        return 2
    records = _records(out)
    if not records:
        print(f"grader: {out} holds no grading records (run `grader grade` first)", file=sys.stderr)
        return 2
    options = options_from(args)
    report = similarity_for(out, assignment, options.earlier, options.threshold)
    csv_path = write_similarity_csv(out, report)
    seeds = sorted({r.get("variant_seed") for r in records if r.get("variant_seed") is not None})
    write_class_report(out, records, assignment, {"variant_seed": seeds[-1] if seeds else None,
                                                  "environment": records[0].get("environment", {})}, report)
    print(f"{compared(report.documents, report.earlier)} in {report.seconds:.1f} s: {report.flagged} pair(s) at or "
          f"above {report.threshold:g}; see {out / 'report.html'} and {csv_path}.")
    for note in report.notes:
        print(f"note: {note}")
    print(report.caution)
    return 0


def compared(documents: int, earlier: int) -> str:
    """"N submissions of this class compared (with M from earlier terms)": the two counts never add up in one number."""
    own = f"{documents} submission{'s' if documents != 1 else ''} of this class compared"
    return f"{own} with {earlier} from earlier terms" if earlier else own


def own_class_among(earlier: list[Path], out: Path, submissions: Path | None = None) -> str | None:
    """Why an `--earlier` folder cannot be an earlier term (it is this class's results or submissions folder), or None.

    Given its own results or submissions as an "earlier term", every submission would be paired with itself."""
    own = {Path(out).resolve(): "results folder"}
    named = owner_of(out).get("submissions") if Path(out).is_dir() else None
    for folder in (submissions, Path(named) if named else None):
        if folder is not None:
            own.setdefault(Path(folder).resolve(), "submissions folder")
    for folder in earlier:
        what = own.get(Path(folder).resolve())
        if what:
            return (f"--earlier {folder} is this class's own {what}, not an earlier term: comparing the class with it "
                    "would pair every submission with itself. Give an earlier term's results or submissions folder.")
    return None


def _records(out: Path) -> list[Record]:
    records = []
    for path in sorted(out.glob("*.json")):
        try:
            records.append(record_from_json(path.read_text()))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
    return records
