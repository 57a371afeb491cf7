"""`grader adjust` (the instructor's decisions about scores, kept in OUT/adjustments.toml) and `grader explain` (what
each check compared in each world, to decide a regrade request from the evidence).

Why here and not in `grade`: a decision is made after reading a student's feedback, long after the batch; it is
written down at once (validated, with who and when and the submission file's hash), and every later `grader grade`
(a plain re-run reuses unchanged records, `--regrade` grades again) applies it to every output. Neither command
grades or runs student code: both read the results folder only.
"""

from __future__ import annotations

import datetime
import difflib
import getpass
import sys
from pathlib import Path
from typing import Any

from grader.cli.explain_view import indented, score_line, world_lines
from grader.common.last_results import results_folder
from grader.config.late import TARGET as LATE
from grader.model.record import Record, held_checks, hold_reason, record_from_json
from grader.outputs.adjustments import apply
from grader.outputs.adjustments_file import Adjustment, AdjustmentsError, path_in, read, write
from grader.outputs.results_folder import record_names
from grader.outputs.writers import result_path

WHOLE = "submission"    # the CHECK that means the whole submission
OUT_HELP = ("the results folder it reads and writes (default: the one the last `grader grade` wrote, else ./results; "
            "the first line says which)")


def resolved_out(args) -> bool:
    """Set args.out to the results folder by the one rule (common/last_results.py) and say which; False: none."""
    folder, why = results_folder(args.out)
    if folder is None:
        print(f"grader: {why}", file=sys.stderr)
        return False
    print(f"Results: {folder} ({why})", file=sys.stderr)
    args.out = folder
    return True


def add_commands(commands) -> None:
    adjust = commands.add_parser("adjust", help="record an instructor's adjustment of a score (kept in "
                                 "OUT/adjustments.toml and applied by every `grader grade`)", description=(
                                     "Record an instructor's decision about a score. Reads: OUT/<id>.json (to print "
                                     "the score before and after) and OUT/adjustments.toml. Writes: "
                                     "OUT/adjustments.toml only; the next `grader grade` applies it to every output."))
    adjust.add_argument("student", nargs="?", help="the submission id, as in grades.csv")
    adjust.add_argument("check", nargs="?", help=f"a check id, `{WHOLE}` for the whole submission, or `{LATE}` for "
                        f"the late penalty (a deduction: --set 0 waives it, --set -5 makes it 5 points, +2 gives 2 back)")
    adjust.add_argument("points", nargs="?", help="points to add, always signed: +2 adds two, -1.5 takes one and a half "
                        "off (a bare number is refused: say --set to set a score)")
    adjust.add_argument("--set", dest="set_to", metavar="SCORE", help="set the score of CHECK (or the whole submission) "
                        "to SCORE instead of adding")
    adjust.add_argument("--yes", action="store_true", help="do not ask before lowering a grade or changing it by more "
                        "than a tenth of its points (asked on a terminal; refused elsewhere without --yes)")
    adjust.add_argument("--undo", action="store_true", help="remove the adjustment made last (of any student)")
    adjust.add_argument("--reason", help="why, in a sentence the student reads (required to adjust)")
    adjust.add_argument("--who", help="who decided (default: the current user)")
    adjust.add_argument("--out", type=Path, help=OUT_HELP)
    adjust.add_argument("--list", action="store_true", help="list the adjustments and exit")
    adjust.add_argument("--remove", action="store_true", help="remove the adjustment of STUDENT CHECK")
    adjust.add_argument("--confirm", action="store_true", help="confirm the adjustment of STUDENT CHECK for the "
                        "submission as it is now (and clamp a score outside 0..max into that range)")
    explain = commands.add_parser("explain", help="what each check compared in each world for one submission "
                                  "(the instructor's, to decide a regrade request)", description=(
                                      "What each check compared in each world for one submission. Reads: "
                                      "OUT/<id>.json. Writes: nothing (it prints to the terminal)."))
    explain.add_argument("student", help="the submission id")
    explain.add_argument("check", nargs="?", help="one check id (default: every check)")
    explain.add_argument("--out", type=Path, help=OUT_HELP)


