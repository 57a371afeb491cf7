"""`grader validate`: after the load-time checks of the configuration, everything `grader build` makes is made in
memory (the starters from the solution's exercise regions, the autograder zip, the student wheel), then the
reference solution is graded as a student submission. It must score full marks: a check that fails it, or a check
or oracle that raises, is a bug the instructor fixes before any student is graded."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from grader.authoring.starter import BuildError, public_code, render
from grader.authoring.student_wheel import build_wheel_bytes
from grader.common.user_cache import user_cache_dir
from grader.config.assignment import Assignment, ConfigError
from grader.grading.grade import grade
from grader.grading.warm_up import warmed_up
from grader.intake.discovery import load_single
from grader.lms.autograder_zip import OtterConfigError, build_zip_bytes
from grader.model.record import Record
from grader.model.verdicts import grader_fault, passed
from grader.runs.jobs import fresh_variant_seed, scenario_seed

TRIAL_WORLDS = 3    # fresh worlds the reference is graded in before a shortfall counts as the assignment's problem


def trial_problems(assignment: Assignment, note: Callable[[str], None] = lambda text: None,
                   cache: Path | None = None) -> tuple[list[str], Record | None]:
    """What keeps the reference solution from full marks (empty when it scores them), and its record."""
    solution = assignment.solution_path
    if not solution.is_file():
        shown = f"assignments/{assignment.id}/assignment.toml"
        missing = (f"{shown}: [assignment] solution = {assignment.config['assignment']['solution']!r}: no such file "
                   f"under {assignment.root}; write the reference solution there or fix the path")
        return [missing], None
    submission = load_single(solution, assignment.submission_filename, assignment.max_submission_bytes)
    rejected: list[int] = []
    for _ in range(TRIAL_WORLDS):   # a world it falls short in may be a rare unsuitable one: try another before failing
        variant_seed = fresh_variant_seed(assignment, frozenset(rejected))
        seeds = {name: scenario_seed(assignment, scenario, variant_seed) for name, scenario in assignment.scenarios.items()}
        with ExitStack() as stack:
            try:   # the reference is graded here itself: no separate judging of the world (batch_seed=None)
                warm = stack.enter_context(warmed_up(assignment, seeds, note, cache, warm_fresh_seeds=False, steps=note,
                                                     public_source=public_code(assignment)))
            except ConfigError as error:
                return [f"measuring the reference solution failed: {error}"], None
            try:
                record = grade(assignment, submission, warm.facts, variant_seed, warm.runner)
            except ConfigError as error:
                return [f"running the reference solution failed: {error}"], None
            except Exception:  # noqa: BLE001 -- the oracle or framework failed on the reference: every student would see it
                failed = ("grading the reference solution raised an error (every student would get 'the grader failed'):\n"
                          + traceback.format_exc(limit=8))
                return [failed], None
        if grader_fault(record) or passed(record["score"], record["max_score"]):
            break
        rejected.append(variant_seed)
        note(f"The reference solution scored {record['score']:g}/{record['max_score']:g} in the world of variant seed "
             f"{variant_seed}; a batch would not use that world. Trying another.")
    problems = []
    if record["status"] != "graded" and not record.get("unscored_checks"):
        problems.append(f"the reference solution was not graded: {'; '.join(record['messages'][:2])}")
    if rejected and not problems and len(rejected) < TRIAL_WORLDS:
        note(f"Note: {len(rejected)} of {len(rejected) + 1} worlds tried were unsuitable for the reference solution; "
             "batches pass such worlds over, but if this recurs, a tolerance is too tight (see the calibration).")
    errors = record.get("check_errors", {})
    for check in record.get("unscored_checks") or record["checks"]:   # a check's own bug: what the others found
        if check["id"] in errors:
            problems.append(f"check {check['id']} raised an error of its own (fix it in checks.py):\n{errors[check['id']]}")
        elif check["score"] < check["max_score"]:
            problems.append(f"check {check['id']} gave the reference solution {check['score']:g}/{check['max_score']:g}: "
                            + check["feedback"].replace("\n", " ")[:600])
    for scenario, reasons in (record.get("grader_faults") or {}).items():
        problems += [f"the {scenario} run failed in the grader's own code: {reason}" for reason in reasons]
    return problems, record


def build_problems(assignment: Assignment) -> list[str]:
    """What would stop `grader build` (a region without its END marker, a template error, an otter option that
    cannot be honoured, a package file missing), found by building every product in memory."""
    if not assignment.solution_path.is_file():
        return []          # trial_problems says so
    steps = [("the starters", lambda: render(assignment)), ("the autograder zip", lambda: build_zip_bytes(assignment)),
             ("the student wheel", lambda: build_wheel_bytes(assignment, user_cache_dir()))]
    problems = []
    for product, make in steps:
        try:
            make()
        except (BuildError, OtterConfigError, ConfigError, OSError, ValueError) as error:
            problems.append(f"`grader build` would fail making {product}: {error}")
    return problems


def trial_grading(assignment: Assignment) -> int:
    """Print OK or every problem; the exit status of `grader validate` (0 ready, 1 not)."""
    print(f"{assignment.id}: configuration valid ({len(assignment.checks)} checks, {assignment.max_score:g} points); "
          f"building in memory and trial grading of {assignment.solution_path.name} ...")
    problems, record = trial_problems(assignment, lambda text: print(f"  {text}", flush=True))
    problems = build_problems(assignment) + problems
    if problems:
        print(f"FAILED: {len(problems)} problem(s) to fix before grading:", file=sys.stderr)
        for problem in problems:
            print(f"- {problem}", file=sys.stderr)
        return 1
    assert record is not None
    print(f"OK: {assignment.id} is ready to grade; the reference solution scores {record['score']:g}/"
          f"{record['max_score']:g} (variant seed {record['variant_seed']}).")
    return 0
