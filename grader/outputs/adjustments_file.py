"""`OUT/adjustments.toml`: the instructor's decisions about scores, kept beside the results they change.

Why a file beside the results: the grader's records are rewritten by every `grader grade --regrade`; a decision an
instructor made after reading a student's feedback must outlive that, be readable (and editable) by people, and say
who decided what, when and why. Each `[[adjustment]]` table is one decision:

    [[adjustment]]
    student = "alice"                 # the submission id, as in grades.csv
    check = "gradient.value"          # omit for the whole submission
    kind = "set"                      # "set": the score becomes `points`; "add": `points` are added (may be < 0)
    points = 4.0
    reason = "A correct answer the check misjudged: ..."   # shown to the student as written
    who = "jdoe"
    when = "2026-12-03T08:40:00+00:00"
    sha256 = "..."                    # the submission file's hash when the decision was made
    clamp = false                     # true once confirmed: a score outside 0..max is clamped, not held back

The file is read with tomllib and written by the small writer below (no dependency). A malformed file is refused
whole, naming its line and the reason (`AdjustmentsError`), so a command that reads it changes nothing.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from grader.common.files import atomic_write
from grader.common.text import clean_data

FILE_NAME = "adjustments.toml"
KINDS = ("set", "add")
KEYS = ("student", "check", "kind", "points", "reason", "who", "when", "sha256", "clamp")
REQUIRED = ("student", "kind", "points", "reason")
MAX_TEXT = 2000           # a reason longer than this is refused: the file is for people, the page quotes it whole
HEADER = ("# Instructor adjustments, applied on top of the autograde by every `grader grade` (--regrade included).\n"
          "# Written by `grader adjust`; hand edits are welcome (a malformed file stops the command and names the line).\n")


class AdjustmentsError(ValueError):
    """The adjustments file cannot be used: where (file and line) and why, in one sentence."""


@dataclass(frozen=True)
class Adjustment:
    student: str
    check: str | None          # None: the whole submission
    kind: str                  # "set" or "add"
    points: float
    reason: str
    who: str = ""
    when: str = ""
    sha256: str = ""           # the submission file's hash when it was made ("" : unknown, treated as changed)
    clamp: bool = False        # confirmed: clamp a score outside 0..max instead of holding the adjustment back

    @property
    def key(self) -> tuple[str, str | None]:
        return self.student, self.check

    def describe(self) -> str:
        """"set to 4" / "+1.5" / "-2": how the adjustment reads in every output."""
        return f"set to {self.points:g}" if self.kind == "set" else f"{self.points:+g}"

    def target(self) -> str:
        return f"check {self.check}" if self.check else "the whole submission"


def path_in(out: Path) -> Path:
    return Path(out) / FILE_NAME


def read(out: Path) -> list[Adjustment]:
    """The adjustments of a results folder (none when it has no file). Raises AdjustmentsError on any problem."""
    path = path_in(out)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as error:
        raise AdjustmentsError(f"{path}: cannot be read ({error})") from None
    return parse(text, str(path))


def parse(text: str, where: str = FILE_NAME) -> list[Adjustment]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        found = re.search(r"line (\d+)", str(error))
        line = f"line {found.group(1)}" if found else "somewhere"
        raise AdjustmentsError(f"{where}, {line}: not valid TOML ({str(error).split(' (at')[0]})") from None
    starts = [number for number, line in enumerate(text.splitlines(), 1) if re.match(r"\s*\[\[\s*adjustment\s*\]\]", line)]
    extra = sorted(set(data) - {"adjustment"})
    if extra:
        raise AdjustmentsError(f"{where}, {_key_line(text, extra[0], 0)}: unknown top-level key or table `{extra[0]}` "
                               "(the file holds only [[adjustment]] tables)")
    tables = data.get("adjustment", [])
    if not isinstance(tables, list):
        raise AdjustmentsError(f"{where}: `adjustment` must be written as [[adjustment]] tables")
    adjustments: list[Adjustment] = []
    seen: dict[tuple[str, str | None], int] = {}
    for index, table in enumerate(tables):
        start = starts[index] if index < len(starts) else 0
        adjustment = _one(table, text, start, where)
        if adjustment.key in seen:
            raise AdjustmentsError(f"{where}, line {start}: a second adjustment of {adjustment.target()} of "
                                   f"{adjustment.student} (the first is at line {seen[adjustment.key]}); keep one")
        seen[adjustment.key] = start
        adjustments.append(adjustment)
    return adjustments


def _one(table: object, text: str, start: int, where: str) -> Adjustment:
    at = f"{where}, line {start}"
    if not isinstance(table, dict):
        raise AdjustmentsError(f"{at}: an adjustment must be a table")
    for key in table:
        if key not in KEYS:
            raise AdjustmentsError(f"{where}, {_key_line(text, key, start)}: unknown key `{key}` (known: {', '.join(KEYS)})")
    for key in REQUIRED:
        if key not in table:
            raise AdjustmentsError(f"{at}: the adjustment has no `{key}`")

    def text_of(key: str, default: str = "") -> str:
        value = table.get(key, default)
        if isinstance(value, datetime.datetime | datetime.date | datetime.time):
            value = value.isoformat()
        if not isinstance(value, str):
            raise AdjustmentsError(f"{where}, {_key_line(text, key, start)}: `{key}` must be a string")
        if len(value) > MAX_TEXT:
            raise AdjustmentsError(f"{where}, {_key_line(text, key, start)}: `{key}` is longer than {MAX_TEXT} characters")
        return value

    student, reason = text_of("student").strip(), text_of("reason").strip()
    check = text_of("check").strip() or None if "check" in table else None
    kind, points = table["kind"], table["points"]
    if not student:
        raise AdjustmentsError(f"{where}, {_key_line(text, 'student', start)}: `student` is empty")
    if kind not in KINDS:
        raise AdjustmentsError(f"{where}, {_key_line(text, 'kind', start)}: `kind` must be \"set\" or \"add\", not {kind!r}")
    if isinstance(points, bool) or not isinstance(points, int | float) or not math.isfinite(points):
        raise AdjustmentsError(f"{where}, {_key_line(text, 'points', start)}: `points` must be a finite number")
    if not reason:
        raise AdjustmentsError(f"{where}, {_key_line(text, 'reason', start)}: `reason` is empty: say why, in a "
                               "sentence the student reads")
    clamp = table.get("clamp", False)
    if not isinstance(clamp, bool):
        raise AdjustmentsError(f"{where}, {_key_line(text, 'clamp', start)}: `clamp` must be true or false")
    sha = text_of("sha256").strip().lower()
    if sha and not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise AdjustmentsError(f"{where}, {_key_line(text, 'sha256', start)}: `sha256` must be 64 hex digits")
    return Adjustment(student, check, str(kind), float(points), reason, text_of("who"), text_of("when"), sha, clamp)


def _key_line(text: str, key: str, start: int) -> str:
    """"line N" of `key = ...` at or after line `start` (the table's first line), else the table's line."""
    for number, line in enumerate(text.splitlines(), 1):
        if number >= start and re.match(rf"\s*\[*\s*\"?{re.escape(key)}\"?\s*[=\]]", line):
            return f"line {number}"
    return f"line {start}" if start else "somewhere"


def to_toml(adjustments: list[Adjustment]) -> str:
    """The file's text: one [[adjustment]] table each, in order; what `parse` reads back unchanged."""
    parts = [HEADER]
    for a in adjustments:
        lines = ["", "[[adjustment]]", f"student = {_string(a.student)}"]
        if a.check:
            lines.append(f"check = {_string(a.check)}")
        lines += [f"kind = {_string(a.kind)}", f"points = {_number(a.points)}", f"reason = {_string(a.reason)}",
                  f"who = {_string(a.who)}", f"when = {_string(a.when)}", f"sha256 = {_string(a.sha256)}"]
        if a.clamp:
            lines.append("clamp = true")
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


def write(out: Path, adjustments: list[Adjustment]) -> None:
    text = to_toml(adjustments)
    if parse(text) != adjustments:     # the writer's own promise, checked before anything is replaced
        raise AdjustmentsError("the adjustments could not be written faithfully; nothing was changed")
    atomic_write(path_in(out), text)


def _string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, less DEL (TOML refuses it raw) and lone surrogates."""
    return json.dumps(clean_data(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def _number(value: float) -> str:
    text = repr(float(value))
    return text if ("." in text or "e" in text or "inf" in text or "nan" in text) else text + ".0"
