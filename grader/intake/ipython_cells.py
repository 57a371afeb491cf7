"""A notebook code cell as the Python Jupyter runs: IPython's own input transformer decides what is a magic, a
shell escape (`!ls`), a help line (`obj?`) or a line that merely continues a statement (`% loss` inside a
`print(` call stays Python), exactly as the kernel does, and the student's line numbers are kept.

IPython turns those lines into calls of `get_ipython()`, which a graded run does not have. They are resolved here,
in the trusted parent, before the cell reaches the sandbox:
- `%time` / `%%time` and `%%capture` run the code they wrap in the notebook's namespace, as IPython does, so they
  become that code and a name it assigns is graded like any other (`x = %time f()` assigns f()'s value);
- `%%writefile FILE` writes its file, as in Jupyter, so a later `import` of it works;
- every other magic, shell line and help line does not run: it becomes `pass` (or `None` where its value was
  assigned), and is listed so the student is told. `%timeit` is one of them: IPython runs its statement inside a
  timing function, so nothing it assigns is kept in the notebook either.
Line numbers stay those of the cell: where IPython joins a continued line, blank lines fill the gap.
"""

from __future__ import annotations

import ast
import difflib
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field

from grader.common.python_ast import ast_parse
from grader.common.text import parses

CODE_CELL_MAGICS = ("time", "capture")   # cell magics whose body IPython runs in the notebook's namespace
REALIGN_DIFF_LIMIT = 250_000         # lines before x lines after that difflib may align (its worst case)
LOOP_LIMIT = 500                         # transforms of one statement at most (IPython's own TRANSFORM_LOOP_LIMIT)
# Where IPython's token transforms and the `get_ipython()` resolution can act at all: an escape at the start of a
# line (`%magic`, `!cmd`, `?obj`, the autocall `,` `;` `/`), `obj?` at its end, `x = %magic` / `x = !cmd`, or a call
# the student wrote. A cell with none of these is plain Python: it is kept as it is, at the cost of one scan.
IPYTHON_SYNTAX = re.compile(r"^[ \t]*[%!?,;/]|\?[ \t]*$|=[ \t]*[%!]|get_ipython", re.MULTILINE)


@dataclass
class Budget:
    """What converting one notebook may cost, shared by its cells: a student's notebook has a few dozen IPython
    lines; a file made of nothing else must not hold up the batch (each transform costs about 0.3 ms)."""

    transforms: int = 2000           # IPython lines converted
    characters: int = 1_000_000      # characters re-tokenized to find them


@dataclass
class CellPython:
    """A cell as Python (same line numbers as the cell), and its IPython-only lines that will not run."""

    source: str
    not_run: list[tuple[int, str]] = field(default_factory=list)     # (line in the cell, what the student wrote)


def cell_python(cell: str, budget: Budget | None = None) -> CellPython:
    """The cell as the Python IPython would run, with `get_ipython()` calls resolved (see the module doc)."""
    lines = cell.splitlines(keepends=True)
    if not lines:
        return CellPython("")
    if not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    try:
        return _convert(lines, list(range(1, len(lines) + 1)), budget or Budget())
    except Exception:   # noqa: BLE001 -- IPython refused the cell: run it as written (Python reports the error)
        return CellPython("".join(lines))


def _convert(lines: list[str], origin: list[int], budget: Budget) -> CellPython:
    """Transform `lines` (each from cell line `origin[i]`) and resolve the IPython calls."""
    from IPython.core.inputtransformer2 import TransformerManager, cell_magic

    manager = TransformerManager()
    steps: list[Callable[[list[str]], list[str]]] = [*manager.cleanup_transforms, *manager.line_transforms]
    for step in steps:
        after = step(lines)
        if step is cell_magic and after != lines:
            return _cell_magic(lines, origin, budget)
        lines, origin = after, _realign(lines, after, origin)
    if not IPYTHON_SYNTAX.search("".join(lines)):   # plain Python: nothing left for IPython to change
        return CellPython(_place([line.rstrip("\n") for line in lines], origin))
    lines, origin, left = _token_transforms(manager, lines, origin, budget)
    converted = _resolve(lines, origin)
    if left is not None:
        converted.not_run.append((left, "(every IPython line from here on: too many in this notebook to convert; "
                                        "left as written)"))
    return converted


