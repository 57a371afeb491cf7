"""`grader build`: starters rendered from the reference solution (drift, idempotence, validity, no leaked
answers), the AST transform on small snippets, a second assignment defined only under tests/, and grading the
untouched starter, the reference solution and its notebook rendering."""

from __future__ import annotations

import ast
import json
import py_compile
import re
import shutil
import textwrap
import tomllib
from pathlib import Path

import nbformat
import pytest

import grader.cli.batch
import grader.cli.main
import grader.config.assignment
import grader.student.session
from grader.authoring.build import build
from grader.authoring.scaffold import Rules, ScaffoldError, scaffold_region
from grader.authoring.starter import render
from grader.intake.regions import RegionError, find_regions, unfinished_exercises

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "student_templates"
STARTERS = (".py", ".ipynb")   # what `build` writes for students (it also writes the autograder zip)
TINY = Path(__file__).with_name("fixtures") / "tiny_project"
ASSIGNMENT = "performance-05"
EXERCISES = ["memory", "availability_panel", "directional", "hvp"]
MARKER = re.compile(r"^\s*# (BEGIN|END) EXERCISE (\S+)\s*$")
SELF_CHECK = ("print(", "assert ", "np.testing.assert_")


def squash(text: str) -> str:
    return "".join(text.split())


def words(text: str) -> str:
    """Prose as one line of words, whether it was wrapped into `#` comments or written as markdown."""
    lines = [line[1:] if line.startswith("#") else line for line in text.splitlines()]
    return " ".join(" ".join(lines).split())


@pytest.fixture(scope="module")
def assignment():
    return grader.config.assignment.load(ASSIGNMENT, ROOT)


@pytest.fixture(scope="module")
def built(assignment, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("starters")
    paths = build(assignment, out)
    return {path.suffix: path for path in paths if path.suffix in STARTERS}


def code_of_notebook(path: Path) -> str:
    notebook = nbformat.read(path, as_version=4)
    return "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")


# ---- the generated starters ----------------------------------------------------------------------------

def test_build_writes_the_py_and_ipynb_starter(built):
    assert sorted(built) == [".ipynb", ".py"]
    assert built[".py"].name == "performance-05.py" and built[".ipynb"].name == "performance-05.ipynb"


def test_committed_starters_equal_a_fresh_build(built):
    for path in built.values():
        committed = COMMITTED / path.name
        assert committed.is_file(), f"{committed} is missing: run `grader build` and commit student_templates/"
        assert committed.read_bytes() == path.read_bytes(), (
            f"{committed} differs from what `grader build` renders from solutions/ and assignments/: "
            "run `grader build` and commit the result")


def test_build_is_idempotent(assignment, built, tmp_path):
    first = {suffix: path.read_bytes() for suffix, path in built.items()}
    again = {path.suffix: path.read_bytes() for path in build(assignment, built[".py"].parent)}
    elsewhere = {path.suffix: path.read_bytes() for path in build(assignment, tmp_path)}
    assert {suffix: again[suffix] for suffix in STARTERS} == first
    assert elsewhere == again          # the autograder zip too: byte for byte


def test_python_starter_compiles(built, tmp_path):
    py_compile.compile(str(built[".py"]), cfile=str(tmp_path / "starter.pyc"), doraise=True)


def test_notebook_is_valid_nbformat_4_with_stable_ids(built):
    notebook = nbformat.read(built[".ipynb"], as_version=4)
    nbformat.validate(notebook)
    assert notebook.nbformat == 4
    assert [cell.id for cell in notebook.cells] == [f"cell-{n:03d}" for n in range(len(notebook.cells))]
    kinds = [cell.cell_type for cell in notebook.cells]
    assert kinds[0] == "markdown" and set(kinds) == {"markdown", "code"}
    for number, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            compile(cell.source, f"cell {number}", "exec")
            assert not cell.outputs and cell.execution_count is None


def test_run_all_goes_past_unfinished_todos_to_a_final_check_cell(built):
    """"Run all" (and nbconvert --execute) stops at a cell's error unless it is tagged raises-exception: every code
    cell from the first exercise on is, so the final check() cell runs on half-done work."""
    cells = nbformat.read(built[".ipynb"], as_version=4).cells
    code = [cell for cell in cells if cell.cell_type == "code"]
    first = next(i for i, cell in enumerate(code) if "# BEGIN EXERCISE" in cell.source)
    assert all("raises-exception" not in cell.metadata.get("tags", []) for cell in code[:first])
    assert all("raises-exception" in cell.metadata.get("tags", []) for cell in code[first:-1])
    assert code[-1].source == "from grader.student import check\ncheck()"
    assert cells[-2].cell_type == "markdown" and "Check your work" in cells[-2].source
    assert "the last cell always runs" in cells[0].source


