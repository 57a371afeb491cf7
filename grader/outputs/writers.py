"""Write results: one JSON per submission, a Markdown feedback file, and the class grade CSV. All atomic."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from grader.common.files import atomic_write, write_if_changed
from grader.common.markdown import fence, md_block, md_line
from grader.common.text import clean_data
from grader.intake.discovery import safe_filename
from grader.lms.canvas import Roster, canvas_csv, column_header, late
from grader.lms.gradescope import OtterSettings, results_json
from grader.lms.late import late_sentence
from grader.lms.otter_csv import final_grades_csv, safe_cell
from grader.model.record import CheckRecord, Record, held_checks, record_to_json
from grader.model.verdicts import (
    class_status,
    grader_fault,
    mark,
    passed,
    read_first_heading,
    run_descriptions,
    stopped_early,
    student_messages,
)
from grader.outputs.adjustments import autograde_score, student_lines

STUDENT_VISIBLE = ("visible", "after_due_date", "after_published")
ADJUSTMENT_COLUMNS = ("autograde", "adjusted", "late_penalty")   # grades.csv: the grader's own total, the
# instructor's change, and the points the late policy took, negative: total = autograde + adjusted + late_penalty


def result_path(out: Path, submission_id: str) -> Path:
    return out / f"{safe_filename(submission_id)}.json"


def write_result(out: Path, record: Record) -> None:
    atomic_write(result_path(out, record["submission"]), record_to_json(record))
    atomic_write(out / f"{safe_filename(record['submission'])}.feedback.md", feedback_markdown(record, STUDENT_VISIBLE))


def gradescope_path(out: Path, submission_id: str) -> Path:
    return out / "gradescope" / f"{safe_filename(submission_id)}.json"


def write_lms_outputs(out: Path, records: list[Record], assignment, roster: Roster | None = None,
                      late_notes: list[str] | None = None) -> list[str]:
    """The LMS files: `gradescope/<id>.json` (Gradescope results.json), `final_grades.csv` (otter), `canvas.csv`
    (and `canvas-warnings.txt`). Returns the Canvas warnings (who matched no student, who has no submission) and
    `late_notes` (the late policy's: marked late without a time, no time known)."""
    settings, titles = otter_settings(assignment), check_titles(assignment)
    for record in records:   # unchanged files are left alone: a re-run of a graded class rewrites (and syncs) none
        write_if_changed(gradescope_path(out, record["submission"]),
                         json.dumps(clean_data(results_json(record, settings=settings, titles=titles)), indent=2,
                                    allow_nan=False)
                         + "\n")
    write_if_changed(out / "final_grades.csv", final_grades_csv(records, [(c.id, c.points) for c in assignment.checks]))
    text, warnings = canvas_csv(records, column_header(assignment), assignment.max_score, roster)
    warnings += late_notes or []
    write_if_changed(out / "canvas.csv", text)
    write_if_changed(out / "canvas-warnings.txt", "".join(f"{w}\n" for w in warnings))
    return warnings


def otter_settings(assignment) -> OtterSettings:
    """The otter options of `[lms.otter]` in assignment.toml that shape results.json (as in the zip's config)."""
    return OtterSettings.from_config(dict(assignment.config.get("lms", {}).get("otter", {})))


def check_titles(assignment) -> dict[str, str]:
    return {spec.id: spec.title for spec in assignment.checks}


def grades_csv(records: list[Record], groups: list[str]) -> str:
    """One row a submission: id, each group's score, total, max, percent, status."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["submission", *groups, "total", "max_score", "percent", "status", "late", *ADJUSTMENT_COLUMNS,
                     "held"])
    for record in sorted(records, key=lambda r: r["submission"]):
        if grader_fault(record):   # no score the grader did not earn: the cells stay empty, the status says why
            writer.writerow([safe_cell(record["submission"]), *("" for _ in groups), "", _num(record["max_score"]), "",
                             class_status(record), _late_flag(record), *("" for _ in (*ADJUSTMENT_COLUMNS, "held"))])
            continue
        scores = [_num(record["groups"][g]["score"] if g in record["groups"] else 0.0) for g in groups]
        percent = 100.0 * record["score"] / record["max_score"] if record["max_score"] else 0.0
        applied = record.get("adjustments") or []
        autograde = autograde_score(record)
        writer.writerow([safe_cell(record["submission"]), *scores, _num(record["score"]), _num(record["max_score"]),
                         _num(round(percent, 2)), record["status"], _late_flag(record), _num(autograde),
                         f"{sum(a['delta'] for a in applied):+g}" if applied else "", _late_penalty(record),
                         safe_cell(" ".join(held_checks(record)))])   # checks held for review: no points until decided
    return stream.getvalue()


def _late_flag(record: Record) -> str:
    return "late" if late(record) or record.get("late") else ""


def _late_penalty(record: Record) -> str:
    """The points the late policy took off the total, negative ("-10"), "0" for a late submission charged nothing."""
    entry = record.get("late")
    return "" if entry is None else _num(-float(entry["deducted"]) + 0.0)


def _num(value: float) -> str:
    return f"{value:g}"


def feedback_markdown(record: Record, visibilities: tuple[str, ...] = STUDENT_VISIBLE) -> str:
    """The student's report: score, per-group table, each check's feedback, run notes, output head/tail.

    A hidden check shows only that it passed or did not (the file is handed to students once grades are released),
    so every group's score is accounted for. When the file stopped early (a syntax error, sys.exit, a limit), the run
    notes come first: they explain the failures below. Everything that can hold text from the student's run is made
    inert (md_line) or fenced (fence)."""
    lines = [f"# Feedback: {md_line(record.get('title', record.get('assignment', '')))}", "",
             f"Submission {md_line(record['submission'])} ({md_line(record['file'])}): "
             f"**{record['score']:g} / {record['max_score']:g}**", ""]
    if record["status"] == "error":
        reason = record["messages"][0] if record["messages"] else "unknown reason"
        lines += ["Your file could not be graded: " + md_block(reason), ""]
    adjusted = student_lines(record, visibilities)
    if adjusted:   # the instructor's decisions, with their reasons as written (made inert)
        autograde = autograde_score(record)
        lines += ["## Adjusted by your instructor", "",
                  f"The autograder's score was {autograde:g} / {record['max_score']:g}; your instructor adjusted it "
                  "(the score above includes it):", ""]
        lines += [f"- {md_line(a['target'].replace('`', ''))}: {a['change']} ({a['delta']} points). Reason: "
                  f"{md_block(a['reason'])}" for a in adjusted]
        lines.append("")
    late_note = late_sentence(record["late"]) if "late" in record else ""
    if late_note:   # the course's late policy, in a plain sentence (and the instructor's reason, made inert)
        override = record["late"].get("override")
        lines += ["## Late submission", "", md_block(late_note)
                  + (f" Reason: {md_block(override['reason'])}" if override else ""), ""]
    about, others = run_descriptions(record["messages"])
    lines += [md_block(m) for m in about] + ([""] if about else [])   # what a labelled run changes: said once, here
    notes = ["", "## Notes on your run", ""] + [f"- {md_block(m)}" for m in student_messages(others)]
    first = stopped_early(record) and others
    if first:
        lines += [f"## {read_first_heading(record)}", "", *notes[3:], ""]
    lines += ["| Group | Score |", "|---|---|"]
    lines += [f"| {g} | {v['score']:g} / {v['max_score']:g} |" for g, v in record["groups"].items()]
    lines.append("")
    current = None
    for check in record["checks"]:
        if check["group"] != current:
            current = check["group"]
            lines += ["", f"## {current}", ""]
        lines.append(check_line(check, visibilities))
    if others and not first:
        lines += notes
    output = record.get("output")
    if output and (output.get("head") or output.get("tail")):
        text = output.get("head", "")
        if output.get("tail"):
            text += f"\n... ({output.get('omitted_bytes', 0)} bytes omitted) ...\n" + output["tail"]
        lines += ["", "## Your output (baseline run)", "", *fence(text)]
    return "\n".join(lines) + "\n"


def check_line(check: CheckRecord, visibilities: tuple[str, ...] = STUDENT_VISIBLE) -> str:
    """One check as a list item: its verdict and feedback, or for a hidden check only whether it passed."""
    verdict = mark(check["score"], check["max_score"]).upper()
    points = f"({check['score']:g}/{check['max_score']:g})"
    if check["visibility"] not in visibilities:
        outcome = "passed" if passed(check["score"], check["max_score"]) else "did not pass"
        return f"- **{verdict}** a hidden check {outcome} {points}; its details are not shown."
    return f"- **{verdict}** `{check['id']}` {points}: {md_block(check['feedback'])}"
