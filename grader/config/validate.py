"""Validate an assignment folder at load, so a misconfiguration stops the grader before any student is graded.

Without this, a missing key surfaces as a raw KeyError, a name in both [parameters] and [tolerances] as a
TypeError, and a renamed `oracle.build` as "the grader failed" on every submission. Each problem names the
file, the key and the fix; all problems found are reported together in one ConfigError.

Two passes: `config_problems` reads the TOML as plain data (so nothing later meets a key of the wrong type);
`module_problems` then reads the lesson's Python files (oracle, checks, scenario set-up, probes).
"""

from __future__ import annotations

import inspect
import re
import tomllib
import types
from dataclasses import fields
from pathlib import Path
from typing import Any

from grader.config.check_functions import BUILTIN_PREFIX, builtin_names, check_function
from grader.config.child_code import derived_parameters, probe_problems, setup_problems
from grader.config.evidence_use import evidence_problems
from grader.config.late import late_problems
from grader.config.scenario_rules import fact_setup_problems, replay_problems, scenario_problems
from grader.config.similarity import similarity_problems
from grader.config.table_rules import is_number, is_string_list, unknown_keys
from grader.config.wording import names as _names
from grader.config.wording import spelling as _spelling
from grader.model.limits import Limits

VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")
EVIDENCE_BOUNDS = ("max_evaluations", "max_evaluations_per_statement", "max_sightings", "max_sightings_per_statement",
                   "max_elements")
BINDING_RULES = ("first", "last", "last number", "last vector")   # or "as_of <name>"

TABLES = ("assignment", "parameters", "tolerances", "scenarios", "groups", "checks", "limits", "evidence",
          "bindings", "exercise_bindings", "report", "starter", "lms", "similarity", "replays", "units", "late")
REQUIRED_TABLES = ("assignment", "parameters", "scenarios", "groups", "checks")
ASSIGNMENT_KEYS = {"id": "", "title": "", "solution": "solutions/<id>.py (the reference solution, relative to the project root)",
                   "submission_filename": "", "max_submission_bytes": "1048576 (larger files are not run)",
                   "contract": '["x", ...] (the top-level names the checks read)', "reference_facts": "",
                   "seed_parameter": '"lesson_seed" (the [parameters] entry holding the lesson\'s RNG seed)',
                   "solution_is_public": "true when the lesson page itself shows the solution (false by default)",
                   "method_sampler": "assignments/<id>/method_sampler.py (common honest forms, warming large batches)",
                   "method_sampler_min_submissions": "20 (the smallest batch the sampler warms)",
                   "fact_setup": '["nudge_...", ...] (baseline set-up functions the reference facts are measured with)',
                   "fact_exercises": '["memory", ...] (exercises whose public solution code the facts need: a student '
                                     'check measures the facts on its own JAX; needs solution_is_public)',
                   "all_scenarios": "true to run every scenario for every file (a full record; by default a file "
                                    "that passes every check in the primary scenario is graded from that run alone)"}
ASSIGNMENT_REQUIRED = ("solution", "max_submission_bytes", "contract", "seed_parameter")
GROUP_KEYS = ("points", "title")
CHECK_KEYS = ("id", "title", "group", "points", "visibility", "scenarios", "function", "needs", "failure_note", "method",
              "differs_by", "replay", "judged_in_replays")
CHECK_REQUIRED = ("id", "group", "points", "function")
REPORT_KEYS = ("figure",)
LMS_KEYS = ("canvas_assignment_id", "canvas_assignment_name", "otter", "allow_weak_isolation")


