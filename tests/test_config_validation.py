"""A misconfigured assignment is stopped at load with a message naming the file, the key and the fix; `grader
validate` adds a trial grading of the reference (a check's own bug: tests/test_check_faults.py).

Each broken config is a copy of assignments/performance-05 with one thing changed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.config.assignment import ConfigError, load

ROOT = Path(__file__).resolve().parent.parent
LESSON = "performance-05"
TOML = f"assignments/{LESSON}/assignment.toml"
GRADER = [sys.executable, "-m", "grader.cli.main"]


def copy_project(tmp_path: Path) -> Path:
    """A project root holding a copy of the lesson and its solution."""
    shutil.copytree(ROOT / "assignments" / LESSON, tmp_path / "assignments" / LESSON,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "solutions").mkdir()
    shutil.copy(ROOT / "solutions" / f"{LESSON}.py", tmp_path / "solutions")
    return tmp_path


def edit(root: Path, name: str, old: str, new: str) -> None:
    """Replace the first occurrence of `old` (which must be there) in one file of the copied lesson."""
    path = root / "assignments" / LESSON / name
    text = path.read_text()
    assert old in text, f"{name} no longer holds {old!r}: update this test"
    path.write_text(text.replace(old, new, 1))


def toml(old: str, new: str):
    return lambda root: edit(root, "assignment.toml", old, new)


def toml_syntax_error(root: Path) -> str:
    """Breaks one line of the TOML and returns the 'line N' the message must name."""
    path = root / "assignments" / LESSON / "assignment.toml"
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.startswith("title = "))
    lines[number - 1] = 'title = "Memory, rematerialization'          # an unterminated string
    path.write_text("\n".join(lines) + "\n")
    return f"line {number}"


def without_table(name: str):
    """Removes a whole table (its header and its keys, up to the next blank line) from the TOML."""
    def mutate(root: Path) -> None:
        path = root / "assignments" / LESSON / "assignment.toml"
        text = path.read_text()
        start = text.index(f"[{name}]\n")
        path.write_text(text[:start] + text[text.index("\n\n", start) + 2:])
    return mutate


BROKEN = {
    "missing required key": (toml('seed_parameter = "lesson_seed"\n', ""),
                             [TOML, "[assignment] seed_parameter is missing", "add seed_parameter ="]),
    "unknown top-level table": (toml("[report]", "[raport]"),
                                [TOML, "[raport] is not a known table", "did you mean 'report'", "the known tables are"]),
    "misspelled key": (toml("points = 3\n", "pionts = 3\n"),
                       [TOML, "[[checks]] runs.no_errors: unknown key 'pionts'", "did you mean 'points'",
                        "the allowed keys are id, title, group, points"]),
    "name in parameters and tolerances": (toml("[tolerances]\n", "[tolerances]\nwidth = 0.5\n"),
                                          [TOML, "'width' is in both [parameters] and [tolerances]", "rename it or remove it"]),
    "unknown setup function": (toml('"vary_memory_analysis"]', '"vary_memory_analyses"]'),
                               [TOML, "[scenarios.variant] setup lists 'vary_memory_analyses'",
                                "scenario_setup.py has no such function", "did you mean 'vary_memory_analysis'"]),
    "probe parameter outside the contract": (lambda root: edit(root, "probes.py", "def grad_plain(plain, x, w)",
                                                               "def grad_plain(plain, x, weights)"),
                                             [f"assignments/{LESSON}/probes.py", "probe grad_plain() has parameter 'weights'",
                                              "not in [assignment] contract", "add 'weights' to the contract or rename"]),
    "missing oracle function": (lambda root: edit(root, "oracle.py", "def build(", "def make_oracle("),
                                [f"assignments/{LESSON}/oracle.py: no function build", "build(seed, facts, scenario)",
                                 "define it"]),
    "check function missing from checks.py": (toml('function = "remat_saves_fewer"', 'function = "remat_saves_less"'),
                                              [TOML, "function = 'remat_saves_less'",
                                               "checks.py has no such function", "did you mean 'remat_saves_fewer'",
                                               "define def remat_saves_less(run, oracle, settings)"]),
    "unknown builtin check": (toml('function = "builtin:ran_to_the_end"', 'function = "builtin:ran_to_end"'),
                              [TOML, "function = 'builtin:ran_to_end'", "the framework has no such builtin check",
                               "builtin:ran_to_the_end"]),
    "negative points": (toml("points = 3\n", "points = -1\n"),
                        [TOML, "[[checks]] runs.no_errors: points = -1: points must be a number >= 0", "set it to"]),
    "points not a number": (toml("points = 3\n", 'points = "3"\n'),
                            [TOML, "[[checks]] runs.no_errors: points = '3': points must be a number >= 0"]),
    "unknown visibility": (toml('visibility = "visible"', 'visibility = "secret"'),
                           [TOML, "[[checks]] runs.no_errors: visibility = 'secret'",
                            "use one of visible, after_due_date, after_published, hidden"]),
    "duplicate check ids": (toml('id = "runs.reached_end"', 'id = "runs.no_errors"'),
                            [TOML, "id = 'runs.no_errors' is used by 2 checks", "rename one"]),
    "replay reruns an unknown way": (toml('rerun = "slice"', 'rerun = "some"'),
                                     [TOML, "[replays.hvp_scaled]: rerun = 'some': \"end\" or \"slice\""]),
    "replay replaces a name outside the contract": (toml('replace = ["plain", "remat"]', 'replace = ["plain", "remats"]'),
                                                    [TOML, "[replays.hvp_scaled]: 'remats' is not in [assignment] contract"]),
    "replay patches something that is no module attribute": (
        toml('patch = ["numpy.tanh",', 'patch = ["tanh",'),
        [TOML, "[replays.cotangent_shifted]: patch must be a list of module attributes such as \"numpy.tanh\""]),
    "replay replaces nothing and patches nothing": (
        toml('patch = ["numpy.tanh", "jax.numpy.tanh", "jax.nn.tanh", "jax.lax.tanh", "math.tanh"]\n', ''),
        [TOML, "[replays.cotangent_shifted]: replace must be a contract name or a non-empty list of them (empty only "
               "with patch)"]),
    "replay that only patches reruns the end": (
        toml('probe = "_tanh_shifted"\ncapture = ["cotangent"]\nscenarios = ["variant", "baseline"]\nrerun = "slice"',
             'probe = "_tanh_shifted"\ncapture = ["cotangent"]\nscenarios = ["variant", "baseline"]\nrerun = "end"'),
        [TOML, "[replays.cotangent_shifted]: a replay that replaces no name (patch alone) must rerun = \"slice\""]),
    "replay time limit out of range": (toml("seconds = 10\n", "seconds = 0\n"),
                                       [TOML, "[replays.hvp_scaled]: seconds = 0: a number of seconds above 0"]),
    "check lists an unknown scenario": (toml('scenarios = ["baseline", "variant"]', 'scenarios = ["baseline", "varient"]'),
                                        [TOML, "[[checks]] gradients.inputs: scenarios lists 'varient'",
                                         "did you mean 'variant'", "define [scenarios.varient]"]),
    "limit of the wrong type": (toml("wall_seconds = 30 ", 'wall_seconds = "30" '),
                                [TOML, "[limits] wall_seconds = '30': must be a number > 0", "without quotes"]),
    "whole-number limit given a fraction": (toml("max_processes = 256", "max_processes = 2.5"),
                                            [TOML, "[limits] max_processes = 2.5: must be a whole number > 0"]),
    "negative waiting allowance": (toml("cpu_wait_allowance_seconds = 60", "cpu_wait_allowance_seconds = -5"),
                                   [TOML, "[limits] cpu_wait_allowance_seconds = -5: must be a number >= 0"]),
    "unknown check group": (toml('group = "hvp"', 'group = "hvps"'),
                            [TOML, "[[checks]] hvp.shape_and_finite: group = 'hvps': no such group", "did you mean 'hvp'"]),
    "group points that do not add up": (toml("runs = { points = 5,", "runs = { points = 6,"),
                                        [TOML, "[groups] runs: points = 6, but its checks add up to 5",
                                         "make the group's points the sum"]),
    "no baseline scenario": (toml("[scenarios.baseline]", "[scenarios.base]"),
                             [TOML, "[scenarios.baseline] is missing", "add it"]),
    "set-up function without **kwargs": (lambda root: edit(root, "scenario_setup.py", "def vary_memory_analysis(seed, width, layers, **_)",
                                                           "def vary_memory_analysis(seed, width, layers)"),
                                         [f"assignments/{LESSON}/scenario_setup.py: vary_memory_analysis() does not accept **kwargs",
                                          "add **_"]),
    "oracle that cannot be imported": (lambda root: edit(root, "oracle.py", "import numpy as np",
                                                         "import numpy as np\nimport no_such_module_anywhere"),
                                       [f"assignments/{LESSON}/oracle.py: importing it raised ModuleNotFoundError",
                                        "no_such_module_anywhere", "fix the file"]),
    "method checks without [evidence]": (without_table("evidence"),
                                         [TOML, f"assignments/{LESSON}/checks.py: line ", "asks run.",
                                          "has no [evidence] table"]),
    "bad evidence bound": (toml("max_evaluations_per_statement = 0", "max_evaluations_per_statement = -400"),
                           [TOML, "[evidence] max_evaluations_per_statement = -400: must be a whole number >= 0",
                            "write e.g. max_evaluations_per_statement = 64"]),
    "unknown evidence bound": (toml("max_elements = 1024", "max_arrays = 1024"),
                               [TOML, "[evidence]: unknown key 'max_arrays'", "the allowed keys are",
                                "max_evaluations_per_statement"]),
    "seed in a student-facing hint": (toml("variant run, whose seed differs:", "variant run (seed {seed}):"),
                                      [TOML, "[scenarios.variant] hints names {seed}", "shown to students"]),
    "a check's differs_by names no hint": (toml('differs_by = "memory"', 'differs_by = "memroy"'),
                                           [TOML, "differs_by = 'memroy' names no scenario's hints", "known: memory, seed"]),
    "two primary scenarios": (toml('description = "your file as written', 'primary = true\ndescription = "your file as written'),
                              [TOML, "primary is true in", "at most one scenario is primary"]),
    "a replay whose probe runs after every statement": (toml('probe = "_memory_all_available"', 'probe = "memory_all_available"'),
                                                        [TOML, "[replays.all_available]: probe must name a function",
                                                         "starts with _"]),
    "a replay capturing a name outside the contract": (toml('capture = ["panels", "visual_data"]', 'capture = ["panel"]'),
                                                       [TOML, "[replays.all_available]: 'panel' is not in [assignment] contract"]),
    "a check naming no replay": (toml('replay = "all_available"', 'replay = "all_present"'),
                                 [TOML, "replay = 'all_present': no [replays.all_present]"]),
    "fact exercises of a private solution": (toml("solution_is_public = true", "solution_is_public = false"),
                                             [TOML, "[assignment] fact_exercises = ['memory']: needs solution_is_public",
                                              "remove it to ship the facts"]),
    "seed parameter not in [parameters]": (toml('seed_parameter = "lesson_seed"', 'seed_parameter = "seed"'),
                                           [TOML, "[assignment] seed_parameter = 'seed': [parameters] has no 'seed'",
                                            "add seed = <the lesson's seed> to [parameters]"]),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_config_gets_its_own_message(tmp_path, case):
    root = copy_project(tmp_path)
    mutate, expected = BROKEN[case]
    mutate(root)
    with pytest.raises(ConfigError) as caught:
        load(LESSON, root)
    message = str(caught.value)
    for fragment in expected:
        assert fragment in message, f"{case}: {fragment!r} not in:\n{message}"
    others = {f for other, (_, fragments) in BROKEN.items() if other != case for f in fragments[1:2]} - set(expected)
    assert not [f for f in others if f in message], f"{case} reads like another case:\n{message}"


def test_a_toml_syntax_error_names_the_file_and_line(tmp_path):
    root = copy_project(tmp_path)
    line = toml_syntax_error(root)
    with pytest.raises(ConfigError) as caught:
        load(LESSON, root)
    message = str(caught.value)
    assert message.startswith(f"{TOML}: {line}, column ") and "TOML syntax error" in message and "fix the syntax" in message


def test_every_problem_is_reported_at_once(tmp_path):
    root = copy_project(tmp_path)
    edit(root, "assignment.toml", 'visibility = "visible"', 'visibility = "secret"')
    edit(root, "assignment.toml", "wall_seconds = 30 ", 'wall_seconds = "30" ')
    with pytest.raises(ConfigError) as caught:
        load(LESSON, root)
    assert len(caught.value.problems) == 2
    assert all(problem.startswith(TOML) for problem in caught.value.problems)


def test_the_real_assignments_load_cleanly():
    assert load(LESSON, ROOT).max_score == 100
    tiny = load("tiny", ROOT / "tests" / "fixtures" / "tiny_project")
    assert tiny.max_score == sum(group["points"] for group in tiny.groups.values()) == 3


# ---- the command --------------------------------------------------------------------------------------

def test_validate_accepts_the_real_assignment():
    done = subprocess.run([*GRADER, "validate", LESSON], check=False, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert re.search(r"OK: performance-05 is ready to grade; the reference solution scores 100/100", done.stdout)


def test_validate_and_grade_refuse_a_broken_config(tmp_path):
    root = copy_project(tmp_path / "project")
    edit(root, "oracle.py", "def build(", "def make_oracle(")
    folder = root / "assignments" / LESSON
    done = subprocess.run([*GRADER, "validate", str(folder)], check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "FAILED" in done.stderr and f"{LESSON}/oracle.py: no function build" in done.stderr

    submissions, out = tmp_path / "submissions", tmp_path / "results"
    submissions.mkdir()
    shutil.copy(ROOT / "examples" / "submissions" / "bob.py", submissions)
    done = subprocess.run([*GRADER, "grade", str(submissions), "--assignment", str(folder), "--out", str(out)],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "oracle.py: no function build" in done.stderr
    assert not out.exists() or not list(out.glob("*.json"))        # refused before grading anyone


@pytest.mark.slow
def test_validate_reports_a_check_that_fails_the_reference(tmp_path):
    """The trial grading: a check with a bug of its own, and one that the reference solution fails."""
    root = copy_project(tmp_path)
    edit(root, "checks.py", "def remat_saves_fewer(run, oracle, settings):\n",
         "def remat_saves_fewer(run, oracle, settings):\n    return len(None)\n")
    edit(root, "checks.py", "def eps_is_a_sensible_step(run, oracle, settings):\n",
         "def eps_is_a_sensible_step(run, oracle, settings):\n    assert False, 'never satisfied'\n")
    done = subprocess.run([*GRADER, "validate", LESSON, "--root", str(root)], check=False, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "check residuals.remat_saves_fewer raised an error of its own" in done.stderr
    assert "TypeError" in done.stderr and "Traceback" in done.stderr
    assert "check directional.eps_sensible gave the reference solution 0/3: never satisfied" in done.stderr


def test_validate_reports_the_problems_of_every_stage_at_once(tmp_path, capsys):
    """A misspelled key in assignment.toml does not hide a misspelled set-up function (a later stage's problem)."""
    from grader.cli.main import main
    root = copy_project(tmp_path)
    edit(root, "assignment.toml", 'needs = [', 'nedds = [')
    edit(root, "assignment.toml", '"offset_memory_analysis"', '"offset_memory_analysys"')
    with pytest.raises(ConfigError) as stopped:
        load(LESSON, root)
    assert "offset_memory_analysys" not in str(stopped.value)     # loading stops at the first stage
    assert main(["validate", LESSON, "--root", str(root)]) == 1
    error = capsys.readouterr().err
    assert "unknown key 'nedds'" in error
    assert "setup lists 'offset_memory_analysys'" in error and "offset_memory_analysis" in error
    assert "Traceback" not in error
