"""The types store, code_match and value_match share: here, so store and code_match need not import each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.similarity.tokens import Unit


@dataclass(frozen=True)
class Chunk:
    """A whole .py file (cell None) or one notebook code cell (its number among all the notebook's cells)."""
    cell: int | None
    source: str


@dataclass
class Document:
    id: str
    file: str
    chunks: list[Chunk]
    values: dict[str, Any] | None = None         # exercise values of the baseline run (the graded binding)
    failed: frozenset[str] = frozenset()         # checks below full marks
    judged: frozenset[str] = frozenset()         # checks the record holds (a value judged by none is not "wrong")
    term: str = ""                               # "" for this batch, else the earlier term's label
    sha256: str = ""
    units: list[Unit] | None = None              # the statement units kept in its sidecar (None: tokenise chunks)

    @property
    def label(self) -> str:
        return f"{self.term}/{self.id}" if self.term else self.id
