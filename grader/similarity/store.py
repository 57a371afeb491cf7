"""What the similarity report reads: each submission's code and exercise values, kept under OUT/similarity/.

`grader grade` writes `OUT/similarity/<id>.json` for every submission it discovers: the code as graded (a
notebook's code cells, numbered as in the notebook) and, for a file it ran, the exercise values of the baseline
run. The folder is the instructor's, like the records: no student-facing writer reads it, and nothing in it
changes a grade. `grader similar OUT` rebuilds the report from it without grading again. An earlier term is
either such a results folder or a plain folder of submissions (then code only).

A sidecar also keeps the code's statement units as the tokeniser made them when the file was graded (compactly:
each distinct token once, then numbers), so neither `grader similar` nor a later term that names this folder with
`--earlier` tokenises its sources again: a term pays for tokenising its files once, when it grades them. Units
from another version of the tokeniser, or that do not fit the chunks beside them, are not used (the code is
tokenised then, within the per-document caps). What an earlier term costs is capped per file (a sidecar over
EARLIER_FILE_BYTES or a record over EARLIER_RECORD_BYTES is not read; values are bounded as when written) and per
term (EARLIER_MAX_FILES files, EARLIER_MAX_BYTES read, and EARLIER_TOKENISE_BYTES of code without kept units,
a plain folder of submissions or an older grader's sidecars, tokenised); what is left out is named in the notes.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.common.files import atomic_write
from grader.common.text import clean_data
from grader.grading.record_limits import RECORD_BYTES
from grader.intake.discovery import Submission, discover, safe_filename
from grader.intake.notebook import NotebookError, notebook_cells
from grader.model.record import Record, record_from_json
from grader.similarity import code_match
from grader.similarity.documents import Chunk, Document
from grader.similarity.tokens import MAX_TOKENS, UNITS_REMEMBERED, Unit, units_version

FOLDER = "similarity"
FORMAT = 1
VALUE_BYTES = 64 * 1024    # one exercise value as JSON (the lesson's are a few hundred bytes)
EARLIER_FILE_BYTES = 8 * 1024**2     # an earlier term's sidecar (its code, units and values), or 8 x the file limit
EARLIER_RECORD_BYTES = 2 * RECORD_BYTES   # an earlier term's record (records are written under RECORD_BYTES)
EARLIER_MAX_FILES = 2000             # files of one earlier term compared (a course's term is a few hundred)
EARLIER_MAX_BYTES = 512 * 1024**2    # bytes read of one earlier term, sidecars and records together
EARLIER_TOKENISE_BYTES = 32 * 1024**2   # code of one earlier term tokenised here (files without kept units)


AHEAD_CHUNKS = UNITS_REMEMBERED // 2   # tokenised ahead at most: none pushed out before its record needs it


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


def encode_units(units: list[Unit]) -> dict[str, Any]:
    """Units as kept in a sidecar: each distinct token once (`words`), then per unit its chunk, its tokens as numbers
    into `words`, and its tokens' lines as runs [count, first, last] (a statement's tokens share few lines)."""
    numbers: dict[str, int] = {}
    encoded = []
    for unit in units:
        runs: list[list[int]] = []
        for first, last in unit.lines:
            if runs and runs[-1][1] == first and runs[-1][2] == last:
                runs[-1][0] += 1
            else:
                runs.append([1, first, last])
        encoded.append([unit.chunk, [numbers.setdefault(token, len(numbers)) for token in unit.tokens], runs])
    return {"version": units_version(), "words": list(numbers), "units": encoded}


def decode_units(data: Any, chunks: int) -> list[Unit] | None:
    """The units a sidecar keeps, or None where they are of another tokeniser or do not fit its `chunks` chunks."""
    try:
        if not isinstance(data, dict) or data.get("version") != units_version():
            return None
        words, encoded = data["words"], data["units"]
        if not (isinstance(words, list) and all(isinstance(w, str) for w in words) and isinstance(encoded, list)):
            return None
        units, total = [], 0
        for chunk, numbers, runs in encoded:
            if not (isinstance(chunk, int) and 0 <= chunk < chunks and isinstance(numbers, list) and numbers):
                return None
            tokens = tuple(words[n] for n in numbers if isinstance(n, int) and 0 <= n < len(words))
            lines: list[tuple[int, int]] = []
            for count, first, last in runs:
                if not all(isinstance(v, int) for v in (count, first, last)) or not (0 < count and 0 < first <= last):
                    return None
                lines += [(first, last)] * min(count, len(numbers) - len(lines))
            total += len(tokens)
            if len(tokens) != len(numbers) or len(lines) != len(numbers) or total > 2 * MAX_TOKENS:
                return None
            units.append(Unit(chunk, tokens, tuple(lines)))
        return units
    except (KeyError, TypeError, ValueError):
        return None


def write_sidecar(out: Path, submission: Submission, values: dict[str, Any] | None) -> None:
    """Keep a submission's code (and, when it ran, its exercise values) for the similarity report. The values are
    under the record's size guard (`bounded_values`); the code is the submission's own, under its size limit; its
    units are those of its first MAX_TOKENS tokens."""
    chunks = chunks_of(submission)
    data = {"format": FORMAT, "submission": submission.id, "file": submission.relative, "sha256": submission.sha256,
            "chunks": [{"cell": c.cell, "source": c.source} for c in chunks],
            "units": encode_units(code_match.all_units(chunks)), "values": bounded_values(values)}
    atomic_write(sidecar_path(out, submission.id), json.dumps(clean_data(data), allow_nan=False, default=str) + "\n")


def tokenise_ahead(submissions: list[Submission], stop: threading.Event) -> None:
    """Tokenise the submissions' code before their records arrive (the batch calls it in the background while its
    warm-up compiles and a core is idle): each record's sidecar then only looks its units up (tokens.units_of
    remembers them). Nothing here can fail a batch: a file whose code cannot be read is tokenised with its record."""
    chunks = 0
    for submission in submissions:
        if stop.is_set() or chunks >= AHEAD_CHUNKS:
            return
        if not submission.problem:
            try:
                code = chunks_of(submission)
                chunks += len(code)
                code_match.all_units(code)
            except Exception:  # noqa: BLE001,S112 -- the record's own sidecar tries again and says what went wrong
                continue


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
            if document.units is None:   # an older grader's sidecar: its units kept now, for later terms too
                document.units = _keep_units(sidecar_path(out, document.id), stored, document.chunks)
            loaded.documents.append(document)
    if missing:
        loaded.notes.append(f"{len(missing)} graded submission(s) have no stored code under {FOLDER}/ matching their "
                            f"record (graded by an older grader?) and are left out: {', '.join(missing[:10])}; grade "
                            "them again with --regrade.")
    return loaded


def _keep_units(path: Path, stored: dict, chunks: list[Chunk]) -> list[Unit]:
    """The units of a sidecar's chunks, written into it (this class's own folder) so that no later run or term
    tokenises them again."""
    units = code_match.all_units(chunks)
    try:
        atomic_write(path, json.dumps(clean_data({**stored, "units": encode_units(units)}), allow_nan=False,
                                      default=str) + "\n")
    except (OSError, ValueError):
        pass
    return units


class _TermBudget:
    """What one earlier term may cost: EARLIER_MAX_FILES files and EARLIER_MAX_BYTES read, each file under its cap."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.files = 0
        self.bytes = 0
        self.too_big: list[str] = []
        self.cut = False
        self.tokenise = 0
        self.untokenised: list[str] = []

    def take(self, path: Path, cap: int, counted: bool = True) -> bool:
        """Whether `path` may be read (under `cap` bytes, within the term's budget); counts it if so."""
        try:
            size = path.stat().st_size
        except OSError:
            return False
        if size > cap:
            self.too_big.append(path.name)
            return False
        if (counted and self.files >= EARLIER_MAX_FILES) or self.bytes + size > EARLIER_MAX_BYTES:
            self.cut = True
            return False
        self.files += counted
        self.bytes += size
        return True

    def admit(self, document: Document) -> bool:
        """Whether a document is compared: one without kept units only while the term's code to tokenise lasts."""
        if document.units is not None:
            return True
        size = sum(len(chunk.source) for chunk in document.chunks)
        if self.tokenise + size > EARLIER_TOKENISE_BYTES:
            self.untokenised.append(document.id)
            return False
        self.tokenise += size
        return True

    def notes(self) -> list[str]:
        notes = []
        if self.untokenised:
            notes.append(f"earlier term {self.folder}: {len(self.untokenised)} file(s) without kept units past the "
                         f"{EARLIER_TOKENISE_BYTES // 1024**2} MiB of code a term may have tokenised were left out "
                         f"({', '.join(self.untokenised[:10])}); where it is a results folder, `grader similar` "
                         "on it with this grader keeps their units and they are compared from then on.")
        if self.too_big:
            notes.append(f"earlier term {self.folder}: {len(self.too_big)} file(s) over the size an earlier term's file "
                         f"may have were not read: {', '.join(self.too_big[:10])}.")
        if self.cut:
            notes.append(f"earlier term {self.folder}: only its first {self.files} file(s) ({self.bytes // 1024**2} MiB) "
                         f"were compared (at most {EARLIER_MAX_FILES} files and {EARLIER_MAX_BYTES // 1024**2} MiB a term).")
        return notes


