"""Run an assignment's checks on a submission's snapshots and turn each into a scored CheckResult.

A check function reads like a pytest test: `def check(run, oracle, settings)`, plain `assert` with a
message, and it passes by returning (optionally a short note). It may return `Partial(fraction, note)`.
It runs once per scenario it lists; its score is the lowest over them, so a hard-coded number that is
right for the lesson's seed still fails. A name the check needs that is missing or still a TODO costs
that check alone, and the feedback names it. A check that raises anything but an assertion (a TypeError in
its own code) has a bug: that is the grader's fault, so the run is excused like a failed set-up and the
traceback goes to the instructor (`CheckResult.grader_error`), never to the student.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from grader.common.text import clip
from grader.config.assignment import Assignment, CheckSpec
from grader.model.verdicts import passed
from grader.runs.evidence import CallEvent
from grader.runs.places import failure_place
from grader.runs.provenance import Binding, Provenance
from grader.runs.snapshot import UNFINISHED, Missing, Opaque, Snapshot, Statement, where


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
    grader_error: str = ""     # for the instructor only: the traceback of a check that itself failed (a bug)

    @property
    def passed(self) -> bool:
        return passed(self.score, self.max_score)


class RunView:
    """What a check sees of one scenario's run: values by name (the binding the exercise used), the method
    evidence behind them, probes, and how the run went."""

    def __init__(self, snapshot: Snapshot, bindings: dict[str, str] | None = None):
        self.snapshot = snapshot
        self.scenario = snapshot.scenario
        self.seed = snapshot.seed
        self.provenance = Provenance(snapshot, bindings or {})

    def has(self, name: str) -> bool:
        try:
            self.value(name)
        except Missing:
            return False
        return True

    def __getitem__(self, name: str) -> Any:
        return self.value(name)

    def value(self, name: str) -> Any:
        binding = self.provenance.binding(name)
        if binding is None or name not in self.snapshot.history:
            raise Missing(name, self._why_missing(name))
        value = binding.value
        if value is UNFINISHED:
            raise Missing(name, "is still a TODO (it is `...`): fill it in")
        if isinstance(value, Opaque) and value.kind == "too_large":
            raise Missing(name, f"is too large for the grader to read ({value.type_name})")
        return value

    def binding(self, name: str) -> Binding:
        self.value(name)
        binding = self.provenance.binding(name)
        assert binding is not None
        return binding

    def value_when(self, name: str, when: str) -> Any:
        """`name` as it was when `when`'s graded binding was made (the lesson reuses `direction`)."""
        anchor = self.binding(when)
        value = self.provenance.value_at(name, anchor.stmt)
        if value is None:
            raise Missing(name, f"was not defined when `{when}` was computed")
        if value is UNFINISHED:
            raise Missing(name, f"was still a TODO when `{when}` was computed")
        return value

    def calls_for(self, name: str) -> list[CallEvent]:
        """Method evidence: the calls made by the statements that produced `name`'s graded binding."""
        return self.provenance.calls_for(name)

    def evidence_complete(self, name: str) -> bool:
        """The calls behind `name` were all recorded (else a method check falls back to the value, and says so)."""
        return self.provenance.evidence_complete(name)

    def where(self, stmt: int) -> str:
        """"line 12" or "In [3], line 2" (a notebook cell, as Jupyter numbers it) for a statement index."""
        statement = self.snapshot.statement(stmt)
        return where(statement.line, statement.cell) if statement else "an unknown line"

    def probe(self, name: str) -> Any:
        """The probe's result computed with the graded bindings of its inputs (else its latest result)."""
        history = self.snapshot.probe_history.get(name, [])
        if not history:
            raise Missing(name, "could not be computed: the names it needs were never all defined")
        chosen = history[-1]
        for entry in reversed(history):
            inputs = entry[1]
            graded = {p: self.provenance.binding(p) for p in inputs}
            if all(b is not None and b.stmt == inputs[p] for p, b in graded.items()):
                chosen = entry
                break
        _, _, value, error = chosen
        if error:
            at = f" ({where(error['line'], error.get('cell'))})" if error.get("line") else ""
            raise AssertionError(f"Calling your code for `{name}` raised {error['type']}: {error['message'][:300]}{at}.")
        return value

    @property
    def completed(self) -> bool:
        return self.snapshot.ending == "completed"

    @property
    def failed_statements(self):
        return self.snapshot.failed_statements

    def _why_missing(self, name: str) -> str:
        failed = self.snapshot.statement_assigning(name)
        if failed and failed.error and failed.placeholder:
            return (f"is still a TODO: {where(failed.line, failed.cell)} that assigns it still holds a `...` placeholder "
                    f"(running it raised {failed.error['type']}): fill it in")
        if failed and failed.error:
            return (f"is not defined: the statement that assigns it raised {failed.error['type']} at "
                    f"{failure_place(failed)}: {clip(failed.error['message'], 200)}")
        syntax = self.snapshot.syntax_error
        if self.snapshot.ending == "syntax_error" and syntax:
            return (f"is not defined: your file has a syntax error at {where(syntax['line'])}, and nothing after that "
                    "line ran")
        if self.snapshot.ending in ("sys_exit", "exited_early", "killed_wall") or syntax:
            return "is not defined: your file stopped before assigning it"
        return "is not defined at the top level of your file"


