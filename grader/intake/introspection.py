"""Which files reach into JAX's private internals or introspect frames, closures and the garbage collector.

No counterfactual stops a file that reads the grader's secret changes themselves (the amounts live in JAX's rule
tables and closures while a run lasts). Such a file is made visible instead: every place its source reaches there
is listed, and the record carries the list as `review_flags` for the instructor (the report and `grader explain`
show it). It is read from the file's text in the grader's process, never from anything the run reports. It never
docks a score, and it never lets a method's credit stand unseen: the method checks such a file passed are held for
the instructor's review (grading/run_plan.py `held_for_flags`), who decides, since honest curiosity reads these too.
"""

from __future__ import annotations

import ast
import unicodedata

from grader.common.text import clip
from grader.intake.notebook import Cell, parsed_units, where

MAX_FLAGS = 12
# Attribute names that reach a function's or frame's insides (closure cells, code, globals, locals, callers).
INSIDES = {
    "__closure__": "a function's closure cells", "cell_contents": "a closure cell's contents",
    "__code__": "a function's code object", "__globals__": "a function's globals", "__wrapped__": "a wrapped function",
    "f_locals": "a frame's locals", "f_globals": "a frame's globals", "f_back": "the calling frame",
    "tb_frame": "a traceback's frame", "gi_frame": "a generator's frame", "__self__": None,
}
# Calls that find frames and objects the file did not make.
FINDERS = {
    ("sys", "_getframe"): "the current frame", ("inspect", "currentframe"): "the current frame",
    ("inspect", "stack"): "the call stack", ("inspect", "getclosurevars"): "a function's closure variables",
    ("inspect", "getouterframes"): "the calling frames", ("gc", "get_objects"): "every object the collector tracks",
    ("gc", "get_referrers"): "what refers to an object", ("gc", "get_referents"): "what an object refers to",
    ("ctypes", "cast"): "raw memory", ("ctypes", "pythonapi"): "the interpreter's C API",
}
PRIVATE_MODULES = ("jax._src", "jaxlib.xla_extension", "jax.interpreters", "jax._src.interpreters")
# Words one of which any flagged node spells in its text: the `import` keyword, an attribute name `_reason` looks
# for, the name of getattr/vars/setattr. Python reads identifiers in NFKC form, so the text is compared in that
# form too ("ｇetattr" is getattr); a unit holding none of them cannot be flagged and is not parsed.
TRIGGERS = ("import", "_src", "getattr", "setattr", "vars", *sorted({attr for _, attr in FINDERS}),
            *sorted(name for name, meaning in INSIDES.items() if meaning))


def review_flags(source: str, cells: list[Cell] | None = None) -> list[str]:
    """Each place the file reaches into JAX's internals or introspects (first MAX_FLAGS), e.g. "line 4: imports
    jax._src.ad (JAX's private internals)"; [] when it does neither, or cannot be parsed."""
    found: list[str] = []
    for number, tree in parsed_units(source, cells, worth_parsing=_may_flag):
        for node in ast.walk(tree) if tree is not None else ():
            reason = _reason(node)
            if reason:
                found.append(clip(f"{where(getattr(node, 'lineno', None), number)}: {reason}", 300))
                if len(found) == MAX_FLAGS:
                    return found
    return found


def _may_flag(text: str) -> bool:
    """Whether a unit's text could hold a flagged node (a superset test: every identifier and keyword of the parsed
    unit is, in NFKC form, a substring of the text in NFKC form)."""
    readable = text if text.isascii() else unicodedata.normalize("NFKC", text)
    return any(word in readable for word in TRIGGERS)


def _reason(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        private = [alias.name for alias in node.names if _private(alias.name)]
        return f"imports {', '.join(private)} (JAX's private internals)" if private else None
    if isinstance(node, ast.ImportFrom) and node.module:
        names = [f"{node.module}.{alias.name}" for alias in node.names]
        private = [name for name in names if _private(name)]
        if private:
            return f"imports {', '.join(private)} (JAX's private internals)"
        if node.module in {module for module, _ in FINDERS}:
            taken = [alias.name for alias in node.names if (node.module, alias.name) in FINDERS]
            return f"imports {node.module}.{', '.join(taken)} ({FINDERS[(node.module, taken[0])]})" if taken else None
        return None
    if isinstance(node, ast.Attribute):
        if node.attr == "_src" and _dotted(node.value) in ("jax", "jaxlib"):
            return f"reads {_dotted(node.value)}._src (JAX's private internals)"
        owner = _dotted(node.value)
        if (owner, node.attr) in FINDERS:
            return f"calls {owner}.{node.attr} ({FINDERS[(owner, node.attr)]})"
        if INSIDES.get(node.attr):
            return f"reads .{node.attr} ({INSIDES[node.attr]})"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "vars", "setattr"):
        spelled = _string_argument(node)
        if spelled and (INSIDES.get(spelled) or spelled == "_src"):
            return f"reads {spelled!r} by name through {node.func.id}() ({INSIDES.get(spelled) or 'JAX internals'})"
        if node.func.id in ("getattr", "setattr") and len(node.args) > 1 and not isinstance(node.args[1], ast.Constant) \
                and _names_insides(node.args[1]):
            return f"builds the attribute name {_names_insides(node.args[1])!r} for {node.func.id}()"
    return None


def _private(module: str) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in PRIVATE_MODULES)


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _string_argument(call: ast.Call) -> str | None:
    if len(call.args) > 1 and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str):
        return call.args[1].value
    return None


def _names_insides(node: ast.AST) -> str | None:
    """An attribute name built from string pieces ("__" + "closure" + "__") that spells one of INSIDES."""
    joined = "".join(_pieces(node))
    return joined if INSIDES.get(joined) or joined == "_src" else None


def _pieces(node: ast.AST) -> list[str]:
    """The string constants of `+` and f-string concatenations, left to right."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _pieces(node.left) + _pieces(node.right)
    if isinstance(node, ast.JoinedStr):
        return [piece for value in node.values for piece in _pieces(value)]
    return []
