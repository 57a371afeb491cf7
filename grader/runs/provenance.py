"""Which binding of a name is graded: the one the exercise made.

A file may bind a contract name many times: the lesson itself reuses `direction`, and students reuse `x` as a
loop variable, `eps` for machine epsilon before the exercise, or `finite` for a count after it. Two settings of
the assignment decide which binding is the exercise's:

- `[exercise_bindings]` (name -> exercise region): when the student's file still has that region's
  `# BEGIN/END EXERCISE` markers and a top-level statement inside them binds the name, the graded binding is the
  name as the region leaves it (the last such binding; "last number"/"last vector" keep their type filter).
- `[bindings]` (name -> rule), otherwise:

    "last"            the final binding (the default)
    "first"           the first binding (inputs the whole lesson is built on)
    "last number"     the last binding that is a real number, a float before an integer (a later count or a
                      bool is not the exercise's)
    "last vector"     the last binding that is a one-dimensional real array
    "as_of <name>"    the binding live when <name>'s graded binding was made (`eps` as `finite` used it)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.intake.regions import RegionLines
from grader.runs.snapshot import Snapshot, where


@dataclass(frozen=True)
class Binding:
    name: str
    stmt: int              # the statement after which the value was seen (-1: unknown)
    value: Any
    last_stmt: int         # the statement of the name's final binding

    @property
    def is_last(self) -> bool:
        return self.stmt == self.last_stmt


def is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf"


def is_float(value: Any) -> bool:
    return isinstance(value, float) or (isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind == "f")


def is_vector(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 1 and value.size > 1 and value.dtype.kind in "iuf"
    return isinstance(value, list) and len(value) > 1 and all(is_number(item) for item in value)


def _choose(rule: str, history: list[tuple[int, Any]]) -> tuple[int, Any] | None:
    """The entry of `history` a type-filtering or positional rule picks (None when none qualifies)."""
    if not history:
        return None
    if rule == "first":
        return next((entry for entry in history if entry[1] is not None), history[-1])
    if rule == "last number":
        return (next((entry for entry in reversed(history) if is_float(entry[1])), None)
                or next((entry for entry in reversed(history) if is_number(entry[1])), None))
    if rule == "last vector":
        return next((entry for entry in reversed(history) if is_vector(entry[1])), None)
    return history[-1]


class Provenance:
    """Bindings of one run, built once from its snapshot and the student's exercise regions."""

    def __init__(self, snapshot: Snapshot, rules: dict[str, str], exercise_bindings: dict[str, str] | None = None,
                 regions: dict[str, list[RegionLines]] | None = None):
        self.snapshot = snapshot
        self.rules = rules
        self.exercise_bindings = exercise_bindings or {}
        self.regions = regions or {}
        self._bindings: dict[str, Binding | None] = {}

    def binding(self, name: str, _resolving: frozenset[str] = frozenset()) -> Binding | None:
        """The graded binding of `name` (None when it was never bound, or deleted)."""
        if name in self._bindings:
            return self._bindings[name]
        history = list(self.snapshot.history.get(name, []))
        if history and history[-1][1] is None and name not in self.snapshot.values:
            # deleted at some point: `del eps` at the end of a file is tidying up, not undoing the exercise; the
            # graded binding is chosen among the values it had
            history = [entry for entry in history if entry[1] is not None]
        if not history:
            self._bindings[name] = None
            return None
        last = history[-1]
        rule = self.rules.get(name, "last")
        anchor = None
        if rule.startswith("as_of ") and name not in _resolving:
            anchor = self.binding(rule[len("as_of "):], _resolving | {name})
        inside = self._in_region(name, history)
        chosen = None
        if inside and anchor is not None:
            # as the exercise had it when the anchor was made (a rebinding after it, even inside the region, is
            # not graded); the exercise's own binding when it set the name only after the anchor
            earlier = [entry for entry in inside if entry[0] <= anchor.stmt]
            chosen = earlier[-1] if earlier else inside[0]
        elif inside:
            chosen = _choose(rule if rule in ("last number", "last vector") else "last", inside)
        elif anchor is not None:
            earlier = [entry for entry in history if entry[0] <= anchor.stmt]
            chosen = earlier[-1] if earlier else last
        if chosen is None:
            chosen = _choose(rule, history) or last
        binding = Binding(name, chosen[0], chosen[1], last[0])
        self._bindings[name] = binding
        return binding

    def _in_region(self, name: str, history: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        """The bindings of `name` made by statements inside its exercise region, in order."""
        region = self.exercise_bindings.get(name)
        spans = self.regions.get(region, []) if region else []
        if not spans:
            return []
        return [entry for entry in history if entry[1] is not None and self._statement_inside(entry[0], spans)]

    def _statement_inside(self, stmt: int, spans: list[RegionLines]) -> bool:
        statement = self.snapshot.statement(stmt)
        if statement is None:
            return False
        return any(cell == statement.cell and begin < statement.line and statement.end_line < end
                   for cell, begin, end in spans)

    def value_at(self, name: str, stmt: int) -> Any:
        """`name` as it was after statement `stmt` (None when unbound then)."""
        earlier = [value for index, value in self.snapshot.history.get(name, []) if index <= stmt]
        return earlier[-1] if earlier else None

    def bindings_after(self, name: str, stmt: int) -> list[tuple[int, Any]]:
        return [(index, value) for index, value in self.snapshot.history.get(name, []) if index > stmt]

    def rebinding_note(self, name: str) -> str | None:
        """A note when the graded binding is not the final one (so the student knows which value was graded)."""
        binding = self.binding(name)
        if binding is None or binding.is_last or binding.stmt < 0:
            return None
        made, last = self.snapshot.statement(binding.stmt), self.snapshot.statement(binding.last_stmt)
        if made is None or last is None:
            return None
        return (f"`{name}` is bound again at {where(last.line, last.cell)}; the value graded is the one from "
                f"{where(made.line, made.cell)}, the one the exercise used.")
