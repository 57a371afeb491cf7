"""The framework's stages import only downward, and it names no lesson.

Stages from the bottom up; a module may import its own stage and any stage below it, never one above. The
order is what lets a newcomer read the code bottom-up and change a stage without surprises above it."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "grader"
STAGES = ["common", "model", "config", "intake", "sandbox", "runs", "api", "grading", "similarity", "lms", "outputs",
          "authoring", "student", "cli"]
MAX_LINES = 420


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) > 1 and "child" not in parts:
            yield parts[0], path


def imported_stages(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "grader" and len(parts) > 1 and parts[1] in STAGES:
                yield parts[1], node.lineno


def test_every_package_is_a_known_stage():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(STAGES)
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py"}, "every module belongs to a stage"


@pytest.mark.parametrize("stage, path", list(modules()), ids=lambda v: str(v.relative_to(PACKAGE)) if isinstance(v, Path) else v)
def test_a_stage_imports_only_itself_and_stages_below(stage, path):
    upward = [f"line {line}: grader.{target}" for target, line in imported_stages(path)
              if STAGES.index(target) > STAGES.index(stage)]
    assert not upward, f"{path.relative_to(PACKAGE)} ({stage}) imports a stage above it: {upward}"


def test_no_framework_module_is_over_the_size_limit():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules: {long}"


def test_the_framework_names_no_lesson():
    for path in PACKAGE.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".j2"):
            assert "performance-05" not in path.read_text() and "performance_05" not in path.read_text(), path


LESSONS = PACKAGE.parent / "assignments"


@pytest.mark.parametrize("checks", sorted(LESSONS.glob("*/checks.py")), ids=lambda p: p.parent.name)
def test_a_lessons_checks_import_only_the_api_from_the_grader(checks):
    """A check author needs only `grader.api` (Missing included), never the runs' or the engine's modules."""
    inner = [f"line {node.lineno}: {node.module}" for node in ast.walk(ast.parse(checks.read_text()))
             if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "grader"
             and not node.module.startswith("grader.api")]
    assert not inner, f"{checks} imports grader internals: {inner}"


@pytest.mark.parametrize("script", sorted(p for p in LESSONS.glob("*/*.py") if p.name != "checks.py"),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_lessons_other_files_import_only_the_api_and_the_calibration_tools(script):
    """A lesson's oracle, set-up, probes and calibration scripts (run by hand) use the framework only through
    `grader.api` and `grader.authoring.calibration`, so the runs and the engine can change without them."""
    # and the one adapter to JAX's internals, which a scenario's set-up (run inside the child) imports by plain name
    allowed = ("grader.api", "grader.authoring.calibration", "grader.sandbox.child.jax_internals")
    inner = []
    for node in ast.walk(ast.parse(script.read_text())):
        names = [f"{node.module}.{alias.name}" for alias in node.names] \
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else \
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        inner += [f"line {node.lineno}: {name}" for name in names
                  if name.split(".")[0] == "grader" and not name.startswith(allowed)]
    assert not inner, f"{script} imports grader internals: {inner}"


def test_the_api_exports_missing():
    from grader.api import Missing
    from grader.api.values import Missing as AlsoMissing
    from grader.runs.snapshot import Missing as Original
    assert Missing is AlsoMissing is Original


def test_the_student_bundle_does_not_import_the_starter_builder():
    """The student wheel's modules carry what they need from the build as data, not the authoring code."""
    upward = [(str(path.relative_to(PACKAGE)), line) for stage, path in modules() if stage == "student"
              for target, line in imported_stages(path) if target == "authoring"]
    assert not upward, f"grader/student imports grader.authoring: {upward}"


def test_the_graders_own_parses_take_turns():
    """Every `ast.parse` of the grader's process goes through common/python_ast.py (CPython < 3.11.8 and 3.12.1
    shares the AST constructor's recursion depth between threads: two parses at once can raise SystemError; the
    run's own code, in the sandbox, is one thread and parses as it likes)."""
    bare = [str(path.relative_to(PACKAGE)) for path in sorted(PACKAGE.rglob("*.py"))
            if "child" not in path.parts and path.name != "python_ast.py"
            and "ast.parse(" in path.read_text(encoding="utf-8")]
    assert bare == []


def test_a_parse_that_meets_the_shared_depth_mismatch_is_tried_again(monkeypatch):
    import ast

    from grader.common import python_ast
    real, calls = ast.parse, []

    def once_mismatched(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=42, after=25)")
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", once_mismatched)
    assert isinstance(python_ast.ast_parse("x = 1").body[0], ast.Assign) and len(calls) == 2
    monkeypatch.setattr(ast, "parse", lambda *a, **k: (_ for _ in ()).throw(SystemError("another")))
    with pytest.raises(SystemError, match="another"):
        python_ast.ast_parse("x = 1")
