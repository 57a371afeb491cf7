"""HTML reports: `OUT/report.html` for the instructor and `OUT/<id>.feedback.html` for each student.

Both pages are self-contained (CSS inline, images as base64 PNG data URIs) and run no script: a
Content-Security-Policy forbids scripts and remote loads, Jinja autoescapes every value, and student data
(ids, feedback quoting their values, output, figure labels) only ever reaches the page as escaped text or
inside a PNG we drew. The student's page leaves out hidden checks, like the Markdown feedback.

Entry point: `write_reports(out, records, assignment, reference_figures, run_info)`, called by the batch
after every record exists. A failure drawing one page becomes a short page saying so, never a failed batch.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from grader.common.files import atomic_write
from grader.intake.discovery import safe_filename
from grader.lms.late import late_sentence
from grader.model.record import Record, held_checks, hold_reason
from grader.model.verdicts import (
    ISOLATION_PREFIX,
    grader_fault,
    limit_notes,
    mark,
    passed,
    read_first_heading,
    run_descriptions,
    stopped_early,
    student_messages,
)
from grader.outputs.adjustments import autograde_score, class_rows, student_lines
from grader.outputs.figure_data import ReadFigure, differences, read_figure
from grader.outputs.similarity_view import similarity_context
from grader.outputs.summary import class_average
from grader.outputs.writers import STUDENT_VISIBLE
from grader.similarity.report import SimilarityReport

TEMPLATES = Path(__file__).with_name("report_templates")
OUTPUT_SHOWN_CHARS = 20000  # of the head and of the tail each: the page stays small for a 1 MiB output
TOP_MESSAGES = 15


NUMBER = re.compile(r"[-+]?\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def feedback_kind(text: str) -> str:
    """What a feedback text says, its numbers aside: each student's text quotes their own values, so texts are
    counted together when they differ only there (the first line, numbers as `#`)."""
    first = text.split("\n", 1)[0][:2000]
    return NUMBER.sub("#", first)


def _figures():
    """The drawing module, imported on first use: matplotlib takes most of a second to import, and a CLI
    command that writes no report should not pay for it."""
    from grader.outputs import figures

    return figures


def load_drawing() -> None:
    """Import the drawing module ahead of the first page (a batch calls it in the background while its warm-up
    compiles and a core is idle, so the import is not paid between two records). Nothing here can fail a batch: the
    first page imports it again and reports what went wrong."""
    try:
        _figures()
    except Exception:  # noqa: BLE001 -- the page that needs it says why it could not be drawn
        pass


def _inline_code(text: Any) -> Markup:
    """Escape, then show `backticked` spans as <code>: the escaped text holds no '<', so this adds no markup
    of the student's."""
    escaped = str(escape("" if text is None else str(text)))
    return Markup(re.sub(r"`([^`\n]{1,200})`", r"<code>\1</code>", escaped))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["code"] = _inline_code
    env.filters["num"] = lambda value: f"{value:g}" if isinstance(value, (int, float)) else str(value)
    return env


def feedback_page_name(submission_id: str) -> str:
    return f"{safe_filename(submission_id)}.feedback.html"


def _percent(record: Record) -> float:
    return 100.0 * record["score"] / record["max_score"] if record.get("max_score") else 0.0


def _group_titles(assignment) -> dict[str, str]:
    groups = getattr(assignment, "groups", {}) or {}
    return {name: str(info.get("title", name)) if isinstance(info, dict) else name for name, info in groups.items()}


def _scenario_descriptions(assignment) -> dict[str, str]:
    scenarios = getattr(assignment, "scenarios", {}) or {}
    return {name: getattr(s, "description", "") for name, s in scenarios.items()}


def _isolation(record: Record) -> str | None:
    for message in record.get("messages", []):
        if isinstance(message, str) and message.startswith(ISOLATION_PREFIX):
            return message[len(ISOLATION_PREFIX):].rstrip(".")
    return None


# ---- class report ------------------------------------------------------------------------------------

def _section(notes: list[str], what: str, make):
    """`make()`, or None with a short note in `notes` when it fails: each part of report.html (the class summary,
    the similarity section, each figure) is drawn on its own, and a failing one never takes the others with it."""
    try:
        return make()
    except Exception as error:  # noqa: BLE001 -- one section's trouble is its own
        notes.append(f"{what} could not be drawn ({type(error).__name__}: {str(error)[:200]}); the rest of this page, "
                     "grades.csv and the per-student files are complete.")
        return None


