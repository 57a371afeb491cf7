"""Read a student's .ipynb as its code cells, in order, with IPython-only lines turned into comments.

Parsed as JSON only (nothing in the notebook is executed or unpickled here). Magics (`%time`, `%%capture`)
and shell escapes (`!pip install`) cannot run outside IPython, so they become comments, and the student
is told. Cells are numbered by their position in the notebook (markdown cells count), the way a student
finds them, and the harness runs each cell under that number so feedback cites "cell 5, line 2".
"""

from __future__ import annotations

import json
from dataclasses import dataclass


class NotebookError(Exception):
    pass


@dataclass(frozen=True)
class Cell:
    number: int       # 1-based position among all the notebook's cells
    source: str


def notebook_cells(text: str) -> tuple[list[Cell], list[str]]:
    """The code cells of a notebook (JSON text), and notes for the student (magics that were not run)."""
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise NotebookError(f"it is not valid JSON ({error.__class__.__name__})") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("it has no list of cells")
    code, commented = [], 0
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(str(line) for line in source)
        if not isinstance(source, str):
            raise NotebookError(f"cell {number} has no readable source")
        lines = []
        for line in source.splitlines():
            if line.lstrip().startswith(("%", "!")):
                lines.append("# (IPython only, not run) " + line)
                commented += 1
            else:
                lines.append(line)
        code.append(Cell(number, "\n".join(lines) + "\n"))
    notes = [f"{commented} IPython magic or shell line(s) were not run."] if commented else []
    return code, notes


def joined_source(cells: list[Cell]) -> str:
    """All code cells as one text, each after a `# cell N` line (for scans over the whole submission)."""
    return "\n".join(f"# cell {cell.number}\n{cell.source}" for cell in cells)


def joined_line_places(cells: list[Cell]) -> list[tuple[int, int]]:
    """For each line of `joined_source(cells)` (0-based), its (cell number, 1-based line in that cell).

    The `# cell N` header line maps to line 0 of its cell."""
    places: list[tuple[int, int]] = []
    for cell in cells:
        places.append((cell.number, 0))
        places += [(cell.number, number) for number in range(1, cell.source.count("\n") + 2)]
    return places


def notebook_to_source(text: str) -> tuple[str, list[str]]:
    cells, notes = notebook_cells(text)
    return joined_source(cells), notes