def adjust_command(args) -> int:
    if not resolved_out(args):
        return 2
    try:
        adjustments = read(args.out)
    except AdjustmentsError as error:
        print(f"grader: {error}; nothing was changed", file=sys.stderr)
        return 2
    if args.list:
        for a in adjustments:
            print(f"{a.student}\t{a.check or WHOLE}\t{a.describe()}\t{a.who}\t{a.when}\t{a.reason}")
        print(f"{len(adjustments)} adjustment(s) in {path_in(args.out)}", file=sys.stderr)
        return 0
    if args.undo:
        if not adjustments:
            print(f"grader: no adjustment in {path_in(args.out)} to undo", file=sys.stderr)
            return 2
        last = max(range(len(adjustments)), key=lambda i: (adjustments[i].when, i))
        undone = adjustments[last]
        return _save(args.out, adjustments[:last] + adjustments[last + 1:],
                     f"Undid the last adjustment: {undone.student}, {undone.check or 'whole submission'}, "
                     f"{undone.describe()} ({undone.reason}).")
    if not args.student or not args.check:
        print("grader: give STUDENT and CHECK (or --list)", file=sys.stderr)
        return 2
    check = None if args.check == WHOLE else args.check
    record = _record(args.out, args.student)
    if record is None:
        print(f"grader: {no_record(args.out, args.student)}", file=sys.stderr)
        return 2
    ids = [c["id"] for c in record["checks"]]
    if check is not None and check not in ids and check != LATE and not args.remove:
        print(f"grader: {args.student}'s record has no check {check} (its checks: {', '.join(ids)}; "
              f"`{WHOLE}` for the whole submission, `{LATE}` for the late penalty)", file=sys.stderr)
        return 2
    if check == LATE and "late" not in record and not (args.remove or args.confirm):
        print(f"grader: {args.student}'s record has no late penalty (no [late] policy in assignment.toml, or the "
              "submission was on time or its time is unknown); adjust the whole submission instead", file=sys.stderr)
        return 2
    existing = next((a for a in adjustments if a.key == (args.student, check)), None)
    others = [a for a in adjustments if a.key != (args.student, check)]
    what = f"{args.student}, {'total after the late penalty' if check == LATE else check or 'whole submission'}"
    if args.remove or args.confirm:
        if existing is None:
            print(f"grader: no adjustment of {what} in {path_in(args.out)}", file=sys.stderr)
            return 2
        if args.remove:
            return _save(args.out, others, f"Removed the adjustment of {what}.")
        confirmed = Adjustment(**{**existing.__dict__, "sha256": record.get("sha256", ""), "clamp": True})
        return _save(args.out, [confirmed if a is existing else a for a in adjustments],
                     f"Confirmed the adjustment of {what} for the submission as it is now.")
    parsed = _points(args.points, args.set_to)
    if isinstance(parsed, str):
        print(f"grader: {parsed}", file=sys.stderr)
        return 2
    if not (args.reason or "").strip():
        print("grader: give --reason TEXT (the reason is shown to the student)", file=sys.stderr)
        return 2
    kind, points = parsed
    if check == LATE and kind == "set" and points > 0:
        print(f"grader: the late penalty is a deduction: --set -{points:g} makes it {points:g} points, --set 0 waives "
              "it", file=sys.stderr)
        return 2
    made = Adjustment(args.student, check, kind, points, args.reason.strip(), args.who or _user(),
                      datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), record.get("sha256", ""))
    kept = [made if a is existing else a for a in adjustments] if existing else [*adjustments, made]
    old, new, top = _scores(record, adjustments, kept, check)
    change = f"{what}: {_moved(old, new, top)}"
    if check not in (None, LATE):   # one check's score moves the student's total: say both, as the README does
        change += f"; total {_moved(*_scores(record, adjustments, kept, None))}"
    total = float(record["max_score"])
    if (new < old or abs(new - old) > total / 10) and not args.yes and not _agreed(change):
        print(f"grader: not recorded: {change}. It lowers the grade or changes it by more than a tenth of its "
              f"{total:g} points; add --yes to record it", file=sys.stderr)
        return 2
    return _save(args.out, kept, f"{'Replaced' if existing else 'Recorded'} the adjustment of {change}: "
                 f"{made.describe()}. `grader grade` applies it to every output (unchanged submissions are not "
                 "graded again).")


def _points(points: str | None, set_to: str | None) -> tuple[str, float] | str:
    """("add", +N) or ("set", N) from POINTS or --set; else what to say. A bare number is refused: "adjust by 5"
    reads as adding 5 to most people, and setting a score of 5 must be said in so many words."""
    given = points if points is not None else set_to
    if given is None or (points is not None and set_to is not None):
        return "give POINTS to add (+2, -1.5) or --set SCORE to set the score, one of the two"
    text = given.strip()
    try:
        value = float(text)
    except ValueError:
        return f"{text!r} is not a number"
    if points is None:
        return "set", value
    if text[:1] not in "+-":
        return (f"{text} is ambiguous: give +{text} to add {text} points, -{text} to take {text} off, or "
                f"--set {text} to make the score {text}")
    return "add", value


def _scores(record: Record, before: list[Adjustment], after: list[Adjustment], check: str | None
            ) -> tuple[float, float, float]:
    """The score of `check` (or the whole submission) with the adjustments before and after this one, and its
    points (an adjustment that would wait for confirmation changes nothing yet)."""
    def score(adjustments: list[Adjustment]) -> tuple[float, float]:
        adjusted = apply(record, adjustments)
        if check is None or check == LATE:   # the late penalty: the total it leaves
            return float(adjusted["score"]), float(adjusted["max_score"])
        found = next(c for c in adjusted["checks"] if c["id"] == check)
        return float(found["score"]), float(found["max_score"])
    (old, top), (new, _) = score(before), score(after)
    return old, new, top


def _moved(old: float, new: float, top: float) -> str:
    return f"{old:g} → {new:g} of {top:g}" + (f" ({new - old:+g})" if new != old else " (unchanged)")


