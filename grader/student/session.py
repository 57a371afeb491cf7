"""One student check: grade a file exactly as `grader grade` does and keep what the student may see.

The assignment comes from the installed student bundle (config/bundle.py) or, in the instructor's checkout,
from `assignments/`. The bundle brings a facts program (the starter with only the exercises the facts need filled
in) that measures the reference facts on the student's own JAX; the checkout measures them from the solution.
The runs are the normal grading path (the strongest sandbox the machine offers, both scenarios); only visible
checks are reported. `group` narrows the check to one group's checks and the
scenarios they need (baseline always runs: it is the file as written).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.common.environment import environment
from grader.common.jax_range import unsupported as unsupported_jax
from grader.common.private_folder import UnsafeFolder
from grader.common.user_cache import private_cache_dir
from grader.config.assignment import Assignment, ConfigError, find_root, load
from grader.config.bundle import Bundle, bundled_root, read_bundle
from grader.grading.grade import grade
from grader.grading.reference import reference_facts
from grader.grading.single import grade_in_verified_world
from grader.grading.warm_state import WarmState
from grader.intake.discovery import load_single
from grader.model.record import CheckRecord
from grader.model.verdicts import for_student, stopped_early, student_messages
from grader.runs.jobs import fresh_variant_seed
from grader.runs.snapshot import decode
from grader.student.machine import accelerator_note, start_failure
from grader.student.runner import check_runner

COMPARED = ("jax", "jaxlib")     # versions that change the reference facts


class CheckError(Exception):
    """The check cannot start (no assignment, no such file or group): a usage error, exit status 2."""


@dataclass
class StudentCheck:
    """The visible part of one check of one file (what `--json` prints)."""
    file: str
    assignment: str
    title: str
    status: str
    score: float
    max_score: float
    checks: list[CheckRecord]
    groups: dict[str, dict]
    messages: list[str]
    environment: dict[str, dict]          # "yours" and "course"
    group: str | None = None
    version_note: str | None = None
    notebook: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    stopped_early: bool = False           # a syntax error, sys.exit or a limit stopped the file: notes come first

    def __repr__(self) -> str:
        """Short: Jupyter shows a cell's last value, and `check()` has already displayed the feedback."""
        return (f"StudentCheck({Path(self.file).name}: {self.score:g} / {self.max_score:g} over {len(self.checks)} "
                f"visible checks)")

    @property
    def full_marks(self) -> bool:
        return self.status == "graded" and self.max_score > 0 and self.score >= self.max_score - 1e-9

    @property
    def ran_on(self) -> str:
        """What the check ran on, in one line a student can paste when asking for help."""
        yours = self.environment.get("yours") or {}
        return (f"grader {yours.get('grader', '?')}, JAX {yours.get('jax', '?')}, "
                f"Python {yours.get('python', '?')}")

    def as_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "full_marks": self.full_marks, "ran_on": self.ran_on}


def locate(assignment_id: str | None = None, root: Path | None = None) -> tuple[Assignment, Bundle | None]:
    """The assignment to check against: the installed bundle's when there is one, else the checkout's."""
    roots = [root] if root else [r for r in (bundled_root(),) if r is not None]
    if not roots:
        try:
            roots = [find_root()]
        except ConfigError:
            raise CheckError("no assignment found: install the course's student bundle "
                             "(pip install <id>_student-*.whl) or run this inside the course's grader checkout") from None
    try:
        assignment = load(assignment_id, roots[0])
        return assignment, read_bundle(assignment.folder)
    except (ConfigError, ValueError) as error:
        raise CheckError(str(error)) from None


def facts_for(assignment: Assignment, bundle: Bundle | None) -> dict:
    """The reference facts: measured on this JAX (the checkout's solution, or the bundle's facts program, once per
    machine and JAX version), or as the course's JAX gave them where the bundle has no facts program."""
    if bundle is not None and bundle.fact_source:
        try:
            return WarmState(assignment, fact_source=bundle.fact_source).facts()
        except (ConfigError, OSError) as error:
            raise CheckError(start_failure(str(error)) or f"the check could not measure what it compares with on this "
                             f"machine (not a problem in your file): {error}") from None
    if bundle is not None:
        names = assignment.config["assignment"].get("reference_facts", [])
        return {name: decode(bundle.facts[name]) for name in names}
    require_solution(assignment)
    return reference_facts(assignment)


def require_solution(assignment: Assignment) -> None:
    if not assignment.solution_path.is_file():
        raise CheckError(f"{assignment.solution_path} is missing, so the reference facts cannot be measured: check with "
                         "the course's student bundle (grader build writes it beside the autograder zip)")


