"""End-to-end corpus, per assignment: every sample submission in tests/assignments/<id>/corpus/ is graded once by
the real grader, as assignment <id> (the folder's name; see case_expectations.project_root for where it lives).

A case is an entry of a corpus folder -- `<case>.py`, `<case>.ipynb`, a folder `<case>/` (Gradescope layout) or any
other file `<case>.<ext>` -- plus `<case>.expected.toml` beside it:

    status = "graded"            # or "error"
    why = "one line: what this case represents"
    held = ["hvp.plain_matches_oracle"]   # optional: exactly the checks held for the instructor's review
    flagged = true               # optional: the file's text reaches into JAX's internals or introspects
    [groups]                     # expected score of every group of the assignment
    runs = 5
    ...
    [checks]                     # optional: exact expected score of individual check ids
    "directional.central_difference" = 0
    [contains]                   # optional: fragments that must appear (case-insensitive)
    feedback = ["forward difference"]   # in the concatenated feedback of all checks
    messages = ["sys.exit"]             # in the concatenated submission-level messages

A module-scoped fixture grades each assignment's corpus once, when its first case asks: it copies every entry
(symlinks stay symlinks) into a temporary folder and runs `grader.cli.batch.grade_folder` over it once, in-process, with two workers; each (assignment, case) is
then one parameter of `test_corpus_case`. Adding a case is adding its files, adding an assignment's corpus is
adding its folder: nothing here names a case or an assignment.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import re
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from case_expectations import (
    EXPECTED,
    case_folders,
    case_names,
    for_jax,
    project_root,
    record_problems,
    shape_problems,
    summary,
)

import grader.cli.batch
import grader.config.assignment

CORPORA = case_folders("corpus")
SKIPPED = {"__pycache__"}


def corpus_entries(corpus: Path) -> list[Path]:
    """Everything in a corpus that is handed to the grader (all but the expectation files)."""
    return sorted(p for p in corpus.iterdir() if not p.name.endswith(EXPECTED) and p.name not in SKIPPED)


def case_of(entry: Path) -> str:
    """`<case>/` -> case, `<case>.<ext>` -> case (only the last suffix is the extension)."""
    if entry.is_dir() and not entry.is_symlink():
        return entry.name
    stem, dot, _ = entry.name.rpartition(".")
    return stem if dot else entry.name


@dataclass
class Graded:
    corpus: Path
    groups: list[str]
    check_ids: set[str]
    records: dict[str, list[dict]]     # corpus entry name -> records whose `file` lies in it
    csv_rows: list[dict]
    batch_records: int
    seconds: float
    variant_seed: int


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> Callable[[str], Graded]:
    """Assignment id -> its graded corpus, graded on first use and kept for the module."""
    return functools.cache(lambda assignment_id: grade_corpus(assignment_id, tmp_path_factory))


def grade_corpus(assignment_id: str, tmp_path_factory: pytest.TempPathFactory) -> Graded:
    corpus = CORPORA[assignment_id]
    root = tmp_path_factory.mktemp(f"corpus-{assignment_id}")
    submissions, out = root / "submissions", root / "results"
    submissions.mkdir()
    for entry in corpus_entries(corpus):
        target = submissions / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target)
    assignment = grader.config.assignment.load(assignment_id, project_root(assignment_id))
    result = grader.cli.batch.grade_folder(assignment, submissions, out, workers=2, regrade=True)
    records: dict[str, list[dict]] = {}
    for path in sorted(out.glob("*.json")):           # what the grader wrote, not what it returned
        record = json.loads(path.read_text(encoding="utf-8"))
        records.setdefault(record["file"].split("/")[0], []).append(record)
    with open(out / "grades.csv", newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    return Graded(corpus=corpus, groups=list(assignment.groups), check_ids={spec.id for spec in assignment.checks}, records=records,
                  csv_rows=rows, batch_records=len(result.records), seconds=result.seconds,
                  variant_seed=result.variant_seed)


CASES = [pytest.param(assignment_id, case, id=f"{assignment_id}/{case}")
         for assignment_id, corpus in CORPORA.items() for case in case_names(corpus)]


def test_every_assignment_with_a_corpus_exists_and_has_cases() -> None:
    assert "performance-05" in CORPORA and len(CORPORA) >= 2, f"corpora found: {sorted(CORPORA)}"
    for assignment_id, corpus in CORPORA.items():
        assert project_root(assignment_id) and case_names(corpus), assignment_id


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id, case", CASES)
def test_corpus_case(assignment_id: str, case: str, batches: Callable[[str], Graded]) -> None:
    graded = batches(assignment_id)
    corpus = graded.corpus
    expected = tomllib.loads((corpus / f"{case}{EXPECTED}").read_text(encoding="utf-8"))

    # The corpus itself: one entry per case, one case per entry, and no entry pytest would collect.
    entries = corpus_entries(corpus)
    mine = [e for e in entries if case_of(e) == case]
    assert len(mine) == 1, f"case {case!r} needs exactly one corpus entry beside its {EXPECTED}; found {mine}"
    names = set(case_names(corpus))       # once: in the condition it listed the folder again for every entry
    orphans = sorted(e.name for e in entries if case_of(e) not in names)
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


@pytest.mark.parametrize("assignment_id", sorted(CORPORA))
def test_every_corpus_case_is_well_formed(assignment_id: str) -> None:
    """Without grading (what `-m "not slow"` checks of the corpus): one entry per case, well-formed expectations."""
    corpus = CORPORA[assignment_id]
    assignment = grader.config.assignment.load(assignment_id, project_root(assignment_id))
    entries, names = corpus_entries(corpus), case_names(corpus)
    known = set(names)
    problems = [f"corpus entries without an {EXPECTED}: {e.name}" for e in entries if case_of(e) not in known]
    for case in names:
        mine = [e.name for e in entries if case_of(e) == case]
        if len(mine) != 1:
            problems.append(f"case {case!r} needs exactly one corpus entry beside its {EXPECTED}; found {mine}")
        expected = tomllib.loads((corpus / f"{case}{EXPECTED}").read_text(encoding="utf-8"))
        problems += shape_problems(case, expected, list(assignment.groups), {spec.id for spec in assignment.checks})
    assert names and not problems, "\n".join(problems)


def test_a_label_per_jax_release_replaces_only_the_scores_it_names_from_that_release_on():
    expected = {"status": "graded", "why": "w", "groups": {"runs": 5, "hvp": 7}, "checks": {"hvp.x": 0},
                "on_jax": {"0.12": {"why": "w", "groups": {"runs": 2}, "checks": {"runs.no_errors": 0}}}}
    assert for_jax(expected, "0.9.2")["groups"] == {"runs": 5, "hvp": 7}
    assert for_jax(expected, "0.11.2")["checks"] == {"hvp.x": 0}
    for version in ("0.12.0", "0.12.0.1", "0.12.1"):
        assert for_jax(expected, version)["groups"] == {"runs": 2, "hvp": 7}
        assert for_jax(expected, version)["checks"] == {"hvp.x": 0, "runs.no_errors": 0}
    assert shape_problems("c", expected, ["runs", "hvp"], {"hvp.x", "runs.no_errors"}) == []
    broken = {**expected, "on_jax": {"0.x": {"groups": {"nope": 1}}}}
    assert len(shape_problems("c", broken, ["runs", "hvp"], {"hvp.x"})) == 1   # no `why`: the rest is not read