class CheckBug(Exception):
    """A check function raised something other than an assertion: a bug in the check, not the student's doing."""

    def __init__(self, summary: str, trace: str):
        super().__init__(summary)
        self.summary = summary
        self.trace = trace


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
    """One check on one scenario: (fraction of its points, feedback). Raises CheckBug when the check itself fails.

    Student values that a check cannot use fail through assertions (grader.api.values raises AssertionError with
    a sentence for the student); any other exception comes from the check's (or the oracle's) own code."""
    missing = []
    for name in spec.needs:
        try:
            view.value(name)
        except Missing as error:
            missing.append(error)
    if missing:
        others = f" Also missing or unfinished: {', '.join(f'`{m.name}`' for m in missing[1:])}." if len(missing) > 1 else ""
        return 0.0, f"{missing[0]} (needed by this check).{others}"
    try:
        outcome = function(view, oracle, settings)
    except Missing as error:
        return 0.0, f"{error} (needed by this check)."
    except AssertionError as failure:
        return 0.0, _failure_text(str(failure)) or "The check failed."
    except Exception as error:  # a bug in the check: the instructor's to fix, never charged to the student
        trace = "".join(traceback.format_exception(error))[-4000:]
        raise CheckBug(f"{spec.function} raised {type(error).__name__}: {str(error)[:300]}", trace) from error
    if isinstance(outcome, Partial):
        return max(0.0, min(1.0, float(outcome.fraction))), outcome.note
    return 1.0, outcome if isinstance(outcome, str) else "Passed."


def run_checks(assignment: Assignment, snapshots: dict[str, Snapshot], oracles: dict[str, Any]) -> list[CheckResult]:
    views = {name: RunView(snapshot, assignment.bindings) for name, snapshot in snapshots.items()}
    faults = grader_faults(snapshots)
    results = []
    for spec in assignment.checks:
        function = assignment.check_function(spec.function)
        outcomes, bugs = [], {}
        for scenario in spec.scenarios:
            try:
                fraction, feedback = evaluate(function, spec, views[scenario], oracles[scenario], assignment.settings)
            except CheckBug as bug:
                bugs[scenario] = bug
                fraction, feedback = 0.0, ""
            outcomes.append((scenario, fraction, feedback))
        results.append(_combine(assignment, spec, outcomes, snapshots, faults, bugs))
    return results


def _same_place(a: Statement, b: Statement) -> bool:
    return (a.line, a.cell) == (b.line, b.cell)


def errors_only_in(scenario: str, snapshots: dict[str, Snapshot]) -> list[Statement]:
    """Statements that raised in `scenario` but not in baseline (the student never sees these locally)."""
    if scenario == "baseline" or "baseline" not in snapshots:
        return []
    baseline = snapshots["baseline"].failed_statements
    return [s for s in snapshots[scenario].failed_statements
            if s.error and not any(_same_place(s, b) for b in baseline)]


