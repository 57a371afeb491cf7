"""A result record as Gradescope's `results.json`: the schema otter-grader writes, one test entry per check.

Gradescope's autograder specification (which otter's `GradingResults.to_gradescope_dict` writes into) has
top-level `score`, `execution_time`, `output`, `stdout_visibility` and `tests`, each test with `name`,
`score`, `max_score`, `status` ("passed"/"failed"), `visibility` and `output`. Each check keeps its own
visibility from the assignment config:

- `visible`: the check's feedback, shown at once;
- `after_due_date` / `after_published`: the check's feedback, shown after the due date / once the instructor
  publishes grades;
- `hidden`: a fixed sentence with the score only (`hidden_output`). The feedback of a hidden check names
  expected values, so it never enters results.json (unless otter's `show_hidden` says hidden results may be
  shown once published).

otter's grading options that mean something here are honoured as otter honours them (`OtterSettings`):
`points_possible` and `score_threshold` (the total), `show_stdout`, `show_hidden`, `show_all_public` and
`force_public_test_summary` (a "Public Tests" summary entry first, otter's default). Feedback is Markdown
(`test_output_format: md`, every line from a run made inert); the top-level output is plain text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.common.markdown import md_block
from grader.lms.late import late_sentence
from grader.model.record import CheckRecord, Record, held_checks
from grader.model.verdicts import grader_fault, passed, student_messages

GRADESCOPE_VISIBILITIES = ["hidden", "after_due_date", "after_published", "visible"]

# Gradescope's results.json specification as a JSON schema (every key it defines; the ones we always
# write are required). https://gradescope-autograders.readthedocs.io/en/latest/specs/
_TEST_SCHEMA = {
    "type": "object",
    "required": ["name", "score", "max_score", "status", "visibility", "output"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "score": {"type": "number", "minimum": 0},
        "max_score": {"type": "number", "minimum": 0},
        "status": {"enum": ["passed", "failed"]},
        "visibility": {"enum": GRADESCOPE_VISIBILITIES},
        "output": {"type": "string"},
        "name_format": {"type": "string"}, "number": {"type": "string"}, "output_format": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}}, "extra_data": {"type": "object"},
    },
}
RESULTS_SCHEMA = {
    "type": "object",
    "required": ["score", "execution_time", "output", "stdout_visibility", "tests"],
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number", "minimum": 0},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": {"type": "string"}, "test_output_format": {"type": "string"},
        "test_name_format": {"type": "string"},
        "visibility": {"enum": GRADESCOPE_VISIBILITIES},
        "stdout_visibility": {"enum": GRADESCOPE_VISIBILITIES},
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": _TEST_SCHEMA},
        "leaderboard": {"type": "array"},
    },
}


@dataclass(frozen=True)
class OtterSettings:
    """The otter grading options that shape results.json (otter's defaults)."""

    points_possible: float | None = None
    score_threshold: float | None = None
    show_stdout: bool = False
    show_hidden: bool = False
    show_all_public: bool = False
    force_public_test_summary: bool = True

    @classmethod
    def from_config(cls, config: Any) -> OtterSettings:
        """From otter's AutograderConfig (or a dict of its keys)."""
        get = config.get if isinstance(config, dict) else (lambda key, default=None: getattr(config, key, default))
        defaults = cls()
        return cls(**{name: get(name, getattr(defaults, name)) for name in cls.__dataclass_fields__})


def hidden_output(check: CheckRecord) -> str:
    """What a hidden check says on Gradescope: that it exists and its points, nothing it compared."""
    verdict = "passed" if _passed(check) else "did not pass"
    return f"Hidden check {verdict} ({check['score']:g}/{check['max_score']:g}); its details are not shown."


def check_output(check: CheckRecord, show_hidden: bool = False) -> str:
    """The `output` of a check's test entry (the feedback, or the fixed sentence for a hidden check), as Markdown."""
    if check["visibility"] == "hidden" and not show_hidden:
        return hidden_output(check)
    return md_block(check["feedback"], indent="")


def test_visibility(check: CheckRecord, settings: OtterSettings, all_visible: bool) -> str:
    if check["visibility"] == "hidden":
        if settings.show_all_public and all_visible:
            return "visible"
        return "after_published" if settings.show_hidden else "hidden"
    return check["visibility"]


def test_entry(check: CheckRecord, number: str = "", title: str | None = None, settings: OtterSettings = OtterSettings(),
               all_visible: bool = False) -> dict[str, Any]:
    entry = {
        "name": title or check["id"],
        "score": check["score"],
        "max_score": check["max_score"],
        "status": "passed" if _passed(check) else "failed",
        "visibility": test_visibility(check, settings, all_visible),
        "output": check_output(check, settings.show_hidden),
        "output_format": "md",
    }
    if number:
        entry["number"] = number
    return entry


def submission_output(record: Record) -> str:
    """The top-level `output` (always shown to the student, plain text): score, status and the run notes."""
    lines = [f"{record.get('title') or record.get('assignment', '')}: {record['score']:g} / {record['max_score']:g}"]
    if grader_fault(record):
        lines.append("Not graded: the grader failed on this file through its own fault (not yours); it will be "
                     "graded again.")
    elif record["status"] == "error":
        lines.append("Your file could not be graded.")
    if held := held_checks(record):
        lines.append(f"Held for your instructor's review: {', '.join(held)} (no points until they decide; the "
                     "feedback of each says why).")
    if record.get("adjustments"):   # the instructor's decisions, with their reasons as written
        autograde = (record.get("autograde") or {"score": record["score"]})["score"]
        lines.append(f"Adjusted by your instructor (the autograder's score was {autograde:g}):")
        lines += [f"- {a.get('check') or 'whole submission'}: {a['delta']:+g} points. Reason: {a['reason']}"
                  for a in record.get("adjustments", [])]
    late = record.get("late")
    if late is not None and (sentence := late_sentence(late)):   # the course's late policy (lms/late.py)
        override = late.get("override")
        lines.append(sentence + (f" Reason: {override['reason']}" if override else ""))
    lines += [f"- {message}" for message in student_messages(record.get("messages", []))]
    return "\n".join(lines)


def adjustment_note(record: Record, check: CheckRecord) -> str:
    """What a check's test entry adds when the instructor adjusted it (Markdown, the reason made inert)."""
    notes = [a for a in record.get("adjustments", []) if a.get("check") == check["id"]]
    if not notes:
        return ""
    autograde = (record.get("autograde") or {"checks": {}})["checks"].get(check["id"], check["score"])
    return "\n\n" + "\n".join(f"**Adjusted by your instructor** ({a['delta']:+g} points; the autograder gave "
                                f"{autograde:g}). Reason: {md_block(a['reason'], indent='')}" for a in notes)


def public_summary(record: Record) -> dict[str, Any]:
    """otter's "Public Tests" entry: which visible checks passed."""
    visible = [c for c in record["checks"] if c["visibility"] == "visible"]
    failed = [c["id"] for c in visible if not _passed(c)]
    text = f"{len(visible) - len(failed)} of {len(visible)} public checks passed." + (
        "\n" + "\n".join(f"- {name}" for name in failed) if failed else "")
    return {"name": "Public Tests", "score": 0, "max_score": 0, "status": "failed" if failed else "passed",
            "visibility": "visible", "output": md_block(text, indent=""), "output_format": "md"}


def total_score(record: Record, settings: OtterSettings) -> float:
    """The submission's score as otter reports it: scaled to points_possible, or all-or-nothing at a threshold."""
    fraction = record["score"] / record["max_score"] if record["max_score"] else 0.0
    if settings.score_threshold is not None:
        full = settings.points_possible if settings.points_possible is not None else record["max_score"]
        return float(full) if fraction >= settings.score_threshold else 0.0
    if settings.points_possible is not None:
        return round(fraction * float(settings.points_possible), 6)
    return record["score"]


def results_json(record: Record, execution_time: float | None = None, settings: OtterSettings = OtterSettings(),
                 titles: dict[str, str] | None = None) -> dict[str, Any]:
    """Gradescope's results.json for one record. `execution_time` defaults to the longest scenario run (scenarios
    run side by side); stdout (the autograder's own log) is hidden unless otter's `show_stdout` says otherwise.
    `titles`: check id -> readable test name."""
    if execution_time is None:
        execution_time = max((run.get("seconds") or 0.0 for run in (record.get("runs") or {}).values()), default=0.0)
    titles = titles or {}
    all_visible = all(c["visibility"] == "visible" for c in record["checks"])
    tests = [public_summary(record)] if (not settings.show_hidden or settings.force_public_test_summary) else []
    groups: dict[str, int] = {}
    for check in record["checks"]:
        group_number = groups.setdefault(check["group"], len(groups) + 1)
        within = sum(1 for c in record["checks"][: record["checks"].index(check)] if c["group"] == check["group"]) + 1
        tests.append(test_entry(check, f"{group_number}.{within}", titles.get(check["id"]), settings, all_visible))
        tests[-1]["output"] += adjustment_note(record, check)
    return {
        "score": total_score(record, settings),
        "execution_time": round(float(execution_time), 3),
        "output": submission_output(record),
        "output_format": "text",
        "test_output_format": "md",
        "stdout_visibility": "after_published" if settings.show_stdout else "hidden",
        "tests": tests,
    }


def _passed(check: CheckRecord) -> bool:
    return passed(check["score"], check["max_score"])
