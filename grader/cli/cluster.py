"""Grading a batch on a Dask cluster: the task each worker runs, and the client side the batch drives.

The client (`grader grade --scheduler ADDRESS`) keeps everything but the per-submission grading: discovery, the
records and their files (written once each, atomically, as a local batch writes them), the class files, the
progress bar and the exit status. Each task carries what a worker needs, so no shared file system is needed:

- the assignment as bytes (its folder and reference solution, `pack`), unpacked once per worker process and loaded
  there; its fingerprint, which covers the grader's own code, must equal the client's, and so must the versions
  that can change a grade (`environment()`), or the worker refuses;
- the batch's variant seed;
- the submission (its file name, bytes and the code read from them: discovery's `Submission`; its path only
  names it, nothing reads it).

A worker process keeps one grading context per (assignment fingerprint, batch seed): the warm-up a local batch
does (warm state in the worker machine's own cache folder, built once per machine under its lock; the fork server;
the batch's variant world compiled once), entered on its first task and kept for the next. A worker that cannot
sandbox refuses with the reason (`WorkerRefused`), never grading without isolation. The runs go into the same
sandbox as local runs, which has no network: the scheduler's and workers' ports are not reachable from a run.

Faults: Dask runs a lost worker's tasks again elsewhere (`distributed.scheduler.allowed-failures` times); a task
whose workers kept dying becomes an error record that a re-run grades again. Tasks are pure functions of their
input, so a task run twice returns the same record, and only the client writes it, once.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.authoring.starter import public_code
from grader.common.environment import environment
from grader.common.private_folder import private_folder
from grader.common.user_cache import private_cache_dir
from grader.config.assignment import Assignment, ConfigError, load
from grader.grading.grade import error_record, grade_one
from grader.grading.warm_up import WarmUp, warmed_up
from grader.grading.world_check import WorldRejected
from grader.intake.discovery import Submission
from grader.model.record import Record, ran
from grader.runs.jobs import seed_map
from grader.sandbox.isolation import WeakIsolation, recheck, require_isolation, weak_isolation_allowed
from grader.similarity.report import settings_for
from grader.similarity.value_match import compared_run, exercise_values, value_names

CONNECT_SECONDS = 30             # how long the client tries to reach the scheduler before it says it cannot
RETRIES = 2                      # a task that raised (a refusing worker) is tried again, maybe elsewhere
INSTALL_HINT = "grading on a Dask cluster needs Dask: pip install 'jax-course-grader[cluster]' (dask[distributed])"
log = logging.getLogger("grader.cluster")


class WorkerRefused(RuntimeError):
    """A worker that must not grade this batch (no sandbox, other grader code or versions): the batch stops."""


@dataclass(frozen=True)
class Package:
    """An assignment as bytes: project-relative path -> content (its folder and its reference solution)."""
    assignment_id: str
    fingerprint: str
    files: dict[str, bytes]
    environment: dict[str, str]
    allow_weak_isolation: bool = False   # the instructor asked for weak isolation by name on the client
    all_scenarios: bool = False          # every scenario for every file (`grader grade --all-runs` on the client)


def pack(assignment: Assignment) -> Package:
    files = {}
    for path in sorted(assignment.folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(assignment.root).as_posix()] = path.read_bytes()
    solution = assignment.solution_path
    files[solution.relative_to(assignment.root).as_posix()] = solution.read_bytes()
    return Package(assignment.id, assignment.fingerprint, files, dict(environment()), weak_isolation_allowed(),
                   assignment.all_scenarios)


# ---- on a worker --------------------------------------------------------------------------------------------------

@dataclass
class _Context:
    """One batch's grading on this worker process: its assignment and warm-up, kept for the batch's next task."""
    assignment: Assignment
    warm: WarmUp
    stack: contextlib.ExitStack
    notes: list[str] = field(default_factory=list)
    users: int = 0


_CONTEXTS: dict[tuple[str, int], _Context] = {}
_LOCK = threading.Lock()
KEPT_CONTEXTS = 2                # batches whose warm-up a worker keeps (a new batch's seed evicts the oldest idle)


def grade_task(package: Package, seed: int, submission: Submission) -> dict[str, Any]:
    """What a worker runs: one submission's record (as a local batch grades it), its exercise values for the
    similarity report and the reference's figures in the batch's worlds (for the student's page)."""
    context = _context(package, seed)
    try:
        kept: list[dict[str, Any]] = []     # the compared run's exercise values, once the runs are done (as run_keeper)
        names = value_names(settings_for(context.assignment))

        def keep(snapshots) -> None:
            kept.append(exercise_values(compared_run(context.assignment, snapshots), names, context.assignment.bindings))

        record = grade_one(context.assignment, submission, context.warm.facts, seed, context.warm.runner, keep)
        # raises a failed warm-up, or WorldRejected: no record of that world leaves here
        context.warm.verdict(scenarios=ran(record))
        return {"record": record, "values": kept[0] if kept else None, "figures": context.warm.figures(ran(record)),
                "notes": list(context.notes)}
    finally:
        with _LOCK:
            context.users -= 1


def _context(package: Package, seed: int) -> _Context:
    with _LOCK:
        context = _CONTEXTS.get((package.fingerprint, seed))
        if context is None:
            context = _open(package, seed)
            _CONTEXTS[(package.fingerprint, seed)] = context
            idle = [key for key, kept in _CONTEXTS.items() if kept is not context and not kept.users]   # oldest first
            while len(_CONTEXTS) > KEPT_CONTEXTS and idle:
                _CONTEXTS.pop(idle.pop(0)).stack.close()
        context.users += 1
        return context


def _open(package: Package, seed: int) -> _Context:
    where = _worker_name()
    allow_weak = package.allow_weak_isolation or weak_isolation_allowed()   # asked for on the client, or here
    try:   # this worker's sandboxes inspected afresh for every batch; weak only where the instructor asked
        require_isolation(recheck(), allow_weak=allow_weak)
    except WeakIsolation as error:
        raise WorkerRefused(f"worker {where} cannot sandbox student code, so it grades nothing: {error}") from None
    mine = environment()
    differ = {k: (v, mine.get(k)) for k, v in package.environment.items() if mine.get(k) != v}
    if differ:
        raise WorkerRefused(f"worker {where} has other versions than the client, which could change grades "
                            f"({', '.join(f'{k}: client {a}, worker {b}' for k, (a, b) in differ.items())}); "
                            "install the same ones on every worker")
    assignment = unpack(package)
    if assignment.fingerprint != package.fingerprint:
        raise WorkerRefused(f"worker {where} computes another fingerprint of the assignment ({assignment.fingerprint}, "
                            f"the client {package.fingerprint}): its grader's code differs; install the same grader")
    seeds = seed_map(assignment, seed)
    notes: list[str] = []

    def note(text: str) -> None:
        log.info("%s", text)
        notes.append(text)

    stack = contextlib.ExitStack()
    warm = stack.enter_context(warmed_up(assignment, seeds, note, None, steps=lambda text: log.info("%s", text),
                                         public_source=public_code(assignment), batch_seed=seed, allow_weak=allow_weak))
    atexit.register(stack.close)
    return _Context(assignment, warm, stack, notes)


def unpack(package: Package) -> Assignment:
    """The assignment of `package`, written into a folder of this process's own (removed at exit) and loaded."""
    root = Path(tempfile.mkdtemp(prefix="assignment-", dir=_unpack_folder())).resolve()
    atexit.register(shutil.rmtree, root, True)
    for relative, data in package.files.items():
        target = (root / relative).resolve()
        if root not in target.parents:
            raise WorkerRefused(f"a task's assignment file {relative!r} lies outside its folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    assignment = load(package.assignment_id, root)
    assignment.all_scenarios = assignment.all_scenarios or package.all_scenarios
    return assignment


def _unpack_folder() -> Path:
    return private_folder(private_cache_dir() / "cluster")


def _worker_name() -> str:
    try:
        from distributed import get_worker
        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


# ---- on the client ------------------------------------------------------------------------------------------------

Scheduler = Any    # an address ("tcp://host:8786"), a distributed.Client, or a cluster object (LocalCluster, SLURMCluster)


class ClusterGrading:
    """The batch's view of a Dask cluster: submits one task per submission and yields (submission, result) as they
    finish. A `distributed.Client` given to it stays open; one it made from an address or a cluster is closed."""

    def __init__(self, scheduler: Scheduler, assignment: Assignment, seed: int, retries: int = RETRIES):
        try:
            from distributed import Client
        except ImportError:
            raise ConfigError(INSTALL_HINT) from None
        self.assignment, self.seed, self.retries = assignment, seed, retries
        self.figures: dict[int, dict[str, Any]] = {}
        self.notes: list[str] = []
        self._own = not isinstance(scheduler, Client)
        try:
            self.client = Client(scheduler, timeout=CONNECT_SECONDS) if self._own else scheduler
        except (OSError, TimeoutError, ValueError) as error:
            raise ConfigError(f"cannot reach the Dask scheduler {scheduler}: {error}") from None

    def describe(self) -> str:
        workers = self.client.scheduler_info().get("workers", {})
        threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
        return (f"Grading on the Dask cluster at {self.client.scheduler.address}: {len(workers)} worker(s), "
                f"{threads} thread(s); each worker warms up once for this batch.")

    def grade(self, pending: list[Submission]) -> Generator[tuple[Submission, Record, dict[str, Any] | None], None, None]:
        """(submission, record, exercise values) as each finishes; Ctrl-C or an error cancels what has not run."""
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        package = pack(self.assignment)   # in every task (~100 KiB): no scattered data for a lost worker to take along
        futures = {self.client.submit(grade_task, package, self.seed, submission, pure=False, retries=self.retries,
                                      key=f"grade-{submission.id}-{os.urandom(6).hex()}"): submission
                   for submission in pending}
        try:
            for future in as_completed(futures):
                submission = futures[future]
                try:
                    result = future.result()
                except WorkerRefused as error:
                    raise ConfigError(str(error)) from None
                except (ConfigError, WorldRejected):   # the worker's warm-up failed, or the world failed the reference
                    raise
                except KilledWorker as error:    # its workers kept dying: a record says so; a re-run grades it again
                    yield submission, self._failed(submission, f"every worker grading it was lost ({error})"), None
                    continue
                except Exception as error:  # noqa: BLE001 -- a task that failed outside grade_one: the grader's fault
                    yield submission, self._failed(submission, f"{type(error).__name__}: {error}"), None
                    continue
                self.figures.setdefault(self.seed, {}).update(result["figures"])   # each record's runs' at least
                self.notes += [note for note in result["notes"] if note not in self.notes]
                yield submission, result["record"], result["values"]
        finally:
            self.client.cancel(list(futures))   # what has not started never will (finished ones are already read)

    def _failed(self, submission: Submission, reason: str) -> Record:
        record = error_record(self.assignment, submission, "The grader failed on this submission (the cluster: "
                              f"{reason[:300]}); please report it.", self.seed)
        record["grader_error"] = f"cluster: {reason}"[-4000:]
        return record

    def close(self) -> None:
        if self._own:
            self.client.close()
