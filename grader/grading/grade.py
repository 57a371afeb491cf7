"""Grade one submission: run every scenario in the sandbox, check against the oracle, assemble the record."""

from __future__ import annotations

import inspect
import signal
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from grader.api.values import json_safe
from grader.common.environment import environment
from grader.common.text import clean_data, clip
from grader.config.assignment import Assignment
from grader.grading.check_budget import run_in_flight
from grader.grading.engine import (
    CheckResult,
    grader_faults,
    reported_faults,
    run_checks,
    scenario_notes,
)
from grader.grading.record_limits import (
    OUTPUT_CHARS,
    bounded_errors,
    bounded_feedback,
    bounded_figure,
    bounded_messages,
    bounded_output,
    capped_texts,
    fit,
    shown_output,
)
from grader.grading.reference_runs import reference_runs
from grader.grading.run_plan import (
    RunPlan,
    held_by_checks,
    held_for_flags,
    held_for_review,
    merged_holds,
    reasons_for_more_runs,
)
from grader.grading.unfinished import unfinished_cause
from grader.intake.discovery import Submission
from grader.intake.introspection import review_flags
from grader.intake.preimport import note as preimport_note
from grader.intake.preimport import settings_before_import
from grader.intake.regions import Exercises
from grader.model.record import CheckRecord, GroupScore, OutputExcerpt, Record, RunSummary, record_to_json
from grader.model.verdicts import INSTRUCTOR_TOLD, ISOLATION_PREFIX, STOPPED_ENDINGS, UNFINISHED_PREFIX
from grader.runs.jobs import Runner, run_scenario, scenario_seed, setup_parameters, variant_seed_for
from grader.runs.places import failure_place
from grader.runs.provenance import Provenance
from grader.runs.snapshot import Snapshot, Statement, where
from grader.sandbox.frames import SUPERSEDED_VALUE_BYTES, run_memory_bound

MEMORY_SIGNS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "RESOURCE_EXHAUSTED", "out of memory")
ERRORS_LISTED = 5       # failed statements named in a run's note; beyond, "and K more"


