"""Grade a folder of submissions in parallel after a warm-up, write each record's files as soon as it exists, then
the class files.

Every discovered entry ends with a record on disk: a grader-side failure while grading one submission
becomes an error record for it, never a crash of the batch. A re-run reuses a record whose file hash,
grader version and assignment fingerprint are unchanged (unless `regrade`), so an interrupted batch
resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import csv
import os
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from grader import __version__
from grader.authoring.starter import public_code
from grader.cli.cluster import ClusterGrading, Scheduler
from grader.cli.world_ahead import Preparation
from grader.cli.world_ahead import start as start_preparing
from grader.common.environment import environment
from grader.common.files import remove_torn_writes
from grader.common.private_folder import UnsafeFolder, private_folder
from grader.common.user_cache import private_cache_dir
from grader.config.assignment import Assignment, ConfigError
from grader.grading.grade import error_record, grade_one
from grader.grading.seed_stock import SeedStock
from grader.grading.warm_state import WarmState
from grader.grading.warm_up import WarmUp, warmed_up
from grader.grading.world_check import MAX_REJECTED_WORLDS, WorldRejected, WorldVerdict, too_many_rejected
from grader.intake.discovery import Submission, discover
from grader.lms.canvas import DEFAULT_ROSTER_KEY, Roster
from grader.lms.late import TimesError, class_times
from grader.model.record import Record, ran, record_from_json
from grader.outputs.adjustments import ClassAdjustments, summarize
from grader.outputs.adjustments_file import AdjustmentsError
from grader.outputs.adjustments_file import read as read_adjustments
from grader.outputs.batch_files import BatchFiles
from grader.outputs.progress import Progress
from grader.outputs.reports import load_drawing
from grader.outputs.results_folder import claim
from grader.outputs.similarity_view import write_similarity_csv
from grader.outputs.writers import result_path
from grader.runs.jobs import Runner, fresh_variant_seed, is_suitable, named_variant_seed, seed_map, variant_seed_for
from grader.similarity.report import SimilarityOptions, run_keeper, safe_similarity, settings_for
from grader.similarity.store import ensure_sidecars, tokenise_ahead, write_sidecar


@dataclass
class BatchResult:
    records: list[Record] = field(default_factory=list)
    reused: int = 0
    seconds: float = 0.0
    variant_seed: int = 0
    warnings: list[str] = field(default_factory=list)     # Canvas: submissions without a student and the reverse
    problems: list[str] = field(default_factory=list)     # class files the grader could not write (its own fault)
    notes: list[str] = field(default_factory=list)        # worlds passed over because the reference fell short there
    adjustments: ClassAdjustments = field(default_factory=ClassAdjustments)   # the instructor's, applied and pending
    preparing: Preparation | None = None   # the next batch's world, being built after this one (world_ahead.py)


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
    every_run = not assignment.all_scenarios or record.get("status") != "graded" \
        or set(assignment.scenarios) <= set(record.get("runs") or {})   # a full record asked for: one run is not
    return record if same and every_run else None


def grade_folder(assignment: Assignment, folder: Path, out: Path, workers: int | None = None, regrade: bool = False,
                 variant_seed: int | None = None, progress: Progress | Callable[[str], None] | None = None,
                 roster: Path | None = None, similarity: SimilarityOptions | None = None,
                 cache: Path | None = None, scheduler: Scheduler | None = None, times: Path | None = None,
                 roster_key: str = DEFAULT_ROSTER_KEY) -> BatchResult:
    """`times`: when each was submitted, for the [late] policy (lms/late.py; default: a Gradescope export's
    submission_metadata.yml in `folder`); a file the policy cannot use stops the batch before anything is written.
    `roster`, `roster_key`: Canvas's gradebook export for canvas.csv, and the field of it a plain submission id is
    matched against (lms/canvas.py), read before anything is written.
    `cache`: the cache folder holding the warm state (default: the user's, grader/common/user_cache.py).
    `scheduler`: grade on a Dask cluster (its address, a distributed.Client or a cluster object; grader/cli/cluster.py)
    instead of here: only the per-submission grading moves, everything else stays in this process."""
    started = time.monotonic()
    folder, out = Path(folder).absolute(), Path(out).absolute()   # sandboxes bind these by path: never relative
    progress = progress if isinstance(progress, Progress) else (Progress.lines(progress) if progress else Progress())
    try:   # before anything is written: a malformed file stops the batch and changes nothing
        adjustments = read_adjustments(out)
        submitted = class_times(folder, times)
        students = Roster.load(roster, roster_key) if roster else None
        private_folder(cache) if cache else private_cache_dir()   # a cache others could write: refused, none read
    except (AdjustmentsError, TimesError, UnsafeFolder) as error:
        raise ConfigError(f"{error}; nothing was graded or changed") from None
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as error:
        raise ConfigError(f"the roster {roster} cannot be read ({str(error)[:200]}); nothing was graded or "
                          "changed") from None
    submissions = discover(folder, assignment.submission_filename,
                           assignment.max_submission_bytes, exclude=out)
    if not submissions:   # nothing to grade: write nothing (a header-only grades.csv beside old records would lie)
        raise ConfigError(f"no submissions in {folder}: it should hold <id>.py or <id>.ipynb files, or <id>/ folders "
                          f"with one file each (the Gradescope and otter layouts)")
    for note in claim(out, folder, assignment.id, [s.id for s in submissions]):   # one class per results folder
        progress.note(note)
    remove_torn_writes(out)  # left by a run that was killed mid-write; finished files are whole
    seed: int | None = None   # drawn below, only when something is to be graded (a draw can take a second)
    result = BatchResult()
    pending = []
    kept: list[tuple[Submission, Record]] = []
    for submission in submissions:
        previous = None if regrade else previous_record(out, submission, assignment)
        if previous:
            kept.append((submission, previous))
        else:
            pending.append(submission)
    warm: WarmUp | None = None
    remote: ClusterGrading | None = None

    def figures_for(record_seed: int, scenarios: tuple[str, ...]) -> dict:
        """The reference's figures in a record's worlds (its variant seed is its batch seed, as grade() ran it), in
        at least the record's runs' `scenarios`: this batch's from its warm-up (or the cluster's workers), others'
        from the warm state."""
        if warm is not None and record_seed == seed:
            return warm.figures(scenarios)
        if remote is not None and set(scenarios) <= set(remote.figures.get(record_seed) or {}):
            return remote.figures[record_seed]
        return WarmState(assignment, cache).figures(seed_map(assignment, record_seed), record_seed,
                                                    scenarios=scenarios)

    files = BatchFiles(out, assignment, figures_for, adjustments, submitted)
    for submission, record in kept:
        try:
            record = files.reused(record)
        except Exception:  # noqa: BLE001 -- its page cannot be drawn again: grade it again, never stop the class
            pending.append(submission)
            continue
        result.records.append(record)
        result.reused += 1
    if pending:
        seed = variant_seed_for(assignment, variant_seed) if variant_seed is not None else _drawn_seed(assignment, cache)
    else:   # nothing runs: the report names the world most of its records were graded in
        seed = Counter(r.get("variant_seed") for r in result.records).most_common(1)[0][0] if result.records else None
    result.variant_seed = seed or 0
    seeds = seed_map(assignment, seed) if seed is not None else {}
    to_grade = f"{len(pending)} to grade (variant seed {seed})" if pending else "nothing to grade"
    progress.note(f"{len(submissions)} submission(s) in {folder}; {result.reused} unchanged since the last run, "
                  f"{to_grade}.")
    rejected: list[WorldVerdict] = []      # worlds in which the reference solution fell short: never used
    prepare_next = False   # a large batch on this machine with a drawn seed: the next one's world is built after it
    while pending:
        assert seed is not None   # drawn above whenever something is pending
        try:
            if scheduler is not None:     # on the cluster: each worker warms up for itself
                remote = ClusterGrading(scheduler, assignment, seed)
                try:
                    progress.note(remote.describe())
                    result.records += _grade_remote(remote, pending, progress, files, out, assignment, seed)
                finally:
                    remote.close()
            elif any(not s.problem for s in pending):   # something will run: warm up first (a file that cannot run needs none)
                progress.stage("Warming up")
                runnable = sum(1 for s in pending if not s.problem)
                sampler = runnable >= assignment.method_sampler_min_submissions   # its compiling pays back over a class
                prepare_next = sampler and variant_seed is None and named_variant_seed() is None   # else: one world
                stop_tokenising = threading.Event()
                try:
                    with warmed_up(assignment, seeds, progress.note, cache, steps=progress.note,
                                   public_source=public_code(assignment, with_sampler=sampler), batch_seed=seed) as warm:
                        # the code's similarity units, made while the warm-up compiles (its own set-up done first)
                        threading.Thread(target=tokenise_ahead, args=(pending, stop_tokenising), daemon=True,
                                         name="tokenising the submissions for the similarity report").start()
                        threading.Thread(target=load_drawing, daemon=True,
                                         name="loading the report's drawing module").start()
                        result.records += _grade(assignment, pending, warm.facts, seed, warm.runner, workers, progress,
                                                 files, warm, out)
                        warm.settle()   # a warm-up that failed after the last record is still the batch's failure
                finally:
                    stop_tokenising.set()
                    progress.finish()
            else:
                result.records += _grade(assignment, pending, {}, seed, None, workers, progress, files, None, out)
            break
        except WorldRejected as rejection:   # no record of that world was written: grade again in another
            rejected.append(rejection.verdict)
            if len(rejected) >= MAX_REJECTED_WORLDS:
                raise too_many_rejected(rejected) from None
            avoid = frozenset(v.seed for v in rejected)
            seed = (variant_seed_for(assignment, variant_seed, avoid) if variant_seed is not None
                    else fresh_variant_seed(assignment, avoid))
            seeds, warm, remote = seed_map(assignment, seed), None, None
            result.variant_seed = seed
            note = f"{rejection}; grading in the world of variant seed {seed} instead."
            result.notes.append(note)
            progress.note(note)
    # The gradebook first: grades.csv and the LMS files (OUT/gradescope/<id>.json, OUT/final_grades.csv for otter,
    # OUT/canvas.csv with a roster) as soon as the last record is in, never held back by the similarity report
    result.warnings = files.gradebook(result.records, students)
    # The instructor's similarity report (OUT/similarity/ holds each submission's code and values for it)
    ensure_sidecars(out, submissions)
    options = similarity or SimilarityOptions()
    report = None
    if options.enabled if options.enabled is not None else settings_for(assignment).enabled:
        report = safe_similarity(out, assignment, options)
        files.attempt("similarity.csv", lambda: write_similarity_csv(out, report))
    # HTML: OUT/report.html for the instructor, with the similarity report (the students' pages were written above,
    # as their records came)
    files.report(result.records, {"variant_seed": seed, "seconds": time.monotonic() - started,
                                  "environment": environment()}, report)
    result.problems = files.problems
    result.adjustments = summarize(result.records, adjustments)
    result.seconds = time.monotonic() - started
    if prepare_next:   # after everything is written: it runs beside nothing of this batch's
        result.preparing = start_preparing(assignment, cache, with_sampler=True)
    return result


def _drawn_seed(assignment: Assignment, cache: Path | None) -> int:
    """A fresh variant seed for this batch: one drawn ahead by an earlier batch when there is one (seed_stock.py),
    else drawn now; the stock is refilled in the background for the next batch."""
    if named_variant_seed() is not None:   # $GRADER_VARIANT_SEED: one world for every batch, no stock drawn
        return fresh_variant_seed(assignment)
    stock = SeedStock(WarmState(assignment, cache).folder, lambda seed: is_suitable(assignment, seed))
    seed = stock.take()
    if seed is None:
        seed = fresh_variant_seed(assignment)
    threading.Thread(target=stock.refill, args=(lambda: fresh_variant_seed(assignment, frozenset({seed})),),
                     name="drawing variant seeds for the next batches", daemon=True).start()
    return seed


def _written(files: BatchFiles, record: Record, assignment: Assignment, submission: Submission, seed: int) -> Record:
    """Write a record's files. A failure writing them is that record's (the grader's own fault: it becomes an error
    record saying so, which `grader grade` reports with exit status 1 and a re-run grades again), never the batch's."""
    try:
        return files.graded(record)
    except Exception:  # noqa: BLE001 -- one student's files never stop the class
        detail = traceback.format_exc(limit=3).strip().splitlines()[-1]
        failed = error_record(assignment, submission, f"The grader could not write this submission's files ({detail}); "
                              "please report it.", seed)
        failed["grader_error"] = traceback.format_exc(limit=12)[-4000:]
    try:
        files.graded(failed)
    except Exception:  # noqa: BLE001 -- kept in memory: the class files still list it, and it is graded again next run
        pass
    return failed


