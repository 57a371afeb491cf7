"""An instructor's decisions survive the grader (issue 37): `grader adjust` keeps them in OUT/adjustments.toml, every
`grader grade` (--regrade included) applies them on top of the autograde and every output shows them; one made for
another version of the file, for a check that is gone or beyond 0..max waits for the instructor; a malformed file
stops the command and changes nothing; `grader explain` says what each check compared in each world, and none of
that reaches a student's output.

The tiny lesson (tests/fixtures/tiny_project, no JAX) is graded once, adjusted, regraded; the other cases copy that
results folder and re-run `grader grade`, which reuses every unchanged record (no run) and only re-applies.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.outputs.adjustments_file import AdjustmentsError, parse, to_toml

TINY = Path(__file__).with_name("fixtures") / "tiny_project"
WRONG = "import math\nradius = 2.0\narea = math.pi * radius\nside = math.sqrt(area)\n"
REASON = "Right <b>for an unusual</b> reason & `code` | cell; =1+1"     # must come out inert everywhere
STUDENT_FILES = ("wrong_value.feedback.md", "wrong_value.feedback.html", "gradescope/wrong_value.json")


def grade(project: Path, out: Path, *extra: str) -> int:
    return main(["grade", str(project / "submissions"), "--root", str(project), "--assignment", "tiny",
                 "--out", str(out), "--workers", "2", "--no-similarity", *extra])


def adjust(out: Path, *args: str) -> int:
    return main(["adjust", *args, "--out", str(out)])


def record(out: Path, name: str) -> dict:
    return json.loads((out / f"{name}.json").read_text())


def rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("adjust") / "project"
    shutil.copytree(TINY, root)
    (root / "submissions").mkdir()
    (root / "submissions" / "correct.py").write_text((TINY / "solutions" / "tiny.py").read_text())
    (root / "submissions" / "wrong_value.py").write_text(WRONG)
    return root


@pytest.fixture(scope="module")
def adjusted(project, capsys_module) -> tuple[Path, str]:
    """Graded, two adjustments made (a check set to full marks, a point off the whole submission), regraded."""
    out = project / "results"
    assert grade(project, out) == 0
    assert record(out, "wrong_value")["score"] == 2
    assert adjust(out, "wrong_value", "area.value", "--set", "1", "--reason", REASON, "--who", "prof", "--yes") == 0
    assert adjust(out, "correct", "submission", "-1", "--reason", "Handed in a day late.", "--yes") == 0
    capsys_module.readouterr()
    assert grade(project, out, "--regrade") == 0
    return out, capsys_module.readouterr().out


@pytest.fixture(scope="module")
def capsys_module():
    """capsys for a module fixture: the commands' stdout, read through a redirect."""
    import contextlib

    class Capture:
        def __init__(self):
            self.buffer = io.StringIO()

        def readouterr(self):
            text, self.buffer = self.buffer.getvalue(), io.StringIO()
            stack.enter_context(contextlib.redirect_stdout(self.buffer))
            return type("Captured", (), {"out": text})()

    with contextlib.ExitStack() as stack:
        capture = Capture()
        stack.enter_context(contextlib.redirect_stdout(capture.buffer))
        yield capture