def grade(assignment: Assignment, submission: Submission, facts: dict, variant_seed: int,
          runner: Runner | None = None, keep_runs: Callable[[dict[str, Snapshot]], None] | None = None) -> Record:
    """`keep_runs`, when given, sees the runs' snapshots (the batch keeps exercise values for the instructor's
    similarity report); nothing it does reaches the record, and a failure in it costs the student nothing."""
    variant_seed = variant_seed_for(assignment, variant_seed)   # a seed asked for by number: a suitable world
    if submission.problem:
        return error_record(assignment, submission, submission.problem, variant_seed)
    seeds = {name: scenario_seed(assignment, scenario, variant_seed) for name, scenario in assignment.scenarios.items()}
    plan = RunPlan.first(assignment)
    snapshots = _run_scenarios(assignment, plan.first_runs, seeds, submission, runner, variant_seed)
    early = _grader_fault_record(assignment, submission, snapshots, variant_seed)
    if early is not None:
        return early
    oracles = {name: build_oracle(assignment, name, seeds[name], facts, variant_seed) for name in snapshots}
    exercises = submission.exercises    # read once at intake: where each region lies, which still hold `...`
    references = reference_runs(assignment, seeds, runner, variant_seed)
    checks = run_checks(assignment, snapshots, oracles, exercises.regions, references, only=plan.alone,
                        unfinished=exercises.unfinished)
    if plan.alone is not None:
        plan.why = reasons_for_more_runs(checks, snapshots[plan.alone])
        if plan.why:   # the other worlds explain what the first could not decide alone: run them, judge as listed
            others = tuple(name for name in seeds if name not in snapshots)
            snapshots.update(_run_scenarios(assignment, others, seeds, submission, runner, variant_seed))
            early = _grader_fault_record(assignment, submission, snapshots, variant_seed)
            if early is not None:
                return early
            oracles.update({name: build_oracle(assignment, name, seeds[name], facts, variant_seed) for name in others})
            checks = run_checks(assignment, snapshots, oracles, exercises.regions, references,
                                unfinished=exercises.unfinished)
    if keep_runs is not None:
        try:
            keep_runs(snapshots)
        except Exception:  # the instructor's extra data is never worth a student's record
            pass
    unjudged = [c for c in checks if c.unjudged]
    if unjudged:   # a check's own bug: the grader cannot judge this file; no points, the instructor fixes the check
        record = grader_fault_record(assignment, submission, f"the grader's check {', '.join(c.id for c in unjudged)} "
                                     "failed on its own (a bug in the grader, not in your work)", variant_seed,
                                     "\n".join(c.grader_error for c in unjudged))
        record["check_errors"] = bounded_errors({c.id: c.grader_error for c in checks if c.grader_error})
        record["unscored_checks"] = [check_record(c) for c in checks]   # the instructor's: what the checks found
        return record
    flags = review_flags(submission.source, submission.cells)   # read from the file, never from the run
    held = merged_holds(merged_holds(held_for_review(checks, snapshots), held_by_checks(checks)),
                        held_for_flags(checks, {spec.id for spec in assignment.checks if spec.method}, flags))
    as_written = snapshots.get("baseline")                  # the file as written, when that run was needed
    baseline = as_written or next(iter(snapshots.values()))   # else the one run, which went through cleanly
    notes = unfinished_message(exercises) + list(submission.notes)   # what is still TODO explains what follows
    if preset := settings_before_import(submission.source, submission.cells):   # read from the file, as written
        notes.append(preimport_note(preset))
    runs = [m for name, snapshot in snapshots.items()
            for m in run_messages(assignment, name, snapshot, as_written, exercises=exercises)]
    # What stopped the file (a syntax error, sys.exit, a limit) or kept a notebook cell from running explains every
    # later failure: the student reads it first. What a run other than the file as written changes is said once.
    first = baseline.ending in STOPPED_ENDINGS or bool(baseline.syntax_errors)
    messages = (runs + notes if first else notes + runs) + scenario_notes(assignment, checks)
    messages += plan.notes(checks)
    messages += rebinding_notes(assignment, baseline, exercises)
    broken = {c.id: c.grader_error for c in checks if c.grader_error}
    isolation = sorted({s.isolation for s in snapshots.values()})
    messages.append(f"{ISOLATION_PREFIX}{', '.join(isolation)}.")
    record = assemble(assignment, submission, "graded", checks, messages, variant_seed,
                      output=_output(baseline), runs={n: run_summary(s) for n, s in snapshots.items()})
    record["explanations"] = {c.id: c.explanation for c in checks if c.explanation}   # instructor only
    record["runs_why"] = plan.record_text(assignment)
    if held:
        record["review_hold"] = held
    if flags:
        record["review_flags"] = flags
    if broken:
        record["check_errors"] = bounded_errors(broken)   # for the instructor: check id -> where it raised, and why it was charged
    if assignment.figure_name:
        figures = {name: json_safe(snapshot.values.get(assignment.figure_name)) for name, snapshot in snapshots.items()}
        record["figures"] = {name: bounded_figure(figure) for name, figure in figures.items()}
        if not_kept := tuple(name for name, figure in figures.items() if record["figures"][name] is not figure):
            record["capped"] = record.get("capped", []) + capped_texts({}, [], False, not_kept)
    if rebound := [name for name, snapshot in snapshots.items() if snapshot.values_not_kept]:
        record["capped"] = record.get("capped", []) + [f"values bound again in the {name} run" for name in rebound]
    fit(cast(dict, record), lambda kept: len(record_to_json(cast(Record, kept)).encode()))   # the last guard
    return record


