"""Run an assignment's checks on a submission's snapshots and turn each into a scored CheckResult.

A check function reads like a pytest test: `def check(run, oracle, settings)`, plain `assert` with a
message, and it passes by returning (optionally a short note). It may return `Partial(fraction, note)`.
It runs once per scenario it lists; its score is the lowest over them, so a hard-coded number that is
right for the lesson's seed still fails. A name the check needs that is missing or still a TODO costs
that check alone, and the feedback names it.

A check that raises anything but an assertion is asked the same question on the reference solution's run of the
same scenario (same seed, same oracle). Only when it raises the same exception at the same place there is it a
bug in the check's own logic: the check could not judge this submission (`CheckResult.unjudged`), so the record is
the grader's fault (grading/grade.py makes it an error record with no points, graded again on the next run) and
the traceback goes to the instructor. Otherwise the student's values led the check there, and no value a run sends
may earn anything: the check fails with a plain sentence, and the instructor still gets the traceback
(`CheckResult.grader_error`, the record's `check_errors`) to judge whether the check should read such values.
Where the reference's run is not at hand (a student bundle ships no solution) the same holds.

Each call of a check runs under a budget of CPU time and memory growth (`check_budget.py`, [limits]
check_cpu_seconds and check_memory_bytes), one record's checks at a time. A check that overruns it, or runs out
of memory, on a record's values fails for that record with a sentence saying so; it is never excused.
"""

from __future__ import annotations

import math
import numbers
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grader.api.comparisons import recording
from grader.api.verdict import Undecidable
from grader.common.text import clip
from grader.config.assignment import Assignment, CheckSpec, Scenario
from grader.grading.check_budget import RECORD_LOCK, Budget
from grader.grading.explanations import read_values, recording_settings, scenario_explanation
from grader.grading.faults import errors_only_in, grader_faults, reported_faults  # noqa: F401 -- imported from here too
from grader.grading.run_view import RunView, replay_raised, replay_view
from grader.intake.regions import RegionLines, region_lines
from grader.model.limits import Limits
from grader.model.verdicts import INSTRUCTOR_TOLD_CHECK, RUN_DESCRIPTION_PREFIX, passed
from grader.runs.places import failure_place
from grader.runs.snapshot import Missing, Snapshot


@dataclass
class Partial:
    fraction: float
    note: str


@dataclass
class CheckResult:
    id: str
    group: str
    score: float
    max_score: float
    visibility: str
    feedback: str
    grader_error: str = ""     # for the instructor only: tracebacks of the check raising something other than an assertion
    unjudged: bool = False     # ...where that was a bug of the check's own (it raised alike on the reference's run):
                               # the grader could not judge this submission, so its record is the grader's fault
    explanation: dict[str, Any] = field(default_factory=dict)   # scenario -> what it compared (instructor only)
    fractions: dict[str, float] = field(default_factory=dict)   # scenario -> the fraction it gave there
    undecided: bool = False    # judged in one run alone, it could not be decided there (its replay did not run)
    held: str = ""             # why no run could decide it (a check raised Undecidable): held for the instructor

    @property
    def passed(self) -> bool:
        return passed(self.score, self.max_score)


class CheckBug(Exception):
    """A check function raised something other than an assertion. Whether that is a bug in the check or the
    student's values leading it astray is for `run_checks` to decide (see the module's docstring)."""

    def __init__(self, summary: str, trace: str, kind: str = "", signature: tuple = ()):
        super().__init__(summary)
        self.summary = summary
        self.trace = trace
        self.kind = kind               # the exception's type name
        self.signature = signature     # its type and the frames it passed through: "the same exception, same place"


# scenario -> the reference solution's Snapshot of that scenario with the student's seed (None: not available)
ReferenceRuns = Callable[[str], Snapshot | None]