@pytest.mark.slow
def test_nbclient_runs_the_untouched_starter_to_its_last_cell(built, tmp_path):
    """nbclient honours raises-exception as Jupyter's "Run all" does: with errors not allowed, the untouched
    starter still runs to its last cell (here a marker in place of check(), which test_student_venv runs)."""
    from nbclient import NotebookClient
    notebook = nbformat.read(built[".ipynb"], as_version=4)
    notebook.cells[-1].source = "print('REACHED THE END')"
    NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = notebook.cells[-1].get("outputs", [])
    assert any("REACHED THE END" in output.get("text", "") for output in outputs), outputs
    errors = [cell for cell in notebook.cells if any(o.get("output_type") == "error" for o in cell.get("outputs", []))]
    assert errors and all("raises-exception" in cell.metadata.get("tags", []) for cell in errors)


def test_what_the_generator_writes_around_the_lessons_code_reads_as_written(assignment, built):
    """The lesson's code (its comments included) is the page's, unchanged; the starter says so, and its own TODO
    comments name what to write in words."""
    text = built[".py"].read_text()
    assert "exactly as the lesson page prints it, its comments included" in text
    assert "# TODO: the value to append to `memory`" in text and "compute the argument of" not in text
    solution_lines = set(assignment.solution_path.read_text().splitlines())
    given = [line for line in text.splitlines() if line.lstrip().startswith("# Differentiate the objective")]
    assert given and all(line in solution_lines for line in given)


def test_top_level_exercises_are_their_own_cells_after_their_prose(built):
    cells = nbformat.read(built[".ipynb"], as_version=4).cells
    for name in ("directional", "hvp"):
        index = next(i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.startswith(f"# BEGIN EXERCISE {name}"))
        assert cells[index].source.rstrip().endswith(f"# END EXERCISE {name}")
        assert cells[index - 1].cell_type == "markdown" and f"`{name}`" in cells[index - 1].source
    for name in ("memory", "availability_panel"):          # nested in given code: prose before that cell
        index = next(i for i, c in enumerate(cells) if c.cell_type == "code" and f"# BEGIN EXERCISE {name}" in c.source)
        assert cells[index - 1].cell_type == "markdown" and f"`{name}`" in cells[index - 1].source


def test_no_exercise_solution_line_survives(assignment, built):
    """Each code line of each region (whitespace-normalized), except the kept self-checks, is gone."""
    solution = assignment.solution_path.read_text().splitlines()
    outputs = {"py": squash(built[".py"].read_text()), "ipynb": squash(code_of_notebook(built[".ipynb"]))}
    inside, checked = False, 0
    for line in solution:
        if MARKER.match(line):
            inside = not inside
            continue
        text = line.strip()
        if not inside or not text or text.startswith("#") or text.endswith(":") or text.startswith(SELF_CHECK):
            continue
        checked += 1
        for kind, output in outputs.items():
            assert squash(text) not in output, f"the {kind} starter still contains the solution line {text!r}"
    assert checked >= 8


def test_every_exercise_is_a_todo_and_self_checks_stay(built):
    text = built[".py"].read_text()
    for line in ("memory.append(...)  # TODO", "panels.append(...)  # TODO",
                 "direction = jnp.ones_like(...)  # TODO: compute direction", "eps = ...  # TODO: compute eps",
                 "finite = ...  # TODO: compute finite", "automatic = float(...)  # TODO: compute automatic",
                 "direction = jnp.linspace(...)  # TODO: compute direction",
                 "_, hvp_plain = jax.jvp(...)  # TODO: compute hvp_plain",
                 "_, hvp_remat = jax.jvp(...)  # TODO: compute hvp_remat",
                 "np.testing.assert_allclose(finite, automatic, rtol=3e-3, atol=1e-6)",
                 "np.testing.assert_allclose(hvp_plain, hvp_remat, rtol=3e-5, atol=1e-7)",
                 "assert np.isfinite(np.asarray(hvp_plain)).all()"):
        assert line in text
    assert text.count("# BEGIN EXERCISE memory") == 2
    assert '"""performance-05 reference solution' not in text
    assert list(unfinished_exercises(text)) == EXERCISES