def _run_scenarios(assignment: Assignment, names: tuple[str, ...], seeds: dict[str, int], submission: Submission,
                   runner: Runner | None, variant_seed: int) -> dict[str, Snapshot]:
    """The named scenarios' runs, side by side (one student's runs share nothing)."""
    if len(names) == 1:
        return {names[0]: _run(assignment, names[0], seeds[names[0]], submission, runner, variant_seed)}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = {name: pool.submit(_run, assignment, name, seeds[name], submission, runner, variant_seed)
                   for name in names}
        return {name: future.result() for name, future in futures.items()}


def _grader_fault_record(assignment: Assignment, submission: Submission, snapshots: dict[str, Snapshot],
                         variant_seed: int) -> Record | None:
    """The record of a file the grader could not judge through its own fault in one of its runs, or None."""
    faults = grader_faults(snapshots)
    if faults:   # a run the sandbox could not set up (twice): nothing of it can be judged, and nothing is excused
        reasons = "; ".join(f"the {name} run: {', '.join(found)}" for name, found in faults.items())
        record = grader_fault_record(assignment, submission, "the grader could not prepare a run of your file",
                                     variant_seed, reasons)
        record["grader_faults"] = faults
        return record
    reported = reported_faults(snapshots)
    if reported:   # the grader's own code raised inside a statement: nothing of the file is judged, nor excused
        reasons = "; ".join(f"the {name} run: {', '.join(found)}" for name, found in reported.items())
        record = grader_fault_record(assignment, submission, "the grader's own code failed while running a statement "
                                     "of your file (not an error in your file)", variant_seed, reasons)
        record["reported_grader_faults"] = {name: bounded_messages(found) for name, found in reported.items()}
        return record
    return None


def _run(assignment: Assignment, scenario: str, seed: int, submission: Submission, runner: Runner | None,
         batch_seed: int):
    """One scenario's run; a run the sandbox could not set up (the grader's failure) is tried once more, fresh.
    Only the snapshot is returned: the run's raw frames (up to the channel's budget) are dropped as soon as they are
    folded, not kept while the other run and the checks go on."""
    def run(chosen: Runner | None) -> Snapshot:
        with run_in_flight(run_memory_bound(assignment.limits)):
            return run_scenario(assignment, assignment.scenarios[scenario], seed, submission.source,
                                submission.run_name, chosen, submission.cells, submission.data, batch_seed)[0]

    snapshot = run(runner)
    if snapshot.setup_error:
        snapshot = run(getattr(runner, "fresh", None))
    return snapshot


def build_oracle(assignment: Assignment, scenario: str, seed: int, facts: dict, batch_seed: int | None = None) -> Any:
    """The assignment's oracle for one scenario: `build(seed, facts, scenario)`, with `parameters=` (what the
    scenario's set-up received) and `batch_seed=` when build takes them (older oracles take two arguments)."""
    build = assignment.oracle.build
    batch_seed = seed if batch_seed is None else batch_seed   # as setup_parameters reads it
    accepted = set(inspect.signature(build).parameters)
    if accepted & {"parameters", "batch_seed"}:
        spec = assignment.scenarios[scenario]
        extra = {"parameters": setup_parameters(assignment, spec, seed, batch_seed), "batch_seed": batch_seed}
        return build(seed, facts, spec, **{k: v for k, v in extra.items() if k in accepted})
    if len(accepted) >= 3:
        return build(seed, facts, assignment.scenarios[scenario])
    return build(seed, facts)


def rebinding_notes(assignment: Assignment, snapshot: Snapshot, exercises: Exercises | None = None) -> list[str]:
    """Say which binding was graded wherever a contract name was bound again after the exercise used it."""
    regions = exercises.regions if exercises is not None else None
    provenance = Provenance(snapshot, assignment.bindings, assignment.exercise_bindings, regions)
    return [note for name in assignment.contract if (note := provenance.rebinding_note(name))]