def _failure_text(text: str) -> str:
    """The check's own message. pytest's rewritten comparison is shown only for an assert without a message:
    a check's message already says, in words, what was compared (and the tolerances are not the student's)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    message = [line for line in lines if not line.startswith(("assert ", " +", "+", "where ", " where"))]
    if message:
        return "\n".join(message[:8])
    compared = next((line for line in lines if line.startswith("assert ")), None)
    return f"The check failed ({compared[len('assert '):][:200]})." if compared else "The check failed."


def evaluate(function, spec: CheckSpec, view: RunView, oracle: Any, settings: Any) -> tuple[float, str]:
    """One check on one scenario: (fraction of its points, feedback). Raises CheckBug when the check raises
    anything but an assertion (or Missing), reading the names it needs included.

    Student values that a check cannot use fail through assertions (grader.api.values raises AssertionError with
    a sentence for the student); anything else is judged by `run_checks`."""
    missing: list[Missing] = []
    settings, view.settings_read = recording_settings(settings)   # the tolerances it compares with, for `grader explain`
    view.undecidable = ""
    try:
        missing = _missing(spec, view)
        if missing and not spec.function.startswith(BUILTIN):
            return 0.0, _missing_text(missing)
        outcome = function(view, oracle, settings)   # a runs check names how the run went before any missing name
        if missing:
            return 0.0, _missing_text(missing)
    except Missing as error:
        return 0.0, f"{error} (needed by this check)."
    except Undecidable as why:   # no points from this run; held for review where no other run decides (_combine)
        view.undecidable = _failure_text(str(why)) or "This run's values cannot decide this check."
        return 0.0, view.undecidable
    except AssertionError as failure:
        text = _failure_text(str(failure)) or "The check failed."
        also = f" Also missing or unfinished: {', '.join(f'`{m.name}`' for m in missing)}." if missing else ""
        return 0.0, text + also
    except Exception as error:  # the check's own bug, or the student's values leading it astray: run_checks decides
        frames = tuple((frame.filename, frame.lineno) for frame in traceback.extract_tb(error.__traceback__)[1:])
        trace = "".join(traceback.format_exception(error))[-4000:]
        raise CheckBug(f"{spec.function} raised {type(error).__name__}: {str(error)[:300]}", trace,
                       type(error).__name__, (type(error).__name__, frames)) from error
    if isinstance(outcome, Partial):
        fraction = float(outcome.fraction) if isinstance(outcome.fraction, numbers.Real) else 0.0
        return (max(0.0, min(1.0, fraction)) if math.isfinite(fraction) else 0.0), str(outcome.note)
    return 1.0, outcome if isinstance(outcome, str) else "Passed."


BUILTIN = "builtin:"    # the framework's runs checks: what stopped the run comes before the names it left missing


def _missing_text(missing: list[Missing]) -> str:
    others = f" Also missing or unfinished: {', '.join(f'`{m.name}`' for m in missing[1:])}." if len(missing) > 1 else ""
    return f"{missing[0]} (needed by this check).{others}"


def _missing(spec: CheckSpec, view: RunView) -> list[Missing]:
    missing = []
    for name in spec.needs:
        try:
            view.value(name)
        except Missing as error:
            missing.append(error)
    return missing


def solution_regions(assignment: Assignment) -> dict[str, list[RegionLines]] | None:
    """The reference solution's exercise regions (its runs are read as the students' are)."""
    try:
        return region_lines(assignment.solution_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def run_checks(assignment: Assignment, snapshots: dict[str, Snapshot], oracles: dict[str, Any],
               regions: dict[str, list[RegionLines]] | None = None,
               reference: ReferenceRuns | None = None, only: str | None = None,
               unfinished: Mapping[str, object] | None = None) -> list[CheckResult]:
    """Every check on every scenario it lists. `regions` are the submission's exercise regions (for
    [exercise_bindings]); `reference` gives the reference solution's runs with the same seeds, asked for only when a
    check raises something other than an assertion. With `only` (the primary scenario run alone), every check is
    judged in that run: a check not listed there but naming a `replay` on that replay of it, and undecided where the
    replay did not run."""
    views = {name: RunView(snapshot, assignment.bindings, assignment.exercise_bindings, regions, unfinished)
             for name, snapshot in snapshots.items()}
    reference_views: dict[str, RunView | None] = {}

    def reference_view(scenario: str) -> RunView | None:
        if scenario not in reference_views:
            found = reference(scenario) if reference else None
            reference_views[scenario] = (RunView(found, assignment.bindings, assignment.exercise_bindings,
                                                 solution_regions(assignment)) if found is not None else None)
        return reference_views[scenario]

    limits = assignment.limits
    results = []
    with RECORD_LOCK:   # one record's checks at a time: the memory a check adds is its own (check_budget.py)
        for spec in assignment.checks:
            function = assignment.check_function(spec.function)
            outcomes, bugs, charged = [], {}, {}
            undecidable: dict[str, str] = {}   # scenario -> why that run's values could not decide the check
            explained: dict[str, Any] = {}
            view_of = dict(views)
            if only is not None and only not in spec.scenarios and spec.replay:
                replayed = replay_view(views[only], spec.replay)
                if replayed is None:
                    results.append(_undecided(spec, only))
                    continue
                view_of[only] = replayed
            for scenario in ((only,) if only is not None else spec.scenarios):
                fraction, feedback, bug = 0.0, "", None
                view = view_of[scenario]
                view.details = {}
                with Budget(limits.check_cpu_seconds, limits.check_memory_bytes) as budget, recording() as compared:
                    try:
                        fraction, feedback = evaluate(function, spec, view, oracles[scenario],
                                                      assignment.settings)
                    except CheckBug as caught:
                        bug = caught
                overrun = budget.reason or ("it ran out of memory" if bug is not None and bug.kind == "MemoryError"
                                            else "")
                if overrun:   # the record's values took the check there: charged, never excused
                    fraction, feedback = 0.0, _overrun_feedback(spec, overrun)
                    charged[scenario] = CheckBug(f"{spec.function} overran its budget on this record's {scenario} "
                                                 f"run: {overrun}", bug.trace if bug else "", "CheckOverrun")
                elif bug is not None:
                    on_reference = reference_view(scenario)
                    if on_reference is not None and _raises_alike(function, spec, on_reference, oracles[scenario],
                                                                  assignment.settings, bug, limits):
                        bugs[scenario] = bug
                    else:
                        charged[scenario] = bug
                        feedback = _charged_feedback(spec, bug, on_reference is not None)
                if view.undecidable and not overrun and bug is None:
                    undecidable[scenario] = view.undecidable
                if spec.judged_in_replays and not overrun and bug is None and scenario in views:
                    fraction, feedback = _judged_in_replays(assignment, spec, function, views[scenario],
                                                            oracles[scenario], fraction, feedback)
                outcomes.append((scenario, fraction, feedback))
                explained[scenario] = scenario_explanation(fraction, feedback, read_values(spec.needs, view),
                                                           view.details, view.seed, view.settings_read,
                                                           compared, assignment.config.get("units"))
            results.append(_combine(assignment, spec, outcomes, snapshots, bugs, charged, undecidable))
            results[-1].explanation = explained
    return results


def _judged_in_replays(assignment: Assignment, spec: CheckSpec, function, view: RunView, oracle: Any,
                       fraction: float, feedback: str) -> tuple[float, str]:
    """The check's verdict on the run and on each replay it names of that run: the lowest counts, with its feedback
    (a branch of the file's code is judged in every world the replays give it, not only in the one this run drew).
    A replay whose statements raised fails the check with what they raised; one that could not start says
    nothing (the run's own verdict stands)."""
    worst = (fraction, feedback)
    for name in spec.judged_in_replays:
        description = assignment.replays[name].description if name in assignment.replays else name
        raised = replay_raised(view, name)
        replayed = replay_view(view, name)
        if raised is not None:
            outcome = (0.0, f"Run again with {description}, your code raised {raised}: the branch it takes there "
                            "must work too.")
        elif replayed is None:
            continue
        else:
            try:
                got, text = evaluate(function, spec, replayed, oracle, assignment.settings)
            except CheckBug:   # the check cannot judge this replay: the run's own verdict stands
                continue
            outcome = (got, text if got >= 1.0 else f"Run again with {description}: {text}")
        if outcome[0] < worst[0]:
            worst = outcome
    return worst


def _undecided(spec: CheckSpec, scenario: str) -> CheckResult:
    """A check its one run could not decide: no points from that run; the other runs decide it (run_plan)."""
    return CheckResult(id=spec.id, group=spec.group, score=0.0, max_score=spec.points, visibility=spec.visibility,
                       feedback=f"Not decided from the {scenario} run alone.", undecided=True)


def _raises_alike(function, spec: CheckSpec, view: RunView, oracle: Any, settings: Any, bug: CheckBug,
                  limits: Limits) -> bool:
    """The check raises the same exception at the same place on the reference solution's run (within its budget:
    a reference run that overruns it raises nothing alike)."""
    alike = False
    with Budget(limits.check_cpu_seconds, limits.check_memory_bytes) as budget:
        try:
            evaluate(function, spec, view, oracle, settings)
        except CheckBug as other:
            alike = other.signature == bug.signature
    return alike and not budget.reason


def _overrun_feedback(spec: CheckSpec, overrun: str) -> str:
    """What a student reads when a check stopped on their values: what ran over, and where to look."""
    names = [name for name in spec.needs if name != "*"]
    values = ", ".join(f"`{name}`" for name in names) if names else "the values this check reads"
    return (f"This check was stopped on your values: {overrun}, far beyond what the exercise's values need. "
            f"Look at the type, shape and size of {values}: they differ from what the exercise produces.")


def _charged_feedback(spec: CheckSpec, bug: CheckBug, compared: bool) -> str:
    """What a student reads when their values led a check to raise: which values, never the traceback."""
    names = [name for name in spec.needs if name != "*"]
    values = ", ".join(f"`{name}`" for name in names) if names else "the values this check reads"
    reference = " (the reference solution's values do not)" if compared else ""
    return (f"The check could not use your values: reading them raised {bug.kind}{reference}. Look at the type, "
            f"shape and size of {values}: they differ from what the exercise produces.")


def scenario_label(scenario: str) -> str:
    """How a failure in a run other than the file as written begins; the run itself is described once per record."""
    return f"In the {scenario} run: "


def scenario_notes(assignment: Assignment, checks: list[CheckResult]) -> list[str]:
    """One sentence per run a failure is labelled with (`scenario_label`), saying what that run changes."""
    labelled = {s for s in assignment.scenarios for c in checks if c.feedback.startswith(scenario_label(s))}
    return [f"{RUN_DESCRIPTION_PREFIX}{name} run: {assignment.scenarios[name].description}." for name in assignment.scenarios
            if name in labelled]


def _bug_report(bugs: dict[str, CheckBug], charged: dict[str, CheckBug]) -> str:
    """The instructor's account of a check that raised: which runs, whether it could judge, and the traceback."""
    unjudged = [f"[{scenario} run, not judged: it raises alike on the reference solution's run] {bug.summary}\n"
               f"{bug.trace}" for scenario, bug in bugs.items()]
    failed = [f"[{scenario} run, charged to the submission: only its values lead the check there] {bug.summary}\n"
              f"{bug.trace}" for scenario, bug in charged.items()]
    return "\n".join(unjudged + failed)


def world_hint(scenario: Scenario, spec: CheckSpec) -> str:
    """What to say when `spec` failed only in `scenario`: the sentence naming the difference between the worlds that
    can explain it (the scenario's `hints` entry its `differs_by` names), or nothing; a lesson that gives no `hints`
    keeps its one `failure_hint`."""
    if scenario.hints:
        return scenario.hints.get(spec.differs_by, "") if spec.differs_by else ""
    return scenario.failure_hint


def _combine(assignment: Assignment, spec: CheckSpec, outcomes: list, snapshots: dict[str, Snapshot],
             bugs: dict[str, CheckBug] | None = None, charged: dict[str, CheckBug] | None = None,
             undecidable: dict[str, str] | None = None) -> CheckResult:
    bugs = bugs or {}
    error = _bug_report(bugs, charged or {})
    if bugs:   # the check's own bug: it cannot judge this submission in that run, so nothing is scored here
        return CheckResult(id=spec.id, group=spec.group, score=0.0, max_score=spec.points, visibility=spec.visibility,
                           feedback=("Not judged: this check failed because of a bug in the grader's own check (not in "
                                     f"your work). {INSTRUCTOR_TOLD_CHECK}"),
                           grader_error=error, unjudged=True)
    undecidable = undecidable or {}
    decided = [item for item in outcomes if item[0] not in undecidable]
    if undecidable and all(f >= 1.0 for _, f, _ in decided):
        # no run that could decide it failed it: neither failed (the grader's shortcoming) nor passed (nothing showed
        # it): held for the instructor, with the run's own sentence as the evidence
        why = next(iter(undecidable.values()))
        return CheckResult(id=spec.id, group=spec.group, score=0.0, max_score=spec.points, visibility=spec.visibility,
                           feedback=("Held for your instructor's review (no points until they decide): " + why),
                           grader_error=error, fractions={s: f for s, f, _ in outcomes}, held=why)
    outcomes = decided or outcomes   # a run that decided it failed it: that run's verdict, as any failure
    fraction = min(f for _, f, _ in outcomes)
    failing = [(s, f, text) for s, f, text in outcomes if f < 1.0]
    if not failing:
        feedback = outcomes[0][2]
    else:
        # the file as written first: the numbers its feedback quotes are those the student can reproduce
        lowest = min(failing, key=lambda item: item[1])
        scenario, _, text = next((item for item in failing if item[0] == "baseline" and item[1] <= lowest[1]), lowest)
        passed_elsewhere = [s for s, f, _ in outcomes if f >= 1.0]
        only_here = errors_only_in(scenario, snapshots)
        feedback = text
        if only_here:
            first = only_here[0]
            feedback += (f"\nIn that run, {failure_place(first)} raised {first.raised['type']}: "
                         f"{clip(first.raised['message'], 200)}")
        if scenario != "baseline" or passed_elsewhere:
            hint = world_hint(assignment.scenarios[scenario], spec)   # as written: no seed reaches a student
            # what the run is comes once per record (scenario_notes), not with every failure
            hinted = passed_elsewhere and hint and not only_here and not spec.method   # a method's failure is its own
            feedback = scenario_label(scenario) + feedback + (f"\n{hint}" if hinted else "")
        feedback += f"\n{spec.failure_note}" if spec.failure_note else ""
    return CheckResult(id=spec.id, group=spec.group, score=round(spec.points * fraction, 6), max_score=spec.points,
                       visibility=spec.visibility, feedback=feedback, grader_error=error,
                       fractions={s: f for s, f, _ in outcomes})
