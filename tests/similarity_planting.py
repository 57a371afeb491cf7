"""Planted copies for the similarity tests and benchmark: an honest file disguised the ways copiers disguise one.

- `rename`: every name the student chose gets another (imports, attributes, builtins and the graded contract
  names stay, as a copier who still wants the marks must keep them);
- `reorder`: top-level functions and classes moved, in reverse order, right after the imports;
- `reformat`: the code printed again by `ast.unparse` (other spacing, quotes, parentheses, no comments);
- `notebook`: the script cut into notebook cells with markdown between them.
Each keeps the program's meaning, so a planted copy can also be graded.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import json
import keyword
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
