"""Read a student's .ipynb as Python source: code cells in order, IPython-only lines turned into comments.

Parsed as JSON only (nothing in the notebook is executed or unpickled here). Magics (`%time`, `%%capture`)
and shell escapes (`!pip install`) cannot run outside IPython, so they become comments, and the student
is told; each cell is preceded by a `# cell N` comment so line numbers in feedback point somewhere real.
"""

from __future__ import annotations

import json


class NotebookError(Exception):
    pass


def notebook_to_source(text: str) -> tuple[str, list[str]]:
    try:
        notebook = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise NotebookError(f"it is not valid JSON ({error.__class__.__name__})") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("it has no list of cells")
    parts, commented = [], 0
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
        parts.append(f"# cell {number}\n" + "\n".join(lines) + "\n")
    notes = [f"{commented} IPython magic or shell line(s) were not run."] if commented else []
    return "\n".join(parts), notes