def _grade_remote(remote: ClusterGrading, pending: list[Submission], progress: Progress, files: BatchFiles,
                  out: Path, assignment: Assignment, seed: int) -> list[Record]:
    """`_grade` on a cluster: the records (and the exercise values the similarity report keeps) come back from
    the workers and are written here, each once, as it arrives."""
    records: list[Record] = []
    shown = 0
    progress.start(len(pending))
    try:
        with contextlib.closing(remote.grade(pending)) as results:   # closed at once on Ctrl-C: cancels the rest
            for submission, record, values in results:
                for note in remote.notes[shown:]:   # what a worker's warm-up says the user must know (once each)
                    progress.note(f"Cluster: {note}")
                shown = len(remote.notes)
                if values is not None:
                    write_sidecar(out, submission, values)
                record = _written(files, record, assignment, submission, seed)
                records.append(record)
                progress.advance(record)
    finally:
        progress.finish()
    return records


def _grade(assignment: Assignment, pending: list[Submission], facts: dict, seed: int, runner: Runner | None,
           workers: int | None, progress: Progress, files: BatchFiles, warm: WarmUp | None, out: Path) -> list[Record]:
    """Grade `pending` in parallel; each record's files are written as it arrives once the batch's world is verified
    (records that arrive before the verdict are held, then written). A warm-up that fails meanwhile, or a world in
    which the reference solution falls short (WorldRejected), stops the batch before any record of it is written."""
    records: list[Record] = []
    held: list[tuple[Submission, Record]] = []

    def write(submission: Submission, record: Record) -> None:
        record = _written(files, record, assignment, submission, seed)
        records.append(record)
        progress.advance(record)

    def write_judged(wait: bool) -> None:
        """Write the held records whose world's verdict is in (`wait`: every one, waiting for its verdict)."""
        for submission, record in list(held):
            if warm is not None:
                if not wait and not warm.judged(ran(record)):
                    continue
                warm.verdict(scenarios=ran(record))     # raises a rejection that came in meanwhile
            held.remove((submission, record))
            write(submission, record)

    progress.start(len(pending))
    with ThreadPoolExecutor(max_workers=max(1, workers or os.cpu_count() or 1)) as pool:
        futures = {pool.submit(grade_one, assignment, s, facts, seed, runner, run_keeper(out, s, assignment)): s
                   for s in pending}
        try:
            for future in as_completed(futures):
                failure = warm.failure() if warm else None
                if failure is not None:
                    raise failure
                held.append((futures[future], future.result()))
                write_judged(wait=False)
            write_judged(wait=True)        # the world's verdicts before the last records are kept
        except BaseException:   # stopping (a failed warm-up, a rejected world, Ctrl-C): what has not started never will
            pool.shutdown(wait=False, cancel_futures=True)
            progress.finish()
            raise
    progress.finish()
    return records
