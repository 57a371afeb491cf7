"""Why a contract name a check needs has no value, in a sentence that is true of the run it describes.

The reason a name is missing is, in order: an earlier statement of its notebook cell failed, so it never ran (the
harness stops a cell at its first error, as Jupyter does); the statement that assigns it still holds the starter's
`...`, or it raised; the file stopped at a syntax error (a script) or a notebook cell with a syntax error was skipped, as
Jupyter skips it; the file stopped early (sys.exit, a crash, a limit); or it is simply never assigned at the top
level. Each sentence names the place ("line 12", "In [9], line 5") the student can go to.
"""

from __future__ import annotations

from grader.common.text import clip
from grader.runs.places import failure_place
from grader.runs.snapshot import Snapshot, Statement, where


def why_missing(snapshot: Snapshot, name: str) -> str:
    """The reason `name` has no value in this run, to follow "`name` " in a sentence."""
    failed = snapshot.statement_assigning(name)
    if failed and failed.status == "skipped" and failed.placeholder:
        return (f"is still a TODO: {where(failed.line, failed.cell)} that assigns it still holds a `...` placeholder "
                "(it did not run: an earlier statement of its cell failed, and Jupyter stops a cell there): fill it in")
    if failed and failed.status == "skipped":
        stop = stopping_statement(snapshot, failed)
        cause = (f"{failure_place(stop)} raised {(stop.error or {}).get('type', 'an error')}" if stop is not None
                 else "an earlier statement of its cell failed")
        return (f"is not defined: {cause}, and Jupyter stops a cell at its first error, so the statement at "
                f"{where(failed.line, failed.cell)} that assigns it never ran")
    if failed and failed.error and failed.placeholder:
        return (f"is still a TODO: {where(failed.line, failed.cell)} that assigns it still holds a `...` placeholder "
                f"(running it raised {failed.error['type']}): fill it in")
    if failed and failed.error:
        return (f"is not defined: the statement that assigns it raised {failed.error['type']} at "
                f"{failure_place(failed)}: {clip(failed.error['message'], 200)}")
    syntax = snapshot.syntax_error
    if snapshot.ending == "syntax_error" and syntax:
        return (f"is not defined: your file has a syntax error at {where(syntax['line'])}, and nothing after that "
                "line ran")
    skipped = [problem for problem in snapshot.syntax_errors if problem.get("cell") is not None]
    if skipped and snapshot.ending == "completed":
        return f"is not defined: {skipped_cells(skipped)}"
    if snapshot.ending in ("sys_exit", "exited_early", "killed_wall"):
        return "is not defined: your file stopped before assigning it"
    return "is not defined at the top level of your file"


def stopping_statement(snapshot: Snapshot, skipped: Statement) -> Statement | None:
    """The failed statement of `skipped`'s notebook cell that stopped the cell before it (the harness runs nothing
    more of a cell after its first failure, as Jupyter does)."""
    before = [s for s in snapshot.failed_statements if s.cell == skipped.cell and s.index < skipped.index]
    return before[-1] if before else None


def skipped_cells(problems: list[dict]) -> str:
    """Notebook cells skipped for a syntax error, as Jupyter skips them, and what that costs."""
    first = problems[0]
    more = f" (and {len(problems) - 1} more cell(s) with a syntax error)" if len(problems) > 1 else ""
    return (f"the cell at {where(first['line'], first.get('cell'))} has a syntax error "
            f"({clip(first['message'], 120)}) and did not run{more}, so names it would have defined are missing")
