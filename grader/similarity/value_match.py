"""Value similarity: submissions that share the same wrong value, or the same rare free choice.

Token-based tools never see this: two students with the same wrong number to the last digit, the same typed-in
figure or the same odd step size. Which names are exercise values, which checks judge each, and which are free
choices all come from the assignment (`[similarity]`, grader/config/similarity.py). A shared value counts only
when it is telling:
- it is wrong (a check judging it lost points) in both submissions, or a free choice in both; a right answer,
  which every right submission shares, never counts;
- it is rare: held by at most the common limit of submissions (the lesson's eps, which many copy, is not);
- it is not a value honest students pick alike by chance: a round number (one significant digit, a small
  integer, a power of two, a root of a float type's epsilon), an evenly spaced or constant vector (`linspace`,
  `ones`), or a string the given code already holds.
Values of one exercise (one check group) are one piece of evidence: they are usually computed from each other.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.api.values import json_safe
from grader.config.assignment import Assignment
from grader.config.similarity import SimilaritySettings
from grader.runs.provenance import Provenance
from grader.runs.snapshot import Opaque, Snapshot
from grader.similarity.documents import Document

MAX_SHOWN = 160
NATURAL_CONSTANTS = tuple(sorted({float(np.finfo(kind).eps) ** power for kind in (np.float16, np.float32, np.float64)
                                  for power in (1, 1 / 2, 1 / 3, 1 / 4)}))


@dataclass(frozen=True)
class SharedValue:
    names: str          # the exercise value's name in each of the two submissions ("finite", "hvp_plain / hvp_remat")
    shown: str          # the value, shortened
    holders: int        # submissions holding it (this batch and earlier terms)
    reason: str         # "wrong" or "unusual choice"
    exercise: str       # the check group it belongs to: one piece of evidence per exercise


def compared_run(assignment: Assignment, snapshots: dict[str, Snapshot]) -> Snapshot | None:
    """The run whose values the class is compared by: the one every file gets (the primary scenario's, else the
    file as written), so that every two files are compared in the same world."""
    return snapshots.get(assignment.primary_scenario or "baseline")


def exercise_values(snapshot: Snapshot | None, names: list[str], bindings: dict[str, str]) -> dict[str, Any]:
    """The graded binding of each exercise value in one run, as plain JSON data (missing and TODO names left out)."""
    if snapshot is None:
        return {}
    provenance = Provenance(snapshot, bindings)
    found = {}
    for name in names:
        binding = provenance.binding(name)
        if binding is None or isinstance(binding.value, Opaque):
            continue
        found[name] = json_safe(binding.value)
    return found


def value_names(settings: SimilaritySettings) -> list[str]:
    return list(settings.values) + [name for name in settings.choices if name not in settings.values]


def shared_values(documents: list[Document], current: int, settings: SimilaritySettings, limit: int,
                  exercise_of: dict[str, str], given_text: str,
                  inside_limit: int | None = None) -> dict[tuple[int, int], list[SharedValue]]:
    """(i, j) -> the telling values both hold (documents from `current` on are earlier terms'). A pair within the
    class is judged by the class alone (holders counted there, against `inside_limit`), so earlier terms never change
    it; a pair with an earlier submission by everyone's holders against `limit`."""
    inside_limit = limit if inside_limit is None else inside_limit
    holders: dict[str, dict[int, tuple[str, str | None]]] = defaultdict(dict)   # key -> doc -> (name, reason)
    for number, document in enumerate(documents):
        for name, value in (document.values or {}).items():
            if value is None or name not in settings.values and name not in settings.choices:
                continue
            key = json.dumps(value, sort_keys=True, allow_nan=False, default=str)
            if number not in holders[key]:
                holders[key][number] = (name, _reason(document, name, settings))
            else:
                seen, why = holders[key][number]
                holders[key][number] = (f"{seen} / {name}", why or _reason(document, name, settings))
    pairs: dict[tuple[int, int], list[SharedValue]] = defaultdict(list)
    for key, held in holders.items():
        telling = sorted(n for n, (_, reason) in held.items() if reason)
        if len(telling) < 2 or natural(json.loads(key), given_text):
            continue
        in_class = sum(1 for n in held if n < current)
        shown = _shown(json.loads(key))
        for index, a in enumerate(telling):
            if a >= current:
                break
            for b in telling[index + 1:]:
                count, most = (in_class, inside_limit) if b < current else (len(held), limit)
                if count > most:
                    continue
                name_a, reason_a = held[a]
                name_b, reason_b = held[b]
                names = name_a if name_a == name_b else f"{name_a} | {name_b}"
                reason = "wrong" if "wrong" in (reason_a, reason_b) else "unusual choice"
                first = name_a.split(" / ")[0]
                pairs[(a, b)].append(SharedValue(names, shown, count, reason, exercise_of.get(first, first)))
    return pairs


def value_score(shared: list[SharedValue]) -> float:
    """Each exercise with a telling shared value halves the room left for chance: 1 -> 0.5, 2 -> 0.75, 3 -> 0.875."""
    return round(1 - 0.5 ** len({value.exercise for value in shared}), 4)


def _reason(document: Document, name: str, settings: SimilaritySettings) -> str | None:
    judging = [check for check in settings.values.get(name, ()) if check in document.judged]
    if any(check in document.failed for check in judging):
        return "wrong"
    if name in settings.choices:
        return "unusual choice"
    return None


def natural(value: Any, given_text: str = "") -> bool:
    """A value honest students arrive at alike by chance (see the module's docstring)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        return len(value) <= 3 or value in given_text
    if isinstance(value, (int, float)):
        return _round_number(float(value))
    if isinstance(value, list):
        numbers = _numbers(value)
        if numbers is not None and len(numbers) >= 2 and _evenly_spaced(numbers):
            return True
        return all(natural(item, given_text) for item in value)
    if isinstance(value, dict):
        return all(natural(item, given_text) for item in value.values())
    return False


def _numbers(value: list) -> np.ndarray | None:
    flat = value
    while flat and all(isinstance(item, list) for item in flat):
        flat = [x for item in flat for x in item]
    if not flat or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in flat):
        return None
    return np.asarray(flat, dtype=np.float64)


def _evenly_spaced(numbers: np.ndarray) -> bool:
    steps = np.diff(numbers)
    scale = float(np.max(np.abs(numbers))) or 1.0
    return bool(np.all(np.abs(steps - steps[0]) <= 1e-5 * scale))


def _round_number(x: float) -> bool:
    if not math.isfinite(x) or x == 0:
        return True
    if x == int(x) and abs(x) <= 1000:
        return True
    spellings = [repr(x)]
    if float(np.float32(x)) == x:      # a float32 value: 0.001 stored in float32 is 0.0010000000474974513
        spellings.append(np.format_float_positional(np.float32(x), unique=True))
    if min(_significant_digits(text) for text in spellings) <= 1:
        return True
    magnitude = abs(x)
    if math.log2(magnitude).is_integer():
        return True
    return any(abs(magnitude - c) <= 1e-6 * c for c in NATURAL_CONSTANTS)


def _significant_digits(text: str) -> int:
    mantissa = text.lower().lstrip("+-").split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return len(mantissa)


def _shown(value: Any) -> str:
    numbers = _numbers(value) if isinstance(value, list) else None
    if numbers is not None:
        head = ", ".join(f"{x:.6g}" for x in numbers[:4])
        text = f"[{head}{', ...' if len(numbers) > 4 else ''}] ({len(numbers)} values)"
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN - 3] + "..."