def class_context(records: list[Record], assignment, run_info: dict) -> dict[str, Any]:
    records = sorted(records, key=lambda r: str(r.get("submission")))
    graded = [r for r in records if r.get("status") == "graded"]
    errored = [r for r in records if r.get("status") != "graded"]
    titles = _group_titles(assignment)

    check_order: list[str] = [spec.id for spec in getattr(assignment, "checks", [])]
    check_info: dict[str, dict] = {spec.id: {"group": spec.group, "points": spec.points, "visibility": spec.visibility}
                                   for spec in getattr(assignment, "checks", [])}
    for record in records:
        for check in record.get("checks", []):
            if check["id"] not in check_info:
                check_order.append(check["id"])
                check_info[check["id"]] = {"group": check["group"], "points": check["max_score"],
                                           "visibility": check["visibility"]}
    check_rows = []
    for check_id in check_order:
        results = [c for r in graded for c in r.get("checks", []) if c["id"] == check_id]
        full = sum(1 for c in results if passed(c["score"], c["max_score"]))
        partial = sum(1 for c in results if 0 < c["score"] < c["max_score"])
        n = len(results)
        check_rows.append({"id": check_id, **check_info[check_id], "n": n, "full": full, "partial": partial,
                           "rate": full / n if n else 0.0, "partial_rate": partial / n if n else 0.0,
                           "mean": sum(c["score"] for c in results) / n if n else 0.0})

    group_names = list(titles) or sorted({g for r in records for g in r.get("groups", {})})
    group_rows = []
    for group in group_names:
        scores = [r["groups"][group] for r in graded if group in r.get("groups", {})]
        n = len(scores)
        maximum = scores[0]["max_score"] if scores else 0.0
        full = sum(1 for s in scores if passed(s["score"], s["max_score"]))
        group_rows.append({"name": group, "title": titles.get(group, group), "n": n, "full": full,
                           "rate": full / n if n else 0.0, "max_score": maximum,
                           "mean": sum(s["score"] for s in scores) / n if n else 0.0})

    failing = [(c["id"], c["feedback"]) for r in graded for c in r.get("checks", []) if c["score"] < c["max_score"]]
    feedback_counts = Counter((check_id, feedback_kind(text)) for check_id, text in failing)
    example: dict[tuple[str, str], str] = {}   # (check, kind) -> the first student's wording of it
    for check_id, text in failing:
        example.setdefault((check_id, feedback_kind(text)), text)
    note_counts = Counter(m for r in records for m in r.get("messages", [])
                          if isinstance(m, str) and not m.startswith(ISOLATION_PREFIX))
    isolation_counts = Counter(_isolation(r) for r in graded)
    seeds = Counter(r.get("variant_seed") for r in records)

    problems = [{"id": r["submission"], "page": feedback_page_name(r["submission"]),
                 "status": "grader fault: not graded" if grader_fault(r) else r.get("status"),
                 "reasons": r.get("messages", [])[:1] or ["unknown reason"]} for r in errored]
    problems += [{"id": r["submission"], "page": feedback_page_name(r["submission"]), "status": "hit a limit",
                  "reasons": notes} for r in graded if (notes := limit_notes(r))]
    problems += [{"id": r["submission"], "page": feedback_page_name(r["submission"]), "status": "check raised",
                  "reasons": [f"check {check_id} raised something other than an assertion (full traceback in {r['submission']}.json "
                              f"under check_errors): {str(trace).splitlines()[0][:200] if trace else ''}"
                              for check_id, trace in r["check_errors"].items()][:5]}
                 for r in records if isinstance(r.get("check_errors"), dict) and r["check_errors"]]
    problems += [{"id": r["submission"], "page": feedback_page_name(r["submission"]),
                  "status": "flagged for review (its method checks held)", "reasons": list(r["review_flags"])[:5]}
                 for r in records if isinstance(r.get("review_flags"), list) and r["review_flags"]]
    problems += [{"id": r["submission"], "page": feedback_page_name(r["submission"]),
                  "status": "held for your review (no points until you decide)",
                  "reasons": [f"{hold_reason(r['review_hold'])}; held: {', '.join(held)}"]}
                 for r in records if (held := held_checks(r))]

    percents = [_percent(r) for r in records]
    average = class_average(records, getattr(assignment, "max_score", None))
    environment = dict(run_info.get("environment") or (records[0].get("environment", {}) if records else {}))
    drawing: list[str] = []   # figures that could not be drawn
    return {
        "summary": True, "section_notes": drawing,
        "title": getattr(assignment, "title", "") or getattr(assignment, "id", ""),
        "assignment_id": getattr(assignment, "id", ""),
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "n": len(records), "n_graded": len(graded), "n_errored": len(errored),
        "n_grader_faults": sum(1 for r in records if grader_fault(r)),
        "max_score": getattr(assignment, "max_score", records[0]["max_score"] if records else 0.0),
        "average": average,
        "histogram": _section(drawing, "The score histogram", lambda: _figures().score_histogram(percents))
        if records else None,
        "checks": check_rows, "groups": group_rows,
        "check_chart": _section(drawing, "The pass-rate chart", lambda: _figures().pass_rate_chart(
            [(row["id"], row["rate"], row["partial_rate"]) for row in check_rows])) if check_rows and graded else None,
        "feedback": [{"count": n, "check": check_id, "text": example[(check_id, kind)]}
                     for (check_id, kind), n in feedback_counts.most_common(TOP_MESSAGES)],
        "notes": [{"count": n, "text": text} for text, n in note_counts.most_common(TOP_MESSAGES)],
        "problems": problems,
        "environment": environment,
        "variant_seed": run_info.get("variant_seed"),
        "other_seeds": sorted((s for s in seeds if s != run_info.get("variant_seed") and s is not None), key=str),
        "seconds": run_info.get("seconds"),
        "isolation": [{"count": n, "text": text or "not recorded"} for text, n in isolation_counts.most_common()],
        "adjustments": class_rows(records),
        "submissions": [{"id": r["submission"], "page": feedback_page_name(r["submission"]), "status": r.get("status"),
                         "score": r["score"], "max_score": r["max_score"], "percent": _percent(r)} for r in records],
    }


