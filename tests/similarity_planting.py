"""Planted copies for the similarity tests and benchmark: an honest file disguised the ways copiers disguise one.

- `rename`: every name the student chose gets another (imports, attributes, builtins and the graded contract
  names stay, as a copier who still wants the marks must keep them);
- `reorder`: top-level functions and classes moved, in reverse order, right after the imports;
- `reformat`: the code printed again by `ast.unparse` (other spacing, quotes, parentheses, no comments);
- `notebook`: the script cut into notebook cells with markdown between them;
- `edit` (`edit(source, seed)`): what a ring of copiers does to one file so that no two copies read alike:
  operands of `+` and `*` swapped, adjacent assignments that share no name swapped, `pass` padding and comments
  inserted, each at random (seeded).
Each keeps the program's meaning (`edit`: up to `+` of strings, which no file here swaps), so a planted copy can
also be graded.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import json
import keyword
import random
import tokenize

KEEP = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins))


def rename(source: str, keep: tuple[str, ...] = (), salt: str = "") -> str:
    tree = ast.parse(source)
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    tokens, previous = [], ""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        text = token.string
        if (token.type == tokenize.NAME and text not in KEEP and text not in imported and text not in keep
                and previous != "."):
            text = "r" + hashlib.sha256((salt + text).encode()).hexdigest()[:6]
        tokens.append((token.type, text, token.start, token.end, token.line))
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token.string
    return tokenize.untokenize(tokens)


def reorder(source: str) -> str:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)

    def first(node: ast.stmt) -> int:
        return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1

    definitions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    taken = {i for n in definitions for i in range(first(n), n.end_lineno or n.lineno)}
    rest = [line for i, line in enumerate(lines) if i not in taken]
    last_import = max([n.end_lineno or 0 for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))] + [0])
    cut = sum(1 for i in range(last_import) if i not in taken)
    moved = "\n\n".join("".join(lines[first(n):n.end_lineno]) for n in reversed(definitions))
    return "".join(rest[:cut]) + "\n" + moved + "\n" + "".join(rest[cut:])


def reformat(source: str) -> str:
    return ast.unparse(ast.parse(source)) + "\n"


def notebook(source: str, every: int = 4) -> str:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    cells, start = [], 0
    for index, node in enumerate(tree.body):
        if index % every == every - 1 or index == len(tree.body) - 1:
            cells.append("".join(lines[start:node.end_lineno]))
            start = node.end_lineno or start
    content = []
    for number, cell in enumerate(cells):
        content.append({"cell_type": "markdown", "metadata": {}, "source": f"## Part {number}"})
        content.append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": cell})
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": content}, indent=1)


class _Editor(ast.NodeTransformer):
    def __init__(self, rng: random.Random, modules: set[str]):
        self.rng, self.modules = rng, modules

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        strings = any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in (node.left, node.right))
        if isinstance(node.op, (ast.Add, ast.Mult)) and not strings and self.rng.random() < 0.6:
            node.left, node.right = node.right, node.left
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            for index in range(len(body) - 1):
                a, b = body[index], body[index + 1]
                if (isinstance(a, ast.Assign) and isinstance(b, ast.Assign) and not (self._names(a) & self._names(b))
                        and self.rng.random() < 0.7):
                    body[index], body[index + 1] = b, a
            for _ in range(self.rng.randint(0, 2)):
                body.insert(self.rng.randint(0, len(body)), ast.Pass())
        return node

    def _names(self, node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - self.modules


def edit(source: str, seed: int) -> str:
    """`source` with meaning-keeping edits chosen by `seed` (see the module's docstring)."""
    rng = random.Random(seed)
    tree = ast.parse(source)
    modules = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
               if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    text = ast.unparse(ast.fix_missing_locations(_Editor(rng, modules).visit(tree)))
    lines = text.splitlines()
    for _ in range(len(lines) // 8):
        where = rng.randint(0, len(lines))
        lines.insert(where, f"# step {rng.randint(0, 999)}: see the lesson")
    return "\n".join(lines) + "\n"


def disguise(source: str, ways: list[str], keep: tuple[str, ...] = (), salt: str = "") -> tuple[str, str]:
    """(text, suffix) of `source` disguised in these ways, in order (`notebook` last)."""
    for way in ways:
        if way == "rename":
            source = rename(source, keep, salt)
        elif way == "reorder":
            source = reorder(source)
        elif way == "reformat":
            source = reformat(source)
        elif way != "notebook":
            raise ValueError(f"unknown disguise {way!r}")
    return (notebook(source), ".ipynb") if "notebook" in ways else (source, ".py")
