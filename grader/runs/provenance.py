"""Which binding of a name is graded, and which statements produced it.

A file may bind a contract name many times: the lesson itself reuses `direction`, and students reuse `x` as a
loop variable or `finite` for `np.isfinite(...)` after the exercise. The assignment's `[bindings]` table says
which binding the exercise used:

    "last"            the final binding (the default)
    "first"           the first binding (inputs the whole lesson is built on)
    "last number"     the last binding that is a real number (a later bool or array is not the exercise's)
    "last vector"     the last binding that is a one-dimensional real array
    "as_of <name>"    the binding live when <name>'s graded binding was made (`eps` as `finite` used it)

`producers` follows a binding back through the statements it read: the statement that made it, the last
statement before it that bound each name it reads, and the statements in between that changed that name in
place (`vals.append(...)`). Method evidence is read from the calls those statements made. The walk is bounded
and uses per-name indexes, so its cost is linear in the number of statements.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.runs.snapshot import Opaque, Snapshot, where

MAX_PRODUCERS = 64


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


def is_vector(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 1 and value.size > 1 and value.dtype.kind in "iuf"
    return isinstance(value, list) and len(value) > 1 and all(is_number(item) for item in value)


class Provenance:
    """Bindings and producers of one run, built once from its snapshot."""

    def __init__(self, snapshot: Snapshot, rules: dict[str, str]):
        self.snapshot = snapshot
        self.rules = rules
        self._bindings: dict[str, Binding | None] = {}
        self._producers: dict[int, list[int]] = {}
        self._assigned: dict[str, list[int]] = {}
        self._mutated: dict[str, list[int]] = {}
        for statement in snapshot.statements:
            for name in statement.assigns:
                self._assigned.setdefault(name, []).append(statement.index)
            for name in statement.mutates:
                self._mutated.setdefault(name, []).append(statement.index)

    # ---- bindings -----------------------------------------------------------------------------------------

    def binding(self, name: str, _resolving: frozenset[str] = frozenset()) -> Binding | None:
        """The graded binding of `name` (None when it was never bound, or deleted)."""
        if name in self._bindings:
            return self._bindings[name]
        history = [(index, value) for index, value in self.snapshot.history.get(name, [])]
        if not history or (history[-1][1] is None and name not in self.snapshot.values):
            self._bindings[name] = None
            return None
        last = history[-1]
        rule = self.rules.get(name, "last")
        chosen = last
        if rule == "first":
            chosen = next((entry for entry in history if entry[1] is not None), last)
        elif rule == "last number":
            chosen = next((entry for entry in reversed(history) if is_number(entry[1])), last)
        elif rule == "last vector":
            chosen = next((entry for entry in reversed(history) if is_vector(entry[1])), last)
        elif rule.startswith("as_of ") and name not in _resolving:
            anchor = self.binding(rule[len("as_of "):], _resolving | {name})
            if anchor is not None:
                earlier = [entry for entry in history if entry[0] <= anchor.stmt]
                chosen = earlier[-1] if earlier and earlier[-1][1] is not None else last
        binding = Binding(name, chosen[0], chosen[1], last[0])
        self._bindings[name] = binding
        return binding

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

    # ---- producers ----------------------------------------------------------------------------------------

    def producers(self, stmt: int, limit: int = MAX_PRODUCERS) -> list[int]:
        """Statement `stmt` and, transitively, the statements that bound or changed the names it read."""
        if stmt not in self._producers:
            self._producers[stmt] = self._walk(stmt, limit)
        return self._producers[stmt]

    def _walk(self, stmt: int, limit: int) -> list[int]:
        found: list[int] = []
        queue = [stmt]
        seen = set()
        while queue and len(found) < limit:
            index = queue.pop(0)
            if index in seen or index < 0:
                continue
            seen.add(index)
            found.append(index)
            statement = self.snapshot.statement(index)
            if statement is None:
                continue
            for name in statement.reads:
                bound = self._before(self._assigned.get(name, []), index)
                if bound is not None:
                    queue.append(bound)
                changed = self._mutated.get(name, [])
                start = bisect.bisect_right(changed, bound if bound is not None else -1)
                end = bisect.bisect_left(changed, index)
                queue.extend(changed[start:end][-8:])
        return sorted(found)

    @staticmethod
    def _before(indices: list[int], index: int) -> int | None:
        position = bisect.bisect_left(indices, index)
        return indices[position - 1] if position else None

    def evidence_complete(self, name: str) -> bool:
        """Every statement that produced `name` had all its calls recorded, and the recorder worked."""
        binding = self.binding(name)
        if binding is None or not self.snapshot.evidence.installed or self.snapshot.evidence.problem:
            return False
        for index in self.producers(binding.stmt):
            statement = self.snapshot.statement(index)
            if statement is not None and statement.calls_omitted:
                return False
        return True

    def calls_for(self, name: str):
        """The method evidence of `name`'s graded binding: calls made by the statements that produced it."""
        binding = self.binding(name)
        if binding is None or binding.stmt < 0 or isinstance(binding.value, Opaque):
            return []
        statements = set(self.producers(binding.stmt))
        return [call for call in self.snapshot.calls if call.stmt in statements]
