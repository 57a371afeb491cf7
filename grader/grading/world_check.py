"""Every world a batch uses is one in which the reference solution scores full marks, verified by grading it there.

A world is what a batch seed makes of the scenarios: the variant's fresh seed and every secret amount an assignment
derives from the batch seed. An assignment's `suitable_seed` says which worlds separate its methods, from the oracle
alone; only a real run can say that the reference solution's own values, computed in float32 by the installed JAX,
land inside every tolerance there. So the reference solution is graded as a student's file is, through the same
runner, oracle and checks, and a world in which it falls short of full marks is never used: the batch draws the next
one and says so. Its record also gives the reference's figure in each scenario it ran, drawn beside every student's.

A world is judged in two steps, as a student's file is run (grading/run_plan.py): first as the reference's own plan
runs it (the primary scenario alone, which every record of a batch needs), and in every scenario only once a record
of that world has a run in the others (a file that failed a check in the primary world). A class that passes in the
primary world never runs the reference, nor compiles the lesson's programs, in the lesson's own world.

The verdict of a world is a fact of the grader's code, the installed versions and the world (the warm state keeps it
under that key, grader/grading/warm_state.py). A reference that could not be graded at all is the grader's failure,
not a world's: the batch stops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from grader.common.text import clip
from grader.config.assignment import Assignment, ConfigError
from grader.grading.grade import grade
from grader.intake.discovery import load_single
from grader.model.record import Record
from grader.model.verdicts import grader_fault, limit_notes, passed
from grader.runs.jobs import Runner


@dataclass(frozen=True)
class WorldVerdict:
    """How the reference solution did in one world."""

    seed: int
    score: float
    max_score: float
    shortfalls: tuple[str, ...] = ()           # "check id: score/max: feedback" for each check short of full marks
    figures: dict[str, Any] = field(default_factory=dict)
    conditions: tuple[str, ...] = ()           # what could have caused a shortfall besides the world: a limit hit, a
                                               # run that did not complete, time the runs waited for a busy CPU
    scenarios: tuple[str, ...] = ()            # the scenarios the reference ran in (empty: every one, as kept before)

    def covers(self, scenarios: Iterable[str]) -> bool:
        """The verdict speaks for records whose runs are `scenarios`: the reference ran in each of them."""
        return not self.scenarios or set(scenarios) <= set(self.scenarios)

    @property
    def suitable(self) -> bool:
        return passed(self.score, self.max_score) and not self.shortfalls

    @property
    def worth_keeping(self) -> bool:
        """A rejection judged under conditions that a failure or load could explain is tried again, not kept."""
        return self.suitable or not self.conditions

    def payload(self) -> dict[str, Any]:
        return {"seed": self.seed, "score": self.score, "max_score": self.max_score,
                "shortfalls": list(self.shortfalls), "figures": self.figures, "conditions": list(self.conditions),
                "scenarios": list(self.scenarios)}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> WorldVerdict:
        return cls(int(payload["seed"]), float(payload["score"]), float(payload["max_score"]),
                   tuple(str(s) for s in payload["shortfalls"]), dict(payload["figures"]),
                   tuple(str(c) for c in payload.get("conditions", [])),
                   tuple(str(s) for s in payload.get("scenarios", [])))

    def describe(self) -> str:
        first = self.shortfalls[0] if self.shortfalls else "no check named"
        return (f"the reference solution scored {self.score:g}/{self.max_score:g} in the world of variant seed "
                f"{self.seed} ({first}{f'; and {len(self.shortfalls) - 1} more' if len(self.shortfalls) > 1 else ''})")


class WorldRejected(Exception):
    """The reference solution falls short of full marks in this world: no record of it may be kept."""

    def __init__(self, verdict: WorldVerdict):
        super().__init__(f"{verdict.describe()}: that world is not used")
        self.verdict = verdict

    def __reduce__(self):   # crosses processes whole (a Dask worker's task raises it to the client)
        return (WorldRejected, (self.verdict,))


MAX_REJECTED_WORLDS = 5    # worlds in a row in which the reference falls short: past this, a tolerance is wrong


def too_many_rejected(rejected: list[WorldVerdict]) -> ConfigError:
    """What stops a batch whose worlds keep failing the reference: a check or tolerance to fix, not bad luck."""
    listed = "; ".join(v.describe() for v in rejected[:3])
    return ConfigError(f"the reference solution fell short of full marks in {len(rejected)} worlds in a row ({listed}): "
                       "a check or a tolerance of the assignment is wrong for this JAX; run `grader validate` and the "
                       "assignment's calibration")


def judge_world(assignment: Assignment, facts: dict, seed: int, runner: Runner | None,
                every: bool = False) -> WorldVerdict:
    """Grade the reference solution in the world of batch seed `seed`, as a student's file is graded: in the runs
    its plan makes (the primary scenario alone when it passes there), or with `every` in every scenario (raises
    ConfigError when it could not be graded at all: the grader's failure, not the world's)."""
    solution = assignment.solution_path
    if not solution.is_file():
        raise ConfigError(f"the reference solution {solution} is missing: no world can be verified without it")
    submission = load_single(solution, assignment.submission_filename, assignment.max_submission_bytes)
    record = grade(dataclasses.replace(assignment, all_scenarios=True) if every else assignment, submission, facts,
                   seed, runner)
    if grader_fault(record) or record["status"] != "graded":
        raise ConfigError(f"the reference solution could not be graded in the world of variant seed {seed}: "
                          f"{clip(str(record.get('grader_error') or record['messages'][:1]), 600)}")
    shortfalls = tuple(f"{check['id']}: {check['score']:g}/{check['max_score']:g}: {clip(check['feedback'], 300)}"
                       for check in record["checks"] if not passed(check["score"], check["max_score"]))
    return WorldVerdict(int(record["variant_seed"]), float(record["score"]), float(record["max_score"]), shortfalls,
                        dict(record.get("figures") or {}), judged_under(record), tuple(record.get("runs") or {}))


def judged_under(record: Record) -> tuple[str, ...]:
    """The conditions of the reference's runs that could explain a shortfall without the world: limits hit, runs
    that did not complete, and time they waited for a busy CPU (the machine was loaded)."""
    found = list(limit_notes(record))
    for name, run in (record.get("runs") or {}).items():
        if isinstance(run, dict) and run.get("ending") != "completed":
            found.append(f"the {name} run ended as {run.get('ending')}")
        if isinstance(run, dict) and (run.get("cpu_wait_allowance_seconds") or 0) > 0:
            found.append(f"the {name} run waited {run['cpu_wait_allowance_seconds']:g} s for a busy CPU")
    return tuple(found)