def unfinished_message(exercises: Exercises) -> list[str]:
    """Name the starter's exercise regions that still hold a `...` placeholder (none for a file without markers)."""
    if not exercises.unfinished:
        return []

    def cite(places: list[tuple[int | None, int]]) -> str:
        if all(cell is None for cell, _ in places):
            return f"line{'s' if len(places) > 1 else ''} {', '.join(str(line) for _, line in places)}"
        return ", ".join(where(line, cell) for cell, line in places)

    listed = ", ".join(f"{name} ({cite(places)})" for name, places in exercises.unfinished.items())
    return [f"{UNFINISHED_PREFIX}: {listed}. Finish them first: an error later in the file may come from a value "
            "they leave undefined."]


def grader_fault_record(assignment: Assignment, submission: Submission, reason: str, variant_seed: int,
                        detail: str) -> Record:
    """The grader could not grade this file through its own fault: an error record with no points (never an excuse
    that keeps them), the reason in plain words, `grader_error` for the instructor; a re-run grades it again, and
    the batch exits non-zero."""
    record = error_record(assignment, submission, f"The grader could not grade this file: {reason}. This is the "
                          f"grader's fault, not yours; {INSTRUCTOR_TOLD}", variant_seed)
    record["grader_error"] = clip(detail, 4000) or reason
    return record


def error_record(assignment: Assignment, submission: Submission, reason: str, variant_seed: int) -> Record:
    checks = [CheckResult(id=spec.id, group=spec.group, score=0.0, max_score=spec.points, visibility=spec.visibility,
                          feedback=f"Not graded: {reason}") for spec in assignment.checks]
    return assemble(assignment, submission, "error", checks, [reason, *submission.notes], variant_seed)


def assemble(assignment: Assignment, submission: Submission, status: str, checks: list[CheckResult],
             messages: list[str], variant_seed: int, output: OutputExcerpt | None = None,
             runs: dict[str, RunSummary] | None = None) -> Record:
    groups: dict[str, GroupScore] = {}
    for group, info in assignment.groups.items():
        members = [c for c in checks if c.group == group]
        groups[group] = {"score": round(sum(c.score for c in members), 6), "max_score": float(info["points"])}
    record: Record = {
        "submission": submission.id,
        "file": submission.relative,
        "assignment": assignment.id,
        "title": assignment.title,
        "status": status,
        "score": round(sum(c.score for c in checks), 6),
        "max_score": assignment.max_score,
        "groups": groups,
        "checks": [check_record(c) for c in checks],
        "messages": bounded_messages(messages),
        "environment": environment(),
        "variant_seed": variant_seed,
        "sha256": submission.sha256,
        "fingerprint": assignment.fingerprint,
    }
    if runs:
        record["runs"] = runs
    if output:
        record["output"] = output
    capped = capped_texts({c.id: c.feedback for c in checks}, messages, bool(output and output["omitted_bytes"]))
    if capped:
        record["capped"] = capped
    return record


def check_record(check: CheckResult) -> CheckRecord:
    return {"id": check.id, "group": check.group, "score": check.score, "max_score": check.max_score,
            "visibility": check.visibility, "feedback": bounded_feedback(check.feedback)}


def run_summary(snapshot: Snapshot) -> RunSummary:
    summary: RunSummary = {
        "seed": snapshot.seed, "ending": snapshot.ending, "seconds": snapshot.seconds,
        "statements": len(snapshot.statements), "failed_statements": len(snapshot.failed_statements),
        "returncode": snapshot.returncode, "output_bytes": snapshot.output_bytes,
        "cpu_seconds": snapshot.cpu_seconds, "max_rss_bytes": snapshot.max_rss_bytes,
        "cpu_wait_allowance_seconds": snapshot.cpu_wait_allowance_seconds}
    skipped = [problem for problem in snapshot.syntax_errors if problem.get("cell") is not None]
    if skipped:   # "completed" with 0 failed statements is true of the cells that ran: say which did not
        summary["skipped"] = [f"{where(p['line'], p.get('cell'))}: {clip(p['message'], 160)}" for p in skipped]
    return summary


