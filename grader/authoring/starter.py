"""Render an assignment's student starter (.py and .ipynb) from its reference solution, through its templates.

The solution is split into chunks: given code (cut at blank lines between top-level statements) and exercise
regions (see scaffold.py). A region that is a whole top-level block is a chunk of its own; a region nested in
given code (inside a loop, or an `else:` clause) stays in its chunk, and its prose goes before that chunk.
Jinja templates (`starter.py.j2` and `starter.ipynb.j2`: the framework's defaults in grader/authoring/templates/,
each replaced by a file of the same name in the lesson's `assignments/<id>/templates/` when it has one) lay the
chunks out with the prose from `[starter.exercises.<name>]`; the notebook template writes cells in the
percent format (`# %%` and `# %% [markdown]` lines), which become nbformat cells here. Output is deterministic
(cell ids from their index), so a second build is byte-identical and a committed starter can be diffed.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import nbformat

from grader.authoring.scaffold import Rules, ScaffoldError, end_line, scaffold_region, todo_values
from grader.common.files import atomic_write
from grader.common.python_ast import ast_parse
from grader.config.assignment import Assignment
from grader.intake.regions import Region, RegionError, find_regions

TEMPLATES = "templates"
DEFAULT_TEMPLATES = Path(__file__).resolve().parent / TEMPLATES
PY_TEMPLATE = "starter.py.j2"
NOTEBOOK_TEMPLATE = "starter.ipynb.j2"
CELL_MARKER = re.compile(r"^# %%(?: \[(?P<kind>markdown)\])?(?: tags=(?P<tags>\[[^\]]*\]))?[ \t]*$")
PROSE_FIELDS = ("title", "label", "task", "key_functions", "steps", "hint")
PASS_WORD = re.compile(r"\bPASS\b")
# The lesson's closing "PASS" line, as the starter renders it (hold_back_pass): {values} is exercise -> the names its
# TODOs compute, {statement} the lesson's own line.
HELD_PASS = """\
# The lesson's closing line. "Run all" reaches it whatever failed above, so it says PASS only once no exercise's
# value is still `...` (or not computed at all), and otherwise which exercises' TODOs remain.
def _still_todo(value, depth=0):
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return value is ... or (depth < 4 and any(_still_todo(item, depth + 1) for item in items))
_unfinished = [_exercise for _exercise, _names in {{
{values}
}}.items() if any(_still_todo(globals().get(_name, ...)) for _name in _names)]
if _unfinished:
    print("Not finished: the TODOs of exercise(s)", ", ".join(_unfinished), "remain (a value is still `...`).")