def grader_faults(snapshots: dict[str, Snapshot]) -> dict[str, list[str]]:
    """Scenario -> why the grader failed to set that run up (empty lists are left out).

    Only what the student's process could not have written counts: the harness's set-up report on its control
    pipe (closed before the first student statement) and the sandbox's own status. An error that a run's data
    channel attributes to the grader's code is never taken on its word (`reported_faults` lists it for the
    instructor); the scenario replacements are written so that they cannot raise errors of their own."""
    return {name: [f"the grader could not prepare the run ({snapshot.setup_error})"]
            for name, snapshot in snapshots.items() if snapshot.setup_error}


def reported_faults(snapshots: dict[str, Snapshot]) -> dict[str, list[str]]:
    """Errors a run reported as raised inside the grader's own code (claims from the student's process)."""
    found: dict[str, list[str]] = {}
    for name, snapshot in snapshots.items():
        only_here = errors_only_in(name, snapshots)
        for statement in snapshot.failed_statements:
            error = statement.error or {}
            if (error.get("grader_fault") or error.get("through_setup")) and (name == "baseline" or statement in only_here):
                found.setdefault(name, []).append(
                    f"{where(statement.line, statement.cell)} raised {error.get('type')} inside the grader's own code "
                    f"(as the run reported it): {str(error.get('message'))[:200]}")
    return found


def _bug_report(bugs: dict[str, CheckBug]) -> str:
    """The instructor's account of a check's own failure: which runs, and the traceback."""
    return "\n".join(f"[{scenario} run] {bug.summary}\n{bug.trace}" for scenario, bug in bugs.items())


def _combine(assignment: Assignment, spec: CheckSpec, outcomes: list, snapshots: dict[str, Snapshot],
             faults: dict[str, list[str]], bugs: dict[str, CheckBug] | None = None) -> CheckResult:
    bugs = bugs or {}
    error = _bug_report(bugs)
    excused = [s for s, f, _ in outcomes if (f < 1.0 and s in faults) or s in bugs]
    usable = [(s, f, text) for s, f, text in outcomes if s not in excused]
    if not usable:
        runs = ", ".join(excused)
        if bugs:
            feedback = ("Not held against you: this check could not run because of a bug in the grader's own check "
                        "(not in your work), so you get its points. Your instructor has been told.")
        else:
            feedback = (f"Not held against you: the grader's own code failed in the {runs} run, so this check could "
                        "not be judged there. Your instructor has been told.")
        return CheckResult(id=spec.id, group=spec.group, score=spec.points, max_score=spec.points,
                           visibility=spec.visibility, feedback=feedback, grader_error=error)
    fraction = min(f for _, f, _ in usable)
    failing = [(s, f, text) for s, f, text in usable if f < 1.0]
    if not failing:
        feedback = usable[0][2]
    else:
        scenario, _, text = min(failing, key=lambda item: item[1])
        passed_elsewhere = [s for s, f, _ in usable if f >= 1.0]
        only_here = errors_only_in(scenario, snapshots)
        feedback = text
        if only_here:
            first = only_here[0]
            feedback += (f"\nIn that run, {failure_place(first)} raised {first.raised['type']}: "
                         f"{clip(first.raised['message'], 200)}")
        if scenario != "baseline" or passed_elsewhere:
            hint = assignment.scenarios[scenario].failure_hint.format(seed=snapshots[scenario].seed)
            label = f"[{scenario} run: {assignment.scenarios[scenario].description}] "
            feedback = label + feedback + (f"\n{hint}" if passed_elsewhere and hint and not only_here else "")
    if excused:
        feedback += f"\n(The {', '.join(excused)} run was not used here: the grader's own code failed in it.)"
    return CheckResult(id=spec.id, group=spec.group, score=round(spec.points * fraction, 6), max_score=spec.points,
                       visibility=spec.visibility, feedback=feedback, grader_error=error)