def narrowed(assignment: Assignment, group: str | None) -> Assignment:
    """The assignment with only `group`'s visible checks and the scenarios they (and baseline) need."""
    specs = [spec for spec in assignment.checks if spec.visibility == "visible" and (group is None or spec.group == group)]
    if group is not None and not specs:
        groups = sorted({spec.group for spec in assignment.checks if spec.visibility == "visible"})
        raise CheckError(f"no visible checks in group {group!r}; the groups are {', '.join(groups)}")
    needed = {"baseline"} | {scenario for spec in specs for scenario in spec.scenarios}
    return dataclasses.replace(
        assignment, checks=specs, scenarios={n: s for n, s in assignment.scenarios.items() if n in needed},
        groups={n: g for n, g in assignment.groups.items() if any(spec.group == n for spec in specs)})


def version_note(assignment: Assignment, bundle: Bundle | None, specs: list) -> str | None:
    """Say when this JAX differs from the course's, and which checks read facts measured on the course's."""
    if bundle is None or bundle.fact_source:   # facts measured on this JAX: nothing differs from grading
        return None
    yours = environment()
    differing = [f"{name} {yours.get(name)} (the course uses {bundle.environment.get(name)})"
                 for name in COMPARED if yours.get(name) != bundle.environment.get(name)]
    if not differing:
        return None
    facts = set(assignment.config["assignment"].get("reference_facts", []))
    affected = [spec.id for spec in specs if facts & set(spec.needs)]
    pins = " ".join(f"{name}=={bundle.environment.get(name)}" for name in COMPARED)
    text = f"You have {', '.join(differing)}."
    if affected:
        text += (f" These checks compare your values with the reference solution's {', '.join(sorted(facts))} as "
                 f"measured on the course's JAX, and may disagree with your final grade: {', '.join(affected)}.")
    return text + f" To check exactly as you will be graded: pip install {pins}"


def run_check(path: Path, assignment: Assignment, bundle: Bundle | None, group: str | None = None,
              note: Callable[[str], None] = lambda text: None, variant_seed: int | None = None) -> StudentCheck:
    """Grade `path` (a .py or .ipynb) in the sandbox; return its visible checks. `variant_seed` names the variant's
    world (default: a fresh one, drawn per check; a student bundle's check only)."""
    if not path.is_file():
        raise CheckError(f"{path} is not a file")
    try:   # a cache another user could write is refused before anything in it is read
        private_cache_dir()
    except UnsafeFolder as error:
        raise CheckError(str(error)) from None
    refused = unsupported_jax(student=True)
    if refused:
        raise CheckError(refused)
    target = narrowed(assignment, group)
    if bundle is None:
        require_solution(assignment)
    submission = load_single(path, assignment.submission_filename, assignment.max_submission_bytes)
    if submission.problem:   # nothing will run (an empty or unreadable file): no fork server, no reference facts
        record = grade(target, submission, {}, fresh_variant_seed(assignment))
    elif bundle is None:     # the checkout: in a world the reference solution scores full marks in (grading/single.py)
        record = grade_in_verified_world(target, submission, note, public_source=assignment.built_starter(),
                                         judged=assignment)
    else:                    # a student bundle has no solution to judge a world with: feedback in a drawn one
        with check_runner(target, bundle, note) as runner:   # the fork server starts while the facts are read
            facts = facts_for(assignment, bundle)
            record = grade(target, submission, facts, variant_seed or fresh_variant_seed(assignment), runner)
    visible = [c for c in record["checks"] if c["visibility"] == "visible"]
    for check in visible:
        check["feedback"] = for_student(check["feedback"])
    messages = [for_student(m) for m in student_messages(record["messages"])]
    failure = start_failure(str(record.get("grader_error") or "")) if record["status"] == "error" else None
    messages = ([failure] if failure else []) + messages + [note for note in (accelerator_note(),) if note]
    groups: dict[str, dict[str, float]] = {}
    for check in visible:
        entry = groups.setdefault(check["group"], {"score": 0.0, "max_score": 0.0})
        entry["score"] = round(entry["score"] + check["score"], 6)
        entry["max_score"] = round(entry["max_score"] + check["max_score"], 6)
    return StudentCheck(
        file=str(path), assignment=assignment.id, title=assignment.title, status=record["status"],
        score=round(sum(c["score"] for c in visible), 6), max_score=round(sum(c["max_score"] for c in visible), 6),
        checks=visible, groups=groups, messages=messages, stopped_early=stopped_early(record),
        environment={"yours": environment(), "course": bundle.environment if bundle else environment()},
        group=group, version_note=version_note(assignment, bundle, target.checks),
        notebook=submission.cells is not None,
        seconds={name: run["seconds"] for name, run in record.get("runs", {}).items()})
