"""Which errors of a half-done file come from its unfinished exercises, said beside each error: the student reads
"this is the TODO's doing", not a new mistake to hunt for in the lesson's own code.

A cause is named only with its evidence: the error was raised inside an exercise still holding `...`, a name such
an exercise assigns was missing, or the `...` placeholder itself reached the failing code (Python names the
`ellipsis` in its message). Anything else names no cause."""

from __future__ import annotations

import re
from collections.abc import Mapping

from grader.intake.regions import RegionLines
from grader.runs.snapshot import Statement

NOT_DEFINED = re.compile(r"name '([^']{1,200})' is not defined")


def unfinished_cause(statement: Statement, unfinished: Mapping[str, object],
                     regions: Mapping[str, list[RegionLines]], bindings: Mapping[str, str]) -> str:
    """A few words naming the unfinished exercise `statement`'s error comes from, with the evidence, else ''.
    `unfinished`: the exercises still holding `...` (by name); `regions`: where each exercise lies; `bindings`:
    [exercise_bindings], the exercise each contract name is assigned in."""
    error = statement.error
    if not unfinished or not error:
        return ""
    raised_at = error.get("line")
    line: int = raised_at if isinstance(raised_at, int) else statement.line
    for name in unfinished:
        if any(cell == statement.cell and begin <= line <= end for cell, begin, end in regions.get(name, [])):
            return f"it was raised inside the exercise {name}"
    message = str(error.get("message") or "")
    missing = NOT_DEFINED.search(message) if error.get("type") in ("NameError", "UnboundLocalError") else None
    if missing and bindings.get(missing.group(1)) in unfinished:
        return f"`{missing.group(1)}` is assigned in the exercise {bindings[missing.group(1)]}"
    if "ellipsis" in message:
        names = list(unfinished)
        which = f"the unfinished exercise {names[0]}" if len(names) == 1 else "an unfinished exercise"
        return f"a `...` placeholder of {which} reached it"
    return ""
