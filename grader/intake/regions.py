"""Exercise regions of a source file: the `# BEGIN EXERCISE <name>` / `# END EXERCISE <name>` marker pairs.

The solution's markers are the contract with the starter generator (authoring) and tell the grader which
exercises a student left unfinished (grading). Reading them needs nothing but the text. A submission's are read
once, at intake (`read_exercises`, kept as `Submission.exercises`), into what grading needs: where each region lies
and which still hold a placeholder, with places as the student reads them.
"""

from __future__ import annotations

import bisect
import re
import tokenize
from dataclasses import dataclass, field
from io import StringIO

from grader.intake.notebook import Cell, joined_line_places

MARKER = re.compile(r"^(?P<indent>[ \t]*)#\s*(?P<kind>BEGIN|END) EXERCISE\s+(?P<name>[\w.-]+)\s*$")
MAX_REPORTED_REGIONS = 200   # a file with thousands of markers is named by its first ones


class RegionError(Exception):
    """Exercise markers that do not pair up (nested, unclosed or mismatched)."""


@dataclass(frozen=True)
class Region:
    """One exercise region: 0-based indices of its BEGIN and END marker lines."""

    name: str
    begin: int
    end: int
    indent: str

    def body(self, lines: list[str]) -> list[str]:
        return lines[self.begin + 1:self.end]


def find_regions(lines: list[str]) -> list[Region]:
    """Every exercise region, in order; unbalanced, nested or mismatched markers are an error."""
    regions, open_name, open_at, open_indent = [], None, 0, ""
    for index, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        kind, name = match["kind"], match["name"]
        if kind == "BEGIN":
            if open_name is not None:
                raise RegionError(f"line {index + 1}: BEGIN EXERCISE {name} inside region {open_name!r} "
                                    f"(opened at line {open_at + 1})")
            open_name, open_at, open_indent = name, index, match["indent"]
        else:
            if open_name != name:
                raise RegionError(f"line {index + 1}: END EXERCISE {name} does not close "
                                    f"{'region ' + repr(open_name) if open_name else 'any region'}")
            regions.append(Region(name, open_at, index, open_indent))
            open_name = None
    if open_name is not None:
        raise RegionError(f"line {open_at + 1}: region {open_name!r} has no END EXERCISE {open_name}")
    return regions


def unfinished_exercises(source: str) -> dict[str, list[int]]:
    """Exercise regions of a (student) file that still hold a `...` placeholder: name -> 1-based marker lines.

    Tolerant, never an exception: broken markers yield nothing, a syntax error the placeholders before it."""
    lines = source.split("\n")                  # numbered as tokenize numbers them
    try:
        regions = find_regions(lines)
    except RegionError:
        return {}
    regions = regions[:MAX_REPORTED_REGIONS]
    last_line = regions[-1].end + 1 if regions else 0   # tokens after the last reported region cannot matter
    placeholders = set()
    try:
        for token in tokenize.generate_tokens(StringIO(source).readline):
            if token.start[0] > last_line:
                break
            if token.type == tokenize.OP and token.string == "...":
                placeholders.add(token.start[0])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    ordered = sorted(placeholders)
    unfinished: dict[str, list[int]] = {}
    for region in regions:   # linear: one bisection per region, never regions x lines
        first = bisect.bisect_right(ordered, region.begin + 1)
        if first < len(ordered) and ordered[first] < region.end + 1:
            unfinished.setdefault(region.name, []).append(region.begin + 1)
    return unfinished


# An exercise region in a student's file: (notebook cell number or None, BEGIN marker line, END marker line), 1-based.
RegionLines = tuple[int | None, int, int]


def region_lines(source: str, cells: list | None = None) -> dict[str, list[RegionLines]]:
    """Where each exercise region of a submission lies (per notebook cell; a file's own lines otherwise), so the
    grader can tell a binding made inside an exercise from one made before or after it. Tolerant: markers that do
    not pair up in a unit are ignored there."""
    units = [(cell.number, cell.source) for cell in cells] if cells else [(None, source)]
    found: dict[str, list[RegionLines]] = {}
    for number, text in units:
        try:
            regions = find_regions(text.split("\n"))
        except RegionError:
            continue
        for region in regions[:MAX_REPORTED_REGIONS]:
            found.setdefault(region.name, []).append((number, region.begin + 1, region.end + 1))
    return found


Place = tuple[int | None, int]      # (notebook cell number or None, 1-based line in that cell or the file)


@dataclass(frozen=True)
class Exercises:
    """A submission's exercise regions, read once at intake."""

    regions: dict[str, list[RegionLines]] = field(default_factory=dict)   # where each lies (the graded bindings)
    unfinished: dict[str, list[Place]] = field(default_factory=dict)     # BEGIN markers of regions still holding `...`


def read_exercises(source: str, cells: list[Cell] | None = None) -> Exercises:
    """Both readings of a submission's markers: per unit (notebook cell or file) and over the joined source, whose
    line numbers become the student's places ("In [3], line 1" in a notebook)."""
    places = joined_line_places(cells) if cells else None

    def place(line: int) -> Place:
        if places is not None and 0 < line <= len(places):
            cell, within = places[line - 1]
            return cell, within
        return None, line

    unfinished = {name: [place(line) for line in lines] for name, lines in unfinished_exercises(source).items()}
    return Exercises(region_lines(source, cells), unfinished)