def copy_of(project: Path, out: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The project and its results folder, elsewhere (the results folder re-claimed for the copy's submissions)."""
    copy = tmp_path / "project"
    shutil.copytree(project, copy)
    (copy / "results" / ".grader-results").write_text(json.dumps(
        {"submissions": str((copy / "submissions").resolve()), "assignment": "tiny"}))
    return copy, copy / "results"


# ---- applied, on every output ---------------------------------------------------------------------------------

def test_an_adjustment_survives_regrade_and_the_record_keeps_the_autograde(adjusted):
    out, printed = adjusted
    wrong, correct = record(out, "wrong_value"), record(out, "correct")
    assert wrong["score"] == 3 and wrong["autograde"]["score"] == 2
    assert {c["id"]: c["score"] for c in wrong["checks"]}["area.value"] == 1
    assert wrong["autograde"]["checks"]["area.value"] == 0 and wrong["groups"]["area"]["score"] == 1
    assert wrong["adjustments"] == [{"check": "area.value", "kind": "set", "points": 1.0, "delta": 1.0,
                                     "reason": REASON, "who": "prof", "when": wrong["adjustments"][0]["when"]}]
    assert correct["score"] == 2 and correct["autograde"]["score"] == 3
    assert correct["adjustments"][0]["check"] is None and correct["adjustments"][0]["delta"] == -1
    assert "2 instructor adjustment(s) applied to 2 submission(s)" in printed


def test_every_gradebook_file_shows_it(adjusted):
    out, _ = adjusted
    grades = {row["submission"]: row for row in rows((out / "grades.csv").read_text())}
    assert grades["wrong_value"]["total"] == "3" and grades["wrong_value"]["autograde"] == "2"
    assert grades["wrong_value"]["adjusted"] == "+1" and grades["correct"]["adjusted"] == "-1"
    canvas = (out / "canvas.csv").read_text().splitlines()
    assert any(line.startswith("wrong_value,") and line.endswith(",3") for line in canvas), canvas
    assert any(line.startswith("correct,") and line.endswith(",2") for line in canvas), canvas
    otter = {row["file"]: row for row in rows((out / "final_grades.csv").read_text())}
    wrong = next(row for name, row in otter.items() if "wrong_value" in name)
    assert wrong["area.value"] == "1" and wrong["total_points_earned"] == "3"


def test_the_student_reads_the_reason_as_written_and_inert(adjusted):
    out, _ = adjusted
    markdown = (out / "wrong_value.feedback.md").read_text()
    assert "## Adjusted by your instructor" in markdown and "score was 2 / 3" in markdown
    assert "<b>" not in markdown and "for an unusual" in markdown
    page = (out / "wrong_value.feedback.html").read_text()
    assert "Adjusted by your instructor" in page and "&lt;b&gt;for an unusual&lt;/b&gt; reason &amp;" in page
    assert "<b>for" not in page
    results = json.loads((out / "gradescope" / "wrong_value.json").read_text())
    assert results["score"] == 3 and "Adjusted by your instructor" in results["output"]
    test = next(t for t in results["tests"] if t["name"].startswith("area") or "area" in t["output"]
                and t["max_score"] == 1 and t["score"] == 1)
    assert "Adjusted by your instructor" in test["output"] and "<b>" not in test["output"]
    late = json.loads((out / "gradescope" / "correct.json").read_text())
    assert late["score"] == 2 and "Handed in a day late." in late["output"]


def test_the_class_report_counts_them(adjusted):
    out, _ = adjusted
    report = " ".join((out / "report.html").read_text().split())
    assert "2 submission(s) adjusted, by +0 point(s) in all" in report
    assert 'id="adjustments"' in report and "&lt;b&gt;for an unusual" in report and "<b>for" not in report


# ---- explain ---------------------------------------------------------------------------------------------------

def test_explain_answers_every_check_in_every_world(adjusted, capsys):
    out, _ = adjusted
    assert main(["explain", "wrong_value", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for check in ("runs.no_errors", "runs.reached_end", "area.value"):
        assert f"== {check}" in text
    assert "-- baseline world" in text and "student's area: 6.28318" in text
    assert "oracle_area: 12.566" in text and "tolerance: math.isclose" in text
    assert "adjusted: +1 by prof" in text
    assert main(["explain", "wrong_value", "area.value", "--out", str(out)]) == 0
    one = capsys.readouterr().out
    assert "== area.value" in one and "== runs.no_errors" not in one
    assert main(["explain", "wrong_value", "no.such", "--out", str(out)]) == 2


def test_explanations_never_reach_a_student_output(adjusted):
    out, _ = adjusted
    assert "oracle_area" in json.dumps(record(out, "wrong_value")["explanations"])
    for name in STUDENT_FILES:
        text = (out / name).read_text()
        for secret in ("oracle_area", "math.isclose", "another check's business", "explanations", "score_fraction"):
            assert secret not in text, (name, secret)


# ---- held back until confirmed -----------------------------------------------------------------------------------

def test_a_changed_submission_holds_its_adjustment_back(adjusted, project, tmp_path, capsys):
    out, _ = adjusted
    copy, out = copy_of(project, out, tmp_path)
    (copy / "submissions" / "wrong_value.py").write_text(WRONG + "# edited after the decision\n")
    assert grade(copy, out) == 0
    wrong = record(out, "wrong_value")
    assert wrong["score"] == 2 and "adjustments" not in wrong and "autograde" not in wrong
    assert "changed since the adjustment was made" in wrong["pending_adjustments"][0]["why"]
    printed = capsys.readouterr().out
    assert "NOT applied (wrong_value, area.value" in printed
    assert "Not applied" in (out / "report.html").read_text()
    assert "Adjusted" not in (out / "wrong_value.feedback.md").read_text()
    assert adjust(out, "wrong_value", "area.value", "--confirm") == 0
    assert grade(copy, out) == 0
    assert record(out, "wrong_value")["score"] == 3


def test_a_check_that_is_gone_or_a_score_out_of_range_waits(adjusted, project, tmp_path, capsys):
    out, _ = adjusted
    copy, out = copy_of(project, out, tmp_path)
    sha = record(out, "correct")["sha256"]
    text = (out / "adjustments.toml").read_text() + (
        f'\n[[adjustment]]\nstudent = "correct"\ncheck = "area.gone"\nkind = "add"\npoints = 1\n'
        f'reason = "old check"\nsha256 = "{sha}"\n')
    (out / "adjustments.toml").write_text(text)
    assert adjust(out, "wrong_value", "area.value", "+5", "--reason", "too much", "--yes") == 0
    assert grade(copy, out) == 0
    pending = {(p["check"], p["why"].split(":")[0]) for r in ("correct", "wrong_value")
               for p in record(out, r).get("pending_adjustments", [])}
    assert ("area.gone", "the assignment has no check `area.gone` now") in pending
    assert any(check == "area.value" and "outside 0..1" in why for check, why in pending), pending
    assert record(out, "wrong_value")["score"] == 2
    assert adjust(out, "wrong_value", "area.value", "--confirm") == 0   # confirmed: clamped into 0..max
    assert grade(copy, out) == 0
    assert {c["id"]: c["score"] for c in record(out, "wrong_value")["checks"]}["area.value"] == 1


def test_a_hand_written_adjustment_waits_and_says_the_true_reason(adjusted, project, tmp_path):
    """Issue 57: an adjustment written into adjustments.toml by hand names no version of the file (no sha256); it
    waits for the instructor's confirmation, and the reason says so (the file did not change)."""
    out, _ = adjusted
    copy, out = copy_of(project, out, tmp_path)
    (out / "adjustments.toml").write_text((out / "adjustments.toml").read_text() + (
        '\n[[adjustment]]\nstudent = "correct"\ncheck = "area.value"\nkind = "add"\npoints = -1\n'
        'reason = "typed by hand"\n'))
    assert grade(copy, out) == 0
    why = [p["why"] for p in record(out, "correct").get("pending_adjustments", []) if p["check"] == "area.value"]
    assert why and why[0].startswith("it names no version of the submission's file"), why
    assert "changed" not in why[0]


def test_adjustments_cannot_slip(adjusted, project, tmp_path, capsys):
    """Issue 57: a bare number is refused (adding and setting are said in so many words), the command prints the
    student's old and new score, lowering a grade or moving it by more than a tenth is not recorded without --yes
    (asked on a terminal; a test's stdin is none), and --undo removes the adjustment made last."""
    out, _ = adjusted
    _, out = copy_of(project, out, tmp_path)
    before = (out / "adjustments.toml").read_text()
    capsys.readouterr()
    assert adjust(out, "correct", "submission", "5", "--reason", "r") == 2
    assert "5 is ambiguous: give +5 to add 5 points, -5 to take 5 off, or --set 5" in capsys.readouterr().err
    assert adjust(out, "correct", "submission", "--set", "1", "--reason", "typo for +1") == 2
    refused = capsys.readouterr().err
    assert "not recorded" in refused and "→ 1 of 3" in refused and "add --yes" in refused, refused
    assert (out / "adjustments.toml").read_text() == before
    assert adjust(out, "wrong_value", "area.value", "--set", "1", "--reason", "same again") == 0   # no change: asked nothing
    assert "→ 1 of 1 (unchanged)" in capsys.readouterr().out
    assert adjust(out, "correct", "runs.no_errors", "+0.25", "--reason", "small") == 0
    assert "correct, runs.no_errors: 1 → 1 of 1 (unchanged)" in capsys.readouterr().out   # out of range: waits
    assert adjust(out, "--undo") == 0
    assert "Undid the last adjustment: correct, runs.no_errors" in capsys.readouterr().out
    assert "runs.no_errors" not in (out / "adjustments.toml").read_text()


def test_a_malformed_file_stops_the_command_and_changes_nothing(adjusted, project, tmp_path, capsys):
    out, _ = adjusted
    copy, out = copy_of(project, out, tmp_path)
    good = (out / "adjustments.toml").read_text()
    for broken, said in ((good + "\n[[adjustment]]\nstudent = 'x'\nkind = 'multiply'\npoints = 1\nreason = 'r'\n",
                          "kind"), (good + "\nthis is not toml\n", "not valid TOML")):
        (out / "adjustments.toml").write_text(broken)
        before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
        capsys.readouterr()
        assert grade(copy, out, "--regrade") == 2
        error = capsys.readouterr().err
        assert "adjustments.toml, line" in error and said in error and "nothing was graded or changed" in error
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
        assert adjust(out, "correct", "runs.no_errors", "--set", "0", "--reason", "r") == 2
        assert (out / "adjustments.toml").read_text() == broken


def test_the_adjust_command_lists_replaces_removes_and_refuses(adjusted, project, tmp_path, capsys):
    out, _ = adjusted
    _, out = copy_of(project, out, tmp_path)
    capsys.readouterr()
    assert adjust(out, "--list") == 0
    listed = capsys.readouterr().out
    assert "wrong_value\tarea.value\tset to 1\tprof" in listed and "correct\tsubmission\t-1" in listed
    assert adjust(out, "nobody", "area.value", "1", "--reason", "r") == 2
    assert adjust(out, "correct", "area.nope", "1", "--reason", "r") == 2
    assert adjust(out, "correct", "area.value", "+1") == 2                      # no reason
    assert adjust(out, "correct", "area.value", "lots", "--reason", "r") == 2
    assert adjust(out, "wrong_value", "area.value", "--set", "0.5", "--reason", "half", "--yes") == 0   # replaces
    assert adjust(out, "correct", "submission", "--remove") == 0
    text = (out / "adjustments.toml").read_text()
    assert text.count("[[adjustment]]") == 1 and 'reason = "half"' in text


def test_the_file_round_trips_and_names_the_line_of_each_problem():
    from grader.outputs.adjustments_file import Adjustment
    tricky = [Adjustment("a\"b", "c.d", "add", -1.5, "line\nbreak \x7f \\ \"quoted\" ünï", "w", "2026-01-01", "", True),
              Adjustment("e", None, "set", 3.0, "r")]
    assert parse(to_toml(tricky)) == tricky
    for text, line in (('[[adjustment]]\nstudent = "a"\nkind = "set"\npoints = 1\nreason = "r"\nextra = 1\n', 6),
                       ('[[adjustment]]\nstudent = "a"\nkind = "set"\npoints = "one"\nreason = "r"\n', 4),
                       ('[[adjustment]]\nstudent = "a"\nkind = "set"\npoints = 1\nreason = "r"\n\n[[adjustment]]\n'
                        'student = "a"\nkind = "add"\npoints = 1\nreason = "r"\n', 7),
                       ('[[adjustment]]\nstudent = "a"\nkind = "set"\npoints = nan\nreason = "r"\n', 4),
                       ('[[adjustment]]\nstudent = "a"\nkind = "set"\npoints = 1\n', 1)):
        with pytest.raises(AdjustmentsError, match=f"line {line}"):
            parse(text)


def test_a_re_run_with_the_same_adjustments_rewrites_no_record(adjusted, project, tmp_path):
    out, _ = adjusted
    copy, out = copy_of(project, out, tmp_path)
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.json")}
    assert grade(copy, out) == 0
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.json")} == before
    assert record(out, "wrong_value")["score"] == 3
