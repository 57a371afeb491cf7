"""Turn the exercise regions of a reference solution into TODO scaffolds, by AST transform (no string surgery).

A region is the lines between `# BEGIN EXERCISE <name>` and `# END EXERCISE <name>` comments; those markers are
the only contract with the solution file. Each statement of a region becomes a scaffold a student fills in:

- `name = f(args)` becomes `name = f(...)  # TODO: compute name` when `f` is one of the assignment's hint calls
  (an API worth showing), else `name = ...  # TODO: compute name`; tuple targets keep their shape
  (`_, b = ..., ...` still unpacks). Run untouched, a name is left as the placeholder `...`, or a hint call
  raises on its `...`; either way the grader reports the name as still a TODO.
- Statements that only check or print results (`assert`, and the assignment's check calls such as `print`) are
  kept so students can self-check, but every part of them that does not look at an answer name (an expected
  value, computed or typed in) becomes `...`; text labels and literal options such as `rtol=3e-3` stay.
- Any other call statement keeps its callee and loses its arguments (`results.append(...)`); anything else
  becomes `...  # TODO`.

A region may also be a clause of an enclosing statement (`else:`, `elif ...:`, `except ...:`, `finally:`): the
clause header is kept and its body is scaffolded. Which calls are hints, which calls are checks and which names
are answers come from the assignment's `[starter]` config, never from here.
"""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass, field

from grader.common.python_ast import ast_parse
from grader.common.text import parses
from grader.intake.regions import Region, RegionError, find_regions  # noqa: F401  (starter imports them here)

# A clause header is checked by parsing it after one of these openers (it cannot parse on its own).
_CLAUSE_OPENERS = ("if _:\n    pass\n", "try:\n    pass\n", "for _ in _:\n    pass\n", "while _:\n    pass\n")


class ScaffoldError(RegionError):
    """A region's code cannot be turned into a scaffold."""


@dataclass(frozen=True)
class Rules:
    """What the transform keeps: hint callees, check calls, and which names a kept check may read."""

    hint_calls: frozenset[str] = frozenset()
    check_calls: frozenset[str] = frozenset({"print"})
    answers: frozenset[str] = frozenset()          # values the student computes: a check may look at them
    known: frozenset[str] = frozenset(dir(builtins))   # imported modules and builtins: tools, not answers

    @classmethod
    def from_config(cls, starter: dict, solution: str, regions_text: list[str]) -> Rules:
        """`starter` is the assignment's [starter] table. Answer names default to the names the regions bind."""
        answers = starter.get("answer_names")
        if answers is None:
            answers = set()
            for text in regions_text:
                answers |= bound_names(text)
        modules = {(alias.asname or alias.name).split(".")[0]
                   for node in ast_parse(solution).body if isinstance(node, (ast.Import, ast.ImportFrom))
                   for alias in node.names}
        return cls(hint_calls=frozenset(starter.get("hint_calls", ())),
                   check_calls=frozenset(starter.get("check_calls", ("print",))),
                   answers=frozenset(answers), known=frozenset(modules) | frozenset(dir(builtins)))


@dataclass
class Scaffolded:
    text: str                                           # the TODO version of the region, indented as given
    replaced: list[str] = field(default_factory=list)   # source of every statement that was not kept verbatim


def scaffold_region(lines: list[str], rules: Rules) -> Scaffolded:
    """The TODO scaffold of a region's body lines (without its marker lines)."""
    indent = _common_indent(lines)
    result = _scaffold_block([line[len(indent):] for line in lines], rules)
    result.text = "\n".join(indent + line if line.strip() else "" for line in result.text.split("\n"))
    return result


def bound_names(text: str) -> set[str]:
    """Names a region's code binds (assignment targets, defs): by default, the answers a check may mention."""
    names: set[str] = set()
    for body in _bodies(_dedent(text.split("\n"))):
        pending: list[ast.AST] = list(ast_parse("\n".join(body)).body)
        while pending:
            node = pending.pop()
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                continue                    # names bound inside a def are its locals
            if not isinstance(node, _LOCAL_SCOPES):
                pending.extend(ast.iter_child_nodes(node))
    return names