class ConfigError(Exception):
    """The assignment folder is inconsistent; raised at load time, before any student is graded.

    `problems` holds one line per problem, each naming the file, the key and the fix."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


def raise_problems(problems: list[str]) -> None:
    if problems:
        heading = "" if len(problems) == 1 else f"{len(problems)} problems in the assignment's configuration:\n"
        raise ConfigError(heading + "\n".join(problems), problems)


def binding_rule_problem(rule: object, contract: list[str]) -> str | None:
    """Why a [bindings] rule is not understood (None when it is)."""
    if not isinstance(rule, str):
        return "a rule is a string"
    if rule in BINDING_RULES:
        return None
    kind, _, other = rule.partition(" ")
    if kind == "as_of" and other in contract:
        return None
    return f"use one of {', '.join(repr(r) for r in BINDING_RULES)} or 'as_of <contract name>'"


def read_toml(path: Path, shown: str) -> dict[str, Any]:
    """The parsed TOML; a syntax error names the file and the line."""
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        text = str(error)
        place = re.search(r"\(at line (\d+), column (\d+)\)", text)
        what = re.sub(r"\s*\(at .*\)$", "", text)
        at = f"line {place.group(1)}, column {place.group(2)}: " if place else ""
        raise ConfigError(f"{shown}: {at}TOML syntax error ({what}); fix the syntax there "
                          "(strings in quotes, one key = value a line, [table] headers on their own line)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{shown}: cannot be read ({error}); make it a readable UTF-8 text file") from None


def config_problems(config: dict[str, Any], folder_name: str) -> list[str]:
    """Problems of assignment.toml read as data: tables, keys, types, and references between tables."""
    problems = [f"[{name}] is not a known table{_spelling(name, TABLES)}: the known tables are "
                f"{_names(f'[{t}]' for t in TABLES)}; fix its spelling or remove it" for name in config if name not in TABLES]
    problems += [f"[{name}] is missing: add the table (see assignments/*/assignment.toml of an existing lesson)"
                 for name in REQUIRED_TABLES if name not in config]
    for name in TABLES:
        if name in config and not isinstance(config[name], list if name == "checks" else dict):
            shape = "[[checks]] entries (an array of tables)" if name == "checks" else f"a table [{name}]"
            problems.append(f"{name} must be {shape}, not {type(config[name]).__name__}; rewrite it as one")
    if problems:
        return problems
    parameters, tolerances = config["parameters"], config.get("tolerances", {})
    contract, more = _assignment_problems(config["assignment"], parameters, folder_name)
    problems += more
    problems += [f"{name!r} is in both [parameters] and [tolerances]: checks read both through one `settings`, "
                 "so a name may be in only one; rename it or remove it from one table" for name in parameters if name in tolerances]
    problems += [f"[tolerances] {name} = {value!r}: a tolerance must be a number >= 0; set it to a number, "
                 "e.g. 1e-5" for name, value in tolerances.items() if not (is_number(value) and value >= 0)]
    problems += [f"[units] {name} = {unit!r}: a unit names a [parameters] or [tolerances] entry and is text (e.g. "
                 '"bytes"); fix the name or quote the unit' for name, unit in config.get("units", {}).items()
                 if not isinstance(unit, str) or (name not in parameters and name not in tolerances)]
    scenarios = config["scenarios"]
    problems += scenario_problems(scenarios)
    problems += fact_setup_problems(config["assignment"].get("fact_setup", []), scenarios)
    problems += _check_problems(config["checks"], config["groups"], scenarios, contract)
    problems += replay_problems(config.get("replays", {}), config["checks"], scenarios, contract)
    problems += _limit_problems(config.get("limits", {}))
    problems += _small_table_problems(config, contract)
    problems += similarity_problems(config)   # the instructor's similarity report (grader/config/similarity.py)
    problems += late_problems(config)         # the course's late policy (grader/config/late.py)
    return problems


def _assignment_problems(info: dict, parameters: dict, folder_name: str) -> tuple[list[str], list[str]]:
    problems = unknown_keys(info, ASSIGNMENT_KEYS, "[assignment]")
    problems += [f"[assignment] {key} is missing: add {key} = {ASSIGNMENT_KEYS[key]}"
                 for key in ASSIGNMENT_REQUIRED if key not in info]
    contract = info.get("contract", [])
    if not is_string_list(contract) or not contract:
        problems.append(f"[assignment] contract = {contract!r}: must be a non-empty list of names (strings); "
                        'write e.g. contract = ["x", "y"]')
        contract = []
    elif len(set(contract)) != len(contract):
        problems.append("[assignment] contract lists a name twice: list each name once")
    for key in ("id", "title", "solution", "submission_filename"):
        if key in info and not isinstance(info[key], str):
            problems.append(f"[assignment] {key} = {info[key]!r}: must be a string; put it in quotes")
    if "id" in info and info["id"] != folder_name:
        problems.append(f"[assignment] id = {info['id']!r}: the folder is assignments/{folder_name}; "
                        f"set id = {folder_name!r} or rename the folder")
    if not isinstance(info.get("solution_is_public", False), bool):
        problems.append(f"[assignment] solution_is_public = {info['solution_is_public']!r}: must be true or false")
    size = info.get("max_submission_bytes", 1)
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        problems.append(f"[assignment] max_submission_bytes = {size!r}: must be a whole number of bytes > 0; "
                        "set it to e.g. 1048576")
    facts = info.get("reference_facts", [])
    if not is_string_list(facts) or any(name not in contract for name in facts):
        problems.append(f"[assignment] reference_facts = {facts!r}: must list contract names; "
                        f"use names from [assignment] contract ({_names(contract)})")
    fact_exercises = info.get("fact_exercises", [])
    if not is_string_list(fact_exercises):
        problems.append(f"[assignment] fact_exercises = {fact_exercises!r}: must be a list of exercise names")
    elif fact_exercises and not info.get("solution_is_public", False):
        problems.append(f"[assignment] fact_exercises = {fact_exercises!r}: needs solution_is_public = true (a student "
                        "bundle ships these exercises' solution code, so the lesson page must print it); remove it "
                        "to ship the facts as measured on the course's JAX instead")
    seed = info.get("seed_parameter")
    if seed is not None and seed not in parameters:
        problems.append(f"[assignment] seed_parameter = {seed!r}: [parameters] has no {seed!r}; "
                        f"add {seed} = <the lesson's seed> to [parameters] or name one of {_names(parameters)}")
    elif seed is not None and not (isinstance(parameters[seed], int) and not isinstance(parameters[seed], bool)):
        problems.append(f"[parameters] {seed} = {parameters[seed]!r}: the seed parameter must be a whole number; "
                        "set it to the seed the lesson uses")
    return contract, problems


def _check_problems(checks: list, groups: dict, scenarios: dict, contract: list[str]) -> list[str]:
    problems: list[str] = []
    totals: dict[str, float] = {}
    seen: dict[str, int] = {}
    for number, check in enumerate(checks, 1):
        if not isinstance(check, dict):
            problems.append(f"[[checks]] entry {number} must be a table; write it as a [[checks]] block")
            continue
        where = f"[[checks]] {check['id']}" if isinstance(check.get("id"), str) else f"[[checks]] entry {number}"
        problems += unknown_keys(check, CHECK_KEYS, where)
        problems += [f"{where}: {key} is missing: add {key} = ..." for key in CHECK_REQUIRED if key not in check]
        if "failure_note" in check and not isinstance(check["failure_note"], str):
            problems.append(f"{where}: failure_note must be a string (a sentence added to the feedback when the check "
                            "does not pass)")
        differs_by = check.get("differs_by")
        named = {key for table in (scenarios.values() if isinstance(scenarios, dict) else []) if isinstance(table, dict)
                 for key in (table["hints"] if isinstance(table.get("hints"), dict) else {})}
        if differs_by is not None and differs_by not in named:
            problems.append(f"{where}: differs_by = {differs_by!r} names no scenario's hints (known: "
                            f"{', '.join(sorted(named)) or 'none'}); add it to [scenarios.<name>] hints or remove it")
        if "method" in check and not isinstance(check["method"], bool):
            problems.append(f"{where}: method must be true or false (true: the check judges how a value was computed)")
        if isinstance(check.get("id"), str):
            seen[check["id"]] = seen.get(check["id"], 0) + 1
        points = check.get("points", 0)
        if not is_number(points) or points < 0:
            problems.append(f"{where}: points = {points!r}: points must be a number >= 0; set it to this check's "
                            "share of its group's points, e.g. points = 2")
        group = check.get("group")
        if "group" in check and group not in groups:
            problems.append(f"{where}: group = {group!r}: no such group{_spelling(str(group), groups)}; "
                            f"use one of {_names(groups)} or add [groups] {group} = {{ points = ..., title = ... }}")
        elif isinstance(group, str) and is_number(points):
            totals[group] = totals.get(group, 0.0) + float(points)
        visibility = check.get("visibility", "visible")
        if visibility not in VISIBILITIES:
            problems.append(f"{where}: visibility = {visibility!r}: unknown visibility; use one of {_names(VISIBILITIES)}")
        listed = check.get("scenarios", ["baseline"])
        if not is_string_list(listed) or not listed:
            problems.append(f"{where}: scenarios = {listed!r}: must be a non-empty list of scenario names")
        else:
            problems += [f"{where}: scenarios lists {s!r}: no [scenarios.{s}]{_spelling(s, scenarios)}; use one of "
                         f"{_names(scenarios)} or define [scenarios.{s}]" for s in listed
                         if s not in scenarios and s != "baseline"]      # a missing baseline is reported once
        needs = check.get("needs", [])
        if not is_string_list(needs):
            problems.append(f"{where}: needs = {needs!r}: must be a list of contract names (or [\"*\"] for all)")
        elif needs != ["*"]:
            problems += [f"{where}: needs {n!r}, which is not in [assignment] contract; add it to the contract "
                         f"or fix the name{_spelling(n, contract)}" for n in needs if n not in contract]
        function = check.get("function")
        name = function[len(BUILTIN_PREFIX):] if isinstance(function, str) and function.startswith(BUILTIN_PREFIX) else function
        if "function" in check and not (isinstance(name, str) and name.isidentifier()):
            problems.append(f"{where}: function = {function!r}: must be the name of a function in checks.py "
                            f"(or {BUILTIN_PREFIX}<name> for one of the framework's)")
    problems += [f"[[checks]] id = {check_id!r} is used by {count} checks: each check needs its own id; rename one"
                 for check_id, count in seen.items() if count > 1]
    for group, info in groups.items():
        if not isinstance(info, dict) or not is_number(info.get("points")) or info["points"] < 0:
            problems.append(f"[groups] {group}: points must be a number >= 0; write {group} = {{ points = 10, title = \"...\" }}")
            continue
        problems += unknown_keys(info, GROUP_KEYS, f"[groups] {group}")
        total = totals.get(group, 0.0)
        if abs(total - float(info["points"])) > 1e-9:
            problems.append(f"[groups] {group}: points = {info['points']}, but its checks add up to {total:g}; "
                            "make the group's points the sum of its checks' points")
    return problems


MAY_BE_ZERO = {"cpu_wait_allowance_seconds"}   # 0 turns the allowance off


def _limit_problems(limits: dict) -> list[str]:
    known = {f.name: f.type for f in fields(Limits)}
    problems = unknown_keys(limits, known, "[limits]")
    for name, value in limits.items():
        whole = known.get(name) in (int, "int")
        zero_ok = name in MAY_BE_ZERO
        too_small = is_number(value) and (value < 0 if zero_ok else value <= 0)
        if name in known and (not is_number(value) or too_small or (whole and not isinstance(value, int))):
            kind = ("a whole number" if whole else "a number") + (" >= 0" if zero_ok else " > 0")
            problems.append(f"[limits] {name} = {value!r}: must be {kind}; write it without quotes, "
                            f"e.g. {name} = {getattr(Limits(), name)}")
    soft, wall = limits.get("soft_seconds", Limits.soft_seconds), limits.get("wall_seconds", Limits.wall_seconds)
    if is_number(soft) and is_number(wall) and soft > wall:
        problems.append(f"[limits] soft_seconds = {soft} is above wall_seconds = {wall}: the soft limit must come "
                        "first; lower soft_seconds or raise wall_seconds")
    return problems


def _small_table_problems(config: dict, contract: list[str]) -> list[str]:
    evidence, bindings = config.get("evidence", {}), config.get("bindings", {})
    report, lms = config.get("report", {}), config.get("lms", {})
    problems = unknown_keys(evidence, EVIDENCE_BOUNDS, "[evidence]")
    problems += [f"[evidence] {key} = {value!r}: must be a whole number >= 0; write e.g. {key} = 64"
                 for key, value in evidence.items() if key in EVIDENCE_BOUNDS
                 and (not isinstance(value, int) or isinstance(value, bool) or value < 0)]
    for name, rule in bindings.items():
        if name not in contract:
            problems.append(f"[bindings] {name}: not in [assignment] contract; add it there or remove this line")
        problem = binding_rule_problem(rule, contract)
        if problem:
            problems.append(f"[bindings] {name} = {rule!r}: {problem}")
    for name, region in config.get("exercise_bindings", {}).items():
        if name not in contract:
            problems.append(f"[exercise_bindings] {name}: not in [assignment] contract; add it there or remove this line")
        if not isinstance(region, str) or not region:
            problems.append(f"[exercise_bindings] {name} = {region!r}: name the exercise region (the <name> of "
                            "`# BEGIN EXERCISE <name>` in the solution)")
    problems += unknown_keys(report, REPORT_KEYS, "[report]")
    if "figure" in report and report["figure"] not in contract:
        problems.append(f"[report] figure = {report['figure']!r}: not in [assignment] contract; name a contract name")
    problems += unknown_keys(lms, LMS_KEYS, "[lms]")
    if not isinstance(lms.get("otter", {}), dict):
        problems.append("[lms] otter must be a table [lms.otter] of otter options")
    if not isinstance(lms.get("allow_weak_isolation", False), bool):
        problems.append("[lms] allow_weak_isolation: true or false (grade on an LMS host without namespaces)")
    return problems


# ---- the lesson's Python files ----------------------------------------------------------------------

def _accepts(function: Any, *args: Any) -> bool:
    try:
        inspect.signature(function).bind(*args)
    except (TypeError, ValueError):
        return False
    return True


def module_problems(config: dict[str, Any], folder: Path, shown: Path, oracle: types.ModuleType,
                    checks: types.ModuleType) -> list[str]:
    """Problems between assignment.toml and the lesson's Python files: every function it names exists and
    takes what the framework passes."""
    toml = shown / "assignment.toml"
    problems = []
    build = getattr(oracle, "build", None)
    if not callable(build):
        found = [n for n, v in vars(oracle).items() if inspect.isfunction(v) and v.__module__ == oracle.__name__]
        problems.append(f"{shown / 'oracle.py'}: no function build: the framework calls build(seed, facts, scenario) "
                        f"to make each scenario's oracle; define it{_spelling('build', found)}")
    elif not (_accepts(build, 0, {}, None) or _accepts(build, 0, {})):
        problems.append(f"{shown / 'oracle.py'}: build{inspect.signature(build)} cannot be called as "
                        "build(seed, facts, scenario); give it those three parameters")
    defined = {n for n, v in vars(checks).items() if callable(v) and not n.startswith("_")}
    for check in config["checks"]:
        function = check_function(checks, check["function"])
        if function is None and check["function"].startswith(BUILTIN_PREFIX):
            problems.append(f"{toml}: [[checks]] {check['id']}: function = {check['function']!r}: the framework has no "
                            f"such builtin check; use one of {', '.join(BUILTIN_PREFIX + n for n in builtin_names())}")
        elif function is None:
            problems.append(f"{toml}: [[checks]] {check['id']}: function = {check['function']!r}: checks.py has no such "
                            f"function{_spelling(check['function'], defined)}; define def {check['function']}(run, oracle, "
                            f"settings) in {shown / 'checks.py'} or name an existing one")
        elif not _accepts(function, None, None, None):
            problems.append(f"{shown / 'checks.py'}: {check['function']}{inspect.signature(function)} (check "
                            f"{check['id']}) cannot be called as {check['function']}(run, oracle, settings); give it those parameters")
    problems += setup_problems(config, folder, shown, derived_parameters(config, oracle, problems))
    problems += probe_problems(config, folder, shown)
    problems += evidence_problems(config, folder, shown)
    return problems
