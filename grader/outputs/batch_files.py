"""A batch's files, written as the batch goes: each record's files the moment it exists, the class files at the end.

Per record: `<id>.json`, `<id>.feedback.md` and `<id>.feedback.html` (the page beside the reference's figure in the
record's own variant world), written while the other submissions' runs go on, so the end of a batch only writes
the class files. A record reused from an earlier run keeps the page that run wrote beside it; a missing or older
page is drawn again. Class files a re-run would write unchanged are left alone.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.common.code_digest import grader_code_digest
from grader.common.files import write_if_changed
from grader.config.late import late_policy
from grader.lms.canvas import Roster
from grader.lms.late import SubmittedAt, late_warnings, time_for, with_late
from grader.model.record import Record, ran
from grader.outputs.adjustments import apply
from grader.outputs.adjustments_file import Adjustment
from grader.outputs.reports import FeedbackPages, feedback_page_name, write_class_report
from grader.outputs.similarity_view import similarity_context
from grader.outputs.writers import grades_csv, result_path, write_lms_outputs, write_result
from grader.similarity.report import SimilarityReport

FiguresFor = Callable[[int, tuple[str, ...]], dict[str, Any]]   # a record's variant seed and runs' scenarios -> the
                                                                 # reference's figures in its world, in those at least


def _report_inputs(records: list[Record], assignment, similarity: SimilarityReport | None) -> str:
    ordered = sorted(json.dumps(record, sort_keys=True, default=str) for record in records)
    shown = None    # the similarity section as drawn, less its time (which differs every run)
    if similarity is not None:
        shown = {key: value for key, value in similarity_context(similarity).items() if key != "seconds"}
    material = json.dumps([getattr(assignment, "fingerprint", ""), grader_code_digest(), ordered, shown],
                          sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()


class BatchFiles:
    def __init__(self, out: Path, assignment, figures_for: FiguresFor, adjustments: list[Adjustment] | None = None,
                 times: dict[str, SubmittedAt] | None = None):
        self.out = Path(out)
        self.adjustments = adjustments or []   # the instructor's (OUT/adjustments.toml): applied to every record written
        self.times = times or {}               # when each was submitted (lms/late.py), for the [late] policy
        self.late_policy = late_policy(getattr(assignment, "config", {}))
        self.assignment = assignment
        self._figures_for = figures_for
        self._figures: dict[tuple[int, tuple[str, ...]], dict[str, Any]] = {}
        self._pages: FeedbackPages | None = None
        self.problems: list[str] = []   # class files that could not be written (the grader's fault), in sentences

    def attempt(self, what: str, write: Callable[[], Any]) -> Any:
        """Write one class file; a failure is noted (and the others are still written), never the batch's end."""
        try:
            return write()
        except Exception as error:  # noqa: BLE001 -- one class file's trouble is its own
            self.problems.append(f"{what} could not be written ({type(error).__name__}: {str(error)[:300]})")
            return None

    def figures(self, seed: int, scenarios: tuple[str, ...] = ()) -> dict[str, Any]:
        key = (seed, tuple(sorted(scenarios)))
        if key not in self._figures:
            self._figures[key] = self._figures_for(seed, key[1])
        return self._figures[key]

    def graded(self, record: Record) -> Record:
        """A record graded now, with the instructor's adjustments applied: its JSON and Markdown (what grading rests
        on) first, then its page. Returns the record as written."""
        record = apply(self.with_late(record), self.adjustments)
        write_result(self.out, record)
        self._page(record)
        return record

    def reused(self, record: Record) -> Record:
        """A record kept from an earlier run, with today's adjustments applied: written again when they changed it,
        else its page is drawn again only when missing or older than it. Returns the record as it stands."""
        adjusted = apply(self.with_late(record), self.adjustments)
        if adjusted != record:
            return self.graded(adjusted)
        page = self.out / feedback_page_name(record["submission"])
        try:
            if page.stat().st_mtime >= result_path(self.out, record["submission"]).stat().st_mtime:
                return record
        except OSError:
            pass
        self._page(record)
        return record

    def with_late(self, record: Record) -> Record:
        """The record with its `late` entry as the [late] policy and its time give it now (deducted by `apply`)."""
        return with_late(record, self.late_policy, time_for(record, self.times))

    def finish(self, records: list[Record], roster: Roster | None, run_info: dict[str, Any],
               similarity: SimilarityReport | None = None, started: float | None = None) -> list[str]:
        """The gradebook and report.html (with the instructor's `similarity` report, if any); returns the Canvas
        warnings."""
        warnings = self.gradebook(records, roster)
        self.report(records, run_info, similarity, started)
        return warnings

    def gradebook(self, records: list[Record], roster: Roster | None) -> list[str]:
        """grades.csv and the LMS files, from the records alone (nothing the similarity report computes); returns
        the Canvas warnings."""
        self.attempt("grades.csv", lambda: write_if_changed(self.out / "grades.csv",
                                                             grades_csv(records, list(self.assignment.groups))))
        late = late_warnings(records, self.late_policy, self.times)
        warnings = self.attempt("the LMS files", lambda: write_lms_outputs(self.out, records, self.assignment, roster,
                                                                           late))
        return warnings or []

    def report(self, records: list[Record], run_info: dict[str, Any], similarity: SimilarityReport | None = None,
               started: float | None = None) -> None:
        """report.html, drawn again only when what it shows changed."""
        # The class report (and its charts) is drawn again only when a record changed: a re-run that graded nothing
        # keeps the page the run that graded them wrote. The page ends with a digest of what it was drawn from.
        inputs = self.attempt("report.html's digest", lambda: _report_inputs(records, self.assignment, similarity))
        trailer = f"<!-- grader report inputs: {inputs} -->\n"
        try:
            with open(self.out / "report.html", "rb") as page:
                page.seek(max(0, page.seek(0, 2) - len(trailer)))
                unchanged = page.read().decode("ascii", "replace") == trailer
        except OSError:
            unchanged = False
        if not unchanged or inputs is None:
            self.attempt("report.html", lambda: write_class_report(
                self.out, records, self.assignment, run_info, similarity,
                started if started is not None else time.monotonic(), trailer))

    def _page(self, record: Record) -> None:
        if self._pages is None:
            self._pages = FeedbackPages(self.out, self.assignment)
        seed = record.get("variant_seed")
        self._pages.write(record, self.figures(seed, ran(record)) if isinstance(seed, int) else {})
