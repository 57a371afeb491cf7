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
import os
import re
import stat
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from grader.intake.notebook import Cell, NotebookError, joined_source, notebook_cells
from grader.intake.regions import Exercises, read_exercises

SOURCE_SUFFIXES = (".py", ".ipynb")
SAFE_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}\.(py|ipynb)")
IGNORED_NAMES = {"__pycache__", ".DS_Store", "__MACOSX", ".ipynb_checkpoints", "Thumbs.db"}
LMS_METADATA = {"submission_metadata.yml"}   # a Gradescope export's times, beside its folders: no submission


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
    expected_name: str = ""             # the name the assignment asks for
    from_folder: bool = False           # the entry is a folder (the Gradescope and otter layouts)
    _exercises: Exercises | None = field(default=None, repr=False, compare=False)

    @property
    def exercises(self) -> Exercises:
        """Its exercise regions (where each lies, which still hold `...`), read from its code once, when first asked
        for: a batch starts its first run without reading every file's markers first."""
        if self._exercises is None:
            self._exercises = read_exercises(self.source, self.cells) if self.source else Exercises()
        return self._exercises

    @property
    def run_name(self) -> str:
        """The file name the run sees (`__file__`, tracebacks): the submission's own when it is a plain one, else
        the name the assignment asks for, with the submission's kind."""
        name = self.path.name
        if SAFE_RUN_NAME.fullmatch(name):
            return name
        suffix = ".ipynb" if self.cells is not None else ".py"
        return Path(self.expected_name or "submission.py").stem + suffix


MAX_FOLDER_ENTRIES = 2000          # files looked at inside one submission folder (a folder of a million is refused)
ID_LENGTH = 80


def discover(folder: Path, expected_name: str, max_bytes: int, exclude: Path | None = None) -> list[Submission]:
    """Every entry of `folder` as a Submission, sorted by id, ids unique and stable (`exclude`: the output folder).

    Names are read as bytes, so any name the file system allows (not UTF-8, 255 bytes long) gets a record."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    submissions = []
    for raw in sorted(os.listdir(os.fsencode(folder))):
        entry = folder / os.fsdecode(raw)
        if entry.name in IGNORED_NAMES or entry.name in LMS_METADATA or entry.name.startswith("."):
            continue
        if exclude is not None and not entry.is_symlink() and entry.resolve() == exclude.resolve():
            continue
        submissions.append(_from_entry(entry, folder, expected_name, max_bytes))
    _make_ids_unique(submissions)
    return sorted(submissions, key=lambda s: s.id)


def printable(name: str) -> str:
    """A name as text that can be written anywhere: bytes that are not UTF-8 become U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def entry_id(name: str, keep_suffix: bool = False) -> str:
    """A stable id from an entry's name: the stem of `x.py`/`x.ipynb` (exact, lowercase suffix), else the whole
    name; anything unsafe in a file name, or too long, is replaced and a hash of the real name is added, so two
    names never meet in one id and the same name always gives the same id."""
    suffix = Path(name).suffix
    base = name[: -len(suffix)] if suffix in SOURCE_SUFFIXES and not keep_suffix else name
    clean = "".join(c if c.isalnum() or c in "-_.@+" else "_" for c in base).lstrip(".-+@")
    if clean != base or len(clean) > ID_LENGTH or not clean:
        digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:8]
        clean = f"{clean[:ID_LENGTH] or 'submission'}-{digest}"
    return clean


def load_submission_folder(folder: Path, expected_name: str, max_bytes: int) -> Submission:
    """An LMS submission folder (otter's and Gradescope's `submission/`), read by the rules `grader grade` reads
    a submission folder by."""
    return _from_folder(folder, folder.parent, expected_name, max_bytes)


def load_single(path: Path, expected_name: str, max_bytes: int) -> Submission:
    """One file given directly (`grader check FILE`)."""
    submission = Submission(id=printable(path.stem or path.name), path=path, relative=printable(path.name))
    return _load(submission, expected_name, max_bytes)


