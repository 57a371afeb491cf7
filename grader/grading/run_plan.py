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
from grader.model.record import ReviewHold, hold_reason
from grader.runs.places import failure_place
from grader.runs.snapshot import Snapshot, where

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


def held_for_flags(checks: list[CheckResult], methods: set[str], flags: list[str]) -> ReviewHold | None:
    """A file whose text reads the grader's internals (review flags: JAX's rule tables, closures, frames) can read the
    hidden changes themselves, and then no value shows how it computed what it reports. The method checks it passed
    (`methods`) are held for the instructor with the flags as evidence: no points until they decide (what each had
    scored is kept in the hold, to restore with `grader adjust`)."""
    held = [c for c in checks if c.id in methods and c.score > 0]
    if not flags or not held:
        return None
    evidence = "; ".join(flags[:3]) + (f"; and {len(flags) - 3} more" if len(flags) > 3 else "")
    credited = {c.id: c.score for c in held}
    for check in held:
        check.score = 0.0
        check.feedback = ("Held for your instructor's review (no points until they decide): your file's text reaches "
                          "into JAX's internals or introspects frames, closures or objects it did not make, where the "
                          "grader's hidden changes live, so no value can show how this was computed. Your instructor "
                          "will look at it (the places are listed for them).\n" + check.feedback)
    return {"scenario": "", "statement": evidence, "checks": [c.id for c in held], "credited": credited,
            "why": f"the file reads the grader's or JAX's internals ({evidence}), so no value can show its methods"}


def held_by_checks(checks: list[CheckResult]) -> ReviewHold | None:
    """The checks no run could decide (each raised `Undecidable` where it was judged, and no run failed it): held for
    the instructor with each check's sentence as the evidence, no points until they decide."""
    held = [c for c in checks if c.held]
    if not held:
        return None
    reasons = list(dict.fromkeys(c.held for c in held))
    why = "no run's values could decide " + ", ".join(c.id for c in held) + ": " + " ".join(reasons)
    return {"scenario": "", "statement": reasons[0], "checks": [c.id for c in held], "why": why}


def merged_holds(first: ReviewHold | None, second: ReviewHold | None) -> ReviewHold | None:
    """One hold of a record from two (a statement that raised in one run only, and review flags)."""
    if first is None or second is None:
        return first or second
    merged: ReviewHold = {**first, "checks": list(dict.fromkeys([*first["checks"], *second["checks"]])),
                          "why": f"{hold_reason(first)}; and {hold_reason(second)}"}
    if "credited" in second:
        merged["credited"] = {**first.get("credited", {}), **second["credited"]}
    return merged


def _ended_only_in(scenario: str, snapshots: dict[str, Snapshot]) -> str:
    """How the file ended itself early in `scenario` (sys.exit, os._exit) where it ran to its end as written: said as
    a raise is ("line 12 called sys.exit"), else ''."""
    run, written = snapshots[scenario], snapshots.get("baseline")
    if scenario == "baseline" or written is None or written.ending != "completed":
        return ""
    if run.ending == "sys_exit":
        return f"{where(run.exit_line, run.exit_cell) if run.exit_line else 'a statement'} called sys.exit"
    if run.ending == "exited_early" and not run.memory_limit_hit:
        return "the file ended its own process (os._exit or a signal)"
    return ""


def held_for_review(checks: list[CheckResult], snapshots: dict[str, Snapshot]) -> ReviewHold | None:
    """A statement of the file raised only in a run other than the file as written, and checks failed only there:
    the file's own assertion may be what the hidden changes broke (an honest file), or a file may raise on purpose
    to hide a value. Neither is decided by the grader: those checks keep no points and say they are held for the
    instructor, who decides with `grader adjust`. Returns what is held (for the record), or None."""
    if "baseline" not in snapshots:
        return None
    for scenario in snapshots:
        raised = [s for s in errors_only_in(scenario, snapshots) if not (s.error or {}).get("grader_fault")]
        held = [c for c in checks if c.fractions.get(scenario, 1.0) < 1.0 and c.fractions.get("baseline", 0.0) >= 1.0
                and not c.held]   # a check no run could decide is held on its own (held_by_checks)
        ended = _ended_only_in(scenario, snapshots)   # sys.exit or os._exit: the file's own ending, as a raise is
        if not (raised or ended) or not held:
            continue
        if raised:
            first = raised[0]
            statement = f"{failure_place(first)} raised {first.raised['type']}"
        else:
            statement = ended
        for check in held:
            check.feedback = (f"Held for your instructor's review (no points until they decide): {statement} only in "
                              f"the {scenario} run, under the grader's hidden changes, and this check passed in your "
                              f"file as written but not there. Your instructor will look at it.\n{check.feedback}")
        return {"scenario": scenario, "statement": statement, "checks": [c.id for c in held]}
    return None