_LOCAL_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def todo_values(lines: list[str], rules: Rules) -> list[str]:
    """The names whose values a region's TODOs compute, in order: what its statements assign (`eps = ...`) and what
    its call statements add to (`results.append(...)`). Run untouched, each is still `...`, holds `...`, or is not
    bound at all; the starter's closing line reads them (starter.py `hold_back_pass`)."""
    names: list[str] = []
    for body in _bodies(_dedent(lines)):
        for node in ast_parse("\n".join(body)).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names += [n.id for t in targets for n in ast.walk(t)
                          if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id != "_"]
            elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                  and isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, ast.Name)
                  and not _is_check_call(node.value, rules) and node.value.func.value.id not in rules.known):
                names.append(node.value.func.value.id)
    return list(dict.fromkeys(names))


# ---- blocks: a plain statement list, or a clause header with its indented body ---------------------------

def _common_indent(lines: list[str]) -> str:
    indents = [line[:len(line) - len(line.lstrip())] for line in lines if line.strip()]
    if not indents:
        return ""
    common = indents[0]
    for indent in indents[1:]:
        while not indent.startswith(common):
            common = common[:-1]
    return common


def _dedent(lines: list[str]) -> list[str]:
    indent = _common_indent(lines)
    return [line[len(indent):] for line in lines]


def _is_code(line: str) -> bool:
    return bool(line.strip()) and not line.lstrip().startswith("#")


def _is_clause_header(line: str) -> bool:
    return any(parses(opener + line + "\n    pass\n") for opener in _CLAUSE_OPENERS)


def _clauses(lines: list[str]) -> list[tuple[int, list[str]]]:
    """Split a clause region into (header index, body lines) pairs; lines before the first header are comments."""
    headers = [i for i, line in enumerate(lines) if _is_code(line) and not line[0].isspace()]
    if not headers or any(_is_code(line) for line in lines[:headers[0]]):
        raise ScaffoldError("the region is neither a list of statements nor a clause with its body")
    pairs = []
    for number, start in enumerate(headers):
        stop = headers[number + 1] if number + 1 < len(headers) else len(lines)
        header, body = lines[start], lines[start + 1:stop]
        if not _is_clause_header(header):
            raise ScaffoldError(f"{header.strip()!r} is neither a statement nor a clause header "
                                "(else/elif/except/finally) with its body on the following lines")
        if not any(_is_code(line) for line in body):
            raise ScaffoldError(f"the clause {header.strip()!r} has no body on its own lines")
        pairs.append((start, body))
    return pairs


def _bodies(lines: list[str]) -> list[list[str]]:
    """The statement lists of a region (itself, or each clause's dedented body)."""
    if parses("\n".join(lines)):
        return [lines]
    return [_dedent(body) for _, body in _clauses(lines)]


def end_line(node: ast.stmt) -> int:
    """A parsed statement's last line (`ast.parse` always sets it; only a hand-built node lacks it)."""
    if node.end_lineno is None:
        raise ValueError(f"{type(node).__name__} at line {node.lineno} has no end line: it was not parsed from source")
    return node.end_lineno


def _scaffold_block(lines: list[str], rules: Rules) -> Scaffolded:
    text = "\n".join(lines)
    try:
        tree = ast_parse(text)
    except SyntaxError:
        return _scaffold_clauses(lines, rules)
    starts: dict[int, list[ast.stmt]] = {}
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        starts.setdefault(first, []).append(node)
    out, replaced, number = [], [], 1
    while number <= len(lines):
        if number not in starts:
            out.append(lines[number - 1])          # a comment or a blank line: kept
            number += 1
            continue
        nodes = starts[number]
        for node in nodes:
            new, original = _statement(node, text, rules)
            out.extend(new)
            if original is not None:
                replaced.append(original)
        number = max(end_line(node) for node in nodes) + 1
    return Scaffolded("\n".join(out), replaced)


def _scaffold_clauses(lines: list[str], rules: Rules) -> Scaffolded:
    pairs = _clauses(lines)
    out, replaced = list(lines[:pairs[0][0]]), []
    for start, body in pairs:
        out.append(lines[start])
        indent = _common_indent(body)
        inner = _scaffold_block([line[len(indent):] for line in body], rules)
        out.extend(indent + line if line.strip() else "" for line in inner.text.split("\n"))
        replaced += inner.replaced
    return Scaffolded("\n".join(out), replaced)


