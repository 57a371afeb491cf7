"""A result record as Gradescope's `results.json`: the schema otter-grader writes, one test entry per check.

Gradescope's autograder specification (which otter's `GradingResults.to_gradescope_dict` writes into) has
top-level `score`, `execution_time`, `output`, `stdout_visibility` and `tests`, each test with `name`,
`score`, `max_score`, `status` ("passed"/"failed"), `visibility` and `output`. otter itself gives every
test file one visibility from its `show_hidden` switch; here each check keeps its own, from the
assignment config:

- `visible`: the check's feedback, shown at once;
- `after_published`: the check's feedback, shown once the instructor publishes grades;
- `hidden`: a fixed sentence with the score only (`hidden_output`). The feedback of a hidden check names
  expected values, so it never enters results.json: not in the test's output, nor anywhere visible.
"""

from __future__ import annotations

from typing import Any

VISIBILITY = {"visible": "visible", "hidden": "hidden", "after_published": "after_published"}
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


def hidden_output(check: dict) -> str:
    """What a hidden check says on Gradescope: that it exists and its points, nothing it compared."""
    verdict = "passed" if _passed(check) else "did not pass"
    return f"Hidden check {verdict} ({check['score']:g}/{check['max_score']:g}); its details are not shown."


def check_output(check: dict) -> str:
    """The `output` of a check's test entry (the feedback, or the fixed sentence for a hidden check)."""
    return hidden_output(check) if check["visibility"] == "hidden" else check["feedback"]


def test_entry(check: dict) -> dict[str, Any]:
    return {
        "name": check["id"],
        "score": check["score"],
        "max_score": check["max_score"],
        "status": "passed" if _passed(check) else "failed",
        "visibility": VISIBILITY[check["visibility"]],
        "output": check_output(check),
    }


def submission_output(record: dict) -> str:
    """The top-level `output` (always shown to the student): score, status and the run notes."""
    lines = [f"{record.get('title') or record.get('assignment', '')}: {record['score']:g} / {record['max_score']:g}"]
    if record["status"] == "error":
        lines.append("Your file could not be graded.")
    lines += [f"- {message}" for message in record.get("messages", [])]
    return "\n".join(lines)


def results_json(record: dict, execution_time: float | None = None) -> dict[str, Any]:
    """Gradescope's results.json for one record. `execution_time` defaults to the longest scenario run
    (scenarios run side by side); stdout (the autograder's own log) stays hidden from students."""
    if execution_time is None:
        execution_time = max((run.get("seconds") or 0.0 for run in (record.get("runs") or {}).values()), default=0.0)
    return {
        "score": record["score"],
        "execution_time": round(float(execution_time), 3),
        "output": submission_output(record),
        "stdout_visibility": "hidden",
        "tests": [test_entry(check) for check in record["checks"]],
    }


def _passed(check: dict) -> bool:
    return check["score"] >= check["max_score"]
