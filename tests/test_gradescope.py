"""Gradescope results.json from a record: Gradescope's schema, per-check visibility, hidden checks leak nothing."""

from __future__ import annotations

import json

import jsonschema
import pytest

from grader.config.assignment import load
from grader.lms.gradescope import (
    RESULTS_SCHEMA,
    OtterSettings,
    hidden_output,
    results_json,
)
from grader.outputs.writers import gradescope_path, write_lms_outputs

SECRET = "expected 0.7853981633974483"   # what a hidden check's feedback names and results.json must not


def make_record(status: str = "graded") -> dict:
    return {
        "submission": "alice", "file": "alice.py", "assignment": "demo", "title": "Demo lesson", "status": status,
        "score": 9.5, "max_score": 20.0,
        "groups": {"runs": {"score": 3.0, "max_score": 3.0}, "hvp": {"score": 6.5, "max_score": 17.0}},
        "checks": [
            {"id": "runs.no_errors", "group": "runs", "score": 3.0, "max_score": 3.0, "visibility": "visible",
             "feedback": "Every top-level statement ran without an error."},
            {"id": "hvp.visible_fail", "group": "hvp", "score": 0.0, "max_score": 3.0, "visibility": "visible",
             "feedback": "`hvp_plain` differs from the exact HVP at index 3."},
            {"id": "hvp.secret", "group": "hvp", "score": 4.5, "max_score": 9.0, "visibility": "hidden",
             "feedback": f"Hidden detail: {SECRET}, got 0.78."},
            {"id": "hvp.later", "group": "hvp", "score": 2.0, "max_score": 5.0, "visibility": "after_published",
             "feedback": "Shown once grades are published: 2 of 5 directions right."},
        ],
        "messages": ["In the variant run, line 40 raised an error."],
        "environment": {"grader": "0.1.0"}, "variant_seed": 7, "sha256": "0" * 64,
        "runs": {"baseline": {"seconds": 2.5}, "variant": {"seconds": 3.25}},
    }


def test_results_json_follows_gradescopes_schema():
    results = results_json(make_record())
    jsonschema.validate(results, RESULTS_SCHEMA)
    assert json.loads(json.dumps(results, allow_nan=False)) == results


def test_one_test_entry_per_check_with_its_score_status_and_visibility():
    record = make_record()
    summary, *tests = results_json(record)["tests"]      # otter's "Public Tests" entry first (its default)
    assert summary["name"] == "Public Tests" and summary["max_score"] == 0 and summary["visibility"] == "visible"
    assert [t["name"] for t in tests] == [c["id"] for c in record["checks"]]
    assert [t["number"] for t in tests] == ["1.1", "2.1", "2.2", "2.3"]   # group, then check within it
    assert [(t["score"], t["max_score"]) for t in tests] == [(c["score"], c["max_score"]) for c in record["checks"]]
    assert [t["visibility"] for t in tests] == ["visible", "visible", "hidden", "after_published"]
    assert [t["status"] for t in tests] == ["passed", "failed", "failed", "failed"]  # partial credit is "failed"


def test_visible_and_after_published_checks_carry_their_feedback():
    record = make_record()
    tests = {t["name"]: t for t in results_json(record)["tests"]}
    assert tests["hvp.visible_fail"]["output"] == record["checks"][1]["feedback"]
    assert tests["hvp.later"]["output"] == record["checks"][3]["feedback"]


def test_hidden_checks_leak_nothing_they_compared():
    record = make_record()
    results = results_json(record)
    hidden = next(t for t in results["tests"] if t["name"] == "hvp.secret")
    assert hidden["output"] == hidden_output(record["checks"][2])
    assert "4.5/9" in hidden["output"]
    dumped = json.dumps(results)
    assert SECRET not in dumped and "0.78" not in dumped


def test_top_level_score_output_time_and_stdout_visibility():
    results = results_json(make_record())
    assert results["score"] == 9.5 == sum(t["score"] for t in results["tests"])
    assert results["execution_time"] == 3.25          # longest scenario (they run side by side)
    assert results_json(make_record(), execution_time=12.0)["execution_time"] == 12.0
    assert results["stdout_visibility"] == "hidden"
    assert "Demo lesson: 9.5 / 20" in results["output"]
    assert "line 40 raised an error" in results["output"]


def test_error_record_says_it_could_not_be_graded():
    record = make_record("error")
    record.pop("runs")
    record["messages"] = ["alice.py is empty."]
    results = results_json(record)
    jsonschema.validate(results, RESULTS_SCHEMA)
    assert results["execution_time"] == 0.0
    assert "could not be graded" in results["output"] and "alice.py is empty." in results["output"]


@pytest.mark.parametrize("bad", [
    {"tests": [{"name": "x", "score": 1, "max_score": 1, "status": "ok", "visibility": "visible", "output": ""}]},
    {"tests": [{"name": "x", "score": 1, "max_score": 1, "status": "passed", "visibility": "students", "output": ""}]},
    {"stdout_visibility": "public"},
    {"scroe": 1},
])
def test_schema_rejects_what_gradescope_does_not_define(bad):
    results = {**results_json(make_record()), **bad}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(results, RESULTS_SCHEMA)


def test_write_lms_outputs_writes_one_results_json_per_submission(tmp_path):
    assignment = load()
    records = []
    for name, fraction in (("alice", 1.0), ("bob", 0.5)):
        checks = [{"id": c.id, "group": c.group, "score": c.points * fraction, "max_score": c.points,
                   "visibility": c.visibility, "feedback": "ok"} for c in assignment.checks]
        records.append({"submission": name, "file": f"{name}.py", "title": assignment.title, "status": "graded",
                        "score": sum(c["score"] for c in checks), "max_score": assignment.max_score,
                        "checks": checks, "messages": []})
    write_lms_outputs(tmp_path, records, assignment)
    for record in records:
        results = json.loads(gradescope_path(tmp_path, record["submission"]).read_text())
        jsonschema.validate(results, RESULTS_SCHEMA)
        assert results["score"] == record["score"]
    assert sorted(p.name for p in (tmp_path / "gradescope").iterdir()) == ["alice.json", "bob.json"]
    assert (tmp_path / "final_grades.csv").is_file() and (tmp_path / "canvas.csv").is_file()


def test_otter_options_shape_the_results_as_otter_applies_them():
    record = make_record()
    base = results_json(record)
    assert base["score"] == record["score"] and base["stdout_visibility"] == "hidden"
    assert base["output_format"] == "text" and base["test_output_format"] == "md"
    scaled = results_json(record, settings=OtterSettings(points_possible=50))
    assert scaled["score"] == round(record["score"] / record["max_score"] * 50, 6)
    assert results_json(record, settings=OtterSettings(show_stdout=True))["stdout_visibility"] == "after_published"
    shown = {t["name"]: t for t in results_json(record, settings=OtterSettings(show_hidden=True))["tests"]}
    assert shown["hvp.secret"]["visibility"] == "after_published" and SECRET in shown["hvp.secret"]["output"]
    assert results_json(record, settings=OtterSettings(show_hidden=True, force_public_test_summary=False))["tests"][0]["name"] != "Public Tests"
    threshold = results_json(record, settings=OtterSettings(score_threshold=0.99))
    assert threshold["score"] == 0
    titled = results_json(record, titles={"hvp.secret": "A readable name"})
    assert any(t["name"] == "A readable name" for t in titled["tests"])