def _token_transforms(manager, lines: list[str], origin: list[int],
                      budget: Budget) -> tuple[list[str], list[int], int | None]:
    """IPython's token transforms (magics, `!`, `?`, `x = %magic`), one top-level statement at a time.

    IPython re-tokenizes the whole cell after each transform, which is quadratic in the number of magics (400
    `%time` lines take it 12 s). A transform only ever rewrites one logical line, so running them statement by
    statement gives IPython's result at a cost proportional to each statement; the notebook's budget bounds the
    rest (returns the cell line from which nothing was converted, or None)."""
    from IPython.core.inputtransformer2 import make_tokens_by_line

    starts = _statement_starts(make_tokens_by_line(lines), len(lines))
    out_lines: list[str] = []
    out_origin: list[int] = []
    left = None
    for begin, end in zip(starts, [*starts[1:], len(lines)]):
        chunk, chunk_origin = lines[begin:end], origin[begin:end]
        if left is None and any(mark in line for line in chunk for mark in "%!?"):
            for _ in range(LOOP_LIMIT):
                budget.characters -= sum(len(line) for line in chunk)
                if budget.characters < 0 or budget.transforms <= 0:
                    left = chunk_origin[0] if chunk_origin else None
                    break
                changed, after = manager.do_one_token_transform(chunk)
                if not changed:
                    break
                budget.transforms -= 1
                chunk, chunk_origin = after, _realign(chunk, after, chunk_origin)
        out_lines += chunk
        out_origin += chunk_origin
    return out_lines, out_origin, left


def _statement_starts(tokens_by_line: list[list], count: int) -> list[int]:
    """0-based indices of the lines where a top-level logical line begins (the first is always 0)."""
    starts = {0}
    for tokens in tokens_by_line:
        real = [t for t in tokens if t.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.COMMENT)]
        if real and real[0].start[1] == 0 and 0 < real[0].start[0] <= count:
            starts.add(real[0].start[0] - 1)
    return sorted(starts)


def _realign(before: list[str], after: list[str], origin: list[int]) -> list[int]:
    """The cell line each line of `after` came from: IPython replaces runs of lines by fewer (or changed) lines.

    Linear in the number of lines: the lines both share at the start and at the end map one to one, a changed
    middle of the same length maps line by line (stripped prompts or indentation), and only a small changed middle
    is aligned by difflib (quadratic in the worst case, so a larger one maps by position)."""
    if before == after:
        return list(origin) if origin else [1] * len(after)
    limit = min(len(before), len(after))
    head = 0
    while head < limit and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < limit - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    old, new = before[head:len(before) - tail], after[head:len(after) - tail]
    middle: list[int] = []   # for each line of `new`, its index in `old`
    if len(old) == len(new):
        middle = list(range(len(new)))
    elif old and new and len(old) * len(new) <= REALIGN_DIFF_LIMIT:
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for _, i1, i2, j1, j2 in matcher.get_opcodes():
            middle += [min(i1 + k, i2 - 1) if i2 > i1 else max(i1 - 1, 0) for k in range(j2 - j1)]
    else:
        middle = [min(k, len(old) - 1) if old else -1 for k in range(len(new))]
    sources = [*range(head), *(head + i for i in middle), *range(len(before) - tail, len(before))]
    return [origin[max(source, 0)] if origin else 1 for source in sources]


def _cell_magic(lines: list[str], origin: list[int], budget: Budget) -> CellPython:
    """`%%name line` then a body: the body is the cell's code for the magics that run it, else nothing runs."""
    header = lines[0].rstrip("\n")
    name, _, argument = header[2:].strip().partition(" ")
    body, body_origin = lines[1:], origin[1:]
    if name in CODE_CELL_MAGICS and not (name == "time" and _time_statement(argument) != ""):
        converted = _convert(body, body_origin, budget) if body else CellPython("")   # (`%%time x` is refused by IPython)
        placed = converted.source.splitlines()
        placed += [""] * (origin[0] - len(placed))
        placed[origin[0] - 1] = _capture_binding(argument) if name == "capture" else "pass"
        return CellPython("\n".join(placed) + "\n", converted.not_run)
    if name == "writefile":
        code = _writefile(argument, "".join(body))
        if code is not None:
            return CellPython(_place([code], [origin[0]]))
    return _not_run_at_all(lines, origin)


def _capture_binding(argument: str) -> str:
    """`%%capture [options] NAME` binds NAME to the captured output, as IPython does (its text is in the run's
    output instead, so the object holds none); without a NAME nothing is bound."""
    names = [word for word in argument.split() if not word.startswith("-")]
    if not names or not names[0].isidentifier():
        return "pass"
    return (f"{names[0]} = __import__('types').SimpleNamespace(stdout='', stderr='', outputs=[], "
            "show=lambda: None)")


