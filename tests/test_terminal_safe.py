"""No raw control byte from a student's file reaches the instructor's terminal or any output file (issue 56).

A class of three: a folder-layout submission whose folder name carries ESC and BEL, a file that prints an OSC
window-title sequence and a CSI line-clearing one, and a file whose string value (`eps`) holds C1 and bidirectional
controls. Graded through the real command (with a roster), then `grader explain` and `grader similar`: every byte
printed and every file written is searched for ESC, BEL, C1 controls (CSI 0x9b, OSC 0x9d) and bidi overrides."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys

import pytest

from tests.case_expectations import ROOT

RAW = [b"\x1b", b"\x07", "\u009b".encode(), "\u009d".encode(), "\u202e".encode(), "\u2066".encode()]
FORGED = "\x1b[2K\rgrader: please adjust +20 for everyone\x07"


def raw_bytes(data: bytes) -> list[bytes]:
    return [raw for raw in RAW if raw in data]


@pytest.mark.slow
def test_no_raw_control_byte_reaches_a_terminal_or_a_file(tmp_path):
    solution = (ROOT / "solutions" / "performance-05.py").read_text()
    submissions = tmp_path / "submissions"
    folder = submissions / "evil\x1b]0;owned\x07name"
    folder.mkdir(parents=True)
    (folder / "performance-05.py").write_text(solution)
    (submissions / "printer.py").write_text(solution + f"\nprint({FORGED!r})\nprint('\\x1b]0;window title\\x07')\n")
    (submissions / "valued.py").write_text(solution + "\neps = '1e-3\\u009b2J\\u202e\\u009d0;t\\u0007'\n")
    roster = tmp_path / "roster.csv"
    with roster.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section"])
        writer.writerow(["    Points Possible", "", "", "", ""])
        writer.writerow(["Mallory\x1b[31m", "7", "evil\x1b]0;owned\x07name", "m\x07", "S1"])
        writer.writerow(["Peter", "8", "printer", "p", "S1"])
    out = tmp_path / "out"
    printed = []
    for argv in (["grade", str(submissions), "--out", str(out), "--roster", str(roster), "--roster-key", "SIS User ID"],
                 ["explain", "printer", "--out", str(out)], ["explain", "valued", "--out", str(out)],
                 ["similar", str(out)]):
        done = subprocess.run([sys.executable, "-m", "grader.cli.main", *argv], cwd=ROOT, capture_output=True,
                              timeout=900, check=False)
        printed.append((argv[0], done.returncode, done.stdout + done.stderr))
    assert printed[0][1] == 0, printed[0][2].decode(errors="replace")[-3000:]
    for command, _, data in printed:
        assert not raw_bytes(data), f"`grader {command}` printed raw {raw_bytes(data)}"
    written = [path for path in out.rglob("*") if path.is_file()]
    assert len(written) > 10
    leaks = {str(path.relative_to(out)): raw_bytes(path.read_bytes()) for path in written if raw_bytes(path.read_bytes())}
    assert not leaks, leaks
    assert any(b"\\x1b" in path.read_bytes() for path in written if path.suffix in (".md", ".html")), \
        "the escape should be shown, visibly, where the student's output is quoted"
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_what_is_shown_and_what_is_kept():
    from grader.common.safe_text import json_visible, visible

    assert visible("a\tb\nc\r\nd") == "a\tb\nc\r\nd"                    # tabs, newlines and CRLF line ends stay
    assert visible("x\ry\x1b[2K\x07\u202e\u009b") == "x\\x0dy\\x1b[2K\\x07\\u202e\\x9b"
    import json

    data = {"value": "e\x1b]0;t\x07\u009b\u202e", "ok": "plain"}
    text = json_visible(json.dumps(data, ensure_ascii=False, indent=1) + "\r\n")
    assert not raw_bytes(text.encode()) and json.loads(text) == data   # the same data, no raw control byte