def _from_entry(entry: Path, folder: Path, expected_name: str, max_bytes: int) -> Submission:
    relative = printable(entry.name)
    if entry.is_symlink():
        return Submission(id=entry_id(entry.name), path=entry, relative=relative,
                          problem=f"{relative} is a symbolic link; submit the file itself.")
    if entry.is_dir():
        return _from_folder(entry, folder, expected_name, max_bytes)
    submission = Submission(id=entry_id(entry.name), path=entry, relative=relative)
    if entry.suffix.lower() not in SOURCE_SUFFIXES:
        submission.problem = f"{relative} is not a .py or .ipynb file, so there is nothing to run."
        return submission
    if entry.suffix not in SOURCE_SUFFIXES:
        submission.notes.append(f"The file is named {relative}; its extension is read as {entry.suffix.lower()}.")
    return _load(submission, expected_name, max_bytes)


def _visible_files(folder: Path) -> tuple[list[Path], bool]:
    """The files under a submission folder (hidden ones skipped), and whether the walk was cut short."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in IGNORED_NAMES)
        for name in sorted(files):
            if not name.startswith(".") and name not in IGNORED_NAMES:
                found.append(Path(top) / name)
                if len(found) > MAX_FOLDER_ENTRIES:
                    return found, True
    return found, False


def _from_folder(folder: Path, root: Path, expected_name: str, max_bytes: int) -> Submission:
    """A folder holding one file is that file (whatever its name); with several, the assignment's file is graded.

    The same rules serve `grader grade` (a `<id>/` folder) and the LMS paths (Gradescope's `submission/`), so
    one submission gets one grade and the same messages on every path."""
    files, cut = _visible_files(folder)
    folder_id, shown = entry_id(folder.name, keep_suffix=True), printable(folder.name)
    if len(files) == 1 and not cut:
        submission = _from_entry(files[0], folder, expected_name, max_bytes)
        submission.id, submission.from_folder = folder_id, True
        submission.relative = printable(str(files[0].relative_to(root)))
        return submission
    submission = Submission(id=folder_id, path=folder, relative=shown, from_folder=True)
    candidates = [p for p in files if p.suffix.lower() in SOURCE_SUFFIXES]
    if cut:
        submission.problem = f"The folder {shown}/ holds more than {MAX_FOLDER_ENTRIES} files; submit only {expected_name}."
        return submission
    if not candidates:
        submission.problem = f"The folder {shown}/ holds no .py or .ipynb file."
        return submission
    chosen = [p for p in candidates if p.name == expected_name] if len(candidates) > 1 else candidates
    if len(chosen) != 1:
        names = ", ".join(printable(str(p.relative_to(folder))) for p in candidates[:5])
        submission.problem = f"The folder {shown}/ holds several candidate files ({names}); submit only {expected_name}."
        return submission
    submission.path = chosen[0]
    submission.relative = printable(str(chosen[0].relative_to(root)))
    submission.notes.append(f"Several files were submitted; graded {chosen[0].name} and ignored the others.")
    return _load(submission, expected_name, max_bytes)


def _load(submission: Submission, expected_name: str, max_bytes: int) -> Submission:
    path = submission.path
    name = printable(path.name)
    submission.expected_name = expected_name
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


def _make_ids_unique(submissions: list[Submission]) -> None:
    """Entries whose names give the same id (`alice/` and `alice.py`): a folder keeps it, a file takes its whole
    name as its id. Either way the id depends on the entry's own name only, and both records say so."""
    by_id: dict[str, list[Submission]] = {}
    for submission in submissions:
        by_id.setdefault(submission.id, []).append(submission)
    taken = set(by_id)
    for base, group in by_id.items():
        if len(group) < 2:
            continue
        group.sort(key=lambda s: (not s.from_folder, s.relative))
        for submission in group[1:]:
            name = submission.relative.split("/")[0]
            new = entry_id(name, keep_suffix=True)
            if new in taken:
                new = f"{new}-{hashlib.sha256(os.fsencode(name)).hexdigest()[:8]}"
            taken.add(new)
            submission.id = new
        names = ", ".join(s.relative.split("/")[0] for s in group)
        for submission in group:
            submission.notes.append(f"Several entries map to the id {base} ({names}); this one is recorded as {submission.id}.")


def safe_filename(submission_id: str) -> str:
    """An id usable as a file name in the output folder (ids come from directory entries, so no '/')."""
    cleaned = "".join(c if c.isalnum() or c in "-_.@+" else "_" for c in submission_id).lstrip(".")
    return cleaned or "submission"
