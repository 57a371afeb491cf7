"""The part of an assignment a student may hold: its config and checks module cut down to the visible checks.

Only checks whose visibility is `visible` survive (`hidden` ones must stay secret, and `after_*` ones say
nothing before their date). The config loses `[lms]` (it may hold the grading seed) and `[starter]` (the
lesson's prose is in the starter already), and each group's points become the sum of its visible checks
(groups with none are dropped), so the folder loads and validates as an assignment of its own.

checks.py keeps, verbatim and at the same line numbers, only the statements the visible check functions
need (their definitions, the helpers and constants they reach, and imports); every other line is blanked,
the module docstring and comments between statements included. Same lines, same assertion messages: a student's check reports
exactly what `grader grade` reports.
"""

from __future__ import annotations

import ast
import json
import math
import re

from grader.common.python_ast import ast_parse
from grader.config.assignment import Assignment

DROPPED_TABLES = ("lms", "starter", "similarity")   # similarity: the instructor's, and it names hidden checks
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def visible_specs(assignment: Assignment) -> list:
    return [spec for spec in assignment.checks if spec.visibility == "visible"]


def visible_config(assignment: Assignment) -> dict:
    """assignment.toml's data, for students: visible checks only, groups re-totalled, secrets dropped."""
    config = {key: value for key, value in assignment.config.items() if key not in DROPPED_TABLES}
    kept = {spec.id for spec in visible_specs(assignment)}
    checks = [dict(entry) for entry in assignment.config.get("checks", []) if entry["id"] in kept]
    totals: dict[str, float] = {}
    for entry in checks:
        totals[entry["group"]] = totals.get(entry["group"], 0.0) + float(entry["points"])
    groups = {}
    for name, info in assignment.config.get("groups", {}).items():
        if name in totals:
            points = totals[name]
            groups[name] = {**info, "points": int(points) if points == int(points) else points}
    config["groups"] = groups
    config["checks"] = checks
    return config


def visible_checks_source(source: str, functions: list[str]) -> str:
    """checks.py with every top-level statement the `functions` do not reach turned into blank lines."""
    tree = ast_parse(source)
    lines = source.splitlines(keepends=True)
    defined: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        for name in _bound_names(node):
            defined.setdefault(name, []).append(node)
    wanted, queue = set(), list(functions)
    while queue:
        name = queue.pop()
        if name in wanted or name not in defined:
            continue
        wanted.add(name)
        for node in defined[name]:
            queue += [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
            queue += [n.value.id for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]
    keep = [False] * len(lines)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (_bound_names(node) & wanted):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            for number in range(first, (node.end_lineno or node.lineno) + 1):
                keep[number - 1] = True
    return "".join(line if kept else "\n" for line, kept in zip(lines, keep))


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names = set()
    for target in targets:
        if target is not None:
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


# ---- TOML text (the standard library reads TOML but does not write it) --------------------------------------

def toml_text(data: dict, header: str = "") -> str:
    """`data` as TOML: scalars and arrays of scalars first, then tables, then arrays of tables."""
    out = [header] if header else []
    _table(data, [], out)
    return "\n".join(out).strip("\n") + "\n"


def _table(data: dict, path: list[str], out: list[str]) -> None:
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict) and not _is_table_array(v)}
    if path and (scalars or not data):
        out.append(f"\n[{'.'.join(_key(p) for p in path)}]")
    out += [f"{_key(key)} = {_value(value)}" for key, value in scalars.items()]
    for key, value in data.items():
        if isinstance(value, dict):
            _table(value, [*path, key], out)
    for key, value in data.items():
        if _is_table_array(value):
            for entry in value:
                out.append(f"\n[[{'.'.join(_key(p) for p in [*path, key])}]]")
                out += [f"{_key(k)} = {_value(v)}" for k, v in entry.items()]


def _is_table_array(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _key(key: str) -> str:
    return key if BARE_KEY.fullmatch(key) else json.dumps(key)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
