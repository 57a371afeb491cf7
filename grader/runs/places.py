"""Where feedback says something happened in the student's file: a line of a script, or a line of a notebook cell
cited as Jupyter shows the cell (`In [8], line 2`), and for a statement that failed, the line Python's own
traceback names rather than the first line of the statement (a loop, a `with` block, a multi-line call)."""

from __future__ import annotations

from grader.intake.notebook import where
from grader.runs.snapshot import Statement


def failure_place(statement: Statement) -> str:
    """The line that raised, as the traceback's last frame in the student's code names it.

    Inside the statement (a loop body, a block): that line. In a function defined elsewhere and called by the
    statement: where it raised, then the statement that called it ("line 20 (called from line 172)")."""
    error = statement.error or {}
    line = error.get("line")
    if not isinstance(line, int) or line < 1:
        return where(statement.line, statement.cell)
    cell = error.get("cell") if statement.cell is not None else None
    inside = cell == statement.cell and statement.line <= line <= max(statement.end_line, statement.line)
    if inside:
        return where(line, statement.cell)
    return f"{where(line, cell)} (called from {where(statement.line, statement.cell)})"
