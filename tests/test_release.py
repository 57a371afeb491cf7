"""`grader release` puts each student's feedback page where that student sees it (issue 57), and nothing else.

There is no real Canvas here: the API path is tested against a local server (http.server in a thread, on
127.0.0.1) that answers as Canvas documents its three requests for a file on a submission comment (Submission
Comments API `create_file`, the File Uploads guide, the Submissions API `update`): it checks the Bearer token,
hands out an upload address on itself, takes the multipart upload, redirects to a confirmation that needs the token,
and records the comment. The results folder is made of fabricated records (no JAX, no sandbox) whose pages are drawn
by the grader's own page writer, as `grader grade` draws them.
"""

from __future__ import annotations

import json
import re
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.cli.main import main
from grader.outputs.reports import FeedbackPages
from grader.outputs.writers import write_result
from tests.fake_canvas import ASSIGNMENT, COURSE, TOKEN, FakeCanvas, running_canvas

HIDDEN_SECRET = "HIDDEN-ORACLE-VALUE 4.2424242 expected by the hidden check"
FLAG_SECRET = "REVIEW-FLAG reaches into jax._src.interpreters by name"
ERROR_SECRET = "CHECK-ERROR Traceback in the instructor's checks.py line 99"
ASSIGNMENT_VIEW = SimpleNamespace(title="Tiny lesson", groups={"values": {"title": "Values"}}, scenarios={},
                                  figure_name="figure")


@pytest.fixture
def canvas():
    yield from running_canvas()


# ---- a results folder of fabricated records -------------------------------------------------------------

def make_record(submission: str, file: str, score: float = 3.0, **extra) -> dict:
    checks = [
        {"id": "area.value", "group": "values", "score": 2.0, "max_score": 2.0, "visibility": "visible",
         "feedback": f"The area of {submission} matches the reference."},
        {"id": "area.hidden", "group": "values", "score": score - 2.0, "max_score": 2.0, "visibility": "hidden",
         "feedback": HIDDEN_SECRET},
    ]
    record = {"submission": submission, "file": file, "assignment": "tiny", "title": "Tiny lesson", "status": "graded",
              "score": score, "max_score": 4.0, "groups": {"values": {"score": score, "max_score": 4.0}},
              "checks": checks, "messages": [], "environment": {}, "variant_seed": 7, "sha256": "0" * 64,
              "fingerprint": "f", "review_flags": [FLAG_SECRET], "check_errors": {"area.hidden": ERROR_SECRET}}
    record.update(extra)
    return record


STUDENTS = {   # submission id -> file as Canvas's download named it (or not)
    "smithjane_12345_67890_tiny": "smithjane_12345_67890_tiny.py",
    "doejohn_LATE_23456_78901_tiny": "doejohn_LATE_23456_78901_tiny.py",
    "leeann_34567_89012_tiny": "leeann_34567_89012_tiny.py",
    "walkin": "walkin.py",                      # no Canvas name, no roster: never guessed
}


def write(out: Path, records: list[dict]) -> None:
    pages = FeedbackPages(out, ASSIGNMENT_VIEW)
    for record in records:
        write_result(out, record)
        pages.write(record, {})


@pytest.fixture
def results(tmp_path) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    write(out, [make_record(sid, file, score=3.0 + i % 2) for i, (sid, file) in enumerate(STUDENTS.items())])
    return out


def release(out: Path, *args: str) -> int:
    return main(["release", "--out", str(out), *args])


def api(canvas: FakeCanvas) -> list[str]:
    return ["--canvas-url", canvas.url, "--course", COURSE, "--canvas-assignment", ASSIGNMENT]


def page(out: Path, submission: str) -> bytes:
    return (out / f"{submission}.feedback.html").read_bytes()


# ---- the API path ---------------------------------------------------------------------------------------