else:
{statement}"""


class BuildError(Exception):
    """The starter cannot be generated, or what was generated is not valid or would give an answer away."""


@dataclass
class Exercise:
    """One exercise region as the templates see it: its name, whether it is the first with that name, its prose."""

    name: str
    first: bool
    line: int                       # the BEGIN marker's line in the solution
    title: str = ""
    label: str = ""
    task: str = ""
    key_functions: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    hint: str = ""


@dataclass
class Chunk:
    kind: str                       # "given" or "exercise" (a whole top-level region)
    code: str
    exercises: list[Exercise] = field(default_factory=list)   # regions in this chunk, in order


@dataclass
class Rendered:
    python: str
    notebook: str
    chunks: list[Chunk]


def render(assignment: Assignment, scaffold: bool = True, keep: frozenset[str] = frozenset()) -> Rendered:
    """Both starters as text. `scaffold=False` keeps the solution code (a solution notebook, for tests); `keep`
    names exercises whose solution code stays while the others are scaffolded (the facts program, fact_source)."""
    starter = assignment.config.get("starter", {})
    source = assignment.solution_path.read_text(encoding="utf-8")
    try:
        chunks, replaced = split_solution(source, starter, scaffold, keep)
        if scaffold:
            hold_back_pass(chunks, source, starter)
    except (ScaffoldError, RegionError) as error:
        raise BuildError(f"{assignment.solution_path}: {error}") from None
    # From the first chunk holding an exercise on, a cell may raise while a TODO is unfinished (its own `...`, or a
    # name an earlier TODO left unset): the notebook template tags those cells so "Run all" goes on past them.
    todo_from = next((number for number, chunk in enumerate(chunks) if chunk.exercises), len(chunks))
    context = {"assignment": {"id": assignment.id, "title": assignment.title}, "starter": starter, "chunks": chunks,
               "filename": _filename(assignment, ".py"), "notebook_filename": _filename(assignment, ".ipynb"),
               "todo_from": todo_from}
    environment = _environment(assignment.folder / TEMPLATES)
    try:
        python = environment.get_template(PY_TEMPLATE).render(context)
        cells = parse_cells(environment.get_template(NOTEBOOK_TEMPLATE).render(context))
    except jinja2.TemplateError as error:
        raise BuildError(f"template {getattr(error, 'name', '') or ''} of {assignment.id}: {error}") from None
    python = python.rstrip("\n") + "\n"
    notebook = notebook_text(cells)
    _validate(assignment, python, notebook, source, replaced if scaffold else [])
    return Rendered(python, notebook, chunks)


def public_code(assignment: Assignment, with_sampler: bool = False) -> str:
    """The code every student may read, which warms the compilation cache every run reads
    (grader.runs.compile_cache): the starter's Python, or the reference solution itself where the lesson page shows
    it (`solution_is_public`; its programs then cover the exercises too, so honest runs compile far less), and with
    `with_sampler` the assignment's method sampler after it (a large batch: common honest forms compiled once).
    Empty when neither can be read: runs then compile everything."""
    try:
        code = assignment.public_solution() or render(assignment).python
    except (BuildError, OSError):
        return ""
    sampler = assignment.method_sampler() if with_sampler and code else ""
    return code + ("\n\n" + sampler if sampler else "")


def write_starters(assignment: Assignment, out: Path) -> list[Path]:
    """Write `<stem>.py` and `<stem>.ipynb` into `out` (only when their content changed); return both paths."""
    rendered = render(assignment)
    paths = []
    for suffix, text in ((".py", rendered.python), (".ipynb", rendered.notebook)):
        path = out / _filename(assignment, suffix)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            atomic_write(path, text)
            path.chmod(0o644)           # a starter is for sharing (the temp file behind it was private)
        paths.append(path)
    return paths


def fact_source(assignment: Assignment) -> str:
    """The program the reference facts come from, for a student bundle: the starter with the solution's code kept in
    the exercises `[assignment] fact_exercises` names (the rest scaffolded). Empty unless the lesson page prints the
    solution (`solution_is_public`): only then may those exercises' code leave the instructor's machine."""
    names = frozenset(assignment.config["assignment"].get("fact_exercises", []))
    if not names or not assignment.solution_is_public:
        return ""
    regions = {region.name for region in find_regions(assignment.solution_path.read_text(encoding="utf-8").splitlines())}
    if names - regions:
        raise BuildError(f"[assignment] fact_exercises names {', '.join(sorted(names - regions))}, which "
                         f"{assignment.solution_path} has no exercise region for")
    return render(assignment, keep=names).python


def _filename(assignment: Assignment, suffix: str) -> str:
    return Path(assignment.submission_filename).stem + suffix


# ---- the solution, cut into chunks -----------------------------------------------------------------------

def split_solution(source: str, starter: dict, scaffold: bool = True,
                   keep: frozenset[str] = frozenset()) -> tuple[list[Chunk], list[str]]:
    """(chunks, source of every replaced statement). The solution's module docstring describes the solution
    itself, so it is left out; the templates write the starter's own header."""
    lines = source.splitlines()
    regions = find_regions(lines)
    tree = ast_parse(source)
    prose = starter.get("exercises", {})
    names = list(dict.fromkeys(region.name for region in regions))
    unknown, undescribed = sorted(set(prose) - set(names)), [name for name in names if name not in prose]
    if unknown or undescribed:
        problems = ([f"unknown: {', '.join(unknown)}"] if unknown else []) + \
            ([f"missing: {', '.join(undescribed)}"] if undescribed else [])
        raise ScaffoldError("[starter.exercises] must describe exactly the solution's exercise regions "
                            f"({', '.join(names) or 'none'}); " + "; ".join(problems))
    rules = Rules.from_config(starter, source, ["\n".join(region.body(lines)) for region in regions])
    spans = [(min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1, end_line(node) - 1)
             for node in tree.body]
    skipped = set()
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        skipped = set(range(spans[0][0], spans[0][1] + 1))

    def inside_statement(index: int) -> bool:
        return any(start < index < end for start, end in spans)

    chunks: list[Chunk] = []
    current: list[str] = []
    current_exercises: list[Exercise] = []
    replaced: list[str] = []
    seen: set[str] = set()

    def flush() -> None:
        text = "\n".join(current).strip("\n")
        if text.strip():
            chunks.append(Chunk("given", text, list(current_exercises)))
        elif current_exercises:
            raise ScaffoldError("an exercise region produced an empty chunk")
        current.clear()
        current_exercises.clear()

    by_begin = {region.begin: region for region in regions}
    index = 0
    while index < len(lines):
        if index in skipped:
            index += 1
            continue
        region = by_begin.get(index)
        if region is not None:
            exercise = _exercise(region, prose[region.name], first=region.name not in seen)
            seen.add(region.name)
            body = region.body(lines)
            if scaffold and region.name not in keep:
                result = scaffold_region(body, rules)
                body = result.text.split("\n")
                replaced += result.replaced
            block = [lines[region.begin], *body, lines[region.end]]
            if _standalone(region, lines, inside_statement):
                flush()
                chunks.append(Chunk("exercise", "\n".join(block), [exercise]))
            else:
                current.extend(block)
                current_exercises.append(exercise)
            index = region.end + 1
            continue
        line = lines[index]
        if not line.strip() and not inside_statement(index):
            flush()
        else:
            current.append(line)
        index += 1
    flush()
    for chunk in chunks:
        marker = next((line for line in chunk.code.split("\n") if CELL_MARKER.match(line)), None)
        if marker is not None:
            raise ScaffoldError(f"the solution contains the notebook cell marker line {marker!r}")
    return chunks, replaced