# ---- per-student page --------------------------------------------------------------------------------

def student_context(record: Record, assignment, reference_figures: dict, cache,
                    reference_images: dict[str, tuple]) -> dict[str, Any]:
    """The feedback page's data; `cache` is a figures.FigureCache shared by the run's pages."""
    titles = _group_titles(assignment)
    descriptions = _scenario_descriptions(assignment)
    figure_name = getattr(assignment, "figure_name", None) or "figure"
    sections: list[dict] = []
    current: dict[str, Any] | None = None
    for check in record.get("checks", []):
        if current is None or check["group"] != current["group"]:
            current = {"group": check["group"], "title": titles.get(check["group"], check["group"]), "checks": []}
            sections.append(current)
        verdict = mark(check["score"], check["max_score"])
        if check.get("visibility") in STUDENT_VISIBLE:
            current["checks"].append({**check, "mark": verdict, "hidden": False})
        else:   # only whether it passed, so the group's score is accounted for (as on Gradescope)
            outcome = "passed" if verdict == "pass" else "did not pass"
            current["checks"].append({"id": "", "score": check["score"], "max_score": check["max_score"], "mark": verdict,
                                      "hidden": True, "feedback": f"A hidden check {outcome}; its details are not shown."})

    groups = [{"name": name, "title": titles.get(name, name), "score": value["score"], "max_score": value["max_score"],
               "mark": mark(value["score"], value["max_score"]),
               "width": max(0.0, min(100.0, 100.0 * value["score"] / value["max_score"])) if value["max_score"] else 0.0}
              for name, value in record.get("groups", {}).items()]

    figures = []
    student_figures = record.get("figures")
    reference_figures = reference_figures or {}
    if isinstance(student_figures, dict) or reference_figures:
        ran = record.get("runs") or {}   # the runs this file got (one, when the primary world alone graded it)
        names = [n for n in reference_figures if not ran or n in ran]
        names += [n for n in (student_figures or {}) if n not in names]
        for scenario in names:
            mine = ReadFigure()
            if isinstance(student_figures, dict) and scenario in student_figures:
                mine = read_figure(student_figures[scenario], figure_name)
                image, notes = cache.draw(mine, figure_name)
            elif isinstance(student_figures, dict):
                image, notes = None, [f"No `{figure_name}` was recorded in the {scenario} run."]
            elif record.get("status") != "graded":
                image, notes = None, [f"Your file was not run, so there is no `{figure_name}` to draw."]
            else:  # a record kept from a run of an older grader
                image, notes = None, [f"No `{figure_name}` was recorded for this submission."]
            if scenario in reference_figures:
                if scenario not in reference_images:  # drawn once per run
                    theirs = read_figure(reference_figures[scenario], figure_name)
                    reference_images[scenario] = (theirs, *cache.draw(theirs, figure_name))
                theirs, ref_image, ref_notes = reference_images[scenario]
            else:
                theirs, ref_image, ref_notes = ReadFigure(), None, ["The reference solution has no figure for this run."]
            figures.append({"scenario": scenario, "description": descriptions.get(scenario, ""), "image": image,
                            "notes": notes, "reference_image": ref_image, "reference_notes": ref_notes,
                            "differences": differences(mine, theirs)})

    output = record.get("output")
    head, tail = (str(output.get("head") or ""), str(output.get("tail") or "")) if output else ("", "")
    cut_head = max(0, len(head) - OUTPUT_SHOWN_CHARS)
    cut_tail = max(0, len(tail) - OUTPUT_SHOWN_CHARS)
    return {
        "title": record.get("title") or getattr(assignment, "title", ""),
        "record": record, "percent": _percent(record),
        "error": record.get("status") != "graded",
        "reason": (record.get("messages") or ["unknown reason"])[0],
        "groups": groups, "sections": sections,
        "about_runs": run_descriptions(record.get("messages", []))[0],
        "messages": student_messages(run_descriptions(record.get("messages", []))[1]),
        "stopped": stopped_early(record), "read_first": read_first_heading(record),
        "figure_name": figure_name, "figures": figures,
        "output_head": head[:OUTPUT_SHOWN_CHARS], "output_tail": tail[cut_tail:],
        "output_cut": cut_head + cut_tail, "output_omitted": (output.get("omitted_bytes", 0) or 0) if output else 0,
        "has_output": bool(head or tail),
        "adjustments": student_lines(record, STUDENT_VISIBLE),
        "autograde": autograde_score(record),
        "late": late_sentence(record["late"]) if "late" in record else "",
        "late_reason": override["reason"] if (override := record.get("late", {}).get("override")) else "",
    }


