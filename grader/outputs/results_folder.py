"""A results folder belongs to one submissions folder and one assignment, so its class files (grades.csv,
final_grades.csv, canvas.csv, report.html) always describe exactly the records beside them.

`.grader-results` in the folder (JSON, named so that no reader of the folder's `*.json` records takes it for one)
says whose results it holds. A run for another submissions folder or assignment
is refused while records are there (sibling folders share the default `SUBMISSIONS/../results`: the second is told
to pass `--out`), so two classes never mix. A record whose submission has left the folder since the last run is
moved, with its feedback pages, to `removed/<time>/` (never deleted), so the class files and the records agree.
A folder of records written before the owner file existed is adopted when every record is one of this run's
submissions, else refused the same way.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from grader.common.files import atomic_write
from grader.common.last_results import RECORDS
from grader.config.assignment import ConfigError
from grader.intake.discovery import safe_filename

OWNER_FILE = RECORDS
REMOVED = "removed"
NAMED = 5          # record ids named in a refusal; beyond, "and K more"


class ResultsFolderTaken(ConfigError):
    """The results folder holds another class's records: grading into it would mix the two."""


def record_names(out: Path) -> list[str]:
    """The top-level records of a results folder, by file stem (`<safe id>.json` holding a record)."""
    names = []
    for path in sorted(out.glob("*.json")) if out.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "submission" in data and "checks" in data:
            names.append(path.stem)
    return names


def claim(out: Path, submissions_folder: Path, assignment_id: str, submission_ids: list[str]) -> list[str]:
    """Make `out` this run's results folder (creating it); returns notes for the instructor (records moved away).

    Raises ResultsFolderTaken when it holds records of another submissions folder or assignment."""
    folder = str(Path(submissions_folder).resolve())
    owner = _owner(out)
    present = record_names(out)
    wanted = {safe_filename(i) for i in submission_ids}
    strangers = [name for name in present if name not in wanted]
    same_owner = owner == {"submissions": folder, "assignment": assignment_id}
    # Another class's records, even under the same names (hw1/alice.py and hw2/alice.py), are never overwritten.
    foreign = present if owner and not same_owner else ([] if owner else strangers)
    if foreign:
        whose = (f"the results of {owner['submissions']} (assignment {owner['assignment']})" if owner
                 else "records of submissions that are not in this folder")
        listed = ", ".join(foreign[:NAMED]) + (f" and {len(foreign) - NAMED} more" if len(foreign) > NAMED else "")
        raise ResultsFolderTaken(
            f"{out} holds {whose}: {len(foreign)} record(s) ({listed}). Grading {folder} into it would mix two classes "
            f"in grades.csv and the other class files: give this run its own folder with --out DIR (or delete {out} "
            "to start again).")
    notes = [_move_away(out, strangers)] if strangers else []
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / OWNER_FILE, json.dumps({"submissions": folder, "assignment": assignment_id}, indent=1) + "\n")
    return notes


def owner_of(out: Path) -> dict:
    """{"submissions": folder, "assignment": id} of a results folder ({} when it names none)."""
    return _owner(out)


def _owner(out: Path) -> dict:
    try:
        data = json.loads((out / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {"submissions": data.get("submissions"), "assignment": data.get("assignment")} if isinstance(data, dict) else {}


def _move_away(out: Path, names: list[str]) -> str:
    """Move the records (and their pages) of submissions no longer in the folder to `removed/<time>/`."""
    target = out / REMOVED / time.strftime("%Y%m%d-%H%M%S")
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        for path in (out / f"{name}.json", out / f"{name}.feedback.md", out / f"{name}.feedback.html",
                     out / "gradescope" / f"{name}.json"):
            if path.is_file():
                destination = target / ("gradescope-" + path.name if path.parent.name == "gradescope" else path.name)
                shutil.move(str(path), str(destination))
    return (f"{len(names)} record(s) of submissions no longer in the submissions folder moved to {target} "
            f"({', '.join(names[:NAMED])}{' ...' if len(names) > NAMED else ''}); the class files list the others.")
