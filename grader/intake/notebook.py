"""Read a student's .ipynb as its code cells, in order, each turned into the Python Jupyter runs.

Parsed as JSON only (nothing in the notebook is executed or unpickled here). Each code cell goes through IPython's
own input transformer (`ipython_cells.py`): magics, `!` shell lines and `obj?` help lines are recognised as the
kernel recognises them, the ones with a Python meaning (`%time x = f()`) run as that Python, the others do not run
and the student is told which. Cells are numbered as Jupyter numbers them when the notebook is run from the top:
`In [1]`, `In [2]`, ... over the code cells that hold code (markdown, raw and empty cells get no number), and the
harness runs each cell under its number, so feedback cites the place the way the student sees it: "In [8], line 2".
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from grader.common.python_ast import ast_parse
from grader.common.text import clean
from grader.intake.ipython_cells import Budget, cell_python

NOT_RUN_LISTED = 5     # IPython-only lines named in the note; beyond, "and K more"


class NotebookError(Exception):
    pass


@dataclass(frozen=True)
class Cell:
    number: int       # Jupyter's execution count when the notebook runs top to bottom: the N of `In [N]`
    source: str       # the cell as Python, with the cell's own line numbers


def parsed_units(source: str, cells: list[Cell] | None = None,
                 worth_parsing: Callable[[str], bool] | None = None) -> Iterator[tuple[int | None, ast.Module | None]]:
    """A submission's code as the file's readers in the grader's process see it: (cell number or None, its parsed
    module, or None where it does not parse), a script as one unit, a notebook's code cells in order. A unit whose
    text `worth_parsing` turns down is left out, never parsed (a reader that can tell from the text alone that a
    unit holds nothing for it spares a large notebook's parse)."""
    for number, text in ([(cell.number, cell.source) for cell in cells] if cells is not None else [(None, source)]):
        if worth_parsing is not None and not worth_parsing(text):
            continue
        try:
            yield number, ast_parse(text)
        except (SyntaxError, ValueError):
            yield number, None


def where(line: int | None, cell: int | None = None) -> str:
    """How feedback cites a place: "line 12" in a script, "In [3], line 2" in a notebook (the cell's `In [N]`)."""
    if line is None or line < 0:
        return f"In [{cell}]" if cell is not None else "an unknown line"
    return f"In [{cell}], line {line}" if cell is not None else f"line {line}"


def notebook_cells(text: str) -> tuple[list[Cell], list[str]]:
    """The code cells of a notebook (JSON text), and notes for the student (IPython-only lines that did not run)."""
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise NotebookError(f"it is not valid JSON ({error.__class__.__name__})") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("it has no list of cells")
    code: list[Cell] = []
    not_run: list[str] = []
    budget = Budget()       # shared by the cells: a notebook of nothing but magics is converted only so far
    for position, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(str(line) for line in source)
        if not isinstance(source, str):
            raise NotebookError(f"cell {position} (counting every cell from the top) has no readable source")
        if not source.strip():
            continue      # Jupyter gives an empty cell no number
        source = clean(source)   # JSON carries lone surrogates ("\ud800"); no file or run could take them
        python = cell_python(source, budget)
        number = len(code) + 1
        code.append(Cell(number, python.source))
        not_run += [f"`{written}` ({where(line, number)})" for line, written in python.not_run]
    return code, _not_run_note(not_run)


def _not_run_note(places: list[str]) -> list[str]:
    if not places:
        return []
    listed = ", ".join(places[:NOT_RUN_LISTED])
    more = f" and {len(places) - NOT_RUN_LISTED} more" if len(places) > NOT_RUN_LISTED else ""
    return [f"{len(places)} IPython-only line(s) did not run when graded (shell commands, help lines and most "
            f"magics have no effect there): {listed}{more}."]


def joined_source(cells: list[Cell]) -> str:
    """All code cells as one text, each after a `# In [N]` line (for scans over the whole submission)."""
    return "\n".join(f"# In [{cell.number}]\n{cell.source}" for cell in cells)


def joined_line_places(cells: list[Cell]) -> list[tuple[int, int]]:
    """For each line of `joined_source(cells)` (0-based), its (cell number, 1-based line in that cell).

    The `# In [N]` header line maps to line 0 of its cell."""
    places: list[tuple[int, int]] = []
    for cell in cells:
        places.append((cell.number, 0))
        places += [(cell.number, number) for number in range(1, cell.source.count("\n") + 2)]
    return places


def notebook_to_source(text: str) -> tuple[str, list[str]]:
    cells, notes = notebook_cells(text)
    return joined_source(cells), notes
