"""End-to-end corpus: every sample submission in tests/corpus/ is graded once by the real grader.

A case is an entry of tests/corpus/ -- `<case>.py`, `<case>.ipynb`, a folder `<case>/` (Gradescope layout) or any
other file `<case>.<ext>` -- plus `<case>.expected.toml` beside it:

    status = "graded"            # or "error"
    why = "one line: what this case represents"
    [groups]                     # expected score of every group of the assignment
    runs = 5
    ...
    [checks]                     # optional: exact expected score of individual check ids
    "directional.central_difference" = 0
    [contains]                   # optional: fragments that must appear (case-insensitive)
    feedback = ["forward difference"]   # in the concatenated feedback of all checks
    messages = ["sys.exit"]             # in the concatenated submission-level messages

A module-scoped fixture copies every entry (symlinks stay symlinks) into a temporary folder and runs
`grader.cli.batch.grade_folder` over it once, in-process, with two workers; each case is then one parameter of
`test_corpus_case`. Adding a case is adding its files: nothing here names a case.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from case_expectations import record_problems, shape_problems, summary

import grader.cli.batch
import grader.config.assignment

ASSIGNMENT = "performance-05"
CORPUS = Path(__file__).with_name("corpus")
EXPECTED = ".expected.toml"
SKIPPED = {"__pycache__"}


def corpus_entries() -> list[Path]:
    """Everything in the corpus that is handed to the grader (all but the expectation files)."""
    return sorted(p for p in CORPUS.iterdir() if not p.name.endswith(EXPECTED) and p.name not in SKIPPED)


def case_names() -> list[str]:
    return sorted(p.name[: -len(EXPECTED)] for p in CORPUS.glob("*" + EXPECTED))


def case_of(entry: Path) -> str:
    """`<case>/` -> case, `<case>.<ext>` -> case (only the last suffix is the extension)."""
    if entry.is_dir() and not entry.is_symlink():
        return entry.name
    stem, dot, _ = entry.name.rpartition(".")
    return stem if dot else entry.name


@dataclass
class Graded:
    groups: list[str]
    check_ids: set[str]
    records: dict[str, list[dict]]     # corpus entry name -> records whose `file` lies in it
    csv_rows: list[dict]
    batch_records: int
    seconds: float
    variant_seed: int


@pytest.fixture(scope="module")
def graded(tmp_path_factory, reference_cache) -> Graded:
    root = tmp_path_factory.mktemp("corpus")
    submissions, out = root / "submissions", root / "results"
    submissions.mkdir()
    for entry in corpus_entries():
        target = submissions / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target)
    assignment = grader.config.assignment.load(ASSIGNMENT)
    reference_cache.seed(out, ASSIGNMENT)
    result = grader.cli.batch.grade_folder(assignment, submissions, out, workers=2, regrade=True)
    records: dict[str, list[dict]] = {}
    for path in sorted(out.glob("*.json")):           # what the grader wrote, not what it returned
        record = json.loads(path.read_text(encoding="utf-8"))
        records.setdefault(record["file"].split("/")[0], []).append(record)
    with open(out / "grades.csv", newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    return Graded(groups=list(assignment.groups), check_ids={spec.id for spec in assignment.checks}, records=records,
                  csv_rows=rows, batch_records=len(result.records), seconds=result.seconds,
                  variant_seed=result.variant_seed)


@pytest.mark.slow
@pytest.mark.parametrize("case", case_names())
def test_corpus_case(case: str, graded: Graded) -> None:
    expected = tomllib.loads((CORPUS / f"{case}{EXPECTED}").read_text(encoding="utf-8"))

    # The corpus itself: one entry per case, one case per entry, and no entry pytest would collect.
    entries = corpus_entries()
    mine = [e for e in entries if case_of(e) == case]
    assert len(mine) == 1, f"case {case!r} needs exactly one corpus entry beside its {EXPECTED}; found {mine}"
    orphans = sorted(e.name for e in entries if case_of(e) not in set(case_names()))
    assert not orphans, f"corpus entries without an {EXPECTED}: {orphans}"
    collectable = [e.name for e in entries if re.fullmatch(r"test_.*\.py|.*_test\.py", e.name)]
    assert not collectable, f"pytest would import these corpus files as tests: {collectable}"
    shape = shape_problems(case, expected, graded.groups, graded.check_ids)
    assert not shape, "; ".join(shape)

    # Nothing lost: every entry got exactly one record, on disk and in the class CSV.
    lost = [e.name for e in entries if len(graded.records.get(e.name, [])) != 1]
    assert not lost, f"entries without exactly one record: {lost} (records: { {k: len(v) for k, v in graded.records.items()} })"
    assert sorted(graded.records) == sorted(e.name for e in entries)
    assert graded.batch_records == len(entries) == len(graded.csv_rows)

    record = graded.records[mine[0].name][0]
    problems = record_problems(record, expected)
    row = next(r for r in graded.csv_rows if r["submission"] == record["submission"])
    if float(row["total"]) != pytest.approx(record["score"], abs=1e-3):
        problems.append(f"grades.csv total {row['total']} differs from the record's score {record['score']:g}")
    if problems:
        pytest.fail(f"{case} ({expected['why']}):\n  " + "\n  ".join(problems)
                    + f"\n\nWhat the grader produced (variant seed {graded.variant_seed}):\n{summary(record)}", pytrace=False)


def test_every_corpus_case_is_well_formed() -> None:
    """Without grading (what `-m "not slow"` checks of the corpus): one entry per case, well-formed expectations."""
    assignment = grader.config.assignment.load(ASSIGNMENT)
    entries, names = corpus_entries(), case_names()
    problems = [f"corpus entries without an {EXPECTED}: {e.name}" for e in entries if case_of(e) not in set(names)]
    for case in names:
        mine = [e.name for e in entries if case_of(e) == case]
        if len(mine) != 1:
            problems.append(f"case {case!r} needs exactly one corpus entry beside its {EXPECTED}; found {mine}")
        expected = tomllib.loads((CORPUS / f"{case}{EXPECTED}").read_text(encoding="utf-8"))
        problems += shape_problems(case, expected, list(assignment.groups), {spec.id for spec in assignment.checks})
    assert not problems, "\n".join(problems)