def hold_back_pass(chunks: list[Chunk], source: str, starter: dict) -> None:
    """A starter never says PASS about unfinished work. A lesson that ends by printing "PASS" after its last exercise
    (its own "all done" line) would print it in the untouched starter's notebook, where "Run all" goes on past every
    unfinished TODO: each such top-level `print` after the last exercise is rendered so that it prints only once no
    value an exercise computes (scaffold.py `todo_values`) is still `...` or unbound, and otherwise names the
    exercises whose TODOs remain (HELD_PASS)."""
    last = max((number for number, chunk in enumerate(chunks) if chunk.exercises), default=None)
    if last is None:
        return
    lines = source.splitlines()
    regions = find_regions(lines)
    rules = Rules.from_config(starter, source, ["\n".join(region.body(lines)) for region in regions])
    values: dict[str, list[str]] = {}
    for region in regions:
        values[region.name] = list(dict.fromkeys(values.get(region.name, []) + todo_values(region.body(lines), rules)))
    values = {name: names for name, names in values.items() if names}
    if values:
        for chunk in chunks[last + 1:]:
            chunk.code = _held_pass(chunk.code, values)


def _held_pass(code: str, values: dict[str, list[str]]) -> str:
    try:
        tree = ast_parse(code)
    except SyntaxError:
        return code
    lines = code.split("\n")
    for node in reversed(tree.body):   # from the end, so the earlier statements' line numbers still hold
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "print" and any(PASS_WORD.search(text) for text in _texts(node.value))):
            continue
        statement = "\n".join("    " + line for line in lines[node.lineno - 1:end_line(node)])
        listed = "\n".join(f"    {name!r}: {names!r}," for name, names in values.items())
        lines[node.lineno - 1:end_line(node)] = HELD_PASS.format(values=listed, statement=statement).split("\n")
    return "\n".join(lines)


def _texts(call: ast.Call) -> list[str]:
    """The string constants a call prints (an f-string's literal parts too)."""
    return [node.value for argument in call.args for node in ast.walk(argument)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _standalone(region: Region, lines: list[str], inside_statement) -> bool:
    """A region that is whole top-level statements (not inside a loop, not a clause of given code)."""
    if region.indent or inside_statement(region.begin):
        return False
    try:
        ast_parse("\n".join(region.body(lines)))
    except SyntaxError:
        return False
    return True


def _exercise(region: Region, prose: dict, first: bool) -> Exercise:
    unknown = sorted(set(prose) - set(PROSE_FIELDS))
    if unknown:
        raise ScaffoldError(f"[starter.exercises.{region.name}] has unknown keys {unknown}; known: {list(PROSE_FIELDS)}")
    return Exercise(name=region.name, first=first, line=region.begin + 1,
                    **{key: prose[key] for key in PROSE_FIELDS if key in prose})


# ---- templates and notebook ------------------------------------------------------------------------------

def _environment(folder: Path) -> jinja2.Environment:
    """Templates from the lesson's folder first (when it has one), then the framework's defaults."""
    folders = [folder, DEFAULT_TEMPLATES] if folder.is_dir() else [DEFAULT_TEMPLATES]
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(folders), undefined=jinja2.StrictUndefined,
                                     keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                                     autoescape=False)
    environment.filters["comment"] = comment
    return environment


