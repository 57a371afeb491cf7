"""The record's schema lives in one place (grader/model/record.py): docs/reference.md's `<id>.json` row must name exactly
its keys, and a record the grader really writes for the reference solution must have exactly those keys and types."""

from __future__ import annotations

import re
import shutil
import types
import typing
from pathlib import Path

import pytest

import grader.cli.batch
import grader.config.assignment
from grader.model.record import CheckRecord, GroupScore, OutputExcerpt, Record, ReviewHold, RunSummary, record_from_json

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "performance-05"
NESTED = {"groups": GroupScore, "checks": CheckRecord, "runs": RunSummary, "output": OutputExcerpt,
          "review_hold": ReviewHold}


def readme_keys() -> tuple[set[str], dict[str, set[str]]]:
    """(top-level keys, key -> the keys named in the parentheses after it) from the README's `<id>.json` row."""
    row = next(line for line in (ROOT / "docs/reference.md").read_text().splitlines() if line.startswith("| `<id>.json` |"))
    described = row.split("|")[2].split("): ", 1)[1]     # after "the record (its types: ...): "
    top: set[str] = set()
    inner: dict[str, set[str]] = {}
    depth, last = 0, None
    for token in re.finditer(r"`([a-z_0-9]+)`|\(|\)", described):
        if token.group(0) == "(":
            depth += 1
        elif token.group(0) == ")":
            depth -= 1
        elif depth == 0:
            last = token.group(1)
            top.add(last)
        elif last is not None:
            inner.setdefault(last, set()).add(token.group(1))
    return top, inner


def test_readme_names_exactly_the_record_keys():
    top, inner = readme_keys()
    assert top == set(Record.__annotations__), f"README only: {top - set(Record.__annotations__)}; " \
                                               f"types only: {set(Record.__annotations__) - top}"
    assert set(inner) == set(NESTED), f"the README details {sorted(inner)}; the types nest {sorted(NESTED)}"
    for key, kind in NESTED.items():
        assert inner[key] == set(kind.__annotations__), f"`{key}`: README {sorted(inner[key])}, " \
                                                         f"{kind.__name__} {sorted(kind.__annotations__)}"


def problems(value, kind, where: str) -> list[str]:
    """How a JSON value differs from a type of record.py (TypedDicts, dict/list of them, unions, scalars)."""
    if kind is typing.Any:
        return []
    if typing.is_typeddict(kind):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        hints = typing.get_type_hints(kind)
        found = [f"{where}: missing key {key!r}" for key in kind.__required_keys__ if key not in value]
        found += [f"{where}: unexpected key {key!r}" for key in value if key not in hints]
        for key, hint in hints.items():
            if key in value:
                found += problems(value[key], hint, f"{where}.{key}")
        return found
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):
        options = [problems(value, arg, where) for arg in args]
        return [] if any(not option for option in options) else min(options, key=len)
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        return [p for k, v in value.items() for p in problems(k, args[0], where) + problems(v, args[1], f"{where}[{k}]")]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [p for i, v in enumerate(value) for p in problems(v, args[0], f"{where}[{i}]")]
    if kind is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)   # JSON writes 3.0 as 3.0, but 3 is fine
    else:
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    return [] if ok else [f"{where}: {value!r} is not {kind.__name__}"]


def test_problems_finds_wrong_missing_and_extra_keys():
    good = {"score": 1.0, "max_score": 2}
    assert problems(good, GroupScore, "g") == []
    assert problems({"score": "1"}, GroupScore, "g") == ["g: missing key 'max_score'", "g.score: '1' is not float"]
    assert problems({**good, "extra": 1}, GroupScore, "g") == ["g: unexpected key 'extra'"]


@pytest.fixture(scope="module")
def reference_records(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("schema")
    submissions, out = root / "submissions", root / "results"
    submissions.mkdir()
    assignment = grader.config.assignment.load(ASSIGNMENT)
    shutil.copy2(ROOT / "solutions" / f"{ASSIGNMENT}.py", submissions / "reference.py")
    (submissions / "empty.py").write_text("")                     # nothing to grade
    (submissions / "broken.ipynb").write_text("{not a notebook")   # an error record
    grader.cli.batch.grade_folder(assignment, submissions, out, workers=2, regrade=True)
    return [record_from_json(path.read_text()) for path in sorted(out.glob("*.json"))]   # as written on disk


@pytest.mark.slow
def test_records_written_for_real_submissions_match_the_types(reference_records):
    by_file = {record["file"]: record for record in reference_records}
    assert set(by_file) == {"reference.py", "empty.py", "broken.ipynb"}
    reference = by_file["reference.py"]
    assert reference["status"] == "graded" and reference["score"] == reference["max_score"]
    assert {"runs", "output"} <= set(reference), "a graded record says how its runs went"
    assert by_file["broken.ipynb"]["status"] == "error"
    for record in reference_records:
        assert problems(record, Record, record["file"]) == []
