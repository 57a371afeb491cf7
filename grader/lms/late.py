"""When each submission was handed in, as the LMS says, and the course's late policy ([late] of assignment.toml,
grader/config/late.py) applied to a record.

Where a time comes from:
- `grader grade --times FILE`: a CSV with the columns `submission` (the submission id, the entry's name in the
  submissions folder, or a Canvas user id) and `submitted_at` (ISO 8601 with the offset), or a Gradescope export's
  `submission_metadata.yml`; any LMS.
- A Gradescope export: `submission_metadata.yml` beside the `submission_<id>/` folders maps each folder to its
  metadata, whose `:created_at` is the submission's time (read with PyYAML, which otter-grader brings).
- The Gradescope autograder: `/autograder/submission_metadata.json`, `created_at` (Gradescope's documented file).
- Canvas's download names (`name_LATE_userid_subid_file`) carry a LATE flag and no time. A flag cannot size a
  penalty: the record is marked late with its time unknown, nothing is charged, and the instructor's warnings say
  how to give the times.

A times file the policy cannot use raises TimesError naming the file and the line (or Gradescope's entry), which
stops `grader grade` before anything is graded or written: a line without a submission or a time, a time that is
not ISO 8601 with its offset or lies outside the range the arithmetic holds (config/late.py's `in_range`: a time past
datetime's last UTC instant cannot be compared or shown), and a file that gives no time at all, which would otherwise
charge no one while seeming to apply the policy.

The penalty is taken off the total after the checks and the instructor's adjustments, never below 0, by `deduct`,
which grader/outputs/adjustments.py's `apply` (every class file) and the otter runner (Gradescope) both call.
"""

from __future__ import annotations

import copy
import csv
import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path

from grader.config.late import RANGE as TIME_RANGE
from grader.config.late import LatePolicy, in_range, parse_time
from grader.lms.canvas import parse_download_name
from grader.lms.otter_csv import entry_name
from grader.model.record import Autograde, LateEntry, Record
from grader.model.verdicts import grader_fault

GRADESCOPE_EXPORT = "submission_metadata.yml"      # in a Gradescope export, beside the submission_<id>/ folders
GRADESCOPE_AUTOGRADER = "submission_metadata.json"  # in /autograder, for the submission being graded
CANVAS_FLAG = "Canvas's download name (LATE, no time)"
TIMES_COLUMNS = ("submission", "submitted_at")
TIMES_EXAMPLE = "alice,2026-12-11T10:05:00-05:00"
EXAMPLE_YAML = "`:created_at: 2026-12-11 10:05:00 -05:00`"


class TimesError(ValueError):
    """A times file that cannot be used: which file, where and why."""


@dataclass(frozen=True)
class SubmittedAt:
    at: datetime.datetime | None      # None: the LMS says late, but not when
    source: str


def lms_time(value: object) -> datetime.datetime | None:
    """An aware time from ISO 8601 text, a YAML timestamp, or Gradescope's `2026-12-11 10:05:00.123456789 -08:00`;
    None for anything else, and for a time the late arithmetic cannot compute with (config/late.py's `in_range`)."""
    found = _any_time(value)
    return found if found is not None and in_range(found) else None


def _any_time(value: object) -> datetime.datetime | None:
    found = parse_time(value)
    if found is not None or not isinstance(value, str):
        return found
    match = re.fullmatch(r"\s*(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d(?::\d\d)?)(?:\.(\d+))?\s*(Z|[+-]\d\d:?\d\d)\s*", value)
    if match is None:
        return None
    date, time, fraction, offset = match.groups()
    return parse_time(f"{date}T{time}" + (f".{(fraction + '000000')[:6]}" if fraction else "") + offset)


def _time_problem(value: object) -> str:
    """Why `value` is not a submission time the policy can use, in a clause."""
    if _any_time(value) is None:
        return f"{_shown(value)} is not a time in ISO 8601 with its offset"
    return f"{_shown(value)} is outside the times the grader can compute with ({TIME_RANGE})"


def _shown(value: object) -> str:
    text = str(value)
    return repr(text if len(text) <= 60 else text[:60] + "...")