# ---- statements ----------------------------------------------------------------------------------------

def _dotted(node: ast.expr) -> str | None:
    """`np.testing.assert_allclose` for a plain name/attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _mentions_answer(node: ast.AST, rules: Rules) -> bool:
    return any(isinstance(n, ast.Name) and n.id in rules.answers for n in ast.walk(node))


def _sanitize(node: ast.expr, rules: Rules) -> ast.expr:
    """`node` with every part that computes something besides a look at the answers replaced by `...`.

    `np.isnan(np.asarray(result)).any()` stays; `math.isclose(area, 4 * math.pi)` becomes
    `math.isclose(area, ...)`: the expected value is what the student is asked to compute."""
    if isinstance(node, ast.Constant):
        return node
    if not _mentions_answer(node, rules):
        return node if _is_literal(node) else ast.Constant(...)
    if isinstance(node, ast.Name):
        return node
    if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        local = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if isinstance(node, ast.Lambda):
            local |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        readable = rules.answers | rules.known | local
        return node if all(n.id in readable for n in ast.walk(node) if isinstance(n, ast.Name)) else ast.Constant(...)
    if isinstance(node, ast.Call):
        callee = _dotted(node.func)
        func = node.func if callee and callee.split(".")[0] in rules.known | rules.answers else _sanitize(node.func, rules)
        return ast.Call(func, [_sanitize(a, rules) for a in node.args],
                        [ast.keyword(k.arg, _sanitize(k.value, rules)) for k in node.keywords])
    if isinstance(node, ast.FormattedValue):
        return ast.FormattedValue(_sanitize(node.value, rules), node.conversion, node.format_spec)
    new = copy.copy(node)
    for name, value in ast.iter_fields(node):
        if isinstance(value, ast.expr):
            setattr(new, name, _sanitize(value, rules))
        elif isinstance(value, list):
            setattr(new, name, [_sanitize(v, rules) if isinstance(v, ast.expr) else v for v in value])
    return new


def _sanitize_argument(arg: ast.expr, rules: Rules) -> ast.expr:
    """A positional argument of a check: a text label stays; any other value must be a look at an answer
    (a positional number in `assert_allclose(area, 12.566)` is the expected value)."""
    if isinstance(arg, ast.Starred):
        return ast.Starred(_sanitize_argument(arg.value, rules), arg.ctx)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg
    if not _mentions_answer(arg, rules):
        return ast.Constant(...)
    return _sanitize(arg, rules)


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _target_names(targets: list[ast.expr]) -> str:
    found = [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and n.id != "_"]
    names = [n.id for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]
    return ", ".join(dict.fromkeys(names)) or ", ".join(ast.unparse(t) for t in targets)


def _unparse_target(target: ast.expr) -> str:
    """`_, b` rather than `(_, b)`: a tuple target reads as the lesson wrote it."""
    if isinstance(target, ast.Tuple) and target.elts:
        items = [ast.unparse(e) for e in target.elts]
        return ", ".join(items) + ("," if len(items) == 1 else "")
    return ast.unparse(target)


def _placeholder(target: ast.expr, nested: bool = False) -> str:
    """`...`, or a tuple of them shaped like a tuple target, so unpacking the untouched scaffold still works."""
    if isinstance(target, (ast.Tuple, ast.List)) and target.elts:
        items = [_placeholder(e, True) for e in target.elts]
        inner = ", ".join(items) + ("," if len(items) == 1 else "")
        return f"({inner})" if nested else inner
    return "..."


def _todo(code: str, comment: str) -> list[str]:
    lines = code.split("\n")
    lines[-1] += f"  # TODO: {comment}"
    return lines


def _statement(node: ast.stmt, text: str, rules: Rules) -> tuple[list[str], str | None]:
    """(scaffold lines, original source if it was not kept verbatim)."""
    original = ast.get_source_segment(text, node, padded=False) or ast.unparse(node)
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)):
        return ast.unparse(node).split("\n"), None
    if isinstance(node, ast.Assign):
        targets = " = ".join(_unparse_target(t) for t in node.targets)
        shaped = next((t for t in node.targets if isinstance(t, (ast.Tuple, ast.List))), node.targets[0])
        return _todo(f"{targets} = {_value(node.value, shaped, rules)}", f"compute {_target_names(node.targets)}"), original
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        code = f"{ast.unparse(node.target)}: {ast.unparse(node.annotation)} = {_value(node.value, node.target, rules)}"
        return _todo(code, f"compute {_target_names([node.target])}"), original
    if isinstance(node, ast.AugAssign):
        code = f"{ast.unparse(node.target)} {_OPERATORS[type(node.op)]}= ..."
        return _todo(code, f"compute {_target_names([node.target])}"), original
    if isinstance(node, ast.Assert):
        return _check_assert(node, text, rules, original)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return _call_statement(node.value, text, rules, original)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return ast.unparse(node).split("\n"), None     # a string statement is prose, not an answer
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _function(node), original
    if isinstance(node, ast.Return):
        return _todo("return ...", "compute the return value"), original
    kind = type(node).__name__.lower()
    return _todo("...", f"write the `{kind}` statement of this step"), original


_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.MatMult: "@", ast.Div: "/", ast.Mod: "%",
              ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
              ast.BitAnd: "&", ast.FloorDiv: "//"}


def _value(value: ast.expr, target: ast.expr, rules: Rules) -> str:
    if isinstance(value, ast.Call):
        callee = _dotted(value.func)
        if callee is not None and callee in rules.hint_calls:
            return f"{callee}(...)"
    return _placeholder(target)


def _is_check_call(call: ast.Call, rules: Rules) -> bool:
    callee = _dotted(call.func)
    return callee is not None and (callee in rules.check_calls or callee.rsplit(".", 1)[-1].startswith("assert"))


def _call_statement(call: ast.Call, text: str, rules: Rules, original: str) -> tuple[list[str], str | None]:
    callee = _dotted(call.func)
    if _is_check_call(call, rules):
        args = [_sanitize_argument(a, rules) for a in call.args]
        keywords = [ast.keyword(k.arg, _sanitize(k.value, rules)) for k in call.keywords]
        parts = [_expression(new, old, text) for new, old in zip(args, call.args)]
        parts += [("**" if k.arg is None else f"{k.arg}=") + _expression(k.value, old.value, text)
                  for k, old in zip(keywords, call.keywords)]
        code = f"{callee}({', '.join(parts)})"
        changed = not _same(ast.Call(call.func, args, keywords), call)
        return (_todo(code, "fill in the values this check compares"), original) if changed else (code.split("\n"), None)
    if callee is None:
        return _todo("...", "write this step"), original
    owner, _, method = callee.rpartition(".")
    what = f"the value to append to `{owner}`" if method == "append" and owner else f"what to pass to `{callee}`"
    return _todo(f"{callee}(...)", what), original


def _expression(new: ast.expr, old: ast.expr, text: str) -> str:
    """A kept expression as the solution wrote it (`3e-3` stays `3e-3`; unparse would print 0.003)."""
    if _same(new, old):
        segment = ast.get_source_segment(text, old)
        if segment is not None and "\n" not in segment:
            return segment
    return ast.unparse(new)


def _check_assert(node: ast.Assert, text: str, rules: Rules, original: str) -> tuple[list[str], str | None]:
    test = _sanitize(node.test, rules)
    if isinstance(test, ast.Constant) and test.value is ...:
        return _todo("assert ...", "complete this check"), original
    code = f"assert {_expression(test, node.test, text)}"
    message = None if node.msg is None else _sanitize_argument(node.msg, rules)
    if node.msg is not None and message is not None and not (isinstance(message, ast.Constant) and message.value is ...):
        code += f", {_expression(message, node.msg, text)}"
    if _same(test, node.test) and (message is None or node.msg is None or _same(message, node.msg)):
        return [code], None
    return _todo(code, "complete this check"), original


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    docstring = ast.get_docstring(node, clean=False)
    body: list[ast.stmt] = [ast.Expr(ast.Constant(docstring))] if docstring is not None else []
    body.append(ast.Expr(ast.Constant(...)))
    stub = type(node)(name=node.name, args=node.args, body=body, decorator_list=node.decorator_list,
                      returns=node.returns, type_comment=None, **_type_params(node))
    return _todo(ast.unparse(ast.fix_missing_locations(stub)), f"implement {node.name}")


def _type_params(node: ast.AST) -> dict:
    return {"type_params": node.type_params} if hasattr(node, "type_params") else {}
