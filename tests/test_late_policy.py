"""The course's late policy (issue 57): `[late]` in assignment.toml (due, grace, penalty per day, cap), applied from the
LMS's submission times (a Gradescope export's submission_metadata.yml, the autograder's submission_metadata.json,
`grader grade --times FILE`; Canvas's LATE flag carries no time, so it charges nothing and warns), shown in the
feedback and every gradebook file, overridable and undoable with `grader adjust STUDENT late`.

The arithmetic and validation are tested on plain values; the rest grades the tiny lesson (tests/fixtures/tiny_project,
no JAX) once, laid out as a Gradescope export with a Canvas download beside it, and re-runs `grader grade`, which
reuses every record (the policy is applied as files are written, and is not part of the assignment's fingerprint).
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import io
import json
import shutil
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.config.assignment import every_problem, load
from grader.config.late import LatePolicy, late_policy, late_problems
from grader.lms.gradescope import results_json
from grader.lms.late import SubmittedAt, TimesError, autograder_time, charged, late_entry, read_times, time_for
from grader.outputs.adjustments import apply, autograded
from grader.outputs.adjustments_file import Adjustment

TINY = Path(__file__).with_name("fixtures") / "tiny_project"
WRONG = "import math\nradius = 2.0\narea = math.pi * radius\nside = math.sqrt(area)\n"
DUE = "2026-12-10T23:59:00-05:00"
LATE_TABLE = f'\n[late]\ndue = "{DUE}"\ngrace_minutes = 15\npenalty_per_day = 0.2\nmax_penalty = 0.5\n'
# Gradescope's export: Ruby-symbol keys, its own time format (nanoseconds, a space before the offset)
METADATA = """\
submission_1:
  :submitters:
  - :name: Ann On Time
    :sid: '1'
  :created_at: 2026-12-10 23:50:00.123456789 -05:00
submission_2:
  :submitters:
  - :name: Bo Two Days
  :created_at: 2026-12-12 10:00:00.000000000 -05:00
submission_3:
  :created_at: 2027-01-20 10:00:00.000000000 -05:00