def _output(snapshot: Snapshot) -> OutputExcerpt:
    sandbox_kept = len(snapshot.output_head.encode()) + len(snapshot.output_tail.encode())
    head, tail = bounded_output(snapshot.output_head, snapshot.output_tail, snapshot.output_bytes > sandbox_kept)
    kept = len(head.encode()) + len(tail.encode())
    head, tail = shown_output(head, tail)
    return {"head": head, "tail": tail, "bytes": snapshot.output_bytes,
            "omitted_bytes": max(0, snapshot.output_bytes - kept)}


def run_messages(assignment: Assignment, scenario: str, snap: Snapshot, baseline: Snapshot | None = None,
                 grader_failed: bool = False, exercises: Exercises | None = None) -> list[str]:
    """Plain sentences about how a run went: exits, limits, syntax errors, failed statements.

    For a scenario other than baseline, only errors that baseline did not have are listed."""
    run = f"In the {scenario} run"
    limits = assignment.limits
    messages = []
    for problem in snap.syntax_errors[:ERRORS_LISTED] if scenario == "baseline" else []:   # the same file in every run
        if problem.get("cell") is None:
            messages.append(f"Your file has a syntax error at {where(problem['line'])} ({clip(problem['message'], 200)}): "
                            "Python could not read it past that line, so only the statements before it ran and every "
                            "value assigned after it is missing. Fix it first.")
        else:
            messages.append(f"{where(problem['line'], problem.get('cell'))} has a syntax error "
                            f"({clip(problem['message'], 200)}); that cell did not run (the other cells did, as in Jupyter), "
                            "so names it would have defined are missing. Fix it first.")
    if snap.setup_error:
        messages.append(f"{run}, the grader could not prepare the run ({snap.setup_error}).")
    if snap.ending == "sys_exit":
        messages.append(f"{run}, your file called sys.exit({snap.exit_code!r}) at {where(snap.exit_line, snap.exit_cell)}; "
                        "statements after it did not run.")
    elif snap.ending == "killed_wall":
        messages.append(f"{run}, your file hit the {limits.wall_seconds:g} s time limit{_waited(snap)} and was "
                        "stopped; values computed before that were kept.")
    elif snap.ending == "exited_early":
        messages.append(f"{run}, {_early_exit_reason(snap, limits)}; values computed before that were kept.")
    memory_errors = [s for s in snap.failed_statements if s.error and s.error["type"] == "MemoryError"]
    if snap.memory_limit_hit and not memory_errors and snap.ending != "exited_early":
        messages.append(f"{run}, your program asked for more than its {limits.memory_bytes // 2**20} MiB of memory "
                        "(shared memory and scratch files included) and was refused.")
    if memory_errors:
        messages.append(f"{run}, {failure_place(memory_errors[0])} hit the memory limit "
                        f"({limits.memory_bytes // 2**20} MiB) and was stopped.")
    if snap.soft_limit_hit:
        timed_out = [s for s in snap.statements if s.status == "timeout"]
        at = f" at {where(timed_out[0].line, timed_out[0].cell)}" if timed_out else ""
        messages.append(f"{run}, a statement{at} ran past the {limits.soft_seconds:g} s time limit and was interrupted.")
    errors = [s for s in snap.failed_statements if s.status == "error"]
    if errors and scenario != "baseline":
        places = {(b.line, b.cell) for b in baseline.failed_statements} if baseline else set()
        errors = [s for s in errors if (s.line, s.cell) not in places]
    errors = [s for s in errors if not (s.error or {}).get("grader_fault")]
    if errors:
        def cause(statement: Statement) -> str:
            found = exercises and unfinished_cause(statement, exercises.unfinished, exercises.regions,
                                                   assignment.exercise_bindings)
            return f" (from an unfinished exercise: {found})" if found else ""

        listed = "; ".join(f"{failure_place(s)}: {s.raised['type']}: {clip(s.raised['message'], 160)}{cause(s)}"
                           for s in errors[:ERRORS_LISTED])
        more = f"; and {len(errors) - ERRORS_LISTED} more" if len(errors) > ERRORS_LISTED else ""
        messages.append(f"{run}, {len(errors)} statement(s) raised an error and the run went on past them "
                        f"({listed}{more}).")
    if snap.channel_problem:
        messages.append(f"{run}, {snap.channel_problem}.")
    if snap.values_not_kept:
        messages.append(f"{run}, the file bound contract names again and again with large values: "
                        f"{snap.values_not_kept} earlier value(s) beyond the {SUPERSEDED_VALUE_BYTES // 2**20} MiB the "
                        "grader keeps were not kept (a check reading one sees a value too large to keep).")
    if assignment.evidence and (not snap.evidence.installed or snap.evidence.problem) and snap.ending != "setup_failed":
        messages.append(f"{run}, {evidence_note(snap)}")
    if snap.output_unread:
        messages.append(f"{run}, your program printed more than {limits.output_read_bytes // 2**20} MiB; the grader "
                        "read no more of its output, so its next print waited until the time limit.")
    elif snap.output_bytes > min(limits.output_keep_bytes, 2 * OUTPUT_CHARS):
        messages.append(f"{run}, your program printed {snap.output_bytes} bytes; only the first and last "
                        f"{min(limits.output_keep_bytes // 2, OUTPUT_CHARS)} characters are shown.")
    return messages


