"""Checks that ask how a value was computed read evidence the harness records only when assignment.toml has an
[evidence] table; without one every such question silently gets nothing. Found here, at load, by reading
checks.py for the questions (`run.evaluations`, `run.sightings`, `run.evidence_gaps`: docs/writing-checks.md)."""

from __future__ import annotations

import ast
from pathlib import Path

from grader.common.python_ast import ast_parse

EVIDENCE_QUESTIONS = ("evaluations", "sightings", "evidence_gaps")   # RunView methods that read the recorded evidence


def evidence_problems(config: dict, folder: Path, shown: Path) -> list[str]:
    """A check that asks how a value was computed reads evidence the harness records only when [evidence] is set:
    without it every such question silently gets nothing, so say so here."""
    if config.get("evidence"):
        return []
    try:
        tree = ast_parse((folder / "checks.py").read_text())
    except (OSError, SyntaxError):
        return []          # reported where checks.py is loaded
    asked = sorted({(node.lineno, node.attr) for node in ast.walk(tree)
                    if isinstance(node, ast.Attribute) and node.attr in EVIDENCE_QUESTIONS})
    if not asked:
        return []
    line, name = asked[0]
    return [f"{shown / 'checks.py'}: line {line} asks run.{name}(...), but {shown / 'assignment.toml'} has no [evidence] "
            "table (or an empty one), so nothing is ever recorded and such a check sees nothing; add [evidence] with its "
            "bounds, e.g. max_evaluations = 4000 (see docs/writing-checks.md)"]
