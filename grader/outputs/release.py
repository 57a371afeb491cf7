"""What `grader release` may hand each student, and what it already handed: the pages, who gets which, the ledger.

The page released is the student's own `OUT/<id>.feedback.html`, exactly as `grader grade` wrote it: the student's
report (reports.py), which shows the checks whose visibility is a student's (`STUDENT_VISIBLE` of writers.py, the
set the Markdown feedback uses) and of every other check only whether it passed, and carries nothing the record keeps
for the instructor (review flags, explanations, check errors, the grader's own faults, held-back adjustments; the
similarity report lives in report.html only). Nothing is rendered again here, so what a student receives is what the
instructor could open beside the record. Before a page leaves, it is read once more against its record: a page that
holds a line of text the record keeps for the instructor only (a hidden check's feedback, a review flag, a check's
traceback) is not released, whatever wrote it.

A record is released only when its page is final: graded by a working grader, nothing held for review, every
adjustment of `adjustments.toml` applied (else `grader grade` first), the page no older than its record. Who is who:
the Canvas user id in the name Canvas's "Download submissions" gave the file, else the `--roster` student it
matches by the one field `--roster-key` names (`Roster.find`, the rule canvas.csv is written by); a record with
neither is listed, never guessed, and two records of one Canvas user are both held back. `OUT/release/released.json` remembers what was released
where (student, page sha256, comment, when), so a re-run sends only pages that changed.
"""

from __future__ import annotations

import datetime
import hashlib
import html
import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.common.files import atomic_write
from grader.common.safe_text import visible
from grader.config.late import TARGET as LATE_TARGET
from grader.lms.canvas import DownloadName, Roster, parse_download_name
from grader.model.record import Record, held_checks, record_from_json
from grader.model.verdicts import grader_fault
from grader.outputs.adjustments_file import Adjustment
from grader.outputs.reports import feedback_page_name
from grader.outputs.results_folder import record_names
from grader.outputs.writers import STUDENT_VISIBLE

FOLDER = "release"                       # OUT/release/: the ledger, and the bulk upload unless told --bulk
LEDGER = "released.json"
BULK = "canvas-bulk"                     # OUT/release/canvas-bulk/ and OUT/release/canvas-bulk.zip
BULK_TARGET = "canvas bulk upload"       # the ledger's target for pages put in a bulk zip
PAGE_MARK = 'id="score"'                 # in every student page the template draws (a fallback page has none)
SECRET_MIN_CHARS = 16                    # shorter lines ("Correct.") say nothing a student could use


@dataclass
class Candidate:
    """One record, and whether (and to whom) its page may go."""

    submission: str
    record: Record
    user_id: str | None = None
    download: DownloadName | None = None
    page: Path | None = None
    data: bytes = b""
    sha256: str = ""
    blocked: str | None = None           # why it is not released, in a sentence

    @property
    def who(self) -> str:
        shown = visible(self.submission)
        return f"{shown} (Canvas user {self.user_id})" if self.user_id else shown


@dataclass
class Ledger:
    """OUT/release/released.json: what was released where."""

    path: Path
    entries: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, out: Path) -> Ledger:
        """Raises ValueError, in a sentence, when the ledger is there but cannot be read (sending every page again
        would give each student a second comment)."""
        path = Path(out) / FOLDER / LEDGER
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            entries = [e for e in data["released"] if isinstance(e, dict)]
        except FileNotFoundError:
            entries = []
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path} cannot be read ({type(error).__name__}: {str(error)[:200]}): mend it, or remove "
                             "it to release every page again") from None
        return cls(path, entries)

    def sent(self, target: str, candidate: Candidate) -> dict[str, Any] | None:
        """The entry of this very page released to `target` (the same student, user and sha256), if any."""
        return next((e for e in reversed(self.entries) if e.get("target") == target
                     and e.get("submission") == candidate.submission and e.get("user_id") == candidate.user_id
                     and e.get("sha256") == candidate.sha256), None)

    def add(self, target: str, candidate: Candidate, **details: Any) -> None:
        """Remember one release at once (a run stopped later keeps what it did)."""
        when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self.entries.append({"submission": candidate.submission, "user_id": candidate.user_id, "target": target,
                             "sha256": candidate.sha256, "when": when, **details})
        atomic_write(self.path, json.dumps({"released": self.entries}, indent=1, ensure_ascii=False) + "\n")