def evidence_note(snap: Snapshot) -> str:
    """Why the method evidence of a run is incomplete (checks that need it then fall back to the values)."""
    evidence = snap.evidence
    if not evidence.installed:
        return f"the grader could not record how values were computed ({evidence.problem}); values were graded alone."
    return f"recording how values were computed ran into trouble ({evidence.problem}); values were graded alone where needed."


def _waited(snap: Snapshot) -> str:
    """The time added to the wall limit because the machine kept the run waiting for a CPU, when there was any."""
    waited = snap.cpu_wait_allowance_seconds
    return f" (plus {waited:.1f} s it spent waiting for a busy CPU, which does not count)" if waited >= 0.1 else ""


def _early_exit_reason(snap: Snapshot, limits) -> str:
    output = snap.output_tail[-4000:]
    if snap.memory_limit_hit or any(sign in output for sign in MEMORY_SIGNS):
        return f"the process ran out of memory (limit {limits.memory_bytes // 2**20} MiB) and ended"
    code = snap.returncode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if name == "SIGXCPU":
            return f"the process used more than {limits.cpu_seconds} s of CPU and was stopped"
        return f"the process was killed by {name} before finishing"
    if snap.channel_problem:   # the grader stopped reading: how the run ended is unknown, not the file's doing
        return "the grader stopped reading the run at its data limit (said below), so it did not see the run finish"
    return f"the process ended early with exit status {code} (os._exit or a crash) before finishing"


def grade_one(assignment: Assignment, submission: Submission, facts: dict, seed: int,
              runner: Runner | None = None, keep_runs: Callable[[dict[str, Snapshot]], None] | None = None) -> Record:
    """`grade`, but a grader bug still leaves a record for this student (marked as the grader's error). Its text is
    valid whatever the run sent (a lone surrogate a check quoted is U+FFFD), so every writer and printer takes it."""
    try:
        return cast(Record, clean_data(grade(assignment, submission, facts, seed, runner, keep_runs)))
    except Exception:  # a grader bug must still leave a record for this student
        detail = traceback.format_exc(limit=3).strip().splitlines()[-1]
        record = error_record(assignment, submission, f"The grader failed on this submission ({detail}); please report it.", seed)
        record["grader_error"] = traceback.format_exc(limit=12)[-4000:]
        return cast(Record, clean_data(record))
