"""Load an assignment: its TOML config, its oracle and checks modules, and the child-side sources it ships.

An assignment is a folder `assignments/<id>/` holding `assignment.toml`, `oracle.py` (trusted, parent
side), `checks.py` (trusted, loaded through pytest's assertion rewriting), and `scenario_setup.py` and
`probes.py` (sent into the sandbox as source). The framework reads everything lesson-specific from here.

A check's `function` names a function of the lesson's checks.py, or `builtin:<name>` one of the framework's
generic checks (grader/api/builtin_checks.py: did the file run, did it run to its end), so a lesson writes
only its own checks. Both are loaded here, by name, as check code; the config stage depends on neither.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import PACKAGE_DIR
from grader.common.python_ast import ast_parse
from grader.config.check_functions import check_function
from grader.config.late import TABLE as LATE_TABLE
from grader.config.validate import (  # noqa: F401 -- ConfigError and the vocabularies are imported from here too
    BINDING_RULES,
    EVIDENCE_BOUNDS,
    VISIBILITIES,
    ConfigError,
    binding_rule_problem,
    config_problems,
    module_problems,
    raise_problems,
    read_toml,
)
from grader.model.limits import Limits


@dataclass(frozen=True)
class CheckSpec:
    id: str
    group: str
    points: float
    visibility: str
    scenarios: tuple[str, ...]
    function: str
    needs: tuple[str, ...] = ()
    title: str = ""               # the readable name of its Gradescope test (default: the id)
    failure_note: str = ""        # a sentence the lesson adds to the feedback whenever the check does not pass
    method: bool = False          # it judges how a value was computed: a changed world's failure is the method's, so
                                  # the scenario's failure_hint (about values that follow a seed) is not added
    differs_by: str = ""          # the difference between the worlds that can make it fail in one world only: the
                                  # key of the scenario's `hints` whose sentence its failure there gets (none: no hint)
    replay: str = ""              # in the primary run (where it is not listed), judged on this replay of that run
    judged_in_replays: tuple[str, ...] = ()   # also judged on each of these replays of every run it is judged in,
                                              # its lowest score counting: a branch is judged in every world it has,
                                              # not only in the one the batch drew


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    setup: tuple[str, ...]
    fresh_seed: bool = False
    failure_hint: str = ""        # said after any check that failed only here (a lesson without `hints`)
    hints: dict[str, str] = field(default_factory=dict)   # difference -> its sentence: a check that failed only here
                                                          # gets the one its `differs_by` names, or none
    primary: bool = False         # every check is judged here first; the other runs only when they explain a failure


@dataclass(frozen=True)
class Replay:
    """The end of a run executed again inside that run with `replace` given the value the probe `probe` makes of it:
    the values of `capture` come back (harness.run_replay), so a branch the run's world never took is judged without
    a second run of the file.

    `replace` may name several contract names: the probe then takes their values in that order and returns the new
    ones as a tuple. `rerun` says which statements run again: "end" (from the first after the replaced names' last
    binding that reads one, through the last that binds a captured name) or "slice" (only those the captured names'
    bindings depend on, read off each statement's reads and bindings: the value's own computation, not the rest of
    the file's end).

    `patch` names module attributes (`numpy.tanh`) that the probe's further values stand in for while the statements
    run again, put back after: a change to what a function of a library computes reaches every spelling that calls it
    through its module, whatever the file names its values. The probe takes the replaced names' values, then the
    attributes' (None where the file never imported the module), and returns the new ones in that order."""
    name: str
    replace: tuple[str, ...]
    probe: str
    capture: tuple[str, ...]
    scenarios: tuple[str, ...]
    description: str = ""
    rerun: str = "end"
    seconds: float = 0.0    # its own time limit (wall seconds); 0: a statement's grace, [limits] statement_grace_seconds
    patch: tuple[str, ...] = ()   # module attributes ("numpy.tanh") the probe's values stand in for during the replay


@dataclass
class Assignment:
    id: str
    title: str
    folder: Path
    root: Path
    config: dict
    limits: Limits
    scenarios: dict[str, Scenario]
    groups: dict[str, dict]
    checks: list[CheckSpec]
    contract: list[str]
    parameters: dict[str, Any]
    settings: types.SimpleNamespace
    oracle: types.ModuleType
    check_module: types.ModuleType
    setup_source: str
    probes_source: str
    fingerprint: str = ""
    solution_path: Path = field(default_factory=Path)
    replays: dict[str, Replay] = field(default_factory=dict)
    all_scenarios: bool = False   # [assignment] all_scenarios: every run for every file (a full record), never one

    @property
    def primary_scenario(self) -> str | None:
        """The scenario every file is run in first (a file that passes every check there is graded from that run
        alone), or None: every scenario runs for every file."""
        return next((name for name, scenario in self.scenarios.items() if scenario.primary), None)

    def check_function(self, name: str) -> Callable[..., Any] | None:
        """The check function a `[[checks]] function` names: `builtin:<name>` or a function of checks.py."""
        return check_function(self.check_module, name)

    @property
    def max_score(self) -> float:
        return float(sum(spec.points for spec in self.checks))

    @property
    def submission_filename(self) -> str:
        return self.config["assignment"].get("submission_filename", f"{self.id}.py")

    @property
    def solution_is_public(self) -> bool:
        """[assignment] solution_is_public: the lesson page itself shows the reference solution's code, so what its
        runs leave where a student's run can read it (compiled programs that name its method) reveals nothing."""
        return bool(self.config["assignment"].get("solution_is_public", False))

    def method_sampler(self) -> str:
        """[assignment] method_sampler: code the instructor wrote that computes the exercises the common honest ways,
        run after the public solution when a large batch warms the compilation cache (so most honest runs compile
        nothing of their own). Only where the solution is public: the sampler names methods, as the page does."""
        relative = self.config["assignment"].get("method_sampler")
        if not relative or not self.solution_is_public:
            return ""
        try:
            return (self.root / relative).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ""

    @property
    def method_sampler_min_submissions(self) -> int:
        """A batch warms the cache with the sampler only when it grades at least this many submissions: its
        compiling costs every batch once and pays back per submission."""
        return int(self.config["assignment"].get("method_sampler_min_submissions", 20))

    def public_solution(self) -> str:
        """The reference solution's code where the lesson page shows it (`solution_is_public`), else "": code
        that may warm the compilation cache every run reads (grader/runs/compile_cache.py)."""
        if not self.solution_is_public:
            return ""
        try:
            return self.solution_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ""

    def built_starter(self) -> str:
        """The public code as `grader build` last wrote it: the public solution, else the committed starter
        `student_templates/<stem>.py` (tests/test_build.py keeps it in step with the solution), else "" (runs then
        compile everything). Data made at build time, so a student's check needs no starter builder."""
        if self.solution_is_public:
            return self.public_solution()
        try:
            starter = self.root / "student_templates" / (Path(self.submission_filename).stem + ".py")
            return starter.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ""

    @property
    def seed_parameter(self) -> str:
        return self.config["assignment"]["seed_parameter"]

    @property
    def lesson_seed(self) -> int:
        """The seed the lesson itself uses (baseline), named by [assignment] seed_parameter."""
        return int(self.parameters[self.seed_parameter])

    @property
    def figure_name(self) -> str | None:
        """The contract name holding the lesson's figure data ([report] figure), drawn in the HTML reports."""
        return self.config.get("report", {}).get("figure")

    @property
    def max_submission_bytes(self) -> int:
        return int(self.config["assignment"]["max_submission_bytes"])

    @property
    def evidence(self) -> dict[str, int]:
        """[evidence]: bounds of the method evidence recorded in each run ({} records none)."""
        return {key: int(value) for key, value in self.config.get("evidence", {}).items()}

    @property
    def bindings(self) -> dict[str, str]:
        """[bindings]: which binding of a contract name is graded when the file binds it more than once."""
        return dict(self.config.get("bindings", {}))

    @property
    def exercise_bindings(self) -> dict[str, str]:
        """[exercise_bindings]: name -> exercise region; a name bound inside its region is graded as the region
        leaves it (see grader/runs/provenance.py)."""
        return dict(self.config.get("exercise_bindings", {}))


def _import_path(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as a Python module (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_rewritten(path: Path, name: str) -> types.ModuleType:
    """Import a checks module with pytest's assertion rewriting, so a failing `assert` reports its values."""
    from _pytest.assertion.rewrite import rewrite_asserts

    source = path.read_bytes()
    tree = ast_parse(source, str(path))
    rewrite_asserts(tree, source, str(path))
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 -- the lesson's trusted checks.py
    return module


def find_root(start: Path | None = None) -> Path:
    """The project root: the nearest folder above `start` (or the package) that has `assignments/`."""
    candidates = [Path.cwd()] if start is None else [start]
    candidates.append(PACKAGE_DIR.parent)
    for candidate in candidates:
        for folder in [candidate.resolve(), *candidate.resolve().parents]:
            if (folder / "assignments").is_dir():
                return folder
    from grader.config.bundle import bundled_root  # a student bundle's assignments, installed by its wheel

    if (bundled := bundled_root()) is not None:
        return bundled
    raise ConfigError("no assignments/ folder found above the current directory or the grader package")


def available(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "assignments").iterdir() if (p / "assignment.toml").is_file())


def load(assignment_id: str | None = None, root: Path | None = None) -> Assignment:
    root = root or find_root()
    names = available(root)
    if assignment_id is None:
        if len(names) != 1:
            raise ConfigError(f"several assignments exist ({', '.join(names)}); name one with --assignment")
        assignment_id = names[0]
    folder = root / "assignments" / assignment_id
    if not (folder / "assignment.toml").is_file():
        raise ConfigError(f"unknown assignment {assignment_id!r}; available: {', '.join(names) or 'none'}")
    shown = Path("assignments") / assignment_id          # how messages name the folder
    config = read_toml(folder / "assignment.toml", str(shown / "assignment.toml"))
    raise_problems([f"{shown / 'assignment.toml'}: {problem}" for problem in config_problems(config, assignment_id)])
    info = config["assignment"]
    module_prefix = "assignment_" + "".join(c if c.isalnum() else "_" for c in assignment_id)
    groups = dict(config.get("groups", {}))
    contract = list(info.get("contract", []))
    checks = [CheckSpec(id=c["id"], group=c["group"], points=float(c["points"]), visibility=c.get("visibility", "visible"),
                        scenarios=tuple(c.get("scenarios", ["baseline"])), function=c["function"],
                        needs=tuple(contract if c.get("needs") == ["*"] else c.get("needs", ())),
                        title=str(c.get("title", c["id"])), failure_note=str(c.get("failure_note", "")),
                        method=c.get("method") is True, differs_by=str(c.get("differs_by", "")),
                        replay=str(c.get("replay", "")),
                        judged_in_replays=tuple(c.get("judged_in_replays", ())))
              for c in config.get("checks", [])]
    scenarios = {name: Scenario(name=name, description=s.get("description", name), setup=tuple(s.get("setup", ())),
                                fresh_seed=bool(s.get("fresh_seed", False)), failure_hint=s.get("failure_hint", ""),
                                hints=dict(s.get("hints", {})), primary=s.get("primary") is True)
                 for name, s in config.get("scenarios", {}).items()}
    replays = {name: Replay(name=name, replace=(r["replace"],) if isinstance(r["replace"], str) else tuple(r["replace"]),
                            probe=r["probe"], capture=tuple(r["capture"]), scenarios=tuple(r["scenarios"]),
                            description=str(r.get("description", "")), rerun=str(r.get("rerun", "end")),
                            seconds=float(r.get("seconds", 0.0)), patch=tuple(r.get("patch", ())))
               for name, r in config.get("replays", {}).items()}
    parameters = dict(config.get("parameters", {}))
    settings = types.SimpleNamespace(**parameters, **config.get("tolerances", {}))
    assignment = Assignment(
        id=assignment_id, title=info.get("title", assignment_id), folder=folder, root=root, config=config,
        limits=Limits.from_config(config.get("limits", {})), scenarios=scenarios, groups=groups, checks=checks,
        replays=replays, all_scenarios=info.get("all_scenarios") is True,
        contract=contract, parameters=parameters, settings=settings,
        oracle=_lesson_module(_import_path, folder, shown, "oracle.py", module_prefix + "_oracle"),
        check_module=_lesson_module(load_rewritten, folder, shown, "checks.py", module_prefix + "_checks"),
        setup_source=_read_optional(folder / "scenario_setup.py"),
        probes_source=_read_optional(folder / "probes.py"),
        solution_path=root / info["solution"],
    )
    raise_problems(module_problems(config, folder, shown, assignment.oracle, assignment.check_module))
    assignment.fingerprint = _fingerprint(assignment)
    return assignment


def every_problem(assignment_id: str, root: Path) -> list[str]:
    """Every problem `load` stops at, from every stage that can run (for `grader validate`): the TOML as data,
    then the lesson's Python files against the parts of it that are usable, so a misspelled key does not hide a
    misspelled set-up function. Stages that need what a problem broke say they were not checked."""
    folder, shown = root / "assignments" / assignment_id, Path("assignments") / assignment_id
    try:
        config = read_toml(folder / "assignment.toml", str(shown / "assignment.toml"))
    except ConfigError as error:
        return error.problems + ["(nothing else was checked: the file must be read first)"]
    problems = [f"{shown / 'assignment.toml'}: {problem}" for problem in config_problems(config, assignment_id)]
    tables = {"checks": list, "scenarios": dict, "parameters": dict, "assignment": dict}
    if not all(isinstance(config.get(name), kind) for name, kind in tables.items()):
        return problems + ["(the lesson's Python files were not checked: the tables they are checked against are "
                           "missing or malformed)"]
    usable = dict(config, checks=[c for c in config["checks"] if isinstance(c, dict)
                                  and isinstance(c.get("id"), str) and isinstance(c.get("function"), str)])
    modules = []
    for loader, name in ((_import_path, "oracle.py"), (load_rewritten, "checks.py")):
        try:
            modules.append(_lesson_module(loader, folder, shown, name, f"validate_{assignment_id}_{name[:-3]}"))
        except ConfigError as error:
            problems += error.problems
    if len(modules) < 2:
        return problems + ["(check functions, set-up functions and probes were not checked against assignment.toml: "
                           "oracle.py and checks.py must import first)"]
    try:
        problems += module_problems(usable, folder, shown, *modules)
    except Exception as error:   # a value the first stage already named as wrong stopped the second midway
        problems.append(f"(the lesson's Python files were checked only in part: {type(error).__name__} on a value "
                        "named above; fix those first)")
    return problems


def _lesson_module(loader: Callable[[Path, str], types.ModuleType], folder: Path, shown: Path, name: str,
                   module_name: str) -> types.ModuleType:
    """Import oracle.py or checks.py; a missing file or an error while importing it names the file."""
    if not (folder / name).is_file():
        raise ConfigError(f"{shown / name}: missing: every assignment folder holds {name}; create it")
    try:
        return loader(folder / name, module_name)
    except Exception as error:   # the lesson's own code: say where, never crash with a bare traceback
        line = f" (line {error.lineno})" if isinstance(error, SyntaxError) else ""
        raise ConfigError(f"{shown / name}: importing it raised {type(error).__name__}{line}: {str(error)[:300]}; "
                          "fix the file") from error


def _read_optional(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def _fingerprint(a: Assignment) -> str:
    """Changes whenever anything that can change a grade changes (config, checks, oracle, child code, solution)."""
    digest = hashlib.sha256()
    for path in sorted(a.folder.glob("*.py")) + [a.solution_path]:
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    # assignment.toml as read, less [late]: the late policy is applied as results are written (config/late.py), so
    # changing it re-grades nobody
    graded = {name: table for name, table in a.config.items() if name != LATE_TABLE}
    digest.update(b"assignment.toml\0" + json.dumps(graded, sort_keys=True, default=str).encode())
    package = PACKAGE_DIR
    for path in sorted(package.rglob("*.py")):     # the child's code (grader/sandbox/child/) changes grades too
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]
