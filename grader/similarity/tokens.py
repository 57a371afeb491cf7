"""Code as normalised statement units: what survives renaming, reordering and reformatting.

A unit is one top-level statement (a cell holds several; a class, or a block such as `if __name__ == ...`
holding definitions, is split into its header and its statements, so reordered methods and helpers still
match). Each token is normalised: names a student chooses become `V`, number literals `N`, strings `S`;
keywords, operators, builtins and attribute names (`jax.jvp`, `.ones_like`) stay, since renaming a variable
cannot change them. Comments, blank lines, indentation, `;`, trailing commas and grouping parentheses are
dropped, so layout does not matter, and a run of literals (`[0.3, -1.2, ...]`) is one literal, so typed-in data is not code.
Code that parses (up to `MAX_NORMALISED` characters) is first rewritten by `normalise.py` (no-op statements
dropped, commutative operands and independent statements in a canonical order) and printed again; its tokens
carry the lines of the statement of the original they came from, so matches are still shown where they are.
Code with a syntax error keeps the statements before the error and cuts the rest at lines that start at
column 0; code that does not tokenise falls back to a plain regular-expression scan. Every submission gets
units, whatever it holds, in time linear in its length and bounded (a file is read up to `MAX_SOURCE`).
"""

from __future__ import annotations

import ast
import bisect
import builtins
import functools
import hashlib
import io
import keyword
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

from grader.common.python_ast import ast_parse
from grader.similarity.normalise import normalise

MAX_TOKENS = 40000          # per document: a huge file is compared by its first 40k tokens (linear cost)
MAX_SOURCE = 100_000        # characters of code of a file or cell read at all (the largest honest file is about
                            # 18,000; comments and blank lines do not count): the rest of a megabyte file would cost
                            # seconds of tokenising to be cut anyway
MAX_NORMALISED = 100_000    # characters: longer code (no real submission) is tokenised as it is, not normalised
UNITS_REMEMBERED = 4096     # sources whose units a process keeps (a batch tokenises ahead of its records: store.py)
KEPT_NAMES = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
DROPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
           tokenize.ENDMARKER}
