"""What a check compared in each world, kept for the instructor's `grader explain` (never a student's page).

Why: a regrade request is decided from evidence, not from the grader's code. For every check and every scenario it
ran in, the record keeps (under `explanations`, instructor only) the fraction it gave, the feedback it wrote in that
world (a hidden check's included), the student's values of the names it reads, the settings it read (tolerances,
parameters: `recording_settings`), and whatever the check chose to
attach with `run.explain(key=value, ...)`: the oracle's value, the tolerance, which counterfactual a method check used
and what the value followed. A lesson whose checks attach nothing is still explained by the first four.

Everything is bounded and plain: at most MAX_DETAILS details a check, each summarised in at most MAX_TEXT characters,
so a record stays small whatever a run or a check holds.
"""

from __future__ import annotations

import math
import numbers
import types
from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.api.comparisons import recorded_dicts
from grader.common.text import clip
from grader.model.job import without_run_tags

MAX_DETAILS = 24
MAX_TEXT = 400
MAX_ITEMS = 8


def summary(value: Any, depth: int = 0) -> Any:
    """A value as the instructor reads it: numbers and short strings as they are, arrays by dtype, shape and leading
    values, containers by their first items; anything else by its short repr. JSON-safe, bounded."""
    try:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            number = float(value)
            return number if math.isfinite(number) else repr(number)
        if isinstance(value, str):
            return clip(value, MAX_TEXT)
        if isinstance(value, np.ndarray):   # formatted by hand: np.array2string costs a check call ~1 ms
            shown = ", ".join(_item(item) for item in value.ravel()[:MAX_ITEMS].tolist())
            more = ", ..." if value.size > MAX_ITEMS else ""
            return clip(f"array {value.dtype} shape {value.shape}: [{shown}{more}]", MAX_TEXT)
        if depth < 2 and isinstance(value, dict):
            items = list(value.items())
            return {clip(str(k), 80): summary(v, depth + 1) for k, v in items[:MAX_ITEMS]} | (
                {"...": f"{len(items) - MAX_ITEMS} more"} if len(items) > MAX_ITEMS else {})
        if depth < 2 and isinstance(value, list | tuple):
            return [summary(v, depth + 1) for v in value[:MAX_ITEMS]] + (
                [f"... {len(value) - MAX_ITEMS} more"] if len(value) > MAX_ITEMS else [])
        return clip(repr(value), MAX_TEXT)
    except Exception:  # noqa: BLE001 -- an explanation never fails a check
        return "(a value the grader could not summarise)"


def _item(item: Any) -> str:
    """One array entry as an instructor reads it (8 significant digits for a real number)."""
    if isinstance(item, float):
        return f"{item:.8g}"
    if isinstance(item, bool | int):
        return str(item)
    return clip(repr(item), 40)


def plain_details(details: dict[str, Any]) -> dict[str, Any]:
    """What a check attached with `run.explain`, bounded and JSON-safe."""
    return {clip(str(key), 80): summary(value) for key, value in list(details.items())[:MAX_DETAILS]}


def recording_settings(settings: Any) -> tuple[Any, dict[str, Any]]:
    """(the assignment's settings as a check receives them, the parameters and tolerances it read from them): so every
    check's explanation names the tolerances it compared with, whether or not it attaches anything itself. A copy:
    what a check does to it stays with that call."""
    if not isinstance(settings, types.SimpleNamespace):
        return settings, {}
    read: dict[str, Any] = {}
    names = frozenset(vars(settings))

    class Settings(types.SimpleNamespace):
        def __getattribute__(self, name: str) -> Any:
            value = object.__getattribute__(self, name)
            if name in names:
                read[name] = value
            return value

    return Settings(**vars(settings)), read


def scenario_explanation(fraction: float, feedback: str, values: dict[str, Any], details: dict[str, Any],
                         seed: int | None, settings: dict[str, Any] | None = None,
                         comparisons: list | None = None, units: dict[str, Any] | None = None) -> dict[str, Any]:
    """One check in one world: its fraction, its feedback there, the student's values it read, the settings (tolerances,
    parameters) it read with their units (`units`: the assignment's [units] table), every comparison it made
    (grader.api.comparisons), the check's details."""
    entry: dict[str, Any] = {"score_fraction": round(float(fraction), 6), "feedback": clip(without_run_tags(feedback), 2000),
                             "values": {name: summary(value) for name, value in values.items()}, "seed": seed}
    if settings:
        entry["settings"] = plain_details(settings)
        named = {name: unit for name in entry["settings"] if (unit := setting_unit(name, units))}
        if named:
            entry["units"] = named
    if comparisons:
        entry["comparisons"] = recorded_dicts(comparisons)
    if details:
        entry["details"] = plain_details(details)
    return entry


def read_values(needs: Sequence[str], view: Any) -> dict[str, Any]:
    """The student's values of the names a check reads (a RunView's `value`), for its explanation."""
    values = {}
    for name in (n for n in needs if n != "*"):
        try:
            values[name] = view.value(name)
        except Exception:  # noqa: BLE001 -- missing or unreadable: the feedback says so
            values[name] = "(missing or unfinished)"
    return values


# A setting's unit from the last part of its name, where the assignment's [units] table does not give one.
UNIT_SUFFIXES = (("_bytes", "bytes"), ("_seconds", "seconds"), ("_rtol", "relative (× |expected|)"),
                 ("_atol", "absolute"), ("_fraction", "fraction"), ("_share", "fraction"))


def setting_unit(name: str, units: dict[str, Any] | None = None) -> str:
    """What a setting's number is measured in, as the instructor reads it: the assignment's [units] entry for it, else
    one read from its name (`*_bytes`: bytes, `*_seconds`: seconds, ...), else "" (not said)."""
    given = (units or {}).get(name)
    if isinstance(given, str):
        return clip(given, 120)
    return next((unit for suffix, unit in UNIT_SUFFIXES if name.endswith(suffix)), "")