def _agreed(change: str) -> bool:
    """On a terminal, ask before a change that lowers a grade or moves it by more than a tenth."""
    if not sys.stdin.isatty():
        return False
    answer = input(f"{change}. Record it? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _save(out: Path, adjustments: list[Adjustment], message: str) -> int:
    try:
        write(out, adjustments)
    except (AdjustmentsError, OSError) as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    print(message)
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 -- no user name on this machine: leave it to --who
        return ""


def no_record(out: Path, student: str) -> str:
    """Why there is no record of `student` in `out`, naming the part that is wrong: the student (with the students
    there, the closest first), a record that cannot be read, or a folder that holds no records at all."""
    if result_path(out, student).is_file():
        return f"the record of `{student}` in {out} cannot be read: `grader grade` writes it again"
    names = record_names(out)
    if not names:
        return (f"{out} holds no records: grade the class first (`grader grade SUBMISSIONS --out {out}`), or give "
                "--out the folder `grader grade` wrote")
    shown = closest_first(student, names)
    more = f", … ({len(names) - len(shown)} more)" if len(names) > len(shown) else ""
    return f"no student `{student}` in {out} (students: {', '.join(shown)}{more})"


def closest_first(wanted: str, names: list[str], count: int = 8) -> list[str]:
    """Up to `count` of `names`, the nearest to `wanted` first (then the rest in their order)."""
    near = difflib.get_close_matches(wanted, names, n=count, cutoff=0.5)
    return (near + [name for name in names if name not in near])[:count]


def _record(out: Path, student: str) -> Record | None:
    try:
        return record_from_json(result_path(out, student).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def explain_command(args) -> int:
    if not resolved_out(args):
        return 2
    record = _record(args.out, args.student)
    if record is None:
        print(f"grader: {no_record(args.out, args.student)}", file=sys.stderr)
        return 2
    checks = [c for c in record["checks"] if args.check in (None, c["id"])]
    if not checks:
        ids = [c["id"] for c in record["checks"]]
        ids = closest_first(str(args.check), ids, len(ids))
        print(f"grader: {args.student}'s record has no check {args.check} (its checks: {', '.join(ids)})",
              file=sys.stderr)
        return 2
    print(explanation_text(record, [c["id"] for c in checks]))
    return 0


def explanation_text(record: Record, check_ids: list[str]) -> str:
    """The instructor's account of a record: for each check, its score (autograde and adjusted) and, per scenario,
    the fraction it gave, the feedback there, the student's values it read and what the check attached."""
    explanations = record.get("explanations") or {}
    autograde = (record.get("autograde") or {"checks": {}})["checks"]
    runs = record.get("runs") or {}
    lines = [f"{record['submission']} ({record['file']}): {record['score']:g} / {record['max_score']:g}, status "
             f"{record['status']}, variant seed {record.get('variant_seed')}"]
    if record.get("grader_error"):
        lines.append("The grader could not grade this record (its own fault): see grader_error in the record.")
    if record.get("review_flags"):
        lines.append("Flagged for your review (the file's text reaches into JAX's internals or introspects: the method "
                     "checks it passed are held below, you decide):")
        lines += [f"   {flag}" for flag in record["review_flags"]]
    if held := held_checks(record):
        hold = record["review_hold"]
        credited = hold.get("credited") or {}
        restore = (" (what the grader's checks gave before the hold: "
                   + ", ".join(f"{check} {credited[check]:g}" for check in held if check in credited) + ")"
                   if any(check in credited for check in held) else "")
        lines.append(f"HELD for your review: {hold_reason(hold)}; held without points: {', '.join(held)}{restore}. "
                     "Each held check below shows what was found; decide with `grader adjust` (set the check's "
                     "points, or add 0 to keep the grade as it stands).")
    if record.get("runs_why"):
        lines.append(f"Runs: {record['runs_why']}.")
    lines += [f"Adjustment NOT applied ({a.get('check') or WHOLE}, {a['kind']} {a['points']:g}): {a['why']}"
              for a in record.get("pending_adjustments", [])]
    if not explanations:
        lines.append("This record keeps no per-world explanations (graded before they were kept, or not run): "
                     "`grader grade --regrade` keeps them. Each check's feedback follows.")
    for check in (c for c in record["checks"] if c["id"] in check_ids):
        auto = (f" (autograde {autograde[check['id']]:g})"
                if check["id"] in autograde and autograde[check["id"]] != check["score"] else "")
        lines += ["", f"== {check['id']} [{check['group']}, {check['visibility']}]: {check['score']:g} / "
                  f"{check['max_score']:g}{auto}"]
        lines += [f"   adjusted: {a['delta']:+g} by {a.get('who') or '?'} on {a.get('when') or '?'}: {a['reason']}"
                  for a in record.get("adjustments", []) if a.get("check") == check["id"]]
        worlds = explanations.get(check["id"]) or {}
        if not worlds:
            lines += ["   feedback: " + indented(check["feedback"])]
        else:
            lines.append(score_line(check, len(worlds)))
        for scenario, entry in worlds.items():
            run: dict[str, Any] = dict(runs.get(scenario) or {})
            lines += world_lines(scenario, entry.get("seed", run.get("seed")), entry, float(check["max_score"]))
    return "\n".join(lines)