def _fallback_page(title: str, problem: str) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">"
            f"<title>{html.escape(title)}</title></head><body><h1>{html.escape(title)}</h1>"
            f"<p>{html.escape(problem)}</p></body></html>\n")


class FeedbackPages:
    """Writes students' pages one at a time (a batch writes each as its record arrives), sharing what was drawn:
    each distinct figure and panel is drawn once, the reference's once per distinct figure."""

    def __init__(self, out: Path, assignment):
        self.out = Path(out)
        self.assignment = assignment
        self.template = _environment().get_template("feedback.html.j2")
        self.cache = _figures().FigureCache()
        self.reference_images: dict[str, dict[str, tuple]] = {}   # figure set (as JSON) -> scenario -> drawn

    def write(self, record: Record, reference_figures: dict | None) -> Path:
        path = self.out / feedback_page_name(record["submission"])
        reference_figures = reference_figures or {}
        drawn = self.reference_images.setdefault(_figure_set_key(reference_figures), {})
        try:
            page = self.template.render(student_context(record, self.assignment, reference_figures, self.cache, drawn))
        except Exception as error:  # a report bug must not hide the student's grade or stop the batch
            page = _fallback_page(f"Feedback: {record.get('submission')}",
                                  f"This page could not be drawn ({type(error).__name__}: {error}); "
                                  f"the Markdown feedback next to it has everything.")
        atomic_write(path, page)
        return path


def _figure_set_key(figures: dict) -> str:
    try:
        return json.dumps(figures, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(id(figures))


def write_class_report(out: Path, records: list[Record], assignment, run_info: dict | None,
                       similarity: SimilarityReport | None = None, started: float | None = None,
                       trailer: str = "") -> Path:
    """Write OUT/report.html (a page saying what failed when it cannot be drawn), `trailer` (an HTML comment of the
    grader's) at its end. `similarity` (the instructor's similarity report) goes into it, never into a student's
    page; `grader similar` redraws the page with a new one."""
    started = time.monotonic() if started is None else started
    path = Path(out) / "report.html"
    try:
        notes: list[str] = []
        env = _environment()
        title = getattr(assignment, "title", "") or getattr(assignment, "id", "")
        context = (_section(notes, "The class summary", lambda: class_context(records, assignment, run_info or {}))
                   or {"summary": False, "title": title, "section_notes": []})
        context["report_seconds"] = time.monotonic() - started
        context["similarity_html"] = _section(notes, "The similarity section", lambda: Markup(
            env.get_template("similarity_section.html.j2").render(similarity=similarity_context(similarity)))) \
            if similarity is not None else None
        context["section_notes"] = notes + context["section_notes"]
        template = env.get_template("report.html.j2")
        page = _section(notes, "The class summary", lambda: template.render(context)) if context["summary"] else None
        if page is None:   # the summary's data or its drawing failed: the page still holds the other sections
            context["summary"] = False
            context["section_notes"] = notes
            page = template.render(context)
    except Exception as error:  # the grades and the other outputs are written already: say so, do not crash
        page = _fallback_page("Class report", f"The class report could not be drawn ({type(error).__name__}: "
                                              f"{error}); grades.csv and the per-student files are complete.")
    atomic_write(path, page + trailer)
    return path


def write_reports(out: Path, records: list[Record], assignment, reference_figures: dict | None,
                  run_info: dict | None, similarity: SimilarityReport | None = None) -> list[Path]:
    """Write OUT/report.html and OUT/<safe id>.feedback.html for every record; returns the paths written.

    `similarity` (the instructor's similarity report) goes into report.html only, never into a student's page."""
    started = time.monotonic()
    pages = FeedbackPages(out, assignment)
    written = [pages.write(record, reference_figures) for record in records]
    written.append(write_class_report(out, records, assignment, run_info, similarity, started))
    return written
