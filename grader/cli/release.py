"""`grader release`: each student's feedback page where that student will see it.

Canvas: through its API with the instructor's token (a submission comment with the page attached, per student), or,
without one, a folder and zip laid out for Canvas's "Re-Upload Submissions". Gradescope needs nothing: its results
page shows each student their feedback already. What a page may hold and who gets it: grader/outputs/release.py.
Nothing here grades or runs student code; it reads the results folder and sends or writes pages.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from pathlib import Path

from grader.cli.adjust import resolved_out
from grader.common.safe_text import visible
from grader.intake.discovery import safe_filename
from grader.lms.canvas import DEFAULT_ROSTER_KEY, ROSTER_KEYS, Roster
from grader.lms.canvas_api import CanvasAuthError, CanvasClient, CanvasError, address_problem
from grader.outputs.adjustments_file import AdjustmentsError, read
from grader.outputs.release import (
    BULK,
    BULK_TARGET,
    FOLDER,
    LEDGER,
    Candidate,
    Ledger,
    bulk_name,
    candidates,
    write_bulk,
)

TOKEN_ENV = "CANVAS_TOKEN"
CANVAS_ID = re.compile(r"[A-Za-z0-9_.:-]{1,100}")   # 123, or Canvas's sis_course_id:ABC form
GRADESCOPE = ("Gradescope: the results page already shows each student their feedback (each check's test, with the "
              "visibility of assignment.toml) once you publish grades; there is nothing to release.")
DESCRIPTION = f"""Put each student's feedback page where that student will see it.

Reads the results folder (--out; default the folder the last `grader grade` wrote, else ./results; the first line
says which): each record OUT/<id>.json, its page OUT/<id>.feedback.html (as `grader grade` wrote it: visible
checks' feedback, hidden checks only as passed or not, never review flags, explanations, similarity or any other
field kept for the instructor), OUT/adjustments.toml, and OUT/{FOLDER}/{LEDGER}.