def load_earlier(folder: Path, expected_name: str, max_bytes: int) -> Loaded:
    """An earlier term: a results folder (its sidecars, with values) or a folder of submissions (code only). Its cost
    is bounded per file and per term (see the module's docstring); its units are read, not made again."""
    folder = Path(folder)
    term = folder.name if folder.name not in ("results", "out", FOLDER) else f"{folder.parent.name}/{folder.name}"
    budget = _TermBudget(folder)
    if (folder / FOLDER).is_dir():
        loaded = Loaded()
        for path in sorted((folder / FOLDER).glob("*.json")):
            if budget.cut or not budget.take(path, max(EARLIER_FILE_BYTES, 8 * max_bytes)):
                continue
            stored = _read_json(path)
            record = _read_record(folder, stored, budget)
            if stored and isinstance(stored.get("values"), dict):
                stored["values"] = bounded_values(stored["values"])   # an older grader's sidecar kept any size
            document = _document(stored, record, term) if stored else None
            if document is not None and budget.admit(document):
                loaded.documents.append(document)
        loaded.notes += budget.notes()
        return loaded
    loaded = Loaded()
    for submission in discover(folder, expected_name, max_bytes):
        if submission.problem:
            continue
        if budget.files >= EARLIER_MAX_FILES or budget.bytes + len(submission.source) > EARLIER_MAX_BYTES:
            budget.cut = True
            break
        budget.files += 1
        budget.bytes += len(submission.source)
        document = Document(submission.id, submission.relative, chunks_of(submission), term=term,
                            sha256=submission.sha256)
        if budget.admit(document):
            loaded.documents.append(document)
    loaded.notes += budget.notes()
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
                    values if judged else None, failed, judged, term, str(stored.get("sha256", "")),
                    decode_units(stored.get("units"), len(parsed)))


def _read_record(folder: Path, stored: dict | None, budget: _TermBudget | None = None) -> Record | None:
    if not stored:
        return None
    path = folder / f"{safe_filename(str(stored.get('submission', '')))}.json"
    if budget is not None and not budget.take(path, EARLIER_RECORD_BYTES, counted=False):
        return None
    try:
        return record_from_json(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _read_json(path: Path) -> dict | None:
    try:
        data = clean_data(json.loads(path.read_text()))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
