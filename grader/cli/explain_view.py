"""How `grader explain` prints one check in one world (instructor only): what the credit fraction means in points,
the feedback, the student's values, every comparison the check made (both values, the distance and how it was
measured, the tolerance, its kind and unit, pass or fail, and for a method check what a value that does not follow
the world's change gives), and the settings it read with their units.

The entry is what grader/grading/explanations.py kept in the record; older records without comparisons or units
print what they have.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PAD = " " * 6


def score_line(check: Mapping[str, Any], worlds: int) -> str:
    """What the check's score is: the lowest credit fraction over its worlds, times its points."""
    if worlds > 1:
        return (f"   score = the lowest credit fraction over its {worlds} worlds × {check['max_score']:g} points "
                "(each world's fraction follows)")
    return f"   score = the credit fraction below × {check['max_score']:g} points"


def world_lines(scenario: str, seed: Any, entry: dict[str, Any], points: float) -> list[str]:
    fraction = float(entry.get("score_fraction", 0.0))
    lines = [f"   -- {scenario} world (seed {seed}): credit fraction {fraction:.3g} (of {points:g} points): this "
             f"world alone would give {fraction:.3g} × {points:g} = {fraction * points:.4g} points",
             f"{PAD}feedback: " + indented(str(entry.get("feedback", "")), 16)]
    lines += [f"{PAD}student's {name}: {shown(value)}" for name, value in (entry.get("values") or {}).items()]
    comparisons = [c for c in entry.get("comparisons") or [] if isinstance(c, dict)]
    for number, comparison in enumerate(comparisons, 1):
        lines += comparison_lines(number, len(comparisons), comparison)
    units = entry.get("units") or {}
    for key, value in (entry.get("settings") or {}).items():
        unit = f" {units[key]}" if units.get(key) else ""
        lines.append(f"{PAD}setting {key} (assignment.toml): {shown(value)}{unit}")
    lines += [f"{PAD}{key}: {shown(value)}" for key, value in (entry.get("details") or {}).items()]
    return lines


def comparison_lines(number: int, count: int, comparison: dict[str, Any]) -> list[str]:
    if "passed" not in comparison:           # the line counting comparisons not kept
        return [f"{PAD}{comparison.get('what', '')}"]
    verdict = "PASSED" if comparison["passed"] else "FAILED"
    unit = f" {comparison['unit']}" if comparison.get("unit") else ""
    distance = comparison.get("distance")
    measured = f"{distance:.3g}{unit}" if isinstance(distance, int | float) else "not measurable (shapes or types differ)"
    tolerance = comparison.get("tolerance")
    within = (f" = {distance / tolerance:.3g} × the tolerance" if isinstance(distance, int | float)
              and isinstance(tolerance, int | float) and tolerance > 0 else "")
    lines = [f"{PAD}comparison {number}/{count}: {comparison.get('what', '')}: {verdict}",
             f"{PAD}   student's value: {shown(comparison.get('student'))}",
             f"{PAD}   expected value:  {shown(comparison.get('expected'))}",
             f"{PAD}   distance:        {measured}, measured as {comparison.get('measure', '?')}{within}",
             f"{PAD}   tolerance:       {_number(tolerance)}{unit} ({comparison.get('tolerance_kind', '?')}): "
             f"passes when distance <= tolerance"]
    if "unchanged" in comparison:
        separation = comparison.get("separation")
        apart = (f"; the change moves the expected value {separation:.3g} × the tolerance from it"
                 if isinstance(separation, int | float) else "")
        lines.append(f"{PAD}   method: a value that does not follow this world's change gives "
                     f"{shown(comparison['unchanged'])}{apart}")
    return lines


def _number(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else shown(value)


def shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def indented(text: str, width: int = 13) -> str:
    return ("\n" + " " * width).join(text.splitlines() or [""])