CLOSERS = {")", "]", "}"}
OPENERS = {"(", "[", "{", ",", "=", ":"}
SIGNS = {"-", "+"}
LITERALS = {"N", "S"}
STRING_KINDS = {tokenize.STRING, getattr(tokenize, "FSTRING_START", tokenize.STRING)}
FSTRING_INSIDE = {getattr(tokenize, name) for name in ("FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, name)}
FALLBACK = re.compile(r"""(?P<comment>\#[^\n]*)|(?P<string>[rbfuRBFU]{0,2}("[^"\n]*"|'[^'\n]*'))|(?P<name>[^\W\d]\w*)"""
                      r"""|(?P<number>\d[\w.]*)|(?P<op>\*\*=?|//=?|->|:=|[-+*/%@&|^<>!=]=|<<=?|>>=?|\S)""")


@dataclass(frozen=True)
class Unit:
    """One statement, normalised: `tokens[i]` came from lines `lines[i]` (first, last) of chunk `chunk`."""
    chunk: int
    tokens: tuple[str, ...]
    lines: tuple[tuple[int, int], ...]


@functools.cache
def units_version() -> str:
    """What the units of a source depend on besides the source: this tokeniser, the normaliser and Python's parser.
    Units kept from another version are made again (similarity/store.py)."""
    folder = Path(__file__).parent
    text = b"".join((folder / name).read_bytes() for name in ("tokens.py", "normalise.py"))
    return hashlib.sha256(text + repr(sys.version_info[:2]).encode()).hexdigest()[:16]


def units_of(source: str, chunk: int = 0) -> list[Unit]:
    """The statement units of one file or notebook cell (code that parses is normalised first: `normalise.py`;
    each token then carries the lines of the statement of `source` it came from). Remembered for the process's
    most recent sources: the batch prepares each file as its record arrives (`similarity.report.run_keeper`),
    beside the runs, so the report after the last record only looks them up."""
    return list(_units_of(source, chunk))


@functools.lru_cache(maxsize=UNITS_REMEMBERED)
def _units_of(source: str, chunk: int) -> tuple[Unit, ...]:
    source, code = _read_window(source)
    normalised = _normalised(source) if code <= MAX_NORMALISED else None
    text, lines, parsed = normalised if normalised is not None else (source, None, None)
    tokens = _tokens(text)
    starts = _unit_starts(text, parsed)
    buckets: list[list[tuple[str, int, int]]] = [[] for _ in starts] or [[]]
    for word, start, end in tokens:
        index = max(0, bisect.bisect_right(starts, start) - 1)
        if lines is None:
            buckets[index].append((word, start[0], end[0]))
        else:
            buckets[index].append((word, lines.get(start[0], (1, 1))[0], lines.get(end[0], (1, 1))[1]))
    return tuple(Unit(chunk, tuple(t for t, _, _ in bucket), tuple((a, b) for _, a, b in bucket)) for bucket in buckets if bucket)


def _read_window(source: str) -> tuple[str, int]:
    """What of `source` is read, and how many characters of code it holds: comment-only and blank lines emptied
    (their line breaks kept, so every line keeps its number) and not counted, the rest cut after MAX_SOURCE
    characters of code. A file padded with a long comment header or blank lines is read as the same code as without
    the padding (same tokens, same fingerprints), and the padding costs one linear pass."""
    kept, code = [], 0
    for line in source.splitlines(keepends=True):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            kept.append("\n" if line[-1:] in "\n\r" and line else "")
            continue
        if code + len(stripped) > MAX_SOURCE:
            break
        code += len(stripped)
        kept.append(line)
    return "".join(kept), code


def statement_key(node: ast.AST) -> str:
    """A node's shape, names as `V` and literals as `N` or `S` (attribute and builtin names kept): the order
    `normalise` sorts by, the same whatever the names (two shapes that print alike may sort either way)."""
    parts = []
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            parts.append(child.id if child.id in KEPT_NAMES else "V")
        elif isinstance(child, ast.Attribute):
            parts.append("." + child.attr)
        elif isinstance(child, ast.Constant):
            parts.append("S" if isinstance(child.value, (str, bytes)) else "N")
        elif not isinstance(child, ast.expr_context):
            parts.append(type(child).__name__)
    return " ".join(parts)


def _normalised(source: str) -> tuple[str, dict[int, tuple[int, int]], ast.Module] | None:
    """The normalised text of code that parses, and for each of its lines the (first, last) line in `source` of the
    statement it belongs to; None for code that does not parse (it is tokenised as it is)."""
    tree = _parse(source)
    if tree is None:
        return None
    try:
        normalise(tree, statement_key)
        text = ast.unparse(tree)
        again = ast_parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError, AttributeError):
        return None
    lines: dict[int, tuple[int, int]] = {}
    for new, old in zip(_statements(again), _statements(tree)):
        if type(new) is not type(old):
            whole = (1, max(1, len(source.splitlines())))
            return text, {n: whole for n in range(1, text.count("\n") + 2)}, again
        span = (_first_line(old), old.end_lineno or old.lineno)
        for number in range(_first_line(new), (new.end_lineno or new.lineno) + 1):
            lines[number] = span
    return text, lines, again


def _statements(node: ast.AST) -> list[ast.stmt]:
    """Every statement inside `node`, each before the statements inside it (so their lines come last)."""
    found: list[ast.stmt] = []
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, ast.stmt):
            found.append(current)
        children = [getattr(current, name, []) for name in ("body", "orelse", "finalbody", "handlers", "cases")]
        pending += [child for group in reversed(children) if isinstance(group, list) for child in reversed(group)
                    if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))]
    return found


def _unit_starts(source: str, parsed: ast.Module | None = None) -> list[tuple[int, int]]:
    """Where each unit starts, (line, column), in order. Code with a syntax error: the statements before the
    error as parsed, then every line that starts at column 0 (a statement, as far as one can tell)."""
    lines = source.splitlines()
    tree, parsed_lines = parsed or _parse(source), len(lines)
    if tree is None:
        error_line = _syntax_error_line(source)
        for parsed_lines in range(max(0, min(error_line, len(lines)) - 1), max(-1, error_line - 12), -1):
            if (tree := _parse("\n".join(lines[:parsed_lines]))) is not None:
                break
    starts: list[tuple[int, int]] = []
    for node in tree.body if tree is not None else []:
        _split(node, starts)
    if tree is None:
        parsed_lines = 0
    starts += [(number, 0) for number, line in enumerate(lines[parsed_lines:], start=parsed_lines + 1)
               if line[:1].strip() and not line.startswith(("#", ")", "]", "}"))]
    return sorted(set(starts)) or [(1, 0)]


