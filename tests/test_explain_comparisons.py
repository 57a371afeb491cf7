"""`grader explain` shows, per check and world, what each comparison compared (issue 57): the student's value, the
expected one, the distance and how it was measured, the tolerance with how it is sized and its unit, pass or fail,
and for a method check what a value that does not follow the world's change gives; the settings with their units;
and what the credit fraction means in points. None of it reaches what a student sees.

The API (grader.api.comparisons, close_vectors) is tested in-process; then two example files are graded once by the
real grader (bob: a forward difference where the exercise asks for a central one; alice: the reference's methods),
and one is checked as a student checks it.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.api.comparisons import MAX_COMPARISONS, equal, in_range, recorded_dicts, recording, within
from grader.api.values import close_vectors
from grader.cli.adjust import explanation_text
from grader.cli.main import main
from grader.config import assignment as assignment_module
from grader.config.validate import config_problems
from grader.grading.explanations import scenario_explanation, setting_unit
from grader.grading.record_limits import RECORD_BYTES
from grader.runs.jobs import setup_parameters

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "submissions"
SINGLE = float(np.finfo(np.float32).eps)
# What only the instructor's explanation holds: none of it may reach a student's page or terminal.
INSTRUCTOR_ONLY = ("comparisons", "tolerance_kind", "expected value:", "student − expected", "credit fraction",
                   "rounding units of the largest", "does not follow this world's change", "score_fraction")


# ---- the API, in-process -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("student, expected, tolerance", [(1.0, 1.0 + 1e-9, 1e-9), (1.0, 1.0 + 2e-9, 1e-9),
                                                          (0.0, 0.0, 0.0), (math.nan, 1.0, 1.0), (math.inf, 1.0, 1e300)])
def test_within_is_exactly_the_comparison_and_records_it_only_while_grading(student, expected, tolerance):
    plain = abs(student - expected) <= tolerance
    assert within(student, expected, tolerance, what="outside") is plain      # no recording(): nothing kept, same answer
    with recording() as kept:
        assert within(student, expected, tolerance, what="a number", unit="bytes", unchanged=expected + 5 * tolerance) is plain
    [entry] = recorded_dicts(kept)
    assert entry["passed"] is plain and entry["tolerance"] == tolerance and entry["unit"] == "bytes"
    assert entry["measure"] == "|student − expected|" and entry["tolerance_kind"] == "absolute"
    if math.isfinite(student):
        assert entry["distance"] == pytest.approx(abs(student - expected)) and entry["student"] == student
    if tolerance > 0 and math.isfinite(expected):
        assert entry["separation"] == pytest.approx(5.0)
    json.dumps(entry, allow_nan=False)                                           # plain data, ready for the record


def test_close_vectors_answers_as_before_and_records_the_relative_distance():
    expected = np.arange(1.0, 21.0)
    actual = expected + np.r_[np.zeros(19), 0.04]
    with recording() as kept:
        assert close_vectors(actual, expected, 0.0, 1e-3, what="v vs w") == (False, pytest.approx(0.04 / 20))
        assert close_vectors(actual, expected, 1e-2, 0.0)[0] is True
        assert close_vectors(actual[:3], expected, 0.0, 1.0) == (False, math.inf)
    first, second, third = recorded_dicts(kept)
    assert first["what"] == "v vs w" and first["tolerance"] == 1e-3 and first["tolerance_kind"] == "relative to max|expected|"
    assert first["passed"] is False and first["distance"] == pytest.approx(0.002)
    assert "shape (20,)" in first["student"] and "norm" in first["student"] and "..." in first["student"]
    assert second["passed"] is True and "elementwise 0.01·|expected|" in second["tolerance_kind"]
    assert third["passed"] is False and third["distance"] is None


def test_ranges_exact_figures_and_the_cap():
    with recording() as kept:
        assert in_range(5e-5, 1e-4, 3e-2, what="eps", unit="x units") is False
        assert equal([7, 6], [9, 6], what="counts", unit="lines") is False
        assert equal(np.ones(3), np.ones(3), what="same") is True
        for _ in range(MAX_COMPARISONS):
            within(1.0, 1.0, 0.0, what="more")
    entries = recorded_dicts(kept)
    assert len(entries) == MAX_COMPARISONS + 1 and entries[-1]["what"] == "... 3 more comparison(s) not kept"
    assert entries[0]["distance"] == pytest.approx(5e-5) and entries[0]["expected"] == "in [0.0001, 0.03]"
    assert entries[1]["distance"] == 2 and entries[1]["unit"] == "lines" and entries[2]["passed"] is True


def test_settings_get_their_units_from_the_table_or_their_name():
    assert setting_unit("hvp_tolerance", {"hvp_tolerance": "× max|H·v|"}) == "× max|H·v|"
    assert setting_unit("scratch_bytes") == "bytes" and setting_unit("wall_seconds") == "seconds"
    assert setting_unit("width") == ""
    entry = scenario_explanation(0.5, "half", {}, {}, 7, {"hvp_tolerance": 6e-6, "width": 16}, [],
                                 {"hvp_tolerance": "× max|H·v|"})
    assert entry["units"] == {"hvp_tolerance": "× max|H·v|"} and "comparisons" not in entry
    config = copy.deepcopy(assignment_module.load("performance-05").config)
    assert config["units"]["hvp_tolerance"] and not config_problems(config, "performance-05")
    config["units"]["no_such_setting"] = "bytes"
    assert any("[units] no_such_setting" in problem for problem in config_problems(config, "performance-05"))


def test_explain_says_what_a_fraction_means_and_prints_an_older_record():
    record = {"submission": "s", "file": "s.py", "score": 3.0, "max_score": 6.0, "status": "graded",
              "checks": [{"id": "c.one", "group": "c", "score": 3.0, "max_score": 6.0, "visibility": "visible",
                          "feedback": "half"}],
              "explanations": {"c.one": {"baseline": {"score_fraction": 0.5, "feedback": "half", "seed": 1,
                                                      "settings": {"step": 2}}}}}
    text = explanation_text(record, ["c.one"])
    assert "credit fraction 0.5 (of 6 points): this world alone would give 0.5 × 6 = 3 points" in text
    assert "of the points" not in text and "setting step (assignment.toml): 2" in text


# ---- real gradings: a wrong and a right directional derivative -----------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("explain57")
    (root / "submissions").mkdir()
    for name in ("alice.py", "bob.py"):
        shutil.copy2(EXAMPLES / name, root / "submissions" / name)
    out = root / "results"
    assert main(["grade", str(root / "submissions"), "--out", str(out), "--workers", "2", "--no-similarity"]) == 0
    return out


def record(out: Path, name: str) -> dict:
    return json.loads((out / f"{name}.json").read_text(encoding="utf-8"))


def explained(out: Path, name: str, check: str, capsys) -> str:
    capsys.readouterr()
    assert main(["explain", name, check, "--out", str(out)]) == 0
    return capsys.readouterr().out


def every_comparison(rec: dict):
    for check, worlds in rec["explanations"].items():
        for scenario, entry in worlds.items():
            for comparison in entry.get("comparisons", []):
                yield check, scenario, comparison


@pytest.mark.slow
def test_a_forward_difference_is_explained_with_the_central_difference_it_missed(graded, capsys):
    bob = record(graded, "bob")
    central = next(c for c in bob["checks"] if c["id"] == "directional.central_difference")
    assert central["score"] == 0 and "forward difference" in central["feedback"]
    baseline = bob["explanations"]["directional.central_difference"]["baseline"]
    float32 = next(c for c in baseline["comparisons"] if "float32 rounding" in c["what"])
    # the expected value and the tolerance are the oracle's own, recomputed here from the lesson's world
    assignment = assignment_module.load("performance-05")
    scenario = assignment.scenarios["baseline"]
    parameters = setup_parameters(assignment, scenario, 18, bob["variant_seed"])
    oracle = assignment.oracle.build(18, {"reports": [[], []], "memory": [None, None]}, scenario,
                                     parameters=parameters, batch_seed=bob["variant_seed"])
    eps = float(baseline["values"]["eps"])
    assert min(abs(float32["expected"] - c) for c in oracle.central_differences(eps)) <= 1e-7 * abs(float32["expected"])
    assert float32["tolerance"] == pytest.approx(oracle.finite_noise(eps, assignment.settings.finite_noise_float32, SINGLE))
    assert float32["student"] == pytest.approx(float(baseline["values"]["finite"]), rel=1e-7)
    assert float32["distance"] == pytest.approx(abs(float32["student"] - float32["expected"]), rel=1e-4)
    assert float32["passed"] is False and float32["distance"] > float32["tolerance"]

    text = explained(graded, "bob", "directional.central_difference", capsys)
    assert "this world alone would give 0 × 11 = 0 points" in text and "of the points" not in text
    assert "with float32 rounding: FAILED" in text and "expected value:  " in text
    assert "measured as |student − expected|" in text and "passes when distance <= tolerance" in text
    assert "(absolute: finite_noise_float32 rounding units of the largest |f| evaluated, over eps)" in text
    assert ("setting finite_noise_float32 (assignment.toml): 10 float32 rounding units of the largest |f| "
            "evaluated, over eps") in text
    assert "method: a value that does not follow this world's change gives" in text    # the variant's counterfactual


@pytest.mark.slow
def test_the_reference_methods_are_explained_as_passing_with_their_separation(graded, capsys):
    alice = record(graded, "alice")
    assert alice["score"] == alice["max_score"]
    settings = assignment_module.load("performance-05").settings
    automatic = alice["explanations"]["directional.automatic"]["variant"]["comparisons"]
    [comparison] = automatic
    assert comparison["passed"] is True and comparison["distance"] <= comparison["tolerance"]
    assert comparison["separation"] >= settings.separation      # the world told autodiff from the unchanged slope
    for hvp in ("hvp.plain_matches_oracle", "hvp.remat_matches_plain"):
        decisive = alice["explanations"][hvp]["variant"]["comparisons"][0]
        assert decisive["passed"] is True and decisive["separation"] >= settings.separation, (hvp, decisive)
    text = explained(graded, "alice", "directional.automatic", capsys)
    assert "gradient · (1,…,1): PASSED" in text and "the change moves the expected value" in text
    assert "setting automatic_tolerance (assignment.toml): 1e-06 × Σ|gᵢ|" in text


@pytest.mark.slow
def test_every_recorded_comparison_agrees_with_itself_and_the_record_stays_small(graded):
    for name in ("alice", "bob"):
        assert len((graded / f"{name}.json").read_bytes()) < RECORD_BYTES
        rec = record(graded, name)
        assert any(True for _ in every_comparison(rec)), name
        for check, scenario, comparison in every_comparison(rec):
            if comparison.get("distance") is not None and comparison["tolerance"] > 0:
                assert comparison["passed"] is (comparison["distance"] <= comparison["tolerance"]), (check, scenario)


@pytest.mark.slow
def test_no_comparison_reaches_what_a_student_sees(graded, tmp_path, capsys):
    assert '"comparisons"' in (graded / "bob.json").read_text(encoding="utf-8")      # the instructor's record has them
    for name in ("alice", "bob"):
        for page in (f"{name}.feedback.md", f"{name}.feedback.html", f"gradescope/{name}.json"):
            text = (graded / page).read_text(encoding="utf-8")
            leaked = [secret for secret in INSTRUCTOR_ONLY if secret in text]
            assert not leaked, (page, leaked)
    student = tmp_path / "performance-05.py"
    student.write_text((EXAMPLES / "bob.py").read_text(encoding="utf-8"), encoding="utf-8")
    capsys.readouterr()
    assert main(["check", str(student)]) == 1
    printed = capsys.readouterr()
    assert "[FAIL] directional.central_difference" in printed.out
    leaked = [secret for secret in INSTRUCTOR_ONLY if secret in printed.out + printed.err]
    assert not leaked, leaked