def test_every_student_with_a_canvas_id_gets_exactly_their_own_page(results, canvas, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    assert release(results, *api(canvas)) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0].startswith(f"Results: {results} (given with --out)")
    assert sorted(c["user"] for c in canvas.comments) == ["12345", "23456", "34567"]
    for submission, file in STUDENTS.items():
        if submission == "walkin":
            continue
        user = file.split("_")[-3]
        assert canvas.page_of(user) == [page(results, submission)]
        assert submission.encode() in canvas.page_of(user)[0]
    assert all(c["text"].startswith("Feedback from the autograder on Tiny lesson") for c in canvas.comments)
    assert "walkin: not released: no Canvas user id" in captured.out
    assert "3 page(s) sent, 0 unchanged since sent, 0 failed." in captured.out
    # the token went to Canvas's API only: every API request carried it, the upload address never saw it
    assert all(carried for method, path, carried in canvas.requests if path.startswith("/api/"))
    assert not any(carried for method, path, carried in canvas.requests if path.startswith("/files_api/"))
    assert TOKEN not in captured.out + captured.err
    assert TOKEN not in (results / "release" / "released.json").read_text()
    ledger = json.loads((results / "release" / "released.json").read_text())["released"]
    assert {(e["submission"], e["user_id"]) for e in ledger} == {
        ("smithjane_12345_67890_tiny", "12345"), ("doejohn_LATE_23456_78901_tiny", "23456"),
        ("leeann_34567_89012_tiny", "34567")}
    assert all(e["comment_id"] and e["file_id"] and e["when"] and len(e["sha256"]) == 64 for e in ledger)