def read_times(path: Path) -> dict[str, SubmittedAt]:
    """A times file: a Gradescope export's metadata (.yml/.yaml) or the CSV `submission,submitted_at`. Raises
    TimesError, naming the file and the line, for a file the policy cannot use: unreadable, a line without a usable
    time, or no time at all (which would charge no one while seeming to apply the policy)."""
    path = Path(path)
    if path.suffix.lower() in (".yml", ".yaml"):
        return gradescope_export_times(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as stream:
            reader = csv.reader(stream)
            rows = [(reader.line_num, row) for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise TimesError(f"{path}: cannot be read ({str(error)[:200]})") from None
    header = [cell.strip().lower() for cell in (rows[0][1] if rows else [])]
    if any(column not in header for column in TIMES_COLUMNS):
        raise TimesError(f"{path}: the first line must name the columns {','.join(TIMES_COLUMNS)} (found "
                         f"{','.join(header) or 'nothing'})")
    who, when = header.index("submission"), header.index("submitted_at")
    times = {}
    for number, row in rows[1:]:
        if not any(cell.strip() for cell in row):
            continue
        key = row[who].strip() if who < len(row) else ""
        value = row[when].strip() if when < len(row) else ""
        at = lms_time(value)
        if not key or not value:
            raise TimesError(f"{path}, line {number}: needs a submission and a time in ISO 8601 with its offset, "
                             f"e.g. {TIMES_EXAMPLE}")
        if at is None:
            raise TimesError(f"{path}, line {number}: {_time_problem(value)}; write the time the LMS gave, in "
                             f"ISO 8601 with its offset, e.g. {TIMES_EXAMPLE}")
        times[key] = SubmittedAt(at, f"the times file {path.name}")
    if not times:
        raise TimesError(f"{path}, line {rows[0][0]}: the header names the columns, but no line after it gives a "
                         f"submission's time, so the late policy would charge no one: add a line per submission "
                         f"(e.g. {TIMES_EXAMPLE}), or leave out --times")
    return times


def gradescope_export_times(path: Path) -> dict[str, SubmittedAt]:
    """`submission_<id>` -> its `:created_at`, from a Gradescope export's submission_metadata.yml. Raises TimesError,
    naming the file and the entry, for a file with no submission or an entry without a usable time."""
    try:
        import yaml  # type: ignore[import-untyped]   # otter-grader's dependency; no stubs installed
    except ImportError:
        raise TimesError(f"{path}: reading it needs PyYAML (pip install pyyaml), or give the times as a CSV with "
                         "--times") from None
    try:   # ValueError, OverflowError: a date YAML's timestamp rule reads and datetime refuses (month 13)
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, OverflowError) as error:
        raise TimesError(f"{path}: cannot be read as Gradescope's metadata ({str(error)[:200]})") from None
    if not isinstance(data, dict):
        raise TimesError(f"{path}: expected Gradescope's mapping of submission_<id> folders to their metadata")
    if not data:
        raise TimesError(f"{path}: lists no submission, so the late policy would charge no one: export the "
                         "submissions from Gradescope again (its submission_metadata.yml maps each submission_<id> "
                         "folder to its :created_at), or give the times another way with --times")
    times = {}
    for folder, meta in data.items():
        value = meta.get(":created_at", meta.get("created_at")) if isinstance(meta, dict) else None
        at = lms_time(value)
        if at is None:
            why = _time_problem(value) if value is not None else "has no :created_at"
            raise TimesError(f"{path}, entry {folder} (line {_yaml_line(text, folder)}): {why}; export the "
                             f"submissions from Gradescope again, or write its time as {EXAMPLE_YAML}")
        times[str(folder)] = SubmittedAt(at, f"Gradescope's {path.name}")
    return times


def _yaml_line(text: str, key: object) -> str:
    """The line of `key` in the YAML mapping `text` ("?" when it cannot be found)."""
    import yaml  # found by gradescope_export_times, the one caller
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else []:
            if key_node.value == str(key):
                return str(key_node.start_mark.line + 1)
    except (yaml.YAMLError, ValueError, RecursionError):
        pass
    return "?"


def autograder_time(autograder: Path) -> SubmittedAt | None:
    """The time of the submission the Gradescope autograder is grading (its submission_metadata.json), or None."""
    try:
        meta = json.loads((Path(autograder) / GRADESCOPE_AUTOGRADER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    at = lms_time(meta.get("created_at")) if isinstance(meta, dict) else None
    return SubmittedAt(at, f"Gradescope's {GRADESCOPE_AUTOGRADER}") if at is not None else None


def class_times(folder: Path, times_file: Path | None = None) -> dict[str, SubmittedAt]:
    """The class's times: the file given, else a Gradescope export's metadata in the submissions folder, else none."""
    if times_file is not None:
        return read_times(times_file)
    export = Path(folder) / GRADESCOPE_EXPORT
    return gradescope_export_times(export) if export.is_file() else {}


def time_for(record: Record, times: dict[str, SubmittedAt]) -> SubmittedAt | None:
    """A record's time: by submission id, entry name or Canvas user id; else Canvas's LATE flag with no time."""
    download = parse_download_name(record.get("file", ""))
    for key in (record["submission"], entry_name(record), download.user_id if download else None):
        if key is not None and key in times:
            return times[key]
    return SubmittedAt(None, CANVAS_FLAG) if download is not None and download.late else None


def late_entry(policy: LatePolicy, submitted: SubmittedAt | None, max_score: float) -> LateEntry | None:
    """What the policy charges a submission (None: on time, or its time unknown and no LMS says it is late)."""
    if submitted is None:
        return None
    entry: LateEntry = {"submitted_at": None, "due": policy.due.isoformat(), "source": submitted.source,
                        "minutes_late": None, "grace_minutes": policy.grace_minutes, "days_charged": 0,
                        "penalty": 0.0, "deducted": 0.0}
    if submitted.at is None:
        return entry
    minutes = (submitted.at - policy.due).total_seconds() / 60
    if minutes <= 0:
        return None
    days = policy.days_charged(submitted.at)
    entry["submitted_at"], entry["minutes_late"], entry["days_charged"] = submitted.at.isoformat(), round(minutes, 2), days
    entry["penalty"] = round(policy.fraction(days) * float(max_score), 6)
    return entry


def with_late(record: Record, policy: LatePolicy | None, submitted: SubmittedAt | None) -> Record:
    """`record` with its `late` entry as the policy and time give it now, nothing deducted yet (`deduct` does that);
    the very record when that changes nothing."""
    entry = (late_entry(policy, submitted, record["max_score"])   # none for the grader's own failure: no score yet
             if policy is not None and not grader_fault(record) else None)
    old = record.get("late")
    unchanged = {k: v for k, v in (old or {}).items() if k not in ("deducted", "override")} == \
        {k: v for k, v in (entry or {}).items() if k != "deducted"}
    if unchanged and (old is None) == (entry is None):
        return record
    new = dict(record)
    if entry is None:
        new.pop("late", None)
    else:
        new["late"] = entry
    return new   # type: ignore[return-value]


def deduct(record: Record, charge: float | None = None) -> float:
    """Take the late penalty (`charge`: the instructor's, else the policy's) off `record`'s total, in place, never
    below 0; keeps the score before it under `autograde` when there is none. Returns the points taken."""
    entry = record.get("late")
    if entry is None or grader_fault(record):
        return 0.0
    charge = float(entry["penalty"]) if charge is None else charge
    taken = round(min(max(charge, 0.0), max(float(record["score"]), 0.0)), 6) + 0.0   # never -0
    if taken > 0 and "autograde" not in record:
        kept: Autograde = {"score": record["score"], "groups": copy.deepcopy(record["groups"]),
                           "checks": {c["id"]: c["score"] for c in record["checks"]}}
        record["autograde"] = kept
    record["score"] = round(float(record["score"]) - taken, 6)
    entry["deducted"] = taken
    return taken


def charged(record: Record, policy: LatePolicy | None, submitted: SubmittedAt | None) -> Record:
    """One submission graded alone (the Gradescope autograder): the policy applied and deducted."""
    record = with_late(record, policy, submitted)
    if "late" in record:
        record = dict(record, late=dict(record["late"]))   # type: ignore[assignment]
        deduct(record)
    return record


def _when(text: str, zone: datetime.tzinfo | None = None) -> str:
    moment = datetime.datetime.fromisoformat(text)
    try:   # a time read by this module is in range (lms_time); one written into a record by hand is shown as it is
        moment = moment.astimezone(zone) if zone else moment
    except OverflowError:
        pass
    return moment.isoformat(sep=" ", timespec="seconds")


def late_sentence(entry: LateEntry) -> str:
    """The student's plain sentence about the late policy ("" when the time is unknown: nothing was charged)."""
    submitted = entry.get("submitted_at")
    if not submitted:
        return ""
    due = datetime.datetime.fromisoformat(entry["due"])
    grace = f" after the {entry['grace_minutes']:g}-minute grace period" if entry["grace_minutes"] else ""
    said = f"Submitted {_when(submitted, due.tzinfo)}, due {_when(entry['due'])}: "
    days = entry["days_charged"]
    if not days:
        said += f"within the {entry['grace_minutes']:g}-minute grace period, so no late penalty."
    else:
        said += (f"{days} day{'s' if days != 1 else ''} late{grace}, so {entry['penalty']:g} point"
                 f"{'s' if entry['penalty'] != 1 else ''} off under the course's late policy.")
    override = entry.get("override")
    if override is not None:
        said += f" Your instructor changed the late penalty to {entry['deducted']:g} points."
    elif entry["deducted"] < entry["penalty"]:
        said += f" Only {entry['deducted']:g} were taken: a score does not go below 0."
    return said


def late_warnings(records: list[Record], policy: LatePolicy | None, times: dict[str, SubmittedAt]) -> list[str]:
    """The instructor's: records marked late with no time (nothing charged), and records with no time at all."""
    if policy is None:
        return []
    flagged = [r for r in records if (e := r.get("late")) is not None and e["submitted_at"] is None]
    warnings = [f"{r['file']}: Canvas marks it LATE, but its download name carries no time, so the late policy "
                "charged nothing; give the times with `grader grade --times FILE` (a CSV with the columns "
                f"submission,submitted_at), or decide with `grader adjust {r['submission']} late --set -N`."
                for r in flagged]
    unknown = [r["submission"] for r in records if time_for(r, times) is None]
    if unknown and times:
        listed = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
        warnings.append(f"late policy: no submission time for {len(unknown)} submission(s) ({listed}): none charged.")
    elif unknown and len(unknown) == len(records):
        warnings.append("late policy: assignment.toml has [late], but no submission's time is known (no "
                        f"{GRADESCOPE_EXPORT} in the submissions folder, no --times FILE): nothing was charged.")
    return warnings
