"""Every check of every lesson, fed hostile values: nothing but an assertion may escape, and no check is left unjudged.

For each assignment with test cases (performance-05, and the tiny lesson of tests/fixtures/tiny_project), the
reference solution is run for real in every scenario; its snapshot is then changed one thing at a time and every
check is graded on it through the engine (`run_checks`, with the unchanged run as the reference's):

- each contract name: replaced outright by each value a run can send after decoding (out-of-range numbers, NaN,
  infinities, empty, nested, huge, misshapen and mistyped arrays, strings, Opaque markers), and, leaf by leaf,
  inside the structure the reference gave it (a dict's field, a list's item), with keys dropped and lists cut;
- each probe's results: every entry replaced by such values, or by an error;
- each field of the method evidence (every field of each kind of evidence record, found by introspection, so
  the fuzz follows the evidence API as it changes): arrays replaced by hostile arrays, numbers by extreme ones, lists emptied;
- the statements: lines, cells and errors that are out of the ordinary.

A check that raises anything but an assertion (or Missing) on any of these shows as a `grader_error`; the test
lists every such (assignment, scenario, check, change). Checks are loaded through each assignment's config, so the
fuzz covers whatever checks an assignment has.

A change to one name's value or one probe's results is graded by the checks that read that entry of that run (or
read the whole table): run once on the unchanged runs with tables that note every read, a check that never read the
entry runs exactly as it did there, where it raised nothing. Every tenth such change is also graded by every check,
and both must find the same problems, so a read the notes missed fails the test instead of hiding a problem.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from case_expectations import case_folders, project_root

import grader.config.assignment
from grader.api import values
from grader.grading.engine import run_checks
from grader.grading.grade import build_oracle
from grader.grading.reference import reference_facts
from grader.runs.decoding import INVALID, UNFINISHED, Opaque
from grader.runs.jobs import run_scenario, scenario_seed, variant_seed_for
from grader.runs.snapshot import Snapshot

ASSIGNMENTS = sorted(set(case_folders("corpus")) | set(case_folders("threats")))
VARIANT_SEED = 31337


def nested(depth: int) -> Any:
    value: Any = 1.0
    for _ in range(depth):
        value = [value]
    return value


# What decode() can hand a check (decoding.py bounds: int64 ints, any float, strings <= 20000, containers <= 1000
# items and 12 levels, arrays of any numeric dtype up to 16 MiB, Opaque markers).
VALUES: list[tuple[str, Any]] = [
    ("None", None), ("True", True), ("zero", 0), ("minus one", -1), ("int64 max", 2**63 - 1), ("int64 min", -(2**63)),
    ("1e308", 1e308), ("-1e308", -1e308), ("inf", math.inf), ("-inf", -math.inf), ("nan", math.nan),
    ("denormal", 5e-324), ("empty string", ""), ("long string", "x" * 20000), ("string nan", "nan"),
    ("out of range", Opaque("out_of_range", "int")), ("invalid", INVALID), ("function", Opaque("callable", "function")),
    ("object", Opaque("other", "Thing", "<Thing>")), ("todo", UNFINISHED),
    ("empty list", []), ("empty tuple", ()), ("list of None", [None]), ("list of empty lists", [[], []]),
    ("nested 12", nested(12)), ("1000 floats", [0.5] * 1000), ("16 nan", [math.nan] * 16), ("16 strings", ["a"] * 16),
    ("16 dicts", [{}] * 16), ("pair", (1.0, 2.0)), ("empty dict", {}), ("odd dict", {"": None, "k": math.nan, "1": [1]}),
    ("0-d nan", np.array(math.nan)), ("0-d int8", np.array(7, dtype=np.int8)), ("empty array", np.zeros(0)),
    ("16x16", np.zeros((16, 16))), ("1x16", np.ones((1, 16))), ("16x1", np.ones((16, 1))), ("17", np.ones(17)),
    ("int8 16", np.arange(16, dtype=np.int8)), ("int8 max", np.full(16, 127, dtype=np.int8)),
    ("uint64 max", np.full(16, 2**64 - 1, dtype=np.uint64)), ("inf 16", np.full(16, math.inf)),
    ("nan 16", np.full(16, math.nan)), ("1e308 16", np.full(16, 1e308)), ("float16 inf", np.full(16, np.inf, np.float16)),
    ("complex 16", np.ones(16, dtype=np.complex128) * 1j), ("bool 16", np.ones(16, dtype=bool)),
    ("1 MiB int8", np.ones(2**20, dtype=np.int8)), ("float128", np.full(16, 1e300, dtype=np.longdouble) ** 2),
    ("fortran 2d", np.asfortranarray(np.ones((4, 4)))),
]
LEAVES = [name for name, _ in VALUES if name in {
    "None", "True", "minus one", "int64 max", "1e308", "inf", "nan", "long string", "out of range", "function",
    "empty list", "nested 12", "16 nan", "empty dict", "0-d nan", "empty array", "16x16", "int8 max",
    "uint64 max", "complex 16", "bool 16"}]
ARRAYS = [(name, value) for name, value in VALUES if isinstance(value, np.ndarray) and value.dtype.kind in "fc"]
MAX_PATHS = 80   # leaf paths tried per name
LONG_SEQUENCE = 4   # longer sequences are tried at their first two items and their last (`leaves`)


# ---- the reference's runs --------------------------------------------------------------------------------

@dataclasses.dataclass
class Lesson:
    assignment: Any
    snapshots: dict[str, Snapshot]
    oracles: dict[str, Any]
    reads: dict[str, set] = dataclasses.field(default_factory=dict)   # check id -> entries it read (`noted_reads`)


EVERY_KEY = "<every key>"                  # a read of a whole table (iterated, sized, compared, copied)
KEYED = ("values", "history", "probes", "probe_history", "probe_errors")   # the snapshot's tables read by key


class NotedReads(dict):
    """One of a snapshot's tables that notes each key read, as (scenario, table, key), and EVERY_KEY for any read of
    the whole (Python's own whole-table reads of a dict subclass go through these methods)."""

    def __init__(self, data: Any = (), log: set | None = None, where: tuple[str, str] = ("", "")):
        super().__init__(data)     # (a copy made as type(table)(items), as dataclasses.asdict makes one, notes nothing)
        self._log, self._where = (set() if log is None else log), where

    def _key(self, key: Any) -> None:
        try:
            self._log.add((*self._where, key))
        except TypeError:      # an unhashable key: no such entry, but note it as a read of the whole
            self._log.add((*self._where, EVERY_KEY))

    def _whole(self) -> None:
        self._log.add((*self._where, EVERY_KEY))

    def __getitem__(self, key):
        self._key(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._key(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._key(key)
        return super().__contains__(key)

    def __iter__(self):
        self._whole()
        return super().__iter__()

    def __len__(self):
        self._whole()
        return super().__len__()

    def __eq__(self, other):
        self._whole()
        return super().__eq__(other)

    def __ne__(self, other):
        self._whole()
        return super().__ne__(other)

    __hash__ = None  # type: ignore[assignment]

    def keys(self):
        self._whole()
        return super().keys()

    def values(self):
        self._whole()
        return super().values()

    def items(self):
        self._whole()
        return super().items()

    def copy(self):
        self._whole()
        return dict(super().items())

    def __or__(self, other):
        self._whole()
        return dict(super().items()) | other

    def __ror__(self, other):
        self._whole()
        return other | dict(super().items())

    def __reduce_ex__(self, protocol):
        self._whole()
        return dict, (dict(super().items()),)


def noted_reads(assignment: Any, snapshots: dict[str, Snapshot], oracles: dict[str, Any]) -> dict[str, set]:
    """Check id -> the (scenario, table, key) entries it read, each check graded alone on the unchanged runs."""
    reads: dict[str, set] = {}
    for spec in assignment.checks:
        log: set = set()
        noted = {name: dataclasses.replace(snapshot, **{table: NotedReads(getattr(snapshot, table), log, (name, table))
                                                        for table in KEYED})
                 for name, snapshot in snapshots.items()}
        alone = run_checks(dataclasses.replace(assignment, checks=[spec]), noted, oracles, reference=snapshots.get)
        # what a change no check reads is graded as: the unchanged runs, where nothing may escape
        assert not any(r.grader_error or r.unjudged for r in alone), f"{spec.id} raised on the unchanged runs"
        reads[spec.id] = log
    return reads


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def lesson(request) -> Lesson:
    assignment_id = request.param
    root = project_root(assignment_id)
    assignment = grader.config.assignment.load(assignment_id, root)
    facts = reference_facts(assignment)   # the session's warm state (tests/conftest.py)
    source = assignment.solution_path.read_text(encoding="utf-8")
    snapshots, oracles = {}, {}
    for name, scenario in assignment.scenarios.items():
        seed = scenario_seed(assignment, scenario, variant_seed_for(assignment, VARIANT_SEED))   # a world a batch uses
        snapshots[name], _ = run_scenario(assignment, scenario, seed, source, assignment.submission_filename)
        oracles[name] = build_oracle(assignment, name, seed, facts)
    return Lesson(assignment, snapshots, oracles, noted_reads(assignment, snapshots, oracles))


def readers(lesson: Lesson, scenario: str, touched: frozenset[tuple[str, Any]]) -> list[Any]:
    """The checks that read an entry `touched` ((table, key) pairs) of the `scenario` run, or a whole table of it."""
    wanted = {(scenario, table, key) for table, key in touched} | {(scenario, table, EVERY_KEY) for table, _ in touched}
    return [spec for spec in lesson.assignment.checks if lesson.reads[spec.id] & wanted]


def grade(lesson: Lesson, scenario: str, changed: Snapshot, checks: list[Any] | None = None) -> list[str]:
    """The checks (all by default) with `changed` in place of the reference's `scenario` run: what escaped other
    than assertions."""
    snapshots = {**lesson.snapshots, scenario: changed}
    assignment = lesson.assignment if checks is None else dataclasses.replace(lesson.assignment, checks=checks)
    results = run_checks(assignment, snapshots, lesson.oracles, reference=lesson.snapshots.get)
    return [f"{result.id}{' (UNJUDGED)' if result.unjudged else ''}: {result.grader_error.splitlines()[0][:300]}"
            for result in results if result.grader_error or result.unjudged]


@pytest.mark.slow
def test_the_reference_passes_every_check_unchanged(lesson):
    results = run_checks(lesson.assignment, lesson.snapshots, lesson.oracles, reference=lesson.snapshots.get)
    assert [(r.id, r.feedback) for r in results if not r.passed] == []


# ---- changes --------------------------------------------------------------------------------------------

def with_value(snapshot: Snapshot, name: str, value: Any) -> Snapshot:
    """The snapshot with every binding of `name` (the graded one whichever rule picks it) replaced by `value`."""
    history = {**snapshot.history, name: [(stmt, value) for stmt, _ in snapshot.history.get(name, [(-1, None)])]}
    return dataclasses.replace(snapshot, values={**snapshot.values, name: value}, history=history)


def leaves(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """Paths to the parts of a reference value, containers included: every field of a dict and every item of a
    short sequence (a pair's two items mean different things); of a longer one (a vector of numbers, a list of
    records, read in a loop), the first two items and the last."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from leaves(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        count = len(value)
        for index in (range(count) if count <= LONG_SEQUENCE else (0, 1, count - 1)):
            yield (*path, index)
            yield from leaves(value[index], (*path, index))


def replaced(value: Any, path: tuple, make: Callable[[Any], Any]) -> Any:
    """`value` with the part at `path` replaced by make(part) (a copy; the reference's value is untouched)."""
    if not path:
        return make(value)
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, make)}
    items = list(value)
    items[head] = replaced(items[head], rest, make)
    return items if isinstance(value, list) else tuple(items)


def structural(value: Any) -> Iterator[tuple[str, Any]]:
    """The reference's own value changed inside: each part replaced by a hostile leaf, keys dropped, lists cut."""
    for path in list(leaves(value))[:MAX_PATHS]:
        for leaf in LEAVES:
            yield f"{list(path)} = {leaf}", replaced(value, path, lambda _, leaf=leaf: dict(VALUES)[leaf])
        parent, last = path[:-1], path[-1]
        if isinstance(last, str):
            yield f"{list(path)} dropped", replaced(value, parent, lambda d, key=last: {k: v for k, v in d.items() if k != key})
        else:
            yield f"{list(parent)} cut at {last}", replaced(value, parent, lambda seq, at=last: type(seq)(list(seq)[:at]))


# A change: (label, the changed run, the (table, key) entries it changed, or None where it changed more than entries)
Change = tuple[str, Snapshot, frozenset[tuple[str, Any]] | None]


def value_changes(snapshot: Snapshot, names: list[str]) -> Iterator[Change]:
    for name in names:
        touched = frozenset({("values", name), ("history", name)})
        for label, value in VALUES:
            yield f"`{name}` = {label}", with_value(snapshot, name, value), touched
        if name in snapshot.values:
            for label, value in structural(snapshot.values[name]):
                yield f"`{name}`{label}", with_value(snapshot, name, value), touched


def probe_changes(snapshot: Snapshot) -> Iterator[Change]:
    error = {"type": "E" * 100, "message": "m" * 2000, "line": None, "cell": None, "traceback": "",
             "grader_fault": False, "through_setup": False}
    for name, entries in snapshot.probe_history.items():
        for label, value in [*VALUES, ("error", None)]:
            history = [(stmt, used, value, error if label == "error" else None) for stmt, used, _, _ in entries]
            yield f"probe {name} = {label}", dataclasses.replace(
                snapshot, probe_history={**snapshot.probe_history, name: history},
                probes={**snapshot.probes, name: value}), frozenset({("probe_history", name), ("probes", name)})


def hostile_fields(item: Any) -> Iterator[tuple[str, dict]]:
    """For one evidence dataclass: {field: hostile value} changes, by the type of what the field holds."""
    for field in dataclasses.fields(item):
        current = getattr(item, field.name)
        if isinstance(current, tuple) and all(isinstance(v, np.ndarray) for v in current) and (
                current or field.name in ("args", "outputs", "tangents", "result")):
            for label, array in ARRAYS:
                yield f"{field.name} = ({label},)", {field.name: (array,)}
            yield f"{field.name} = ()", {field.name: ()}
        elif isinstance(current, np.ndarray):
            for label, array in ARRAYS:
                yield f"{field.name} = {label}", {field.name: array}
        elif isinstance(current, bool):
            yield f"{field.name} flipped", {field.name: not current}
        elif isinstance(current, int):
            for number in (-1, 0, 2**62):
                yield f"{field.name} = {number}", {field.name: number}
        elif isinstance(current, str) or current is None:
            for text in ("", "x" * 120, None):
                yield f"{field.name} = {text!r:.12}", {field.name: text}
        elif isinstance(current, tuple) and current and dataclasses.is_dataclass(current[0]):
            yield f"{field.name} = ()", {field.name: ()}
            for label, change in hostile_fields(current[0]):
                yield f"{field.name}[*].{label}", {field.name: tuple(dataclasses.replace(v, **change) for v in current)}
        elif isinstance(current, tuple) and all(isinstance(v, int) for v in current):
            for value in ((), (-1,), (2**62,)):
                yield f"{field.name} = {value}", {field.name: value}
        elif isinstance(current, tuple) and current and all(isinstance(v, tuple) for v in current):
            yield f"{field.name} = ()", {field.name: ()}
            for number in (-1, 2**62):
                extreme = tuple(tuple(number if isinstance(x, int) else x for x in v) for v in current)
                yield f"{field.name} numbers = {number}", {field.name: extreme}


EVIDENCE_LISTS = ("evaluations", "sightings")     # the snapshot's lists of evidence records


def evidence_changes(snapshot: Snapshot) -> Iterator[Change]:
    for name in EVIDENCE_LISTS:
        records = getattr(snapshot, name)
        if not records:
            continue
        yield f"no {name}", dataclasses.replace(snapshot, **{name: []}), None
        yield f"{name} repeated", dataclasses.replace(snapshot, **{name: records * 20}), None
        for label, change in hostile_fields(records[0]):
            changed = [dataclasses.replace(each, **change) for each in records]
            yield f"every {name[:-1]}'s {label}", dataclasses.replace(snapshot, **{name: changed}), None
    summary = snapshot.evidence
    for label, change in (("not installed", {"installed": False}), ("problem", {"problem": "x" * 300}),
                          ("omitted", {"omitted": 2**62})):
        yield f"evidence {label}", dataclasses.replace(snapshot, evidence=dataclasses.replace(summary, **change)), None


def statement_changes(snapshot: Snapshot) -> Iterator[Change]:
    error = {"type": "", "message": "", "line": -1, "cell": None, "traceback": "", "grader_fault": False,
             "through_setup": False}
    for label, change in (("line -1", {"line": -1}), ("cell 2**62", {"cell": 2**62}), ("index -1", {"index": -1}),
                          ("timeout", {"status": "timeout"}), ("error", {"status": "error", "error": error}),
                          ("evaluations omitted", {"evaluations_omitted": 2**62}),
                          ("sightings omitted", {"sightings_omitted": 2**62})):
        statements = [dataclasses.replace(s, **change) for s in snapshot.statements]
        yield f"every statement's {label}", dataclasses.replace(snapshot, statements=statements), None
    yield "no statements", dataclasses.replace(snapshot, statements=[]), None
    for ending in ("lost", "exited_early", "killed_wall", "sys_exit"):
        yield f"ending {ending}", dataclasses.replace(snapshot, ending=ending, exit_code=2**62, exit_line=-1), None


# ---- the fuzz -----------------------------------------------------------------------------------------------

CROSS_CHECKED = 10   # every tenth change of an entry is graded by every check too (`NotedReads` checked)
KINDS = {
    "values": lambda lesson, snap: value_changes(snap, sorted(set(lesson.assignment.contract) | set(snap.values))),
    "probes": lambda lesson, snap: probe_changes(snap),
    "evidence": lambda lesson, snap: evidence_changes(snap),
    "statements": lambda lesson, snap: statement_changes(snap),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_value_a_run_sends_makes_a_check_raise(lesson, kind):
    problems, tried = [], 0
    for scenario, snapshot in lesson.snapshots.items():
        for label, changed, touched in KINDS[kind](lesson, snapshot):
            tried += 1
            found = grade(lesson, scenario, changed, None if touched is None else readers(lesson, scenario, touched))
            if touched is not None and tried % CROSS_CHECKED == 0:   # the notes of reads, checked against every check
                assert grade(lesson, scenario, changed) == found, f"[{scenario}] {label}: a check not noted as reading it"
            problems += [f"[{scenario}] {label} -> {each}" for each in found]
    if kind == "probes" and not tried:
        assert not lesson.assignment.probes_source.strip(), "the lesson has probes, but its reference runs sent none"
    elif kind == "evidence":
        assert not lesson.assignment.evidence or any(s.evaluations or s.sightings for s in lesson.snapshots.values()), (
            "the lesson records evidence, but its reference runs sent none")
    else:
        assert tried, f"no {kind} to change in {lesson.assignment.id}'s reference runs"
    assert not problems, f"{len(problems)} of {tried} changes made a check raise:\n" + "\n".join(sorted(set(problems))[:60])


# ---- the coercions themselves (no run needed: the quick subset's share of this module) ----------------------

HELPERS: dict[str, Callable[[Any], Any]] = {
    "describe": values.describe,
    "as_number": lambda v: values.as_number(v, "`v`"),
    "as_number (non-finite allowed)": lambda v: values.as_number(v, "`v`", finite=False),
    "as_vector": lambda v: values.as_vector(v, "`v`"),
    "as_vector of 16": lambda v: values.as_vector(v, "`v`", 16),
    "close_vectors": lambda v: values.close_vectors(v, np.ones(16), 1e-5, 1e-6),
    "close_vectors (reversed)": lambda v: values.close_vectors(np.ones(16), v, 1e-5, 1e-6),
    "plain_data": values.plain_data,
    "fmt": values.fmt,
    "json_safe": values.json_safe,
}


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_a_coercion_answers_any_value_with_a_result_or_an_assertion(helper):
    escaped = []
    for label, value in VALUES + [("in a list", [value for _, value in VALUES]), ("in a dict", dict(VALUES))]:
        try:
            result = HELPERS[helper](value)
        except AssertionError as failure:
            assert str(failure).endswith(".") and len(str(failure)) < 400, (label, str(failure))
            continue
        except Exception as error:  # noqa: BLE001 -- what this test is about
            escaped.append(f"{label}: {type(error).__name__}: {error}")
            continue
        if helper.startswith("as_vector"):
            assert result.dtype == np.float64 and result.ndim == 1 and np.all(np.isfinite(result)), label
        if helper == "as_number":
            assert isinstance(result, float) and math.isfinite(result), label
    assert not escaped, "\n".join(escaped)


def test_a_complex_vector_is_not_close_to_its_real_part():
    assert values.close_vectors(np.ones(16) + 1j, np.ones(16), 1e-5, 1e-6) == (False, math.inf)
    assert values.close_vectors([1.0] * 16, np.ones(16), 1e-5, 1e-6)[0]


def test_a_noted_table_notes_each_key_read_and_every_whole_read():
    """What the fuzz's shortcut rests on: reads by key are noted by key, and each way Python reads a whole dict is
    noted as a read of every key."""
    import copy
    import json

    def noted(read: Callable[[dict], Any]) -> set:
        log: set = set()
        read(NotedReads({"a": 1, "b": [2]}, log, ("variant", "values")))
        return {key for _, _, key in log}

    assert noted(lambda d: d["a"]) == noted(lambda d: d.get("a")) == noted(lambda d: "a" in d) == {"a"}
    wholes = [list, len, bool, sorted, dict, copy.deepcopy, copy.copy, json.dumps, lambda d: {**d}, lambda d: d == {},
              lambda d: d.items(), lambda d: d.values(), lambda d: d.copy(), lambda d: d | {}, lambda d: {} | d,
              lambda d: {}.update(d), lambda d: [*d], lambda d: dataclasses.asdict(Snapshot("s", None, values=d))]
    for read in wholes:
        assert EVERY_KEY in noted(read), read
