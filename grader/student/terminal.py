"""`grader check FILE [GROUP]` for students: the visible feedback, or `--json`; exit 0 only at full visible marks.

Exit status: 0 when every visible check passed, 1 otherwise (or when the file could not be graded), 2 when the
check could not start (no such file, group or assignment). The student wheel's `grader` command is `main`
here; the instructor's `grader check` (cli/main.py) calls `check_command` with the checkout's assignment.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

from grader import __version__
from grader.common.safe_text import visible_terminal
from grader.config.assignment import Assignment
from grader.config.bundle import Bundle, read_bundle
from grader.model.verdicts import mark
from grader.sandbox.isolation import WEAK_OPTION_HELP, WeakIsolation, isolation_for_command
from grader.student.machine import prepare_runs
from grader.student.session import CheckError, StudentCheck, locate, run_check


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="your .py or .ipynb file")
    parser.add_argument("group", nargs="?", help="check one group only (faster): its visible checks and the runs they need")
    parser.add_argument("--group", dest="group_option", metavar="GROUP", help="the same as the positional GROUP")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (visible checks only)")
    parser.add_argument("--assignment", help="assignment id (default: the only one installed)")
    parser.add_argument("--allow-weak-isolation", action="store_true", help=WEAK_OPTION_HELP)


def main(argv: list[str] | None = None) -> int:
    """The student wheel's `grader` command: only `check`, printed through visible_terminal."""
    with visible_terminal():
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader", description="Check your work before you submit it.")
    parser.add_argument("--version", action="version", version=f"grader {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_check_arguments(commands.add_parser("check", help="grade your file and show the visible checks' feedback"))
    args, extras = parser.parse_known_args(argv)
    if extras:
        unrecognized(commands.choices.get(args.command, parser), extras)
    try:
        assignment, bundle = locate(args.assignment)
    except CheckError as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    return check_command(assignment, args, bundle)


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> None:
    """Exit 2 with `parser`'s usage (the subcommand's, not the top level's) and, for a mistyped flag, the closest one
    it has ("did you mean --regrade?"): what Python 3.14's suggest_on_error does, which 3.11 lacks."""
    flags = [flag for action in parser._actions for flag in action.option_strings]
    typed = next((word.split("=", 1)[0] for word in extras if word.startswith("-")), None)
    closest = difflib.get_close_matches(typed, flags, n=1, cutoff=0.6) if typed else []
    parser.error(f"unrecognized arguments: {' '.join(extras)}" + (f" (did you mean {closest[0]}?)" if closest else ""))


def check_command(assignment: Assignment, args: argparse.Namespace, bundle: Bundle | None = None) -> int:
    if bundle is None:
        try:
            bundle = read_bundle(assignment.folder)
        except ValueError as error:
            print(f"grader: {error}", file=sys.stderr)
            return 2
    group = args.group_option or args.group
    if args.group and args.group_option and args.group != args.group_option:
        print("grader: give the group once (positional or --group)", file=sys.stderr)
        return 2
    # A student's check (the bundle) runs in the student's own Python, by the strategy this machine allows
    # (student/machine.py). The instructor's check: below namespaces only when asked for by name; either way the
    # line says what a run can reach, before anything runs.
    try:
        if bundle is not None:
            line = prepare_runs()
        else:
            line = isolation_for_command(getattr(args, "allow_weak_isolation", False))
    except WeakIsolation as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    print(line, file=sys.stderr, flush=True)
    notes: list[str] = []
    try:
        result = run_check(args.file, assignment, bundle, group, notes.append)
    except CheckError as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    result.messages = notes + result.messages
    if args.json:
        print(json.dumps(result.as_json(), indent=1))
    else:
        print(report_text(result))
    return 0 if result.full_marks else 1


def report_text(result: StudentCheck) -> str:
    scope = f", group {result.group}" if result.group else ""
    lines = [f"{result.title}: checked {result.file}{scope}", result.ran_on]
    if result.version_note:
        lines.append(f"note: {result.version_note}")
    notes = [f"note: {message}" for message in result.messages]
    if result.stopped_early:      # what stopped the file explains the failures below: read first
        lines += notes
    for check in result.checks:
        lines.append(f"[{mark(check['score'], check['max_score']).upper()}] {check['id']} "
                     f"({check['score']:g}/{check['max_score']:g})")
        lines += [f"       {line}" for line in check["feedback"].splitlines()]
    if not result.stopped_early:
        lines += notes
    verdict = "all visible checks pass" if result.full_marks else "not all visible checks pass"
    lines.append(f"Visible checks: {result.score:g} / {result.max_score:g} ({verdict})")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
