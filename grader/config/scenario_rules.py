"""The rules of [scenarios.<name>] (the worlds a file runs in, one of them primary), [replays.<name>] (a run's end run
again with one value replaced) and the reference facts' set-up."""

from __future__ import annotations

import re

from grader.config.table_rules import is_string_list, named_tables

SCENARIO_KEYS = ("description", "setup", "fresh_seed", "failure_hint", "hints", "primary")
_MODULE_ATTRIBUTE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
REPLAY_KEYS = ("replace", "patch", "probe", "capture", "scenarios", "description", "rerun", "seconds")


def fact_setup_problems(fact_setup: object, scenarios: dict) -> list[str]:
    baseline = scenarios.get("baseline") if isinstance(scenarios, dict) else None
    setup = baseline.get("setup", []) if isinstance(baseline, dict) else []
    if isinstance(fact_setup, list) and is_string_list(fact_setup) and all(name in setup for name in fact_setup):
        return []
    return [f"[assignment] fact_setup = {fact_setup!r}: must list set-up functions of [scenarios.baseline] setup (those "
            "that change the programs the reference facts describe, never one whose effect the oracle applies itself)"]


def scenario_problems(scenarios: dict) -> list[str]:
    problems = [] if "baseline" in scenarios else [
        "[scenarios.baseline] is missing: add it (the file as written), e.g. [scenarios.baseline] with description = \"your file as written\""]
    for scenario, where in named_tables(scenarios, "scenarios", SCENARIO_KEYS, "with description and setup keys",
                                         problems):
        if not is_string_list(scenario.get("setup", [])):
            problems.append(f"{where} setup = {scenario['setup']!r}: must be a list of function names of "
                            'scenario_setup.py; write e.g. setup = ["replace_lesson_seed"]')
        if not isinstance(scenario.get("fresh_seed", False), bool):
            problems.append(f"{where} fresh_seed = {scenario['fresh_seed']!r}: must be true or false (no quotes)")
        for key in ("description", "failure_hint"):
            if not isinstance(scenario.get(key, ""), str):
                problems.append(f"{where} {key} = {scenario[key]!r}: must be a string; put it in quotes")
        if isinstance(scenario.get("failure_hint"), str) and "{seed}" in scenario["failure_hint"]:
            problems.append(f"{where} failure_hint names {{seed}}: the hint is shown to students as written, and the "
                            "seed of a graded run is never shown to them; describe what differs instead")
        hints = scenario.get("hints", {})
        if not isinstance(hints, dict) or not all(isinstance(v, str) for v in hints.values()):
            problems.append(f"{where} hints = {hints!r}: must be a table of sentences, one per difference between the "
                            'worlds, e.g. hints = { seed = "... whose seed differs ..." }')
        elif any("{seed}" in text for text in hints.values()):
            problems.append(f"{where} hints names {{seed}}: the hints are shown to students as written, and the seed "
                            "of a graded run is never shown to them; describe what differs instead")
    return problems


def replay_problems(replays: object, checks: list, scenarios: dict, contract: list[str]) -> list[str]:
    """[replays.<name>] tables and the checks naming them: contract names, known scenarios, one primary scenario."""
    if not isinstance(replays, dict):
        return ["[replays] must be a table of [replays.<name>] tables"]
    problems: list[str] = []
    if isinstance(scenarios, dict):
        primary = [n for n, s in scenarios.items() if isinstance(s, dict) and s.get("primary") is not None]
        problems += [f"[scenarios.{n}] primary = {scenarios[n]['primary']!r}: must be true or false (no quotes)"
                     for n in primary if not isinstance(scenarios[n]["primary"], bool)]
        if len([n for n in primary if scenarios[n]["primary"] is True]) > 1:
            problems.append(f"[scenarios] primary is true in {', '.join(primary)}: at most one scenario is primary")
    for replay, where in named_tables(replays, "replays", REPLAY_KEYS, "with replace, probe, capture and scenarios",
                                       problems):
        problems += [f"{where}: {key} is missing" for key in ("replace", "probe", "capture", "scenarios") if key not in replay]
        replaced, patched = replay.get("replace"), replay.get("patch", [])
        if not is_string_list(patched) or not all(_MODULE_ATTRIBUTE.fullmatch(p) for p in patched):
            problems.append(f"{where}: patch must be a list of module attributes such as \"numpy.tanh\"")
        elif not (isinstance(replaced, str) or (is_string_list(replaced) and (replaced or patched))):
            problems.append(f"{where}: replace must be a contract name or a non-empty list of them (empty only with "
                            "patch)")
        elif patched and not replaced and replay.get("rerun", "end") != "slice":
            problems.append(f"{where}: a replay that replaces no name (patch alone) must rerun = \"slice\": without a "
                            "replaced name's last binding there is no end to run again")
        listed = [replaced] if isinstance(replaced, str) else replaced if isinstance(replaced, list) else []
        captured = replay.get("capture", [])
        names = [*listed, *(captured if isinstance(captured, list) else [])]
        seconds = replay.get("seconds", 1)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= 60:
            problems.append(f"{where}: seconds = {seconds!r}: a number of seconds above 0, at most 60")
        if replay.get("rerun", "end") not in ("end", "slice"):
            problems.append(f"{where}: rerun = {replay.get('rerun')!r}: \"end\" or \"slice\"")
        problems += [f"{where}: {n!r} is not in [assignment] contract" for n in names if isinstance(n, str) and n not in contract]
        if not is_string_list(replay.get("capture", [])) or not is_string_list(replay.get("scenarios", [])):
            problems.append(f"{where}: capture and scenarios must be lists of names")
        elif isinstance(scenarios, dict):
            problems += [f"{where}: scenarios lists {s!r}: no [scenarios.{s}]" for s in replay["scenarios"] if s not in scenarios]
        if not isinstance(replay.get("probe", ""), str) or not str(replay.get("probe", "")).startswith("_"):
            problems.append(f"{where}: probe must name a function of probes.py whose name starts with _ (it is called "
                            "only by the replay, never after each statement)")
    for check in checks:
        if isinstance(check, dict) and "replay" in check and check["replay"] not in replays:
            problems.append(f"[[checks]] {check.get('id')}: replay = {check['replay']!r}: no [replays.{check['replay']}]")
        named = check.get("judged_in_replays", []) if isinstance(check, dict) else []
        if not is_string_list(named):
            problems.append(f"[[checks]] {check.get('id')}: judged_in_replays must be a list of [replays] names")
            continue
        for name in named:
            if name not in replays:
                problems.append(f"[[checks]] {check.get('id')}: judged_in_replays lists {name!r}: no [replays.{name}]")
            elif isinstance(replays[name], dict) and isinstance(check.get("scenarios"), list) and \
                    not set(check["scenarios"]) & set(replays[name].get("scenarios", [])):
                problems.append(f"[[checks]] {check.get('id')}: judged_in_replays lists {name!r}, which runs in none of "
                                "its scenarios")
    return problems
