"""JAX and XLA settings a file puts in `os.environ` before it imports JAX.

JAX reads `JAX_*` variables (`JAX_ENABLE_X64`, `JAX_PLATFORMS`, ...) and XLA reads `XLA_FLAGS` once, when it is
imported. `python file.py` imports JAX after such a line, so there it takes effect. A grader's run has imported JAX
before the file's first statement (the fork server preloads it), so the run applies the settings that change what a
file computes (model/job.py IMPORT_SETTINGS: float64, matmul precision, promotion rules, ...) as the file's first
import of JAX runs, as `python file.py` would; the others (XLA_FLAGS, the platform, caches) are the grader's, and the
file is told so, plainly, with what to use instead.
"""

from __future__ import annotations

import ast

from grader.intake.notebook import Cell, parsed_units
from grader.model.job import IMPORT_SETTINGS

PREFIXES = ("JAX_", "XLA_")


def settings_before_import(source: str, cells: list[Cell] | None = None) -> list[str]:
    """The JAX/XLA variable names the file sets in `os.environ` at the top level before its first JAX import that a
    run does not apply (IMPORT_SETTINGS are applied: `python file.py` and the run agree on them)."""
    return [name for name in _set_before_import(source, cells) if name not in IMPORT_SETTINGS]


def _set_before_import(source: str, cells: list[Cell] | None) -> list[str]:
    names: list[str] = []
    for _, tree in parsed_units(source, cells):
        if tree is None:
            return names           # a cell that does not parse does not run: what follows it is not "before"
        for statement in tree.body:
            if _imports_jax(statement):
                return names
            names += [name for name in _set_names(statement) if name not in names]
    return names


def note(names: list[str]) -> str:
    listed = ", ".join(names)
    return (f"Your file sets {listed} in os.environ before importing JAX. JAX and XLA read these once, when they are "
            f"imported, so they apply when you run the file yourself, but the grader's runs use their own platform, "
            f"XLA flags and caches: there they have no effect (settings that change what your code computes, such as "
            f"JAX_ENABLE_X64, are applied as in your own run).")


def _imports_jax(statement: ast.stmt) -> bool:
    for node in ast.walk(statement):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("jax", "jaxlib") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("jax", "jaxlib"):
            return True
    return False


def _set_names(statement: ast.stmt) -> list[str]:
    """Names set by `os.environ[K] = ...`, `os.environ.setdefault/update(...)`, `os.putenv(K, ...)` (K a JAX/XLA name)."""
    found = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _is_environ(target.value):
                    found.append(_constant(target.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner, method = node.func.value, node.func.attr
            if _is_environ(owner) and method == "setdefault" and node.args:
                found.append(_constant(node.args[0]))
            elif _is_environ(owner) and method == "update":
                for argument in node.args:
                    if isinstance(argument, ast.Dict):
                        found += [_constant(key) for key in argument.keys if key is not None]
                found += [keyword.arg for keyword in node.keywords if keyword.arg]
            elif method == "putenv" and isinstance(owner, ast.Name) and owner.id == "os" and node.args:
                found.append(_constant(node.args[0]))
    return [name for name in found if isinstance(name, str) and name.startswith(PREFIXES)]


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _constant(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
