"""Grade a folder of submissions in parallel, write each record as soon as it exists, then the class CSV.

Every discovered entry ends with a record on disk: a grader-side failure while grading one submission
becomes an error record for it, never a crash of the batch. A re-run reuses a record whose file hash,
grader version and assignment fingerprint are unchanged (unless `regrade`), so an interrupted batch
resumes where it stopped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from grader import __version__
from grader.authoring.starter import public_code
from grader.common.environment import environment
from grader.common.files import atomic_write, remove_torn_writes
from grader.config.assignment import Assignment, ConfigError
from grader.grading.grade import grade_one
from grader.grading.reference import reference_facts, reference_figures
from grader.intake.discovery import Submission, discover
from grader.lms.canvas import Roster
from grader.model.record import Record, record_from_json
from grader.outputs.progress import Progress
from grader.outputs.reports import write_reports
from grader.outputs.results_folder import claim
from grader.outputs.similarity_view import write_similarity_csv
from grader.outputs.writers import (
    grades_csv,
    result_path,
    write_lms_outputs,
    write_result,
)
from grader.runs.jobs import fresh_variant_seed, scenario_seed
from grader.runs.runners import fast_runner
from grader.similarity.report import SimilarityOptions, run_keeper, safe_similarity, settings_for
from grader.similarity.store import ensure_sidecars


@dataclass
class BatchResult:
    records: list[Record] = field(default_factory=list)
    reused: int = 0
    seconds: float = 0.0
    variant_seed: int = 0
    warnings: list[str] = field(default_factory=list)     # Canvas: submissions without a student and the reverse


def previous_record(out: Path, submission: Submission, assignment: Assignment) -> Record | None:
    path = result_path(out, submission.id)
    try:
        record = record_from_json(path.read_text())
    except (OSError, ValueError):
        return None
    if record.get("grader_error") or record.get("grader_faults") \
            or record.get("check_errors"):
        return None   # a record the grader's own failure shaped is graded again, never reused
    same = (record.get("sha256") == submission.sha256
            and record.get("fingerprint") == assignment.fingerprint
            and record.get("environment", {}).get("grader") == __version__ and record.get("file") == submission.relative)
    return record if same else None


def grade_folder(assignment: Assignment, folder: Path, out: Path, workers: int | None = None, regrade: bool = False,
                 variant_seed: int | None = None, progress: Progress | Callable[[str], None] | None = None,
                 roster: Path | None = None, similarity: SimilarityOptions | None = None) -> BatchResult:
    started = time.monotonic()
    folder, out = Path(folder).absolute(), Path(out).absolute()   # sandboxes bind these by path: never relative
    progress = progress if isinstance(progress, Progress) else (Progress.lines(progress) if progress else Progress())
    submissions = discover(folder, assignment.submission_filename,
                           assignment.max_submission_bytes, exclude=out)
    if not submissions:   # nothing to grade: write nothing (a header-only grades.csv beside old records would lie)
        raise ConfigError(f"no submissions in {folder}: it should hold <id>.py or <id>.ipynb files, or <id>/ folders "
                          f"with one file each (the Gradescope and otter layouts)")
    for note in claim(out, folder, assignment.id, [s.id for s in submissions]):   # one class per results folder
        progress.note(note)
    remove_torn_writes(out)  # left by a run that was killed mid-write; finished files are whole
    seed = variant_seed if variant_seed is not None else fresh_variant_seed(assignment)
    result = BatchResult(variant_seed=seed)
    pending = []
    for submission in submissions:
        previous = None if regrade else previous_record(out, submission, assignment)
        if previous:
            result.records.append(previous)
            result.reused += 1
        else:
            pending.append(submission)
    progress.note(f"{len(submissions)} submission(s) in {folder}; {result.reused} unchanged since the last run, "
                  f"{len(pending)} to grade (variant seed {seed}).")
    seeds = {name: scenario_seed(assignment, scenario, seed) for name, scenario in assignment.scenarios.items()}
    cache = out / ".grader-cache"
    figures = None
    if pending:
        progress.note(f"Preparing the reference solution's facts and compiled programs in {cache} (measured on the "
                      "first run into a results folder, about a minute on 2 cores; reused after) ...")
        facts = reference_facts(assignment, cache)
        with fast_runner(assignment, cache, seeds, progress.note, public_code(assignment)) as runner:
            figures = reference_figures(assignment, cache, seeds, runner, batch_seed=seed)
            workers = max(1, workers or os.cpu_count() or 1)
            progress.start(len(pending))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = {pool.submit(grade_one, assignment, s, facts, seed, runner, run_keeper(out, s, assignment)): s
                           for s in pending}
                for future in as_completed(futures):
                    record = future.result()
                    write_result(out, record)
                    result.records.append(record)
                    progress.advance(record)
            progress.finish()
    atomic_write(out / "grades.csv", grades_csv(result.records, list(assignment.groups)))
    # LMS files: OUT/gradescope/<id>.json, OUT/final_grades.csv (otter), OUT/canvas.csv (roster: a Canvas export)
    result.warnings = write_lms_outputs(out, result.records, assignment, Roster.load(roster) if roster else None)
    # HTML: OUT/report.html for the instructor, OUT/<id>.feedback.html per student (figure beside the reference's)
    figures = figures if figures is not None else reference_figures(assignment, cache, seeds, batch_seed=seed)
    # The instructor's similarity report (OUT/similarity/ holds each submission's code and values for it)
    ensure_sidecars(out, submissions)
    options = similarity or SimilarityOptions()
    report = None
    if options.enabled if options.enabled is not None else settings_for(assignment).enabled:
        report = safe_similarity(out, assignment, options)
        write_similarity_csv(out, report)
    write_reports(out, result.records, assignment, figures,
                  {"variant_seed": seed, "seconds": time.monotonic() - started, "environment": environment()}, report)
    result.seconds = time.monotonic() - started
    return result
