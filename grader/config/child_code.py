"""The lesson's code that runs inside the sandbox (scenario_setup.py, probes.py), checked against what the framework
calls it with: each scenario's set-up function accepts the keywords it gets ([parameters], `seed`, `batch_seed` and
what `oracle.scenario_parameters` adds), and each probe's parameters are contract names. Read as source (these files
run only in the child)."""

from __future__ import annotations

import ast
import types
from pathlib import Path

from grader.common.python_ast import ast_parse
from grader.config.wording import names, spelling


def functions(source: str) -> dict[str, ast.FunctionDef]:
    tree = ast_parse(source)
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}



def child_functions(folder: Path, shown: Path, name: str, problems: list[str]) -> dict[str, ast.FunctionDef] | None:
    path = folder / name
    if not path.is_file():
        return None
    try:
        return functions(path.read_text())
    except SyntaxError as error:
        problems.append(f"{shown / name}: line {error.lineno}: syntax error ({error.msg}); fix it")
        return {}


def derived_parameters(config: dict, oracle: types.ModuleType, problems: list[str]) -> set[str]:
    """The names `oracle.scenario_parameters` (optional) adds to each scenario's set-up keywords, learnt by calling
    it for the lesson's seed."""
    derive = getattr(oracle, "scenario_parameters", None)
    if derive is None:
        return set()
    settings = types.SimpleNamespace(**config.get("parameters", {}), **config.get("tolerances", {}))
    seed = config.get("parameters", {}).get(config.get("assignment", {}).get("seed_parameter", ""), 1)
    names: set[str] = set()
    for scenario in config.get("scenarios", {}):
        try:
            derived = derive(scenario, seed, 1, settings)
        except Exception as error:
            problems.append(f"oracle.scenario_parameters({scenario!r}, ...) raised {type(error).__name__}: {error}")
            continue
        if not isinstance(derived, dict):
            problems.append(f"oracle.scenario_parameters({scenario!r}, ...) must return a dict of keyword arguments")
            continue
        names |= set(derived)
    return names


def setup_problems(config: dict, folder: Path, shown: Path, derived: set[str] | None = None) -> list[str]:
    """Each scenario's set-up function exists in scenario_setup.py and accepts the keywords it is called with
    (every [parameters] entry, `seed`, `batch_seed` and what oracle.scenario_parameters adds)."""
    problems: list[str] = []
    functions = child_functions(folder, shown, "scenario_setup.py", problems)
    passed = {*config["parameters"], "seed", "batch_seed", *(derived or ())}
    for scenario, table in config["scenarios"].items():
        for name in table.get("setup", []):
            if functions is None or name not in functions:
                where = "there is no scenario_setup.py" if functions is None else "scenario_setup.py has no such function"
                problems.append(f"{shown / 'assignment.toml'}: [scenarios.{scenario}] setup lists {name!r}: {where}"
                                f"{spelling(name, functions or {})}; define def {name}(seed, **_) in "
                                f"{shown / 'scenario_setup.py'} or remove it from setup")
                continue
            args = functions[name].args
            wanted = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
            optional = len(args.defaults) + sum(d is not None for d in args.kw_defaults)
            required = wanted[:len(wanted) - optional] if optional else wanted
            unknown = [a for a in required if a not in passed]
            if unknown:
                problems.append(f"{shown / 'scenario_setup.py'}: {name}() needs {names(unknown)}, which is not passed: "
                                f"set-up functions get the [parameters] entries and seed as keywords; add "
                                f"{unknown[0]} to [parameters] or give it a default")
            elif args.kwarg is None and args.posonlyargs:
                problems.append(f"{shown / 'scenario_setup.py'}: {name}() has positional-only parameters: "
                                "set-up functions are called with keywords; remove the `/`")
            elif args.kwarg is None:
                problems.append(f"{shown / 'scenario_setup.py'}: {name}() does not accept **kwargs: it is called with "
                                "every [parameters] entry and seed as keywords; add **_ to its parameters")
    return problems


def probe_problems(config: dict, folder: Path, shown: Path) -> list[str]:
    """A probe's parameters are contract names: the harness calls it with those values from the student's file."""
    problems: list[str] = []
    functions = child_functions(folder, shown, "probes.py", problems) or {}
    contract = config["assignment"].get("contract", [])
    for name, node in functions.items():
        if name.startswith("_"):
            continue
        args = node.args
        params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        problems += [f"{shown / 'probes.py'}: probe {name}() has parameter {p!r}, which is not in [assignment] "
                     f"contract: a probe's parameters are contract names{spelling(p, contract)}; add {p!r} to the "
                     "contract or rename the parameter" for p in params if p not in contract]
        if args.vararg or args.kwarg:
            problems.append(f"{shown / 'probes.py'}: probe {name}() takes *args or **kwargs: name each contract value it reads")
    return problems