"""
CANVAS = "smithjane_LATE_123_456_tiny.py"
REASON = "Excused <b>illness</b> & =1+1"     # the instructor's text: inert everywhere
POLICY = LatePolicy(due=datetime.datetime.fromisoformat(DUE), grace_minutes=15, penalty_per_day=0.2, max_penalty=0.5)


# ---- the configuration ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("table, fragment", [
    ({"due": "next friday"}, "is not an ISO 8601 date and time"),
    ({"due": "2026-12-10T23:59:00"}, "has no time zone offset"),
    ({"due": datetime.datetime(2026, 12, 10, 23, 59)}, "has no time zone offset"),      # a TOML local date-time
    ({"due": DUE, "penalty_per_day": -0.1}, "penalty_per_day = -0.1: must be a fraction"),
    ({"due": DUE, "max_penalty": 1.5}, "max_penalty = 1.5: must be a fraction"),
    ({"due": DUE, "grace_minutes": -5}, "grace_minutes = -5: must be a number of minutes >= 0"),
    ({"due": DUE, "grace_minutes": "15"}, "grace_minutes = '15'"),
    ({"due": DUE, "penalty_per_dya": 0.1}, "unknown key 'penalty_per_dya'"),
    ({"penalty_per_day": 0.1}, "[late] due is missing"),
])
def test_a_bad_late_table_is_named_with_its_fix(table, fragment):
    problems = late_problems({"late": table, "checks": []})
    assert len(problems) == 1 and fragment in problems[0], problems


def test_a_good_table_or_none_is_fine_and_read_as_written():
    assert late_problems({"checks": []}) == [] and late_policy({"checks": []}) is None
    table = {"due": datetime.datetime(2026, 12, 10, 23, 59, tzinfo=datetime.UTC), "grace_minutes": 15,
             "penalty_per_day": 0.1}
    assert late_problems({"late": table}) == []
    policy = late_policy({"late": table})
    assert policy is not None and policy.max_penalty == 1.0 and policy.due.utcoffset() == datetime.timedelta(0)
    assert late_policy({"late": {"due": "2026-12-10T23:59:00Z"}}).due.tzinfo is not None
    assert "reserved for the late penalty" in late_problems({"checks": [{"id": "late"}]})[0]


def test_validate_lists_the_late_tables_problems(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(TINY, root)
    toml = root / "assignments" / "tiny" / "assignment.toml"
    toml.write_text(toml.read_text() + '\n[late]\ndue = "2026-12-10 23:59"\npenalty_per_day = -1\n')
    problems = every_problem("tiny", root)
    assert any("[late] due" in p and "offset" in p for p in problems), problems
    assert any("[late] penalty_per_day = -1" in p for p in problems), problems


def test_the_late_table_is_not_part_of_the_fingerprint(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(TINY, root)
    toml = root / "assignments" / "tiny" / "assignment.toml"
    before = load("tiny", root).fingerprint
    toml.write_text(toml.read_text() + LATE_TABLE)
    assert load("tiny", root).fingerprint == before
    toml.write_text(toml.read_text() + "\n[limits]\nwall_seconds = 29\n")
    assert load("tiny", root).fingerprint != before       # anything else still re-grades


# ---- the arithmetic -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("after_due, days, penalty", [
    (datetime.timedelta(minutes=-1), None, None),                               # on time: no entry
    (datetime.timedelta(minutes=10), 0, 0.0),                                   # inside the grace
    (datetime.timedelta(minutes=15), 0, 0.0),                                   # the grace's last instant
    (datetime.timedelta(minutes=15, seconds=1), 1, 0.6),                        # a second after it: one started day
    (datetime.timedelta(days=1, minutes=15), 1, 0.6),                           # exactly one day after it
    (datetime.timedelta(days=1, minutes=15, microseconds=1), 2, 1.2),           # a moment more: two
    (datetime.timedelta(days=30), 30, 1.5),                                     # the cap: half of 3 points
])
def test_days_and_points_at_the_boundaries(after_due, days, penalty):
    entry = late_entry(POLICY, SubmittedAt(POLICY.due + after_due, "test"), 3.0)
    if days is None:
        assert entry is None
        return
    assert entry is not None and entry["days_charged"] == days and entry["penalty"] == pytest.approx(penalty)
    assert entry["minutes_late"] == pytest.approx(after_due.total_seconds() / 60, abs=0.01)


def fabricated(score: float, *, submission: str = "sam", file: str = "sam.py") -> dict:
    return {"submission": submission, "file": file, "assignment": "tiny", "title": "Circle area", "status": "graded",
            "score": score, "max_score": 3.0, "groups": {"runs": {"score": min(score, 2.0), "max_score": 2.0},
                                                         "area": {"score": max(score - 2.0, 0.0), "max_score": 1.0}},
            "checks": [{"id": "area.value", "group": "area", "score": max(score - 2.0, 0.0), "max_score": 1.0,
                        "visibility": "visible", "feedback": "ok"}],
            "messages": [], "environment": {}, "variant_seed": 1, "sha256": "a" * 64, "fingerprint": "f"}


def test_the_penalty_comes_after_adjustments_and_never_below_zero():
    late = SubmittedAt(POLICY.due + datetime.timedelta(days=30), "test")      # charged the cap, 1.5
    low = charged(fabricated(1.0), POLICY, late)
    assert low["score"] == 0 and low["late"]["penalty"] == 1.5 and low["late"]["deducted"] == 1.0
    assert low["autograde"]["score"] == 1.0
    added = Adjustment("sam", None, "add", 1.0, "partial credit", sha256="a" * 64)
    record = charged(fabricated(2.0), POLICY, late)
    final = apply(record, [added])
    assert final["score"] == pytest.approx(1.5) and final["autograde"]["score"] == 2.0     # 2 + 1 - 1.5
    assert apply(final, [added]) == final and autograded(final)["score"] == 2.0           # idempotent, undoable
    graced = charged(fabricated(3.0), POLICY, SubmittedAt(POLICY.due + datetime.timedelta(minutes=5), "test"))
    noted = apply(graced, [Adjustment("sam", "late", "add", 0.0, "noted", sha256="a" * 64)])
    assert noted["late"]["override"]["reason"] == "noted" and "override" not in apply(noted, [])["late"]


def test_the_gradescope_autograder_reads_its_metadata(tmp_path):
    (tmp_path / "submission_metadata.json").write_text(json.dumps(
        {"id": 9, "created_at": "2026-12-12T10:00:00.365935-05:00", "assignment": {"due_date": DUE}}))
    submitted = autograder_time(tmp_path)
    assert submitted is not None and submitted.at == datetime.datetime.fromisoformat("2026-12-12T10:00:00.365935-05:00")
    record = charged(fabricated(3.0), POLICY, submitted)
    assert record["score"] == pytest.approx(1.8) and record["late"]["days_charged"] == 2
    results = results_json(record)
    assert results["score"] == pytest.approx(1.8) and "2 days late" in results["output"]
    (tmp_path / "submission_metadata.json").write_text("{}")     # as `otter run` and the tests' layout leave it
    assert autograder_time(tmp_path) is None and charged(fabricated(3.0), POLICY, None)["score"] == 3.0


def test_a_times_csv_is_read_by_id_and_refused_when_malformed(tmp_path):
    good = tmp_path / "times.csv"
    good.write_text("submission,submitted_at\n123,2026-12-12T10:00:00-05:00\nalice,2026-12-10T20:00:00Z\n")
    times = read_times(good)
    assert set(times) == {"123", "alice"} and times["123"].source == "the times file times.csv"
    canvas = fabricated(3.0, submission="smithjane_LATE_123_456_tiny", file=CANVAS)
    assert time_for(canvas, times) == times["123"]                    # found by the Canvas user id
    assert time_for(canvas, {}).at is None                            # the LATE flag, no time
    assert time_for(fabricated(3.0), {}) is None
    bad = tmp_path / "bad.csv"
    bad.write_text("submission,submitted_at\nbob,yesterday\n")
    with pytest.raises(TimesError, match="line 2"):
        read_times(bad)
    bad.write_text("who,when\n")
    with pytest.raises(TimesError, match="must name the columns submission,submitted_at"):
        read_times(bad)


# ---- a class, end to end --------------------------------------------------------------------------------------

def grade(project: Path, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["grade", str(project / "submissions"), "--root", str(project), "--assignment", "tiny",
                     "--out", str(project / "results"), "--workers", "2", "--no-similarity", *extra])
    return code, out.getvalue()


def adjust(project: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["adjust", *args, "--out", str(project / "results")])
    return code, out.getvalue()


def record(project: Path, name: str) -> dict:
    return json.loads((project / "results" / f"{name}.json").read_text())


def rows(path: Path, key: str) -> dict[str, dict]:
    return {row[key]: row for row in csv.DictReader(io.StringIO(path.read_text()))}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The tiny lesson with [late], as a Gradescope export (three folders and the metadata) plus a Canvas download."""
    root = tmp_path_factory.mktemp("late") / "project"
    shutil.copytree(TINY, root)
    toml = root / "assignments" / "tiny" / "assignment.toml"
    toml.write_text(toml.read_text() + LATE_TABLE)
    submissions = root / "submissions"
    correct = (TINY / "solutions" / "tiny.py").read_text()
    for name, text in (("submission_1", correct), ("submission_2", correct), ("submission_3", WRONG)):
        (submissions / name).mkdir(parents=True)
        (submissions / name / "tiny.py").write_text(text)
    (submissions / CANVAS).write_text(correct)
    (submissions / "submission_metadata.yml").write_text(METADATA)
    code, printed = grade(root)
    assert code == 0, printed
    return root


