"""What the harness reads from each top-level statement before running it, INSIDE the sandbox (stdlib only).

The names it binds, reads and mutates (so the parent can trace which statements produced a value), whether it
still holds a starter's `...`, the `observe` decoration that records calls of student code, and a parse that
keeps the longest valid prefix of a file with a syntax error.
"""

import ast
import collections

from recorder import OBSERVE_NAME, SEEN_NAME

MAX_NAMES = 200


def holds_placeholder(node):
    """True when a statement still has a `...` in it (an unfinished TODO of the starter, e.g. `f(...)`)."""
    return any(isinstance(child, ast.Constant) and child.value is Ellipsis for child in ast.walk(node))


def bound_names(node):
    """Top-level names a statement may bind (for mapping a missing name to the statement that failed)."""
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
            names.add(child.id)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(child.name)
        elif isinstance(child, ast.alias):
            names.add((child.asname or child.name).split(".")[0])
    return sorted(names)[:MAX_NAMES]


def read_names(node):
    """Names a statement reads (its inputs, for tracing which statements produced a value)."""
    return sorted({child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load)})[:MAX_NAMES]


MUTABLE_CONTAINERS = (list, dict, set, bytearray, collections.deque)


def mutated_names(node, namespace):
    """Names a statement may change in place: `v.append(...)` on a container or an object of the student's own
    class, `v[i] = ...`, `v.a = ...`, `v += ...`. A method call on a module or an array changes nothing."""
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and isinstance(child.func.value, ast.Name):
            value = namespace.get(child.func.value.id)
            if isinstance(value, MUTABLE_CONTAINERS) or getattr(type(value), "__module__", None) == "__main__":
                names.add(child.func.value.id)
        elif isinstance(child, (ast.Subscript, ast.Attribute)) and isinstance(child.ctx, (ast.Store, ast.Del)) \
                and isinstance(child.value, ast.Name):
            names.add(child.value.id)
        elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name):
            names.add(child.target.id)
    return sorted(names)[:MAX_NAMES]


class Observe(ast.NodeTransformer):
    """Decorate every student `def` and `lambda` with the recorder's `observe` (when it records evaluations), and
    hand every call, arithmetic and indexing result to its `seen` (which returns it unchanged); line numbers are
    kept."""

    def __init__(self, decorate=True):
        super().__init__()
        self.decorate = decorate

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        if not self.decorate:
            return node
        decorator = ast.Name(id=OBSERVE_NAME, ctx=ast.Load())
        ast.copy_location(decorator, node)
        node.decorator_list.append(decorator)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self.generic_visit(node)
        if not self.decorate:
            return node
        call = ast.Call(func=ast.Name(id=OBSERVE_NAME, ctx=ast.Load()), args=[node], keywords=[])
        ast.copy_location(call.func, node)
        return ast.copy_location(call, node)

    def visit_Call(self, node):
        self.generic_visit(node)
        return self._seen(node)

    def visit_BinOp(self, node):
        self.generic_visit(node)
        return self._seen(node)

    def visit_Subscript(self, node):
        """An indexed value read (`eye[3]`, `basis[:, i]`) is seen like a call's result: a tangent taken by indexing
        is a vector the file made. A subscript being assigned or deleted is left as it is."""
        self.generic_visit(node)
        return self._seen(node) if isinstance(node.ctx, ast.Load) else node

    @staticmethod
    def _seen(node):
        hook = ast.Name(id=SEEN_NAME, ctx=ast.Load())
        ast.copy_location(hook, node)
        return ast.copy_location(ast.Call(func=hook, args=[node], keywords=[]), node)


def parse_prefix(source, filename):
    """Parse the source; on a syntax error, keep the longest prefix of whole lines that still parses."""
    try:
        return ast.parse(source, filename), None
    except SyntaxError as error:
        problem = {"line": error.lineno, "message": "%s: %s" % (type(error).__name__, error.msg)}
        lines = source.splitlines(True)
        end = max(0, (error.lineno or 1) - 1)
        for _ in range(200):
            try:
                return ast.parse("".join(lines[:end]), filename), problem
            except SyntaxError as inner:
                end = min(end - 1, max(0, (inner.lineno or 1) - 1))
                if end <= 0:
                    break
        return ast.parse("", filename), problem
    except (ValueError, RecursionError, MemoryError) as error:
        return ast.parse("", filename), {"line": None, "message": "%s: %s" % (type(error).__name__, error)}


def imports_module(node, top):
    """The statement imports `top` or one of its submodules anywhere in it (`import jax.numpy`, `from jax import
    grad`, an import inside a function it defines)."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Import) and any(alias.name.split(".")[0] == top for alias in inner.names):
            return True
        if isinstance(inner, ast.ImportFrom) and not inner.level and (inner.module or "").split(".")[0] == top:
            return True
    return False