def test_lesson_prose_is_around_each_exercise(assignment, built):
    prose = assignment.config["starter"]["exercises"]
    assert set(prose) == set(EXERCISES)
    python = words(built[".py"].read_text())
    markdown = words("\n".join(c.source for c in nbformat.read(built[".ipynb"], as_version=4).cells
                               if c.cell_type == "markdown"))
    for name, info in prose.items():
        for piece in [info["title"], info["task"], *info.get("key_functions", []), *info.get("steps", []),
                      *filter(None, [info.get("hint")])]:
            for kind, text in (("py", python), ("ipynb", markdown)):
                assert " ".join(piece.split()) in text, f"{kind} starter lacks the {name} prose {piece[:60]!r}"
    assert "Key functions & syntax to use" in python and "Step-by-step implementation plan" in markdown
    assert "Apply jvp to each gradient function with the same primal point and tangent." in markdown


def test_page_prose_is_copied_not_paraphrased(assignment):
    """The config's wording comes from the lesson page (either rendering, copied from shared/seeds), word for word."""
    seeds = Path(__file__).parent / "fixtures" / "lesson_page"
    page = " ".join(" ".join(path.read_text() for path in sorted(seeds.glob("*.txt"))).split())
    page = page.replace("`", "")
    for name, info in assignment.config["starter"]["exercises"].items():
        for piece in [info["task"], *info.get("key_functions", []), *info.get("steps", []),
                      *filter(None, [info.get("hint")])]:
            for sentence in piece.replace("`", "").split("\n"):
                assert " ".join(sentence.split()) in page, f"{name}: not on the lesson page: {sentence[:80]!r}"


# ---- a second assignment, defined only under tests/ ----------------------------------------------------

