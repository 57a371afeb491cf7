"""Small rules every table of assignment.toml is read by: numbers, lists of names, unknown keys (with the spelling
they may have meant), named sub-tables."""

from __future__ import annotations

from typing import Any

from grader.config.wording import names as _names
from grader.config.wording import spelling as _spelling


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def unknown_keys(table: dict, allowed: Any, where: str) -> list[str]:
    return [f"{where}: unknown key {key!r}{_spelling(key, allowed)}: the allowed keys are {_names(allowed)}; "
            "fix its spelling or remove it" for key in table if key not in allowed]


def named_tables(tables: dict, kind: str, keys: Any, what: str, problems: list[str]) -> list[tuple[dict, str]]:
    """(table, where) of each [kind.<name>] that is a table; a problem for each that is not, and for each unknown
    key, appended to `problems`."""
    found = []
    for name, table in tables.items():
        where = f"[{kind}.{name}]"
        if not isinstance(table, dict):
            problems.append(f"{where} must be a table; write [{kind}.{name}] {what}")
            continue
        problems += unknown_keys(table, keys, where)
        found.append((table, where))
    return found


def is_string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
