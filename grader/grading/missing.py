"""Why a contract name a check needs has no value, in a sentence that is true of the run it describes.

The reason a name is missing is, in order: the statement that assigns it still holds the starter's `...`, or it
raised; the file stopped at a syntax error (a script) or a notebook cell with a syntax error was skipped, as
Jupyter skips it; the file stopped early (sys.exit, a crash, a limit); or it is simply never assigned at the top
level. Each sentence names the place ("line 12", "In [9], line 5") the student can go to.
"""

from __future__ import annotations

from grader.common.text import clip
from grader.runs.places import failure_place
from grader.runs.snapshot import Snapshot, where


def why_missing(snapshot: Snapshot, name: str) -> str:
    """The reason `name` has no value in this run, to follow "`name` " in a sentence."""
    failed = snapshot.statement_assigning(name)
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


def skipped_cells(problems: list[dict]) -> str:
    """Notebook cells skipped for a syntax error, as Jupyter skips them, and what that costs."""
    first = problems[0]
    more = f" (and {len(problems) - 1} more cell(s) with a syntax error)" if len(problems) > 1 else ""
    return (f"the cell at {where(first['line'], first.get('cell'))} has a syntax error "
            f"({clip(first['message'], 120)}) and did not run{more}, so names it would have defined are missing")
