"""How a result reads to people, defined once for the terminal, the Markdown and the HTML pages."""

from __future__ import annotations

import re
from typing import Literal

from grader.model.record import Record

ISOLATION_PREFIX = "Isolation used: "          # the record message that names the sandbox a run used
LIMIT_ENDINGS = {"killed_wall", "exited_early"}
STOPPED_ENDINGS = ("syntax_error", "sys_exit", "killed_wall", "exited_early")   # no line after the stop ran
# What a grader-fault record says in the instructor's batch, where it is true: the instructor reads the batch's
# report and a re-run grades the file again. A student's own check says FAULT_IN_A_CHECK instead (for_student).
INSTRUCTOR_TOLD = "your instructor has been told and it will be graded again."
INSTRUCTOR_TOLD_CHECK = "Your instructor has been told; it will be graded again."
FAULT_IN_A_CHECK = ("Nobody has been told: run the check again, and if this repeats, show this output to your course "
                    "staff.")
LIMIT_WORDS = re.compile(r"\blimit\b|ran out of memory|was stopped|killed by|only the first and last", re.IGNORECASE)


# Scores are stored rounded to 6 decimals and group totals are sums of them: a full score may fall a hair short.
FULL_SCORE_SLACK = 1e-9

Mark = Literal["pass", "partial", "fail"]


def passed(score: float, max_score: float) -> bool:
    """The one definition of a full score (a check, a group or a submission), used by every output."""
    return score >= max_score - FULL_SCORE_SLACK


def mark(score: float, max_score: float) -> Mark:
    """"pass", "partial" or "fail"."""
    return "pass" if passed(score, max_score) else ("partial" if score > 0 else "fail")


GRADER_ERROR = "grader_error"   # the status a class file gives a record the grader could not grade (its own fault)


def grader_fault(record: Record) -> bool:
    """The grader could not grade this record through its own fault (a run it could not set up, a check that could not
    judge, its own crash): no points, never a score an LMS should take, graded again on the next run."""
    return bool(record.get("grader_error"))


def class_status(record: Record) -> str:
    """The status every class file shows: graded, error (the file itself could not be run), or grader_error."""
    return GRADER_ERROR if grader_fault(record) else str(record["status"])


def limit_notes(record: Record) -> list[str]:
    """Why a submission counts as having hit a limit (empty when it did not)."""
    notes = [m for m in record.get("messages", []) if isinstance(m, str) and not m.startswith(ISOLATION_PREFIX)
             and LIMIT_WORDS.search(m)]
    for scenario, run in (record.get("runs") or {}).items():
        if isinstance(run, dict) and run.get("ending") in LIMIT_ENDINGS and not any(scenario in n for n in notes):
            notes.append(f"The {scenario} run ended with {run['ending']}.")
    capped = record.get("capped")
    if isinstance(capped, list) and capped:   # grading/record_limits.py: texts a run made too long for a record
        notes.append(f"Cut to the record's limits: {', '.join(str(part) for part in capped)}.")
    return notes


UNFINISHED_PREFIX = "Unfinished exercises (still holding `...`)"   # the message grading/grade.py writes


def stopped_early(record: Record) -> bool:
    """Part of the file as written never ran: it stopped before its end (a syntax error, sys.exit, a limit) or a
    notebook cell with a syntax error was skipped. Its run notes explain every later failure, so every report shows
    them before the checks (the record lists the reason first)."""
    baseline = (record.get("runs") or {}).get("baseline")
    stopped = isinstance(baseline, dict) and (baseline.get("ending") in STOPPED_ENDINGS or bool(baseline.get("skipped")))
    return stopped or unfinished(record)


def unfinished(record: Record) -> bool:
    """Exercises of the file still hold the starter's `...`: they explain later failures, so they are read first."""
    return any(isinstance(m, str) and m.startswith(UNFINISHED_PREFIX) for m in record.get("messages", []))


def read_first_heading(record: Record) -> str:
    """The heading of the notes shown before the checks when `stopped_early`."""
    baseline = (record.get("runs") or {}).get("baseline")
    if isinstance(baseline, dict) and baseline.get("ending") in STOPPED_ENDINGS:
        return "Read this first: your file stopped early"
    if isinstance(baseline, dict) and baseline.get("skipped"):
        return "Read this first: part of your notebook did not run"
    return "Read this first: some exercises are still unfinished"


RUN_DESCRIPTION_PREFIX = "About the "        # "About the variant run: ...": what a labelled run changes, said once


def run_descriptions(messages: list[str]) -> tuple[list[str], list[str]]:
    """(the runs described once, shown at the top of a student's page; the other notes)."""
    about = [m for m in messages if isinstance(m, str) and m.startswith(RUN_DESCRIPTION_PREFIX)]
    return about, [m for m in messages if m not in about]


def for_student(text: str) -> str:
    """A record's sentence as a student's own check says it: no instructor hears of a check run on the student's
    machine, so the batch's promise that one was told becomes what the student can do."""
    return text.replace(INSTRUCTOR_TOLD_CHECK, FAULT_IN_A_CHECK).replace(INSTRUCTOR_TOLD, FAULT_IN_A_CHECK)


def student_messages(messages: list[str]) -> list[str]:
    """The record's notes as a student reads them: the sandbox named in a few words (the record and the class
    report keep its whole description)."""
    return [ISOLATION_PREFIX + m[len(ISOLATION_PREFIX):].split(":")[0].rstrip(".") + "."
            if isinstance(m, str) and m.startswith(ISOLATION_PREFIX) else m for m in messages]