def test_hidden_checks_and_instructor_fields_never_reach_canvas(results, canvas, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    assert release(results, *api(canvas)) == 0
    sent = b"".join(canvas.bodies)
    assert b"The area of smithjane" in sent   # the visible feedback went
    for secret in (HIDDEN_SECRET, FLAG_SECRET, ERROR_SECRET):
        assert secret.encode() not in sent
        assert secret.split()[0].encode() not in sent
    assert b"a hidden check" in sent           # a hidden check says only whether it passed


def test_a_re_run_sends_nothing_and_a_changed_page_alone_goes_again(results, canvas, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    assert release(results, *api(canvas)) == 0
    before = len(canvas.requests)
    capsys.readouterr()
    assert release(results, *api(canvas)) == 0
    assert len(canvas.requests) == before and len(canvas.comments) == 3
    assert "0 page(s) sent, 3 unchanged since sent, 0 failed." in capsys.readouterr().out
    time.sleep(0.01)
    write(results, [make_record("leeann_34567_89012_tiny", STUDENTS["leeann_34567_89012_tiny"], score=2.0)])
    assert release(results, *api(canvas)) == 0
    assert [c["user"] for c in canvas.comments[3:]] == ["34567"]
    assert canvas.page_of("34567")[-1] == page(results, "leeann_34567_89012_tiny")
    assert "1 page(s) sent, 2 unchanged since sent, 0 failed." in capsys.readouterr().out


def test_a_student_whose_comment_fails_is_reported_and_the_others_still_go(results, canvas, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    canvas.fail_put_for = {"23456"}
    assert release(results, *api(canvas)) == 1
    out = capsys.readouterr().out
    assert sorted(c["user"] for c in canvas.comments) == ["12345", "34567"]
    assert re.search(r"doejohn_LATE_23456_78901_tiny \(Canvas user 23456\): FAILED: Canvas answered 500 .*posting "
                     r"the comment: An error occurred\.", out)
    assert "Traceback" not in out
    assert "2 page(s) sent, 0 unchanged since sent, 1 failed" in out
    canvas.fail_put_for = set()
    assert release(results, *api(canvas)) == 0    # the retry sends the one that failed, only
    assert sorted(c["user"] for c in canvas.comments) == ["12345", "23456", "34567"]


def test_a_bad_token_fails_clearly_and_sends_nothing(results, canvas, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", "not-the-token")
    assert release(results, *api(canvas)) == 1
    captured = capsys.readouterr()
    assert canvas.comments == [] and len(canvas.requests) == 1    # stopped at the first refusal
    assert "Canvas refused the token in $CANVAS_TOKEN" in captured.err
    assert "401" in captured.err and "Invalid access token." in captured.err
    assert "not-the-token" not in captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err
    assert not (results / "release" / "released.json").exists()
    monkeypatch.delenv("CANVAS_TOKEN")
    assert release(results, *api(canvas)) == 2
    assert "no Canvas token in $CANVAS_TOKEN" in capsys.readouterr().err


def test_no_answer_from_canvas_is_each_students_line_never_a_crash(results, canvas, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    url = canvas.url
    canvas.server.shutdown()
    canvas.server.server_close()   # nothing listens there any more
    assert release(results, "--canvas-url", url, "--course", COURSE, "--canvas-assignment", ASSIGNMENT) == 1
    captured = capsys.readouterr()
    assert captured.out.count("FAILED: no answer from 127.0.0.1") == 3
    assert "0 page(s) sent, 0 unchanged since sent, 3 failed" in captured.out
    assert "Traceback" not in captured.out + captured.err
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN + "\nX-Injected: 1")
    assert release(results, "--canvas-url", url, "--course", COURSE, "--canvas-assignment", ASSIGNMENT) == 1
    err = capsys.readouterr().err
    assert "holds characters no Canvas token has" in err and TOKEN not in err


def test_a_201_confirmation_a_roster_match_and_a_dry_run(results, canvas, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n    Points Possible,,,,\n"
                      "Walker Kim,45678,,walkin,A\n")
    assert release(results, *api(canvas), "--roster", str(roster), "--dry-run") == 0
    assert canvas.requests == [] and not (results / "release").exists()
    assert "walkin (Canvas user 45678): would send walkin.feedback.html" in capsys.readouterr().out
    canvas.confirm_with_201 = True
    assert release(results, *api(canvas), "--roster", str(roster)) == 0
    assert canvas.page_of("45678") == [page(results, "walkin")]
    assert len(canvas.comments) == 4


def test_only_https_or_a_local_server(results, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    assert release(results, "--canvas-url", "http://canvas.example.edu", "--course", "1",
                   "--canvas-assignment", "2") == 2
    assert "not an HTTPS address" in capsys.readouterr().err
    assert release(results, "--canvas-url", "https://canvas.example.edu") == 2
    assert "--canvas-url needs --course and --canvas-assignment" in capsys.readouterr().err


# ---- what is held back ----------------------------------------------------------------------------------

def test_a_page_that_is_not_final_or_not_safe_is_not_released(tmp_path, canvas, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    out = tmp_path / "results"
    out.mkdir()
    held = make_record("held_11111_1_tiny", "held_11111_1_tiny.py",
                       review_hold={"scenario": "variant", "statement": "line 3", "checks": ["area.hidden"]})
    fault = make_record("fault_22222_2_tiny", "fault_22222_2_tiny.py", grader_error="the grader's own crash")
    leaky = make_record("leaky_33333_3_tiny", "leaky_33333_3_tiny.py")
    fine = make_record("fine_44444_4_tiny", "fine_44444_4_tiny.py")
    write(out, [held, fault, leaky, fine])
    tampered = page(out, "leaky_33333_3_tiny").replace(b"</body>", f"<p>{HIDDEN_SECRET}</p></body>".encode())
    (out / "leaky_33333_3_tiny.feedback.html").write_bytes(tampered)
    assert release(out, *api(canvas)) == 0
    text = capsys.readouterr().out
    assert [c["user"] for c in canvas.comments] == ["44444"]
    assert "held_11111_1_tiny (Canvas user 11111): not released: held for your review (area.hidden)" in text
    assert "fault_22222_2_tiny (Canvas user 22222): not released: the grader could not grade it" in text
    assert ("leaky_33333_3_tiny (Canvas user 33333): not released: its page holds text meant for the instructor only "
            "(hidden check area.hidden's feedback)") in text
    # an adjustment made since the page was written waits for `grader grade`
    (out / "adjustments.toml").write_text('[[adjustment]]\nstudent = "fine_44444_4_tiny"\nkind = "add"\npoints = 1.0\n'
                                          'reason = "Generous."\nwho = "prof"\nwhen = "2026-01-01T00:00:00+00:00"\n'
                                          f'sha256 = "{"0" * 64}"\n')
    assert release(out, *api(canvas), "--all") == 0
    assert "fine_44444_4_tiny (Canvas user 44444): not released: adjustments.toml changed" in capsys.readouterr().out
    assert len(canvas.comments) == 1
    # a late penalty waived in adjustments.toml is final once the record carries the override
    (out / "adjustments.toml").write_text('[[adjustment]]\nstudent = "fine_44444_4_tiny"\ncheck = "late"\nkind = "set"\n'
                                          'points = 0.0\nreason = "Ill."\nwho = "prof"\n'
                                          f'when = "2026-01-01T00:00:00+00:00"\nsha256 = "{"0" * 64}"\n')
    late = {"submitted_at": None, "due": "2026-01-01T00:00:00+00:00", "source": "test", "minutes_late": 60.0,
            "grace_minutes": 0.0, "days_charged": 1, "penalty": 1.0, "deducted": 1.0}
    time.sleep(0.01)
    write(out, [make_record("fine_44444_4_tiny", "fine_44444_4_tiny.py", late=late)])
    assert release(out, *api(canvas), "--all") == 0
    assert "fine_44444_4_tiny (Canvas user 44444): not released: adjustments.toml changed" in capsys.readouterr().out
    override = {"check": "late", "kind": "set", "points": 0.0, "delta": 1.0, "reason": "Ill.", "who": "prof",
                "when": "2026-01-01T00:00:00+00:00"}
    write(out, [make_record("fine_44444_4_tiny", "fine_44444_4_tiny.py", late={**late, "deducted": 0.0,
                                                                                 "override": override})])
    assert release(out, *api(canvas), "--all") == 0
    assert "fine_44444_4_tiny (Canvas user 44444): sent" in capsys.readouterr().out
    assert len(canvas.comments) == 2 and canvas.page_of("44444")[-1] == page(out, "fine_44444_4_tiny")


# ---- the bulk upload ------------------------------------------------------------------------------------

def test_the_bulk_zip_holds_each_page_under_its_canvas_name(results, monkeypatch, capsys):
    monkeypatch.delenv("CANVAS_TOKEN", raising=False)
    assert release(results) == 0
    text = capsys.readouterr().out
    archive = results / "release" / "canvas-bulk.zip"
    with zipfile.ZipFile(archive) as bundle:
        names = sorted(bundle.namelist())
        assert names == ["doejohn_LATE_23456_78901_feedback.html", "leeann_34567_89012_feedback.html",
                         "smithjane_12345_67890_feedback.html"]
        for name in names:
            submission = next(s for s in STUDENTS if s.split("_")[0] == name.split("_")[0])
            assert bundle.read(name) == page(results, submission)
            assert HIDDEN_SECRET.encode() not in bundle.read(name) and FLAG_SECRET.encode() not in bundle.read(name)
    assert sorted(p.name for p in (results / "release" / "canvas-bulk").iterdir()) == names
    assert "Re-Upload Submissions" in text and str(archive) in text
    assert "walkin: not released: no Canvas user id" in text
    assert release(results) == 0   # nothing changed: nothing new to upload
    assert "Nothing new for Canvas's bulk upload (3 page(s) unchanged" in capsys.readouterr().out
    assert release(results, "--all", "--bulk", str(results / "again")) == 0
    with zipfile.ZipFile(results / "again.zip") as bundle:
        assert sorted(bundle.namelist()) == names


def test_gradescope_needs_nothing_and_help_says_what_it_reads_and_writes(capsys):
    assert main(["release", "--gradescope"]) == 0
    assert "results page already shows each student their feedback" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["release", "--help"])
    text = capsys.readouterr().out
    for words in ("Reads the results folder", "OUT/<id>.feedback.html", "released.json", "canvas-bulk.zip",
                  "CANVAS_TOKEN", "Re-Upload Submissions"):
        assert words in text
    assert not re.search(r"\w+\.py\b", text), "the help names no source file"



def test_a_roster_matches_a_plain_record_by_the_named_field_as_canvas_csv_does(tmp_path, canvas, monkeypatch, capsys):
    """Issue 65: `45678.py` (a classmate's Canvas user id) is no SIS Login ID, so by default it reaches nobody; with
    --roster-key ID it matches the classmate, whose own Canvas download is there too: neither page goes."""
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    out = tmp_path / "results"
    out.mkdir()
    write(out, [make_record("45678", "45678.py"), make_record("walker_45678_5_tiny", "walker_45678_5_tiny.py")])
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nWalker Kim,45678,,walkin,A\n")
    assert release(out, *api(canvas), "--roster", str(roster), "--dry-run") == 0
    text = capsys.readouterr().out
    assert "45678: not released: no Canvas user id" in text and "SIS Login ID" in text, text
    assert "walker_45678_5_tiny (Canvas user 45678): would send" in text
    assert release(out, *api(canvas), "--roster", str(roster), "--roster-key", "ID", "--dry-run") == 0
    text = capsys.readouterr().out
    assert "45678 (Canvas user 45678): not released: Canvas user 45678 has 2 records" in text, text
    assert "would send" not in text
