"""Checks every lesson has, so no lesson copies them: did the file run, and did it run to its end.

An assignment names one in `[[checks]] function = "builtin:<name>"` (see grader.config.assignment); a lesson's
checks.py may also import one and wrap it. They read only how the run went (`run.snapshot`), never a value, so
they need no oracle and no settings. Their signature is every check's: `check(run, oracle, settings)`.
"""

from __future__ import annotations

from typing import Any

from grader.common.text import clip
from grader.runs.places import failure_place
from grader.runs.snapshot import where

PREFIX = "builtin:"

# How a run that did not complete ended, in words a student can act on (`{where}`: the line of sys.exit).
RUN_OUTCOMES = {
    "sys_exit": "your file called sys.exit at {where}; code after it never ran",
    "syntax_error": "your file stopped at a syntax error",
    "exited_early": "the process ended without finishing (os._exit, a crash or a memory limit)",
    "killed_wall": "the run hit the wall-clock limit and was stopped",
    "setup_failed": "the grader could not prepare the run",
    "lost": "the run ended without reporting",
}


def no_statement_failed(run: Any, oracle: Any, settings: Any) -> str:
    """Every top-level statement ran without raising (the first failure is named, with its line)."""
    failures = run.failed_statements
    snap = run.snapshot
    if snap.ending in ("killed_wall", "exited_early"):
        # "after the last statement it reported", never "your statement": what ran then may be a statement whose
        # record never came, or the file's code run again by the grader's probes; the replays after the file's end
        # are never the file's (a run killed there ends as the file said it did: sandbox/file_end.py)
        after = f" after the last statement it reported ({run.where(snap.statements[-1].index)})" if snap.statements else ""
        cause = ("was killed at the time limit" if snap.ending == "killed_wall"
                 else "ended (a crash, os._exit or a limit)")
        raise AssertionError(f"The run{after} {cause}: what ran then never finished.")
    syntax = snap.syntax_error
    if syntax:
        rest = ("that cell did not run" if syntax.get("cell") is not None else "the code after it did not run")
        raise AssertionError(f"Your file has a syntax error at {_place(syntax)} ({clip(syntax['message'], 200)}); {rest}.")
    if failures:
        first = failures[0]
        kind = ("ran out of time" if first.status == "timeout"
                else f"raised {first.raised['type']}: {clip(first.raised['message'], 300)}")
        more = f" ({len(failures) - 1} more statement(s) failed after it)" if len(failures) > 1 else ""
        cause = getattr(run, "unfinished_cause", lambda statement: "")(first)
        if cause:
            raise AssertionError(f"The statement at {failure_place(first)} {kind}{more}. It comes from an unfinished "
                                 f"exercise ({cause}): finish that exercise first.")
        raise AssertionError(f"The statement at {failure_place(first)} {kind}{more}. Read the traceback in your output "
                             "and fix the first error first.")
    return "Every top-level statement ran without an error."


def ran_to_the_end(run: Any, oracle: Any, settings: Any) -> str:
    """The run completed: no syntax error, no sys.exit or crash, nothing interrupted at the soft time limit."""
    snap = run.snapshot
    if snap.syntax_error and snap.syntax_error.get("cell") is not None:
        raise AssertionError(f"{_place(snap.syntax_error)} has a syntax error, so that cell never ran.")
    if snap.syntax_error:
        raise AssertionError(f"Your file stops at a syntax error at {_place(snap.syntax_error)}; the rest never ran.")
    if not run.completed:
        place = _place({"line": snap.exit_line, "cell": snap.exit_cell})
        raise AssertionError(RUN_OUTCOMES.get(snap.ending, snap.ending).format(where=place).capitalize() + ".")
    if snap.soft_limit_hit:
        raise AssertionError("Part of your file ran past the time limit and was interrupted; look for a loop that never ends.")
    return "The file ran to its end."


BUILTIN_CHECKS = {"no_statement_failed": no_statement_failed, "ran_to_the_end": ran_to_the_end}


def _place(problem: dict) -> str:
    return where(problem.get("line"), problem.get("cell"))