def test_gradescope_times_are_applied_and_canvas_late_without_time_is_not(project):
    on_time, two_days, wrong = (record(project, f"submission_{n}") for n in (1, 2, 3))
    assert "late" not in on_time and on_time["score"] == 3
    assert two_days["late"]["days_charged"] == 2 and two_days["late"]["penalty"] == pytest.approx(1.2)
    assert two_days["score"] == pytest.approx(1.8) and two_days["autograde"]["score"] == 3
    assert two_days["late"]["source"] == "Gradescope's submission_metadata.yml"
    assert wrong["score"] == pytest.approx(0.5) and wrong["late"]["deducted"] == pytest.approx(1.5)   # the cap
    canvas = record(project, "smithjane_LATE_123_456_tiny")
    assert canvas["score"] == 3 and canvas["late"]["submitted_at"] is None and canvas["late"]["deducted"] == 0
    assert not (project / "results" / "submission_metadata.yml.json").exists()     # not taken for a submission
    warnings = (project / "results" / "canvas-warnings.txt").read_text()
    assert f"{CANVAS}: Canvas marks it LATE, but its download name carries no time" in warnings
    assert "--times FILE" in warnings


def test_every_gradebook_file_and_the_feedback_show_it(project):
    out = project / "results"
    grades = rows(out / "grades.csv", "submission")
    assert grades["submission_2"]["total"] == "1.8" and grades["submission_2"]["late_penalty"] == "-1.2"
    assert grades["submission_2"]["autograde"] == "3" and grades["submission_2"]["late"] == "late"
    assert grades["submission_1"]["late_penalty"] == "" and grades["smithjane_LATE_123_456_tiny"]["late_penalty"] == "0"
    otter = rows(out / "final_grades.csv", "file")
    assert otter["submission_2"]["total_points_earned"] == "1.8" and otter["submission_2"]["percent_correct"] == "0.6"
    canvas = (out / "canvas.csv").read_text().splitlines()
    assert any(line.startswith("submission_2,") and line.endswith(",1.8") for line in canvas), canvas
    results = json.loads((out / "gradescope" / "submission_2.json").read_text())
    assert results["score"] == pytest.approx(1.8) and "2 days late after the 15-minute grace period" in results["output"]
    markdown = (out / "submission_2.feedback.md").read_text()
    assert "## Late submission" in markdown and "Submitted 2026-12-12 10:00:00-05:00, due 2026-12-10 23:59:00-05:00" \
        in markdown and "1.2 points off under the course's late policy" in markdown and "**1.8 / 3**" in markdown
    page = (out / "submission_2.feedback.html").read_text()
    assert 'id="late"' in page and "2 days late" in page
    assert "Late submission" not in (out / "smithjane_LATE_123_456_tiny.feedback.md").read_text()   # nothing charged


