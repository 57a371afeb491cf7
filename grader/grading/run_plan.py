"""Which runs a file gets: the primary scenario alone first; the others only when they explain something.

A file that passes every check in the primary run (the world the student cannot see: a fresh seed, the grader's
secret changes) is graded from that one run: that world already holds everything a grade needs. The others (the
file as written) run when a check failed or could not be decided there, or a statement of the file raised or
stopped it: they tell a mistake made in every world from one that only the hidden world shows, and let feedback
quote the numbers the student sees. `[assignment] all_scenarios = true` (or `grader grade --all-runs`) runs every
scenario for every file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grader.grading.faults import errors_only_in
from grader.model.record import ReviewHold
from grader.runs.places import failure_place
from grader.runs.snapshot import Snapshot

if TYPE_CHECKING:
    from grader.config.assignment import Assignment
    from grader.grading.engine import CheckResult

REASONS_LISTED = 5


@dataclass
class RunPlan:
    first_runs: tuple[str, ...]
    alone: str | None                 # the scenario judged alone first; None: every scenario runs at once
    why: list[str] = field(default_factory=list)   # why the other scenarios ran after it (empty: they did not)

    @classmethod
    def first(cls, assignment: Assignment) -> RunPlan:
        primary = assignment.primary_scenario
        if primary is None or assignment.all_scenarios or len(assignment.scenarios) == 1:
            return cls(tuple(assignment.scenarios), None)
        return cls((primary,), primary)

    def record_text(self, assignment: Assignment) -> str:
        """For the instructor's record: which runs happened and why."""
        if self.alone is None:
            every = "every scenario is run for every file ([assignment] all_scenarios or --all-runs)" \
                if assignment.all_scenarios else "this assignment names no primary scenario"
            return f"every run: {every}"
        if not self.why:
            return f"the {self.alone} run alone: every check passed there and every statement ran"
        return f"the {self.alone} run, then the others: " + "; ".join(self.why)

    def notes(self, checks: list[CheckResult]) -> list[str]:
        """One sentence for the student when their file was run in more than one world and a check failed."""
        if self.alone is None or not self.why or all(c.passed for c in checks):
            return []
        return [f"Besides your file as written, the grader ran it once more in the {self.alone} run (other numbers, "
                "described above where a check failed only there); where a check failed in both, the figures quoted "
                "are those of your file as written, which you can reproduce by running it."]


def reasons_for_more_runs(checks: list[CheckResult], snapshot: Snapshot) -> list[str]:
    """Why the primary run alone cannot grade this file (empty: it can)."""
    reasons = []
    failed = [c.id for c in checks if not c.passed and not c.undecided]
    if failed:
        reasons.append(f"{len(failed)} check(s) did not pass there ({', '.join(failed[:REASONS_LISTED])})")
    undecided = [c.id for c in checks if c.undecided]
    if undecided:
        reasons.append(f"{', '.join(undecided)} could not be decided from that run alone")
    raised = snapshot.failed_statements
    if raised:
        reasons.append(f"{len(raised)} statement(s) raised or timed out there (first: {failure_place(raised[0])})")
    if snapshot.ending != "completed":
        reasons.append(f"the run ended as {snapshot.ending}")
    if snapshot.syntax_errors:
        reasons.append("the file has a syntax error")
    return reasons


def held_for_review(checks: list[CheckResult], snapshots: dict[str, Snapshot]) -> ReviewHold | None:
    """A statement of the file raised only in a run other than the file as written, and checks failed only there:
    the file's own assertion may be what the hidden changes broke (an honest file), or a file may raise on purpose
    to hide a value. Neither is decided by the grader: those checks keep no points and say they are held for the
    instructor, who decides with `grader adjust`. Returns what is held (for the record), or None."""
    if "baseline" not in snapshots:
        return None
    for scenario in snapshots:
        raised = [s for s in errors_only_in(scenario, snapshots) if not (s.error or {}).get("grader_fault")]
        held = [c for c in checks if c.fractions.get(scenario, 1.0) < 1.0 and c.fractions.get("baseline", 0.0) >= 1.0]
        if not raised or not held:
            continue
        first = raised[0]
        statement = f"{failure_place(first)} raised {first.raised['type']}"
        for check in held:
            check.feedback = (f"Held for your instructor's review (no points until they decide): {statement} only in "
                              f"the {scenario} run, under the grader's hidden changes, and this check passed in your "
                              f"file as written but not there. Your instructor will look at it.\n{check.feedback}")
        return {"scenario": scenario, "statement": statement, "checks": [c.id for c in held]}
    return None