Who is who: the Canvas user id in the file name Canvas's "Download submissions" gave (<name>_<userid>_<subid>_<file>),
else the student of --roster (Canvas's gradebook export) whose --roster-key field (default: the SIS Login ID) is the
record's id, as in `grader grade`'s canvas.csv. A record with neither, two records of one Canvas user, one held for
your review, one whose adjustments are not applied yet, one the grader could not grade, and a page holding any text
its record keeps for the instructor are listed, never sent.

Canvas API (--canvas-url URL --course ID --canvas-assignment ID, the token in ${TOKEN_ENV} or --token-env NAME,
never on the command line): per student, the page is uploaded and attached to a comment on their submission.
HTTPS only (http://localhost for a test server). The token is sent to that Canvas only, never printed or written.

Without --canvas-url (or with --bulk FOLDER): writes OUT/{FOLDER}/{BULK}/<name>_<userid>_<subid>_feedback.html and
OUT/{FOLDER}/{BULK}.zip (or FOLDER and FOLDER.zip) for Canvas's Re-Upload Submissions, which needs the download names:
a class whose files Canvas's Download Submissions did not name (plain ids such as alice) goes through the API
with --roster instead.

OUT/{FOLDER}/{LEDGER} remembers what was released where (student, Canvas user, page sha256, comment, when): a re-run
sends only pages that changed (--all sends every page again). Exit status 0 when nothing failed, 1 when a student's
page could not be sent or no record can be released the way asked (the last line says why), 2 when the command could
not start.

Gradescope (--gradescope): nothing to do; the results page shows students their feedback."""


def add_release_command(commands) -> None:
    release = commands.add_parser("release", help="put each student's feedback page where they will see it (Canvas: "
                                  "a submission comment through the API, or a zip for its bulk upload)",
                                  description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    release.add_argument("--out", type=Path, help="the results folder it reads, and writes OUT/release/ in (default: "
                         "the one the last `grader grade` wrote, else ./results; the first line says which)")
    release.add_argument("--canvas-url", metavar="URL", help="Canvas's address, e.g. https://canvas.example.edu: send "
                         "through its API (needs --course, --canvas-assignment and the token)")
    release.add_argument("--course", metavar="ID", help="the Canvas course id (the number in its address)")
    release.add_argument("--canvas-assignment", metavar="ID", help="the Canvas assignment id (the number in its address)")
    release.add_argument("--token-env", metavar="NAME", default=TOKEN_ENV, help=f"the environment variable holding the "
                         f"Canvas access token (default: {TOKEN_ENV}); the token is never taken from the command line")
    release.add_argument("--bulk", type=Path, metavar="FOLDER", help=f"write the pages and FOLDER.zip for Canvas's bulk "
                         f"upload here (default without --canvas-url: OUT/{FOLDER}/{BULK})")
    release.add_argument("--roster", type=Path, metavar="CANVAS.csv", help="Canvas's gradebook export: finds the "
                         "Canvas user of a record whose file name is not a Canvas download name")
    release.add_argument("--roster-key", choices=ROSTER_KEYS, default=DEFAULT_ROSTER_KEY, metavar="FIELD",
                         help=f"the --roster column such a record's id is matched against, as `grader grade --roster-key` "
                         f"does: {', '.join(repr(k) for k in ROSTER_KEYS)} (default: {DEFAULT_ROSTER_KEY!r})")
    release.add_argument("--dry-run", action="store_true", help="list what would be sent or written; send and write nothing")
    release.add_argument("--all", action="store_true", help="send every page again, also those released unchanged")
    release.add_argument("--gradescope", action="store_true", help="the class is on Gradescope: say so and do nothing")


def release_command(args) -> int:
    if args.gradescope:
        print(GRADESCOPE)
        return 0
    api = args.canvas_url is not None and args.bulk is None
    problem = _usage_problem(args, api)
    if problem:
        print(f"grader: {problem}", file=sys.stderr)
        return 2
    if not resolved_out(args):
        return 2
    try:
        adjustments = read(args.out)
        roster = Roster.load(args.roster, args.roster_key) if args.roster else None
    except (AdjustmentsError, OSError, UnicodeDecodeError, csv.Error) as error:
        print(f"grader: {visible(str(error))}; nothing was released", file=sys.stderr)
        return 2
    found = candidates(args.out, adjustments, roster)
    if not found:
        print(f"grader: no records in {args.out}: grade the class first (or give --out)", file=sys.stderr)
        return 2
    try:
        ledger = Ledger.load(args.out)
    except ValueError as error:
        print(f"grader: {visible(str(error))}; nothing was released", file=sys.stderr)
        return 2
    token = "" if args.dry_run or not api else os.environ.get(args.token_env, "").strip()
    if api and not args.dry_run and not token:
        print(f"grader: no Canvas token in ${args.token_env}: make one in Canvas (Account > Settings > New Access "
              f"Token), then `export {args.token_env}=...` (never on the command line); or leave out --canvas-url to "
              "write the bulk upload instead. Nothing was sent.", file=sys.stderr)
        return 2
    ready = [c for c in found if not c.blocked]
    failed = _send(args, ready, ledger, token) if api else _bulk(args, ready, ledger)
    blocked = [c for c in found if c.blocked]
    for candidate in blocked:
        print(f"  {candidate.who}: not released: {candidate.blocked}")
    if blocked:
        print(f"{len(blocked)} record(s) not released (above: why, and what to do).")
    if not any(c.user_id for c in found):
        print("No record has a Canvas user id. If this class is on Gradescope, its results page shows each student "
              "their feedback already (`grader release --gradescope`).")
    unreachable = _unreachable(args, api, found)
    if unreachable:   # this way can release nothing of this class: said in one line, and not a success
        print(f"grader: nothing was released: {unreachable}", file=sys.stderr)
        return 1
    return 1 if failed else 0


def _unreachable(args, api: bool, found: list[Candidate]) -> str | None:
    """Why no record of the class can reach its student the way asked (None: some can; those that cannot, and those
    held back for other reasons, are listed above with theirs)."""
    count = f"none of the {len(found)} record(s) in {args.out}"
    if not api and not any(c.download for c in found):
        return (f"{count} has a Canvas download name (<name>_<userid>_<subid>_<file>), which the bulk upload needs to "
                "find each student's submission: grade the folder Canvas's Download Submissions gave, or send through "
                "Canvas's API, which finds students through --roster: `grader release --canvas-url URL --course ID "
                f"--canvas-assignment ID --roster gradebook.csv` (the token in ${args.token_env})")
    if api and not any(c.user_id for c in found):
        if args.roster is None:
            return (f"{count} has a Canvas user id (no Canvas download name): give --roster gradebook.csv, Canvas's "
                    "gradebook export, whose SIS Login ID is the submission id (--roster-key names another field)")
        return (f"{count} matches a student of --roster {args.roster} by its {args.roster_key}: --roster-key names "
                f"the field that holds the submission ids ({', '.join(ROSTER_KEYS)})")
    return None


def _usage_problem(args, api: bool) -> str | None:
    if args.canvas_url is not None and args.bulk is not None:
        return "give --canvas-url (send through Canvas's API) or --bulk FOLDER (write the bulk upload), not both"
    if not api:
        return None
    missing = [flag for flag, value in (("--course", args.course), ("--canvas-assignment", args.canvas_assignment))
               if not value]
    if missing:
        return f"--canvas-url needs {' and '.join(missing)} (the numbers in the Canvas addresses of the course and assignment)"
    for flag, value in (("--course", args.course), ("--canvas-assignment", args.canvas_assignment)):
        if not CANVAS_ID.fullmatch(value):
            return f"{flag} {visible(value[:100])!r} is not a Canvas id (a number, as in the course's address)"
    return address_problem(args.canvas_url)


def _send(args, ready: list[Candidate], ledger: Ledger, token: str) -> int:
    """Each ready page through Canvas's API; returns how many failed."""
    base = args.canvas_url.rstrip("/")
    target = f"{base}/courses/{args.course}/assignments/{args.canvas_assignment}"
    print(f"Canvas: {target} ({'dry run: nothing is sent' if args.dry_run else f'token from ${args.token_env}'})")
    try:
        client = None if args.dry_run else CanvasClient(base, token)
    except CanvasError as error:   # a token no Canvas issues: said without showing it
        print(f"grader: ${args.token_env}: {error}; nothing was sent", file=sys.stderr)
        return max(1, len(ready))
    sent = unchanged = failed = 0
    refused: str | None = None
    for candidate in ready:
        earlier = None if args.all else ledger.sent(target, candidate)
        if earlier is not None:
            unchanged += 1
            print(f"  {candidate.who}: unchanged since it was sent on {earlier.get('when')}: not sent again")
            continue
        if refused is not None:
            failed += 1
            print(f"  {candidate.who}: FAILED: not sent, Canvas refused the token")
            continue
        if client is None:
            print(f"  {candidate.who}: would send {candidate.page.name if candidate.page else ''} "
                  f"(sha256 {candidate.sha256[:12]})")
            continue
        try:
            posted = client.comment_with_file(args.course, args.canvas_assignment, str(candidate.user_id),
                                              _attachment_name(candidate), candidate.data, "text/html",
                                              _comment_text(candidate))
        except CanvasAuthError as error:
            refused = str(error)
            failed += 1
            print(f"  {candidate.who}: FAILED: {error}")
            continue
        except CanvasError as error:
            failed += 1
            print(f"  {candidate.who}: FAILED: {error}")
            continue
        except Exception as error:  # noqa: BLE001 -- one student's trouble is that student's line, never the run's end
            failed += 1
            print(f"  {candidate.who}: FAILED: {type(error).__name__}: {visible(str(error))[:200]}")
            continue
        try:
            ledger.add(target, candidate, comment_id=posted.comment_id, file_id=posted.file_id)
        except OSError as error:
            print(f"  {candidate.who}: sent, but {ledger.path} could not be written ({error}): a re-run sends it again")
        sent += 1
        print(f"  {candidate.who}: sent (comment {posted.comment_id or '?'}, file {posted.file_id})")
    if refused is not None:
        print(f"grader: Canvas refused the token in ${args.token_env} ({refused}). Make a new token in Canvas (Account "
              "> Settings > New Access Token) for an account that teaches the course, and run again: pages already "
              "sent are not sent twice.", file=sys.stderr)
    verb = "would be sent" if args.dry_run else "sent"
    print(f"{len(ready) - unchanged - failed if args.dry_run else sent} page(s) {verb}, {unchanged} unchanged since "
          f"sent, {failed} failed" + (f" (each above; run again to retry them: {ledger.path} keeps what was sent)"
                                      if failed else "") + ".")
    return failed


def _bulk(args, ready: list[Candidate], ledger: Ledger) -> int:
    """The pages of the ready records that have Canvas download names, in a folder and zip for Canvas's bulk upload."""
    folder = args.bulk or args.out / FOLDER / BULK
    chosen, unchanged = [], 0
    for candidate in ready:
        if candidate.download is None:
            candidate.blocked = ("its file name is not a Canvas download name, which Canvas's bulk upload needs to "
                                 "find the submission: use --canvas-url (the API) for it")
            continue
        earlier = None if args.all else ledger.sent(BULK_TARGET, candidate)
        if earlier is not None:
            unchanged += 1
            print(f"  {candidate.who}: unchanged since the bulk upload of {earlier.get('when')}: left out "
                  "(--all puts it back)")
            continue
        chosen.append(candidate)
        print(f"  {candidate.who}: {'would write' if args.dry_run else 'wrote'} {bulk_name(candidate.download)}")
    if not chosen:
        print(f"Nothing new for Canvas's bulk upload ({unchanged} page(s) unchanged since the last one; --all writes "
              "them again)." if unchanged else "No page to write for Canvas's bulk upload.")
        return 0
    if args.dry_run:
        print(f"{len(chosen)} page(s) would be written to {folder} and {folder}.zip (dry run: nothing written).")
        return 0
    try:
        archive = write_bulk(folder, chosen)
        for candidate in chosen:
            ledger.add(BULK_TARGET, candidate, file=bulk_name(candidate.download))  # type: ignore[arg-type]
    except OSError as error:
        print(f"grader: the bulk upload could not be written in {folder} ({error})", file=sys.stderr)
        return len(chosen)
    print(f"{len(chosen)} page(s) in {archive} (and, unzipped, in {folder}/). In Canvas: open the assignment, "
          "choose Re-Upload Submissions (the assignment's sidebar, or the assignment column's menu in the Gradebook), "
          f"select {archive.name} and click Upload Files: each page becomes a comment on that student's submission, "
          "visible to the student when the assignment's grades are posted.")
    if unchanged:
        print(f"{unchanged} page(s) unchanged since an earlier bulk upload were left out (--all puts them back).")
    if args.bulk is None:
        print("With a Canvas access token: `grader release --canvas-url URL --course ID --canvas-assignment ID` sends "
              f"each page as a comment through Canvas's API instead (the token in ${args.token_env}).")
    return 0


def _attachment_name(candidate: Candidate) -> str:
    return f"{safe_filename(str(candidate.record.get('assignment') or 'assignment'))}-feedback.html"


def _comment_text(candidate: Candidate) -> str:
    title = str(candidate.record.get("title") or candidate.record.get("assignment") or "this assignment")
    return (f"Feedback from the autograder on {visible(title)}: the attached page shows your score and each check's "
            "feedback.")
