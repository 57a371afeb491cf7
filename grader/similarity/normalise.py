"""A statement rewritten so that edits which do not change the program do not change its tokens.

- no-op statements are dropped: `pass`, a bare constant, `x = x` (a docstring is kept: two students who
  wrote the same natural one-line helper, one of them with a docstring, must not become identical);
- operands of a commutative operator (`+ * & | ^`, and `==`, `!=` with one operator) are put in a canonical
  order, a chain of one operator (`a + b + c`) as a whole, by the normalised text of each operand (names as `V`,
  so renaming cannot change the order). `+` of strings or lists and `*` of a list are not commutative, nor is
  float addition exactly associative: two different programs may then look alike. This is accepted: similarity
  is a reason to look, never a verdict, and a shared operand swap is not what makes a pair score;
- consecutive simple statements (assignments, expressions) that neither read nor write each other's names are
  sorted by their normalised text, in every block inside a statement (a method call or an attribute or item
  assignment counts as writing the name it is made on). Anything else (a return, a loop, a definition) keeps
  its place and is a barrier between groups.
- `dict(a=1, b=2)` becomes `{'a': 1, 'b': 2}` (`dict()` becomes `{}`): the same program, so that students who
  restyle a dict literal they were given (the lesson's panel records) share no code of their own by that. A file
  that rebinds `dict` is read as if it had not.
Names themselves are normalised by the tokeniser (`tokens.py`), not here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

COMMUTATIVE = (ast.Add, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
SYMMETRIC = (ast.Eq, ast.NotEq)
SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
MAX_GROUP = 24                # statements compared pairwise in one group (bounded: linear overall)
BODIES = ("body", "orelse", "finalbody")


class Normaliser(ast.NodeTransformer):
    """Rewrites a tree in place (see the module's docstring); `key` gives the normalised text of a node."""

    def __init__(self, key: Callable[[ast.AST], str], modules: frozenset[str]):
        self.key = key
        self.modules = modules      # imported names: calling `np.sum` does not write `np`

    def visit_Module(self, node: ast.Module) -> ast.AST:
        """Top-level statements are units of their own (their order never mattered): no-ops dropped, not sorted."""
        for index, statement in enumerate(node.body):
            node.body[index] = self.visit(statement)
        node.body = [statement for statement in node.body if not _no_op(statement)]
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for name in BODIES:
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                setattr(node, name, self._block(body))
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, COMMUTATIVE):
            return node
        operands = _chain(node, type(node.op))
        operands.sort(key=self.key)
        built: ast.expr = operands[0]
        for operand in operands[1:]:
            built = ast.BinOp(built, type(node.op)(), operand)
        return built

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args
                and all(keyword.arg is not None for keyword in node.keywords)):
            keys: list[ast.expr | None] = [ast.copy_location(ast.Constant(keyword.arg), keyword)
                                           for keyword in node.keywords]
            return ast.copy_location(ast.Dict(keys=keys, values=[keyword.value for keyword in node.keywords]), node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], SYMMETRIC):
            left, right = sorted([node.left, node.comparators[0]], key=self.key)
            node.left, node.comparators = left, [right]
        return node

    def _block(self, body: list[ast.stmt]) -> list[ast.stmt]:
        kept = [statement for statement in body if not _no_op(statement)]
        leading = next((s for s in body if not (_no_op(s) and not _string(s))), None)
        if leading is not None and _string(leading):
            kept.insert(0, leading)  # a docstring is kept (one token, S): two helpers alike but for it are not one
        out: list[ast.stmt] = []
        group: list[tuple[ast.stmt, set[str], set[str]]] = []
        for statement in kept:
            if isinstance(statement, SIMPLE):
                reads, writes = _names(statement, self.modules)
                if len(group) < MAX_GROUP and all(not (writes & (r | w)) and not (reads & w) for _, r, w in group):
                    group.append((statement, reads, writes))
                    continue
                out += self._sorted(group)
                group = [(statement, reads, writes)]
                continue
            out += self._sorted(group) + [statement]
            group = []
        return out + self._sorted(group)

    def _sorted(self, group: list[tuple[ast.stmt, set[str], set[str]]]) -> list[ast.stmt]:
        return sorted((statement for statement, _, _ in group), key=self.key)


def normalise(tree: ast.AST, key: Callable[[ast.AST], str]) -> None:
    """Rewrite `tree` in place; `key(node)` orders operands and statements (imports at the top level are modules)."""
    modules = frozenset(alias.asname or alias.name.split(".")[0] for node in getattr(tree, "body", [])
                        if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names)
    keys: dict[int, tuple[ast.AST, str]] = {}    # the node is held too: a freed node's id could be reused

    def remembered(node: ast.AST) -> str:     # a node's key once (a chain's operands are keyed again and again)
        found = keys.get(id(node))
        if found is None:
            found = keys[id(node)] = (node, key(node))
        return found[1]
    Normaliser(remembered, modules).visit(tree)


def _string(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def _chain(node: ast.expr, op: type) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, op):
        return _chain(node.left, op) + _chain(node.right, op)
    return [node]


def _no_op(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True
    return (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Name)
            and statement.targets[0].id == statement.value.id)


def _names(statement: ast.stmt, modules: frozenset[str]) -> tuple[set[str], set[str]]:
    """(names read, names written) of a simple statement; a method call writes its receiver's base name."""
    reads: set[str] = set()
    writes: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            (writes if isinstance(node.ctx, (ast.Store, ast.Del)) else reads).add(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = _base(node.func.value)
            if base is not None and base not in modules:
                writes.add(base)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            base = _base(node.value)
            if base is not None:
                writes.add(base)
        elif isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)):
            writes.add("<effect>")
            reads.add("<effect>")
    if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
        reads.add(statement.target.id)
    return reads, writes


def _base(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None