def _parse(source: str) -> ast.Module | None:
    try:
        return ast_parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _syntax_error_line(source: str) -> int:
    try:
        ast_parse(source)
    except SyntaxError as error:
        return error.lineno or 1
    except (ValueError, RecursionError, MemoryError):
        return 1
    return 1


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _split(node: ast.stmt, starts: list[tuple[int, int]]) -> None:
    first = _first_line(node)
    starts.append((first, 0 if first < node.lineno else node.col_offset))
    bodies = [getattr(node, name, []) for name in ("body", "orelse", "finalbody")]
    bodies += [handler.body for handler in getattr(node, "handlers", [])]
    statements = [child for body in bodies for child in body if isinstance(child, ast.stmt)]
    defines = any(isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for child in statements)
    if defines and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for child in statements:   # a class or a guard block: its definitions are units of their own
            _split(child, starts)


def _tokens(source: str) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """Normalised tokens with their (line, column) start and end."""
    raw: list[tuple[int, str, tuple[int, int], tuple[int, int]]] = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(source).readline):
            raw.append((t.type, t.string, t.start, t.end))
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        # keep what was read; scan the rest plainly (from the line after the last token read)
        last = raw[-1][3][0] if raw else 0
        rest = "\n" * last + "\n".join(source.splitlines()[last:])
        raw += _fallback_tokens(rest)
    out: list[tuple[str, tuple[int, int], tuple[int, int]]] = []
    previous = ""
    opened: list[bool] = []     # for each open bracket: is it kept (a call's, an index's) or a grouping one
    for index, (kind, text, start, end) in enumerate(raw):
        if len(out) >= MAX_TOKENS:
            break
        if kind in DROPPED or text == ";":
            continue
        if kind == tokenize.NAME:
            word = text if text in KEPT_NAMES or previous == "." else "V"
        elif kind == tokenize.NUMBER:
            word = "N"
        elif kind in STRING_KINDS:
            word = "S"
        elif kind in FSTRING_INSIDE:
            continue   # the rest of an f-string (Python 3.12 splits it into pieces): one S, as before
        else:
            word = text
        if word == "," and _next_text(raw, index) in CLOSERS:
            continue   # a trailing comma is layout
        if word == "(":
            opened.append(previous == "V" or previous in CLOSERS or (previous.isidentifier()
                                                                      and not keyword.iskeyword(previous)))
            if not opened[-1]:
                continue   # grouping parentheses are layout: `a, b = (x, y)` is `a, b = x, y`
        elif word in ("[", "{"):
            opened.append(True)
        elif word in CLOSERS and opened and not opened.pop():
            continue
        if word in LITERALS and len(out) >= 2 and out[-1][0] in SIGNS and out[-2][0] in OPENERS:
            out.pop()  # a signed literal is one literal: `[-1.2, 0.5]` is `[N, N]`
        if word in LITERALS and len(out) >= 2 and out[-1][0] == "," and out[-2][0] == word:
            out.pop()  # a run of literals is one: a typed-in list of 16 numbers is not 16 times the same code
            continue
        if word.strip():
            out.append((word, start, end))
            previous = word
    return out


def _next_text(raw: list, index: int) -> str:
    for kind, text, _, _ in raw[index + 1:index + 8]:
        if kind not in DROPPED:
            return text
    return ""


def _fallback_tokens(source: str) -> list[tuple[int, str, tuple[int, int], tuple[int, int]]]:
    """A plain scan for text that Python's tokenizer refuses (an unclosed string, a stray dedent)."""
    kinds = {"comment": tokenize.COMMENT, "string": tokenize.STRING, "name": tokenize.NAME, "number": tokenize.NUMBER,
             "op": tokenize.OP}
    out = []
    line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
    for match in FALLBACK.finditer(source):
        line = bisect.bisect_right(line_starts, match.start())
        place = (line, match.start() - line_starts[line - 1])
        out.append((kinds[match.lastgroup or "op"], match.group(), place, place))
        if len(out) > 4 * MAX_TOKENS:
            break
    return out