def candidates(out: Path, adjustments: list[Adjustment], roster: Roster | None = None) -> list[Candidate]:
    """Every record of the results folder, with its page and Canvas user id, or why it is not released."""
    found = []
    for name in record_names(out):
        try:
            record = record_from_json((out / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found.append(_candidate(out, record, adjustments, roster))
    by_user: dict[str, list[Candidate]] = {}
    for candidate in found:
        if candidate.user_id and not candidate.blocked:
            by_user.setdefault(candidate.user_id, []).append(candidate)
    for user, several in by_user.items():
        if len(several) > 1:   # one comment per student: which page is theirs is the instructor's call
            names = ", ".join(visible(c.submission) for c in several)
            for candidate in several:
                candidate.blocked = (f"Canvas user {user} has {len(several)} records ({names}): none is released; "
                                     "keep one submission per student")
    return sorted(found, key=lambda c: c.submission)


def _candidate(out: Path, record: Record, adjustments: list[Adjustment], roster: Roster | None) -> Candidate:
    candidate = Candidate(str(record["submission"]), record)
    candidate.download = parse_download_name(str(record.get("file", "")))
    if candidate.download is not None:
        candidate.user_id = candidate.download.user_id
    elif roster is not None and (student := roster.find(record)) and student.get("ID"):
        candidate.user_id = str(student["ID"])
    candidate.blocked = _not_final(out, record, adjustments)
    if candidate.blocked is None:
        page = out / feedback_page_name(candidate.submission)
        candidate.page = page
        try:
            candidate.data = page.read_bytes()
            stale = page.stat().st_mtime < (out / f"{page.name.removesuffix('.feedback.html')}.json").stat().st_mtime
        except OSError:
            candidate.blocked = f"no feedback page ({page.name}): run `grader grade` to write it"
            return candidate
        candidate.sha256 = hashlib.sha256(candidate.data).hexdigest()
        text = candidate.data.decode("utf-8", "replace")
        if stale:
            candidate.blocked = "its page is older than its record: run `grader grade` to draw it again"
        elif PAGE_MARK not in text:
            candidate.blocked = "its page could not be drawn (it says why): run `grader grade` to draw it again"
        elif leak := instructor_text_in(record, text):
            candidate.blocked = (f"its page holds text meant for the instructor only ({leak}): "
                                 "run `grader grade --regrade` to write it again")
    if candidate.blocked is None and not candidate.user_id:
        candidate.blocked = ("no Canvas user id: its file name is not a Canvas download name "
                             "(<name>_<userid>_<subid>_<file>)" + (f" and no --roster student's {roster.key} is "
                                                                   "its id (--roster-key names the field)" if roster
                                                                   else "; --roster CANVAS.csv may match it"))
    return candidate


def _not_final(out: Path, record: Record, adjustments: list[Adjustment]) -> str | None:
    """Why a record's page is not the student's final feedback yet (None: it is)."""
    if grader_fault(record):
        return "the grader could not grade it (its own fault, not the student's): `grader grade` grades it again"
    if held := held_checks(record):
        return (f"held for your review ({', '.join(held)}): decide with `grader adjust`, then `grader grade`")
    if record.get("pending_adjustments"):
        return ("an adjustment waits for you (`grader adjust STUDENT CHECK --confirm` or `--remove`, then "
                "`grader grade`)")
    checks = {c["id"] for c in record.get("checks", [])} | {None}   # a check's or the whole submission's
    applied: list[Any] = [a for a in record.get("adjustments", []) if a.get("check") in checks]
    late = record.get("late")
    if isinstance(late, dict):   # the late penalty's override (`grader adjust STUDENT late ...`) is kept there
        checks.add(LATE_TARGET)
        applied += [late["override"]] if isinstance(late.get("override"), dict) else []
    if _decisions(a.__dict__ for a in adjustments if a.student == record["submission"] and a.check in checks) != \
            _decisions(applied):
        return "adjustments.toml changed since its page was written: run `grader grade` to apply it"
    return None


def _decisions(items) -> list[tuple]:
    """The score decisions, comparable between adjustments.toml and a record's applied `adjustments`."""
    return sorted((str(a.get("check") or ""), str(a.get("kind")), float(a.get("points", 0.0)), str(a.get("reason")))
                  for a in items)


# ---- the page read against its record -------------------------------------------------------------------

def instructor_texts(record: Record) -> list[tuple[str, str]]:
    """(what, text) of everything the record keeps for the instructor only, as it could appear on a page."""
    hidden = {c["id"] for c in record.get("checks", []) if c.get("visibility") not in STUDENT_VISIBLE}
    texts = [(f"hidden check {c['id']}'s feedback", str(c.get("feedback", "")))
             for c in record.get("checks", []) if c["id"] in hidden]
    texts += [(f"hidden check {check}'s feedback", str(entry.get("feedback", "")))
              for check, worlds in (record.get("explanations") or {}).items() if check in hidden
              for entry in (worlds or {}).values() if isinstance(entry, dict)]
    texts += [("a review flag", str(flag)) for flag in record.get("review_flags") or []]
    texts += [(f"check {check}'s error", str(trace)) for check, trace in (record.get("check_errors") or {}).items()]
    texts += [("the grader's error", str(record.get("grader_error") or ""))]
    texts += [("an unscored check", str(c.get("feedback", ""))) for c in record.get("unscored_checks") or []]
    texts += [("a run's claim of a grader fault", str(line)) for lines in (record.get("reported_grader_faults") or {}
                                                                           ).values() for line in lines]
    return texts


def instructor_text_in(record: Record, page: str) -> str | None:
    """What instructor-only text `page` holds (None: none). A line is looked for when it is long enough to mean
    something and is not also the student's to read (a visible check's feedback, a note, the student's output)."""
    output: dict[str, Any] = dict(record.get("output") or {})
    shown = _plain(" \n ".join([*(str(c.get("feedback", "")) for c in record.get("checks", [])
                                  if c.get("visibility") in STUDENT_VISIBLE),
                                *(str(m) for m in record.get("messages", [])),
                                *(str(output.get(part, "")) for part in ("head", "tail")),
                                *(str(a.get("reason", "")) for a in record.get("adjustments", []))]))
    plain_page = _plain(re.sub(r"<[^>]*>", " ", page), unescape=True)
    for what, text in instructor_texts(record):
        for line in text.splitlines():
            wanted = _plain(line)
            if len(wanted) >= SECRET_MIN_CHARS and wanted not in shown and wanted in plain_page:
                return what
    return None


def _plain(text: str, unescape: bool = False) -> str:
    """Text as a reader sees it: entities decoded, backticks (drawn as code) dropped, whitespace collapsed."""
    if unescape:
        text = html.unescape(text)
    return " ".join(text.replace("`", "").split())


# ---- Canvas's bulk upload ------------------------------------------------------------------------------

def bulk_name(download: DownloadName) -> str:
    """`<name>_[LATE_]<userid>_<subid>_feedback.html`: the prefix Canvas's download gave the file, which its
    "Re-Upload Submissions" reads (the first two all-digit parts are the user and the submitted file)."""
    name = "".join(c for c in download.name if c.isascii() and c.isalnum()) or "student"
    if name.isdigit():   # a digits-only name would be read as the user id
        name = f"s{name}"
    return f"{name}_{'LATE_' if download.late else ''}{download.user_id}_{download.submission_id}_feedback.html"


def write_bulk(folder: Path, chosen: list[Candidate]) -> Path:
    """Each page under its Canvas name in `folder` (earlier pages of ours there removed first) and the zip beside it
    (`folder`.zip), which is what Canvas takes; returns the zip's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*_feedback.html"):
        if old.is_file() and not old.is_symlink():
            old.unlink()
    archive = folder.with_name(folder.name + ".zip")
    for candidate in chosen:
        assert candidate.download is not None
        atomic_write(folder / bulk_name(candidate.download), candidate.data)
    temp = archive.with_name(f".{archive.name}.tmp")
    with zipfile.ZipFile(temp, "w", zipfile.ZIP_DEFLATED) as bundle:
        for candidate in chosen:
            assert candidate.download is not None
            bundle.writestr(bulk_name(candidate.download), candidate.data)
    temp.replace(archive)
    return archive
