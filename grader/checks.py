"""Run an assignment's checks on a submission's snapshots and turn each into a scored CheckResult.

A check function reads like a pytest test: `def check(run, oracle, settings)`, plain `assert` with a
message, and it passes by returning (optionally a short note). It may return `Partial(fraction, note)`.
It runs once per scenario it lists; its score is the lowest over them, so a hard-coded number that is
right for the lesson's seed still fails. A name the check needs that is missing or still a TODO costs
that check alone, and the feedback names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .assignment import Assignment, CheckSpec
from .snapshot import UNFINISHED, Missing, Opaque, Snapshot


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

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


class RunView:
    """What a check sees of one scenario's run: values by name, history, probes, and how the run went."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot
        self.scenario = snapshot.scenario
        self.seed = snapshot.seed

    def has(self, name: str) -> bool:
        return name in self.snapshot.values and self.snapshot.values[name] is not UNFINISHED

    def __getitem__(self, name: str) -> Any:
        return self.value(name)

    def value(self, name: str) -> Any:
        if name not in self.snapshot.values:
            raise Missing(name, self._why_missing(name))
        value = self.snapshot.values[name]
        if value is UNFINISHED:
            raise Missing(name, "is still a TODO (it is `...`): fill it in")
        if isinstance(value, Opaque) and value.kind == "too_large":
            raise Missing(name, f"is too large for the grader to read ({value.type_name})")
        return value

    def value_when(self, name: str, when: str) -> Any:
        """`name` as it was when `when` was last assigned (the lesson reuses `direction`)."""
        self.value(when)
        set_at = self.snapshot.history[when][-1][0]
        earlier = [value for index, value in self.snapshot.history.get(name, []) if index <= set_at]
        if not earlier or earlier[-1] is None:
            raise Missing(name, f"was not defined when `{when}` was computed")
        if earlier[-1] is UNFINISHED:
            raise Missing(name, f"was still a TODO when `{when}` was computed")
        return earlier[-1]

    def probe(self, name: str) -> Any:
        if name in self.snapshot.probes:
            return self.snapshot.probes[name]
        error = self.snapshot.probe_errors.get(name)
        if error:
            where = f" (line {error['line']})" if error.get("line") else ""
            raise AssertionError(f"Calling your code for `{name}` raised {error['type']}: {error['message']}{where}.")
        raise Missing(name, "could not be computed: the names it needs were never all defined")

    @property
    def completed(self) -> bool:
        return self.snapshot.ending == "completed"

    @property
    def failed_statements(self):
        return self.snapshot.failed_statements

    def _why_missing(self, name: str) -> str:
        failed = self.snapshot.statement_assigning(name)
        if failed and failed.error and failed.placeholder:
            return (f"is still a TODO: line {failed.line} that assigns it still holds a `...` placeholder "
                    f"(running it raised {failed.error['type']}): fill it in")
        if failed and failed.error:
            return (f"is not defined: the statement at line {failed.line} that assigns it raised "
                    f"{failed.error['type']}: {failed.error['message'][:200]}")
        if self.snapshot.ending in ("sys_exit", "exited_early", "killed_wall") or self.snapshot.syntax_error:
            return "is not defined: your file stopped before assigning it"
        return "is not defined at the top level of your file"


def _failure_text(text: str) -> str:
    """The check's own message, then pytest's rewritten comparison (its first line) as the values compared."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    message = [line for line in lines if not line.startswith(("assert ", " +", "+"))]
    compared = next((line for line in lines if line.startswith("assert ")), None)
    # Keep the comparison when it shows values; drop pure boolean glue like "not (True and 2 == 2)".
    if compared and message and not re.search(r"\b(True|False)\b", compared):
        message.append(f"(compared: {compared[len('assert '):][:200]})")
    return "\n".join((message or lines)[:8])


def evaluate(function, spec: CheckSpec, view: RunView, oracle: Any, settings: Any) -> tuple[float, str]:
    """One check on one scenario: (fraction of its points, feedback)."""
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
    except Exception as error:  # a student value the check did not anticipate: never crash the batch
        return 0.0, f"The grader could not evaluate this check on your values ({type(error).__name__}: {str(error)[:200]})."
    if isinstance(outcome, Partial):
        return max(0.0, min(1.0, float(outcome.fraction))), outcome.note
    return 1.0, outcome if isinstance(outcome, str) else "Passed."


def run_checks(assignment: Assignment, snapshots: dict[str, Snapshot], oracles: dict[str, Any]) -> list[CheckResult]:
    results = []
    for spec in assignment.checks:
        function = getattr(assignment.check_module, spec.function)
        outcomes = []
        for scenario in spec.scenarios:
            fraction, feedback = evaluate(function, spec, RunView(snapshots[scenario]), oracles[scenario], assignment.settings)
            outcomes.append((scenario, fraction, feedback))
        results.append(_combine(assignment, spec, outcomes, snapshots))
    return results


def _errors_only_in(scenario: str, snapshots: dict[str, Snapshot]) -> str:
    """An error that happens only in a grader scenario is invisible to the student locally: name it."""
    if scenario == "baseline" or "baseline" not in snapshots:
        return ""
    baseline_lines = {s.line for s in snapshots["baseline"].failed_statements}
    for statement in snapshots[scenario].failed_statements:
        if statement.line not in baseline_lines and statement.error:
            return (f"\nIn that run, line {statement.line} raised {statement.error['type']}: "
                    f"{statement.error['message'][:200]}")
    return ""


def _combine(assignment: Assignment, spec: CheckSpec, outcomes: list, snapshots: dict[str, Snapshot]) -> CheckResult:
    fraction = min(f for _, f, _ in outcomes)
    failing = [(s, f, text) for s, f, text in outcomes if f < 1.0]
    if not failing:
        feedback = outcomes[0][2]
    else:
        scenario, _, text = min(failing, key=lambda item: item[1])
        passed_elsewhere = [s for s, f, _ in outcomes if f >= 1.0]
        feedback = text + _errors_only_in(scenario, snapshots)
        if scenario != "baseline" or passed_elsewhere:
            hint = assignment.scenarios[scenario].failure_hint.format(seed=snapshots[scenario].seed)
            label = f"[{scenario} run: {assignment.scenarios[scenario].description}] "
            feedback = label + feedback + (f"\n{hint}" if passed_elsewhere and hint else "")
    return CheckResult(id=spec.id, group=spec.group, score=round(spec.points * fraction, 6), max_score=spec.points,
                       visibility=spec.visibility, feedback=feedback)