def test_a_changed_policy_regrades_nobody_and_applies_at_once(project, tmp_path):
    copy = tmp_path / "project"
    shutil.copytree(project, copy)
    (copy / "results" / ".grader-results").write_text(json.dumps(
        {"submissions": str((copy / "submissions").resolve()), "assignment": "tiny"}))
    toml = copy / "assignments" / "tiny" / "assignment.toml"
    toml.write_text(toml.read_text().replace("penalty_per_day = 0.2", "penalty_per_day = 0.1"))
    code, printed = grade(copy)
    assert code == 0 and "4 reused)" in printed               # nothing graded again
    assert record(copy, "submission_2")["score"] == pytest.approx(2.4)           # 3 - 2 days x 0.1 x 3
    times = tmp_path / "times.csv"                                             # the Canvas student's time, by user id
    times.write_text("submission,submitted_at\n123,2026-12-11T12:00:00-05:00\n")
    code, printed = grade(copy, "--times", str(times))
    canvas = record(copy, "smithjane_LATE_123_456_tiny")
    assert code == 0 and canvas["score"] == pytest.approx(2.7) and canvas["late"]["source"] == "the times file times.csv"
    assert "no submission time for 3 submission(s)" in printed                  # the times file names only one


def test_adjust_waives_changes_and_undoes_the_late_penalty(project, tmp_path):
    copy = tmp_path / "project"
    shutil.copytree(project, copy)
    (copy / "results" / ".grader-results").write_text(json.dumps(
        {"submissions": str((copy / "submissions").resolve()), "assignment": "tiny"}))
    assert adjust(copy, "submission_2", "late", "--set", "2", "--reason", "x")[0] == 2          # a deduction only
    assert adjust(copy, "submission_1", "late", "--set", "0", "--reason", "x")[0] == 2          # on time: nothing
    code, _ = adjust(copy, "submission_2", "late", "--set", "0", "--reason", REASON)          # raises by 1.2 of 3:
    assert code == 2 and not (copy / "results" / "adjustments.toml").exists()               # asked, refused here
    code, printed = adjust(copy, "submission_2", "late", "--set", "0", "--reason", REASON, "--yes")
    assert code == 0 and "1.8 → 3 of 3 (+1.2)" in printed
    assert grade(copy)[0] == 0
    waived = record(copy, "submission_2")
    assert waived["score"] == 3 and waived["late"]["deducted"] == 0 and waived["late"]["override"]["reason"] == REASON
    assert rows(copy / "results" / "grades.csv", "submission")["submission_2"]["late_penalty"] == "0"
    markdown = (copy / "results" / "submission_2.feedback.md").read_text()
    assert "changed the late penalty to 0 points" in markdown and "<b>" not in markdown
    assert "&lt;b&gt;illness&lt;/b&gt;" in (copy / "results" / "submission_2.feedback.html").read_text()
    code, printed = adjust(copy, "submission_2", "late", "-0.3", "--reason", "Half a day more.", "--yes")
    assert code == 0 and "3 → 1.5 of 3 (-1.5)" in printed                      # replaces the waiver: 1.2 + 0.3 off
    assert adjust(copy, "--undo")[0] == 0
    assert grade(copy)[0] == 0
    restored = record(copy, "submission_2")
    assert restored["score"] == pytest.approx(1.8) and "override" not in restored["late"]