def test_build_works_for_an_assignment_defined_only_under_tests(tmp_path, capsys):
    folder = tmp_path / "project"
    shutil.copytree(TINY, folder)
    out = tmp_path / "out"
    assert grader.cli.main.main(["build", str(folder / "assignments" / "tiny"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / "tiny.py"), str(out / "tiny.ipynb"), str(out / "tiny-autograder.zip"),
                       str(out / "tiny_student-0.1.0-py3-none-any.whl")]
    text = (out / "tiny.py").read_text()
    assert "area = ...  # TODO: compute area" in text
    assert "side = math.sqrt(...)  # TODO: compute side" in text
    assert 'assert math.isclose(side * side, area), "a square of side `side` has area `area`"' in text
    assert "math.pi * radius ** 2" not in text and "reference solution" not in text
    assert "# Hint: The area of a circle is pi r squared." in text
    notebook = nbformat.read(out / "tiny.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert any(c.cell_type == "markdown" and "## Circle and square" in c.source for c in notebook.cells)
    assert grader.cli.main.main(["build", "tiny", "--root", str(folder), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "tiny.ipynb").read_bytes() == (out / "tiny.ipynb").read_bytes()
    # With no --out, the starters go to <project root>/student_templates and the zip (it holds the solution) to build/.
    assert grader.cli.main.main(["build", "tiny", "--root", str(folder)]) == 0
    assert (folder / "student_templates" / "tiny.py").read_bytes() == (out / "tiny.py").read_bytes()
    assert sorted(p.name for p in (folder / "student_templates").iterdir()) == ["tiny.ipynb", "tiny.py"]
    assert (folder / "build" / "tiny-autograder.zip").read_bytes() == (out / "tiny-autograder.zip").read_bytes()


def test_framework_modules_name_nothing_of_performance_05():
    for module in ("scaffold.py", "starter.py", "build.py"):
        text = (ROOT / "grader" / "authoring" / module).read_text()
        for word in ("performance", "hvp", "finite", "memory.", "jnp", "panels", "direction"):
            assert word not in text, f"grader/{module} mentions {word!r}"


def test_build_refuses_prose_for_an_unknown_exercise(tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(TINY, folder)
    config = folder / "assignments" / "tiny" / "assignment.toml"
    config.write_text(config.read_text() + '\n[starter.exercises.other]\ntitle = "no such region"\n')
    assert grader.cli.main.main(["build", "tiny", "--root", str(folder), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


# ---- the AST transform on snippets ---------------------------------------------------------------------

RULES = Rules(hint_calls=frozenset({"jnp.ones_like", "jax.jvp", "float"}),
              check_calls=frozenset({"print", "np.testing.assert_allclose"}),
              answers=frozenset({"finite", "automatic", "hvp_plain", "hvp_remat", "result", "results", "total"}),
              known=Rules().known | {"np", "jnp", "jax", "math"})


def scaffold(code: str, rules: Rules = RULES) -> str:
    return scaffold_region(textwrap.dedent(code).strip("\n").split("\n"), rules).text


@pytest.mark.parametrize("code, expected", [
    ("direction=jnp.ones_like(x)", "direction = jnp.ones_like(...)  # TODO: compute direction"),
    ("automatic=float(jnp.vdot(jax.grad(plain)(x),direction))", "automatic = float(...)  # TODO: compute automatic"),
    ("finite=(float(plain(x+eps*d))-float(plain(x-eps*d)))/(2*eps)", "finite = ...  # TODO: compute finite"),
    ("eps=.001", "eps = ...  # TODO: compute eps"),
    ("d = jnp.vdot(g, v)", "d = ...  # TODO: compute d"),
    ("_,hvp_plain=jax.jvp(jax.grad(plain),(x,),(direction,))", "_, hvp_plain = jax.jvp(...)  # TODO: compute hvp_plain"),
    ("a,b=divmod(7,2)", "a, b = ..., ...  # TODO: compute a, b"),
    ("(a, b), c = f(x)", "(a, b), c = (..., ...), ...  # TODO: compute a, b, c"),
    ("a = b = g(x)", "a = b = ...  # TODO: compute a, b"),
    ("total += g(x)", "total += ...  # TODO: compute total"),
    ("np.testing.assert_allclose(finite,automatic,rtol=3e-3,atol=1e-6)",
     "np.testing.assert_allclose(finite, automatic, rtol=3e-3, atol=1e-6)"),
    ("np.testing.assert_allclose(jax.grad(plain)(x),automatic,rtol=3e-3)",
     "np.testing.assert_allclose(..., automatic, rtol=3e-3)  # TODO: fill in the values this check compares"),
    ("np.testing.assert_allclose(finite, 0.0074, rtol=tol)",
     "np.testing.assert_allclose(finite, ..., rtol=...)  # TODO: fill in the values this check compares"),
    ("print('finite/automatic:',finite,automatic,'epsilon',eps)",
     "print('finite/automatic:', finite, automatic, 'epsilon', ...)  # TODO: fill in the values this check compares"),
    ("print('done')", "print('done')"),
    ("print(f'{finite:.3g}', round(finite, 3))", "print(f'{finite:.3g}', round(finite, 3))"),
    ("assert np.isfinite(np.asarray(hvp_plain)).all()", "assert np.isfinite(np.asarray(hvp_plain)).all()"),
    ("assert math.isclose(result, 4 * math.pi), 'check it'",
     "assert math.isclose(result, ...), 'check it'  # TODO: complete this check"),
    ("assert plain(x) > 0", "assert ...  # TODO: complete this check"),
    ("results.append(None if a is None else {n: getattr(a, n) for n in names})",
     "results.append(...)  # TODO: the value to append to `results`"),
    ("import math", "import math"),
    ("def f(v):\n    '''Doc.'''\n    return jnp.sum(v*v)", 'def f(v):\n    """Doc."""\n    ...  # TODO: implement f'),
    ("for i in range(3):\n    total += i", "...  # TODO: write the `for` statement of this step"),
])
def test_statement_scaffolds(code, expected):
    assert scaffold(code) == expected


def test_comments_and_blank_lines_are_kept_and_indentation_restored():
    code = ["    # Record it.", "    results.append(compute(a))", "", "    total = 2 * total"]
    assert scaffold_region(code, RULES).text.split("\n") == [
        "    # Record it.", "    results.append(...)  # TODO: the value to append to `results`", "",
        "    total = ...  # TODO: compute total"]


def test_else_clause_region_keeps_its_header_and_scaffolds_its_body():
    text = scaffold("""
        else:
            results.append({'title': 'unavailable', 'y': [int(m is not None) for m in memory]})
            total = 0
        """)
    assert text == ("else:\n    results.append(...)  # TODO: the value to append to `results`\n"
                    "    total = ...  # TODO: compute total")
    source = "if results:\n    pass\n" + text
    ast.parse(source)


def test_except_and_finally_clauses_are_regions_too():
    text = scaffold("""
        except ValueError:
            result = fallback(x)
        finally:
            results.append(result)
        """)
    ast.parse("try:\n    pass\n" + text)
    assert "result = ...  # TODO: compute result" in text and "fallback" not in text


def test_a_region_that_is_neither_statements_nor_a_clause_is_refused():
    with pytest.raises(ScaffoldError):
        scaffold("x = (1,\n")
    with pytest.raises(ScaffoldError):
        scaffold("else: total = 1")       # a clause body on the header line: put it on its own line


def test_answer_names_default_to_what_the_regions_bind():
    solution = "import numpy as np\nx = 1\n# BEGIN EXERCISE e\ny = np.sqrt(x)\nprint(y, [k * y for k in (1, 2)], x)\n# END EXERCISE e\n"
    lines = solution.splitlines()
    region = find_regions(lines)[0]
    rules = Rules.from_config({}, solution, ["\n".join(region.body(lines))])
    assert rules.answers == {"y"} and "np" in rules.known and "k" not in rules.answers
    assert scaffold_region(region.body(lines), rules).text.split("\n")[1] == (
        "print(y, [k * y for k in (1, 2)], ...)  # TODO: fill in the values this check compares")


@pytest.mark.parametrize("lines, problem", [
    (["# BEGIN EXERCISE a", "# BEGIN EXERCISE b"], "inside region"),
    (["# BEGIN EXERCISE a", "# END EXERCISE b"], "does not close"),
    (["# END EXERCISE a"], "does not close"),
    (["# BEGIN EXERCISE a"], "has no END"),
])
def test_broken_markers_are_reported(lines, problem):
    with pytest.raises(RegionError, match=problem):
        find_regions(lines)


def test_unfinished_exercises_reads_student_files_tolerantly(assignment):
    assert unfinished_exercises(assignment.solution_path.read_text()) == {}
    student = "x = 1\n# BEGIN EXERCISE a\ny = ...\n# END EXERCISE a\n# BEGIN EXERCISE b\nz = 2\n# END EXERCISE b\nw = (\n"
    assert unfinished_exercises(student) == {"a": [2]}
    assert unfinished_exercises("# BEGIN EXERCISE a\n") == {}


# ---- grading the starter, the solution and the solution as a notebook ----------------------------------

@pytest.fixture(scope="module")
def graded(assignment, built, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("graded")
    submissions, out = root / "submissions", root / "results"
    submissions.mkdir()
    shutil.copy(built[".py"], submissions / "starter.py")
    shutil.copy(assignment.solution_path, submissions / "solution.py")
    (submissions / "solution_notebook.ipynb").write_text(render(assignment, scaffold=False).notebook)
    grader.cli.batch.grade_folder(assignment, submissions, out, workers=2, regrade=True)
    records = {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}
    return {"records": records}


@pytest.mark.slow
def test_untouched_starter_scores_only_the_given_parts(graded):
    record = graded["records"]["starter"]
    assert record["status"] == "graded"
    groups = {name: group["score"] for name, group in record["groups"].items()}
    assert groups == {"runs": 0, "gradients": 10, "residuals": 15, "memory": 0, "memory_unavailable": 0,
                      "directional": 0, "hvp": 0}
    feedback = "\n".join(check["feedback"] for check in record["checks"])
    assert "`eps` is still a TODO" in feedback and "`finite` is still a TODO" in feedback
    assert "`...` (an unfinished TODO)" in feedback and "`memory`" in feedback
    for name in ("automatic", "hvp_plain"):    # their hint calls `f(...)` raise: still reported as TODOs
        assert f"`{name}` is still a TODO: line" in feedback, f"the feedback does not call `{name}` a TODO"
    for name in ("hvp_remat",):   # `direction` is a helper name: the runs checks ask for results, not it
        assert f"`{name}`" in feedback, f"the feedback does not name the unfinished `{name}`"
    unfinished = next(m for m in record["messages"] if m.startswith("Unfinished exercises"))
    assert all(name in unfinished for name in EXERCISES)


@pytest.mark.slow
def test_solution_py_and_notebook_get_the_same_full_marks(assignment, graded):
    script, notebook = graded["records"]["solution"], graded["records"]["solution_notebook"]
    assert script["status"] == notebook["status"] == "graded"
    assert script["score"] == script["max_score"] == assignment.max_score
    assert notebook["groups"] == script["groups"]
    assert [c["score"] for c in notebook["checks"]] == [c["score"] for c in script["checks"]]


@pytest.mark.slow
def test_check_lists_the_unfinished_exercises_of_the_starter(graded, monkeypatch, capsys):
    assert grader.cli.main.main(["check", str(COMMITTED / "performance-05.py")]) == 1     # 0 only at full marks
    output = capsys.readouterr().out
    line = next(line for line in output.splitlines() if line.startswith("note: Unfinished exercises"))
    assert [name for name in EXERCISES if name in line] == EXERCISES
    assert "[PASS] gradients.inputs" in output and "[FAIL] directional.central_difference" in output


def test_committed_config_keeps_its_grading_keys():
    """The [starter] table is an addition: grading keys are where they were."""
    config = tomllib.loads((ROOT / "assignments" / ASSIGNMENT / "assignment.toml").read_text())
    assert {"assignment", "limits", "scenarios", "parameters", "tolerances", "groups", "checks", "starter"} <= set(config)