def comment(text: str, width: int = 100) -> str:
    """Prose as `#` comment lines wrapped at `width`; list items (`- x`, `1. x`) get a hanging indent."""
    out = []
    for paragraph in str(text).strip().split("\n"):
        if not paragraph.strip():
            out.append("#")
            continue
        item = re.match(r"(\s*(?:[-*]|\d+\.)\s+)", paragraph)
        hang = " " * len(item.group(1)) if item else ""
        out.extend(textwrap.wrap(paragraph, width=width, initial_indent="# ", subsequent_indent="# " + hang,
                                 break_long_words=False, break_on_hyphens=False) or ["#"])
    return "\n".join(out)


Cell = tuple[str, str, list[str]]     # (kind, source, tags)


def parse_cells(text: str) -> list[Cell]:
    """Percent-format text -> [(kind, source, tags)]: `# %%` opens a code cell, `# %% [markdown]` a markdown cell,
    either followed by ` tags=["raises-exception"]` (a JSON list, as jupytext writes it) for the cell's tags."""
    cells: list[tuple[str, list[str], list[str]]] = []
    for line in text.split("\n"):
        match = CELL_MARKER.match(line)
        if match:
            try:
                tags = json.loads(match["tags"]) if match["tags"] else []
            except ValueError:
                raise BuildError(f"the notebook template writes unreadable tags in {line!r}") from None
            if not all(isinstance(tag, str) for tag in tags):
                raise BuildError(f"the notebook template writes tags that are not strings in {line!r}")
            cells.append(("markdown" if match["kind"] else "code", [], tags))
        elif cells:
            cells[-1][1].append(line)
        elif line.strip():
            raise BuildError(f"the notebook template writes {line!r} before its first `# %%` cell marker")
    result = []
    for kind, lines, tags in cells:
        source = "\n".join(lines).strip("\n")
        if source.strip():
            result.append((kind, source, tags))
    return result


def notebook_text(cells: list[Cell]) -> str:
    """An nbformat 4 notebook with ids from the cell index (stable across builds), validated."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                         "language_info": {"name": "python"}}
    for number, (kind, source, tags) in enumerate(cells):
        cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
        cell.id = f"cell-{number:03d}"
        if tags:   # "raises-exception": Jupyter's "Run all" and nbclient go on past this cell's error
            cell.metadata["tags"] = list(tags)
        notebook.cells.append(cell)
    try:
        nbformat.validate(notebook)
    except nbformat.ValidationError as error:
        raise BuildError(f"the generated notebook is not valid nbformat 4: {error.message}") from None
    return nbformat.writes(notebook, version=4).rstrip("\n") + "\n"


# ---- validation -----------------------------------------------------------------------------------------

def _squash(text: str) -> str:
    return "".join(text.split())


def _validate(assignment: Assignment, python: str, notebook: str, solution: str, replaced: list[str]) -> None:
    """Both files parse, and no replaced solution statement survives in either (unless given code has it too)."""
    name = _filename(assignment, ".py")
    try:
        compile(python, name, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise BuildError(f"the generated {name} does not parse: line {error.lineno}: {error.msg}") from None
    code_cells = [cell.source for cell in nbformat.reads(notebook, as_version=4).cells if cell.cell_type == "code"]
    for number, source in enumerate(code_cells, start=1):
        try:
            compile(source, f"code cell {number}", "exec", dont_inherit=True)
        except SyntaxError as error:
            raise BuildError(f"code cell {number} of the generated notebook does not parse: {error.msg}") from None
    lines = solution.splitlines()
    removed = {i for region in find_regions(lines) for i in range(region.begin + 1, region.end)}
    given = _squash("\n".join(line for i, line in enumerate(lines) if i not in removed))
    outputs = {name: _squash(python), _filename(assignment, ".ipynb"): _squash("\n".join(code_cells))}
    for statement in replaced:
        squashed = _squash(statement)
        for output, text in outputs.items():
            if squashed in text and squashed not in given:
                raise BuildError(f"the generated {output} still contains the solution statement {statement!r}")
