"""Find submissions in a folder and load their source, turning every odd case into a reasoned record.

A submission is `<id>.py` / `<id>.ipynb`, or a folder `<id>/` with one such file inside (the Gradescope
and otter layouts). Nothing is skipped silently: links, empty, binary, undecodable, oversized and
unreadable files, empty folders, folders with several candidate files and files of other kinds all get
a Submission with `problem` set, which becomes a result with status "error" and that one sentence.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import stat
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from .notebook import Cell, NotebookError, joined_source, notebook_cells

SOURCE_SUFFIXES = (".py", ".ipynb")
IGNORED_NAMES = {"__pycache__", ".DS_Store", "__MACOSX", ".ipynb_checkpoints", "Thumbs.db"}


@dataclass
class Submission:
    id: str
    path: Path                      # the file graded (or the entry that could not be graded)
    relative: str                   # path shown in results, relative to the submissions folder
    problem: str | None = None      # why it cannot be graded at all
    notes: list[str] = field(default_factory=list)
    source: str = ""                # the code as one text (a notebook's code cells joined)
    sha256: str = ""
    data: bytes = b""               # the file's bytes (a readable copy is the run's `__file__`)
    cells: list[Cell] | None = None     # a notebook's code cells, run one by one; None for a .py file


def discover(folder: Path, expected_name: str, max_bytes: int, exclude: Path | None = None) -> list[Submission]:
    """Every entry of `folder` as a Submission, sorted by id, ids made unique (`exclude`: the output folder)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    submissions = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name in IGNORED_NAMES or entry.name.startswith("."):
            continue
        if exclude is not None and not entry.is_symlink() and entry.resolve() == exclude.resolve():
            continue
        submissions.append(_from_entry(entry, folder, expected_name, max_bytes))
    _make_ids_unique(submissions)
    return submissions


def load_single(path: Path, expected_name: str, max_bytes: int) -> Submission:
    """One file given directly (`grader check FILE`)."""
    submission = Submission(id=path.stem or path.name, path=path, relative=path.name)
    return _load(submission, expected_name, max_bytes)


def _from_entry(entry: Path, folder: Path, expected_name: str, max_bytes: int) -> Submission:
    relative = entry.name
    if entry.is_symlink():
        return Submission(id=_stem(entry), path=entry, relative=relative,
                          problem=f"{entry.name} is a symbolic link; submit the file itself.")
    if entry.is_dir():
        return _from_folder(entry, folder, expected_name, max_bytes)
    submission = Submission(id=_stem(entry), path=entry, relative=relative)
    if entry.suffix.lower() not in SOURCE_SUFFIXES:
        submission.problem = f"{entry.name} is not a .py or .ipynb file, so there is nothing to run."
        return submission
    return _load(submission, expected_name, max_bytes)


def _from_folder(folder: Path, root: Path, expected_name: str, max_bytes: int) -> Submission:
    candidates = sorted(p for p in folder.rglob("*") if p.suffix.lower() in SOURCE_SUFFIXES
                        and not any(part.startswith(".") or part in IGNORED_NAMES for part in p.relative_to(folder).parts))
    submission = Submission(id=folder.name, path=folder, relative=folder.name)
    if not candidates:
        submission.problem = f"The folder {folder.name}/ holds no .py or .ipynb file."
        return submission
    chosen = [p for p in candidates if p.name == expected_name] if len(candidates) > 1 else candidates
    if len(chosen) != 1:
        names = ", ".join(str(p.relative_to(folder)) for p in candidates[:5])
        submission.problem = f"The folder {folder.name}/ holds several candidate files ({names}); submit only {expected_name}."
        return submission
    submission.path = chosen[0]
    submission.relative = str(chosen[0].relative_to(root))
    if len(candidates) > 1:
        submission.notes.append(f"Several files were submitted; graded {expected_name} and ignored the others.")
    elif Path(chosen[0].name).stem != Path(expected_name).stem:
        submission.notes.append(f"The file is named {chosen[0].name}; the assignment asks for {expected_name} (graded anyway).")
    return _load(submission, expected_name, max_bytes)


def _load(submission: Submission, expected_name: str, max_bytes: int) -> Submission:
    path = submission.path
    name = path.name
    try:
        if path.is_symlink():
            submission.problem = f"{name} is a symbolic link; submit the file itself."
            return submission
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            submission.problem = f"{name} is not a regular file."
            return submission
        if info.st_size > max_bytes:
            submission.problem = f"{name} is {info.st_size} bytes, over the {max_bytes}-byte limit for a submission."
            return submission
        data = path.read_bytes()
    except OSError as error:
        submission.problem = f"{name} could not be read ({error.strerror or error})."
        return submission
    submission.sha256 = hashlib.sha256(data).hexdigest()
    if not data.strip():
        submission.problem = f"{name} is empty."
        return submission
    if b"\0" in data:
        submission.problem = f"{name} is a binary file, not Python source."
        return submission
    text = decode_source(data)
    if text is None:
        submission.problem = (f"{name} is not valid UTF-8 text and declares no encoding Python knows; "
                              "save it as UTF-8.")
        return submission
    if path.suffix.lower() == ".ipynb":
        try:
            cells, notes = notebook_cells(text)
        except NotebookError as error:
            submission.problem = f"{name} is not a readable notebook: {error}"
            return submission
        submission.notes += notes
        if not any(cell.source.strip() for cell in cells):
            submission.problem = f"{name} has no code cells."
            return submission
        submission.cells = cells
        text = joined_source(cells)
    else:
        submission.data = data
    submission.source = text
    return submission


def decode_source(data: bytes) -> str | None:
    """The text Python would read: UTF-8 (a BOM allowed), else the PEP 263 coding line's encoding; None if neither."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        codecs.lookup(encoding)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None


def _stem(path: Path) -> str:
    return path.stem if path.suffix.lower() in SOURCE_SUFFIXES else path.name


def _make_ids_unique(submissions: list[Submission]) -> None:
    """Ids name output files: make them file-name safe, then unique (`alice.py` and `alice/` both exist)."""
    for submission in submissions:
        submission.id = safe_filename(submission.id)
    taken: set[str] = set()
    for submission in submissions:
        base = submission.id
        if base in taken:
            # a new id must not collide with a real one either (alice/, alice.py and alice-2.py together)
            all_ids = {s.id for s in submissions}
            number = 2
            while f"{base}-{number}" in taken or f"{base}-{number}" in all_ids:
                number += 1
            submission.id = f"{base}-{number}"
            submission.notes.append(f"Another entry is also called {base}; this one is recorded as {submission.id}.")
        taken.add(submission.id)


def safe_filename(submission_id: str) -> str:
    """An id usable as a file name in the output folder (ids come from directory entries, so no '/')."""
    cleaned = "".join(c if c.isalnum() or c in "-_.@+" else "_" for c in submission_id).lstrip(".")
    return cleaned or "submission"