def _not_run_at_all(lines: list[str], origin: list[int]) -> CellPython:
    return CellPython(_place(["pass"], [origin[0]]), [(origin[0], lines[0].rstrip())])


def _writefile(argument: str, body: str) -> str | None:
    """`%%writefile [-a] FILE` as one Python statement writing the body (None when IPython would refuse it)."""
    from IPython.core import magic_arguments
    from IPython.core.magics.osm import OSMagics

    try:
        args = magic_arguments.parse_argstring(OSMagics.writefile, argument)
    except Exception:   # noqa: BLE001 -- a usage error in Jupyter too: nothing is written
        return None
    filename = str(args.filename)
    if len(filename) > 1 and filename[0] == filename[-1] and filename[0] in "'\"":
        filename = filename[1:-1]
    mode = "a" if args.append else "w"
    return f"open({filename!r}, {mode!r}, encoding='utf-8').write({body!r})"


def _time_statement(argument: str) -> str | None:
    """The code `%time` runs, as IPython parses its options (None: IPython would refuse them)."""
    from IPython.core import magic_arguments
    from IPython.core.magics.execution import ExecutionMagics

    try:
        _, extra = magic_arguments.parse_argstring(ExecutionMagics.time, argument, partial=True)
    except Exception:   # noqa: BLE001 -- a usage error in Jupyter too: the line does not run
        return None
    return " ".join(extra)


def _resolve(lines: list[str], origin: list[int]) -> CellPython:
    """Replace each `get_ipython().…(...)` call IPython wrote by the Python it stands for, or by nothing."""
    try:
        tree = ast_parse("".join(lines))
    except SyntaxError:
        return CellPython(_place([line.rstrip("\n") for line in lines], origin))   # the run reports it, in place
    not_run: list[tuple[int, str]] = []
    edits: dict[int, str] = {}
    statements = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        found = _ipython_call(node)
        if found is None or not isinstance(node, ast.Call) or node.lineno != node.end_lineno:
            continue
        method, args = found
        index = node.lineno - 1
        line = lines[index]
        code = _time_statement(args[1]) if method == "run_line_magic" and len(args) == 2 and args[0] == "time" else None
        if id(node) in statements:      # a line of its own: the statement it wraps, or nothing
            code = code if code is not None and parses(code) else None
            indent = line[:len(line) - len(line.lstrip())]
            edits[index] = indent + (code if code is not None else "pass")
        else:                           # `x = %time f()`: the expression's value, or None
            code = code if code is not None and parses(code, "eval") else None
            start, end = _offsets(line, node)
            edits[index] = line[:start] + (f"({code})" if code is not None else "None") + line[end:].rstrip("\n")
        if code is None:
            not_run.append((origin[index], _as_written(method, args)))
    rendered = [edits.get(i, line.rstrip("\n")) for i, line in enumerate(lines)]
    return CellPython(_place(rendered, origin), sorted(not_run))


def _ipython_call(node: ast.AST) -> tuple[str, list[str]] | None:
    """(method, string arguments) of a `get_ipython().method('...', ...)` call, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    owner = node.func.value
    if not (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "get_ipython"):
        return None
    texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if node.keywords or len(texts) != len(node.args):
        return None
    return node.func.attr, texts


def _as_written(method: str, args: list[str]) -> str:
    """What the student wrote, as IPython understood it: `%name arg`, `!command` or `name?`."""
    if method in ("system", "getoutput"):
        return "!" + (args[0] if args else "")
    if method == "run_line_magic" and args and args[0] in ("pinfo", "pinfo2", "psearch"):
        return (args[1] if len(args) > 1 else "") + ("??" if args[0] == "pinfo2" else "?")
    if method == "run_line_magic" and args:
        return ("%" + args[0] + " " + (args[1] if len(args) > 1 else "")).rstrip()
    return f"get_ipython().{method}(...)"


def _offsets(line: str, node: ast.expr) -> tuple[int, int]:
    """Character offsets of a node in its line (ast counts UTF-8 bytes)."""
    encoded = line.encode("utf-8")
    end = node.end_col_offset if node.end_col_offset is not None else len(encoded)
    return (len(encoded[:node.col_offset].decode("utf-8", "replace")), len(encoded[:end].decode("utf-8", "replace")))


def _place(lines: list[str], origin: list[int]) -> str:
    """Put each line at its cell line number; blank lines fill where IPython had joined lines."""
    placed: list[str] = []
    for line, number in zip(lines, origin):
        while len(placed) + 1 < number:
            placed.append("")
        placed.append(line)
    placed += lines[len(origin):]
    return "\n".join(placed) + "\n" if placed else ""
