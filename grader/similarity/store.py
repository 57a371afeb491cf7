"""What the similarity report reads: each submission's code and exercise values, kept under OUT/similarity/.

`grader grade` writes `OUT/similarity/<id>.json` for every submission it discovers: the code as graded (a
notebook's code cells, numbered as in the notebook) and, for a file it ran, the exercise values of the baseline
run. The folder is the instructor's, like the records: no student-facing writer reads it, and nothing in it
changes a grade. `grader similar OUT` rebuilds the report from it without grading again. An earlier term is
either such a results folder or a plain folder of submissions (then code only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.common.files import atomic_write
from grader.common.text import clean_data
from grader.grading.record_limits import RECORD_BYTES
from grader.intake.discovery import Submission, discover, safe_filename
from grader.intake.notebook import NotebookError, notebook_cells
from grader.model.record import Record, record_from_json

FOLDER = "similarity"
FORMAT = 1
VALUE_BYTES = 64 * 1024    # one exercise value as JSON (the lesson's are a few hundred bytes)


@dataclass(frozen=True)
class Chunk:
    """A whole .py file (cell None) or one notebook code cell (its number among all the notebook's cells)."""
    cell: int | None
    source: str


@dataclass
class Document:
    id: str
    file: str
    chunks: list[Chunk]
    values: dict[str, Any] | None = None         # exercise values of the baseline run (the graded binding)
    failed: frozenset[str] = frozenset()         # checks below full marks
    judged: frozenset[str] = frozenset()         # checks the record holds (a value judged by none is not "wrong")
    term: str = ""                               # "" for this batch, else the earlier term's label
    sha256: str = ""

    @property
    def label(self) -> str:
        return f"{self.term}/{self.id}" if self.term else self.id


@dataclass
class Loaded:
    documents: list[Document] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def sidecar_path(out: Path, submission_id: str) -> Path:
    return Path(out) / FOLDER / f"{safe_filename(submission_id)}.json"


def bounded_values(values: dict[str, Any] | None) -> dict[str, Any] | None:
    """The exercise values a sidecar keeps: each under VALUE_BYTES as JSON and all together under RECORD_BYTES (the
    record's guard), in order; a larger value (a run can bind a name to megabytes) is left out, never compared."""
    if not values:
        return values
    kept: dict[str, Any] = {}
    total = 0
    for name, value in values.items():
        size = len(json.dumps(clean_data(value), allow_nan=False, default=str))
        if size <= VALUE_BYTES and total + size <= RECORD_BYTES:
            kept[name] = value
            total += size
    return kept


def chunks_of(submission: Submission) -> list[Chunk]:
    if submission.cells is not None:
        return [Chunk(cell.number, cell.source) for cell in submission.cells]
    return [Chunk(None, submission.source)]


def write_sidecar(out: Path, submission: Submission, values: dict[str, Any] | None) -> None:
    """Keep a submission's code (and, when it ran, its exercise values) for the similarity report. The values are
    under the record's size guard (`bounded_values`); the code is the submission's own, under its size limit."""
    data = {"format": FORMAT, "submission": submission.id, "file": submission.relative, "sha256": submission.sha256,
            "chunks": [{"cell": c.cell, "source": c.source} for c in chunks_of(submission)],
            "values": bounded_values(values)}
    atomic_write(sidecar_path(out, submission.id), json.dumps(clean_data(data), allow_nan=False, default=str) + "\n")


def ensure_sidecars(out: Path, submissions: list[Submission]) -> None:
    """Code-only sidecars for submissions not graded in this run (reused records) that have none, or a stale one."""
    for submission in submissions:
        if submission.problem:
            continue
        stored = _read_json(sidecar_path(out, submission.id))
        if not stored or stored.get("sha256") != submission.sha256:
            write_sidecar(out, submission, None)


def load_results(out: Path) -> Loaded:
    """This batch: every record in OUT with its sidecar (code and values)."""
    loaded = Loaded()
    missing = []
    for path in sorted(Path(out).glob("*.json")):
        try:
            record = record_from_json(path.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        stored = _read_json(sidecar_path(out, str(record.get("submission", ""))))
        if stored is None or stored.get("sha256") != record.get("sha256"):   # none, or kept for another file
            if record.get("status") == "graded":
                missing.append(str(record.get("submission")))
            continue
        document = _document(stored, record, term="")
        if document is not None:
            loaded.documents.append(document)
    if missing:
        loaded.notes.append(f"{len(missing)} graded submission(s) have no stored code under {FOLDER}/ matching their "
                            f"record (graded by an older grader?) and are left out: {', '.join(missing[:10])}; grade "
                            "them again with --regrade.")
    return loaded


def load_earlier(folder: Path, expected_name: str, max_bytes: int) -> Loaded:
    """An earlier term: a results folder (its sidecars, with values) or a folder of submissions (code only)."""
    folder = Path(folder)
    term = folder.name if folder.name not in ("results", "out", FOLDER) else f"{folder.parent.name}/{folder.name}"
    if (folder / FOLDER).is_dir():
        loaded = Loaded()
        for path in sorted((folder / FOLDER).glob("*.json")):
            stored = _read_json(path)
            record = _read_record(folder, stored)
            document = _document(stored, record, term) if stored else None
            if document is not None:
                loaded.documents.append(document)
        return loaded
    loaded = Loaded()
    for submission in discover(folder, expected_name, max_bytes):
        if not submission.problem:
            loaded.documents.append(Document(submission.id, submission.relative, chunks_of(submission), term=term,
                                             sha256=submission.sha256))
    if not loaded.documents:
        loaded.notes.append(f"earlier term {folder}: no submissions or stored code found there.")
    return loaded


def boilerplate_chunks(root: Path, paths: tuple[str, ...]) -> tuple[list[Chunk], list[str]]:
    """The code every student was given or steered to (the starters, the reference solution)."""
    chunks, notes = [], []
    for relative in paths:
        path = Path(root) / relative
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            notes.append(f"boilerplate {relative} was not found: code in it counts as the students' own "
                         "(run `grader build`, or fix [similarity] boilerplate).")
            continue
        if path.suffix == ".ipynb":
            try:
                chunks += [Chunk(cell.number, cell.source) for cell in notebook_cells(text)[0]]
            except NotebookError as error:
                notes.append(f"boilerplate {relative} is not a readable notebook ({error}).")
        else:
            chunks.append(Chunk(None, text))
    return chunks, notes


def _document(stored: dict, record: Record | None, term: str) -> Document | None:
    chunks = stored.get("chunks")
    if not isinstance(chunks, list):
        return None
    parsed = [Chunk(c.get("cell") if isinstance(c.get("cell"), int) else None, str(c.get("source", "")))
              for c in chunks if isinstance(c, dict)]
    values = stored.get("values") if isinstance(stored.get("values"), dict) else None
    checks = record.get("checks", []) if record and record.get("status") == "graded" else []
    failed = frozenset(str(c.get("id")) for c in checks if isinstance(c, dict) and c.get("score", 0) < c.get("max_score", 0))
    judged = frozenset(str(c.get("id")) for c in checks if isinstance(c, dict))
    return Document(str(stored.get("submission", "")), str(stored.get("file", "")), parsed,
                    values if judged else None, failed, judged, term, str(stored.get("sha256", "")))


def _read_record(folder: Path, stored: dict | None) -> Record | None:
    if not stored:
        return None
    try:
        return record_from_json((folder / f"{safe_filename(str(stored.get('submission', '')))}.json").read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _read_json(path: Path) -> dict | None:
    try:
        data = clean_data(json.loads(path.read_text()))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