def test_the_autograder_path_charges_what_grade_charged(project, tmp_path):
    """Paths agree: the Gradescope autograder (otter_runner: its submission_metadata.json) and `grader grade` of the
    export (its submission_metadata.yml) take the same points off the same record."""
    graded = record(project, "submission_2")
    plain = autograded(graded)
    plain.pop("late")
    (tmp_path / "submission_metadata.json").write_text(json.dumps({"created_at": "2026-12-12T10:00:00.000-05:00"}))
    alone = charged(plain, late_policy(load("tiny", project).config), autograder_time(tmp_path))
    assert alone["score"] == graded["score"] == pytest.approx(1.8)
    assert {k: v for k, v in alone["late"].items() if k != "source"} == \
        {k: v for k, v in graded["late"].items() if k != "source"}
    assert results_json(alone)["score"] == json.loads((project / "results" / "gradescope" / "submission_2.json")
                                                      .read_text())["score"]


# ---- a times file that cannot be used stops the batch (issue 65) ----------------------------------------------

FAR_FUTURE = "9999-12-31T23:00:00-12:00"       # a real ISO time, past the last instant a datetime holds in UTC


@pytest.mark.parametrize("name, text, fragment", [
    ("times.csv", "submission,submitted_at\n", "line 1"),                                     # the header alone
    ("times.csv", "submission,submitted_at\n\n  \n", "line 1"),                               # and blank lines
    ("times.yml", "{}\n", "no submission"),                                                   # a mapping of nothing
    ("times.csv", f"submission,submitted_at\nalice,2026-12-10T20:00:00Z\nbob,{FAR_FUTURE}\n", "line 3"),
    ("times.csv", "submission,submitted_at\nbob,0001-01-01T00:00:00+14:00\n", "line 2"),     # before year 1 in UTC
    ("submission_metadata.yml", METADATA + f"submission_4:\n  :created_at: {FAR_FUTURE}\n", "submission_4 (line 12)"),
    ("submission_metadata.yml", "submission_1:\n  :created_at: 9999-12-31 23:00:00.000000000 -12:00\n",
     "submission_1 (line 1)"),
])
def test_a_times_file_with_no_usable_time_is_refused_naming_where(tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TimesError) as raised:
        read_times(path)
    message = str(raised.value)
    assert str(path) in message and fragment in message, message


def test_the_autograder_charges_nothing_for_a_time_it_cannot_compute_with(tmp_path):
    (tmp_path / "submission_metadata.json").write_text(json.dumps({"created_at": FAR_FUTURE}))
    assert autograder_time(tmp_path) is None
    assert charged(fabricated(3.0), POLICY, autograder_time(tmp_path))["score"] == 3.0


@pytest.mark.parametrize("table, fragment", [
    ({"due": FAR_FUTURE}, "outside the times the grader can compute with"),
    ({"due": datetime.datetime(1, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=5)))},
     "outside the times the grader can compute with"),
    ({"due": DUE, "grace_minutes": 1e20}, "grace_minutes = 1e+20: must be a number of minutes >= 0 and at most"),
    ({"due": DUE, "grace_minutes": 10 ** 9}, "grace_minutes = 1000000000"),
    ({"due": DUE, "grace_minutes": True}, "grace_minutes = True"),
    ({"due": DUE, "penalty_per_day": 1e300}, "penalty_per_day = 1e+300: must be a fraction"),
])
def test_late_arithmetic_that_could_overflow_is_a_config_error(table, fragment):
    problems = late_problems({"late": table, "checks": []})
    assert len(problems) == 1 and fragment in problems[0], problems


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("name, text, fragment", [
    ("times.csv", "submission,submitted_at\n", "line 1"),
    ("times.yml", "{}\n", "no submission"),
    ("times.csv", f"submission,submitted_at\n123,{FAR_FUTURE}\n", "line 2"),
])
def test_grade_with_an_unusable_times_file_exits_2_and_changes_nothing(project, tmp_path, capsys, name, text, fragment):
    copy = tmp_path / "project"
    shutil.copytree(project, copy)
    (copy / "results" / ".grader-results").write_text(json.dumps(
        {"submissions": str((copy / "submissions").resolve()), "assignment": "tiny"}))
    times = tmp_path / name
    times.write_text(text)
    before = snapshot(copy / "results")
    capsys.readouterr()
    code, printed = grade(copy, "--times", str(times))
    err = capsys.readouterr().err
    assert code == 2, printed + err
    problem = [line for line in err.splitlines() if line.startswith("grader: ")]
    assert len(problem) == 1 and str(times) in problem[0] and fragment in problem[0], err
    assert "nothing was graded or changed" in problem[0]
    assert snapshot(copy / "results") == before
