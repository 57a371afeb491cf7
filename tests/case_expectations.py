"""Shared by the corpus and threat suites: where each assignment's cases live, and how a graded record is
compared with a case's `<case>.expected.toml`.

Cases are per assignment: `tests/assignments/<id>/corpus/` and `tests/assignments/<id>/threats/`, the id being
the folder's name. The assignment itself is the project's `assignments/<id>/`, or a test project's under
`tests/fixtures/*/assignments/<id>/` (the tiny second lesson).

    status = "graded"            # or "error"
    why = "one line: what this case represents"
    [groups]                     # expected score of every group of the assignment
    [checks]                     # optional: exact expected score of individual check ids
                                 # a score may be a list [a, b] (any one of them) only in a case whose `varies`
                                 # says why: a mistake whose value some worlds tell apart and others cannot (the
                                 # suite grades in a world drawn per session); an honest case never varies
    varies = "sentence"          # optional, top level: why the listed scores depend on the world drawn
    [contains]                   # optional: fragments that must appear (case-insensitive); a fragment given as a
                                 # list is met by any one of its entries, only in a case whose `varies` says why
    feedback = [...]             # in the concatenated feedback of all checks
    messages = [...]             # in the concatenated submission-level messages
    output = [...]               # in the kept head and tail of the baseline run's output
    flagged = true               # optional, top level: the record is (true) or is not (false) flagged for the
                                 # instructor's review (`review_flags`: the file reaches into JAX's internals or
                                 # introspects frames and closures)
    lms = true                   # optional, top level (threats): also graded through `otter run` and Gradescope's
                                 # entry point (tests/test_threats_lms.py), where every run is a fresh interpreter
    [on_jax."0.12"]              # optional: from this JAX release on, the file's own statements behave otherwise
    why = "sentence"             # (what it does there, and where that was seen); its `groups` and `checks`
    groups = { runs = 2 }        # replace those above when the grader runs on that JAX or a later one (never a
    checks = { "runs.no_errors" = 0 }   # list of alternatives, which would also pass the other JAX)
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from grader.common.jax_range import release
from grader.model.record import held_checks

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CASES = TESTS / "assignments"
EXPECTED = ".expected.toml"
KEYS = {"status", "why", "submission", "groups", "checks", "contains", "lms", "flagged", "held", "varies", "on_jax"}


def case_folders(kind: str) -> dict[str, Path]:
    """Assignment id -> its `tests/assignments/<id>/<kind>/` folder (kind: "corpus" or "threats")."""
    return {folder.parent.name: folder for folder in sorted(CASES.glob(f"*/{kind}")) if folder.is_dir()}


def case_names(folder: Path) -> list[str]:
    return sorted(p.name[: -len(EXPECTED)] for p in folder.glob("*" + EXPECTED))


def project_root(assignment_id: str) -> Path:
    """The project root holding `assignments/<assignment_id>/`: this project's, else a test project's."""
    candidates = [ROOT, *sorted(p.parent for p in (TESTS / "fixtures").glob("*/assignments"))]
    for root in candidates:
        if (root / "assignments" / assignment_id / "assignment.toml").is_file():
            return root
    raise LookupError(f"tests/assignments/{assignment_id}/ has cases but no assignment {assignment_id!r} exists "
                      f"under {ROOT / 'assignments'} or tests/fixtures/*/assignments")


def summary(record: dict) -> str:
    lines = [f"{record['submission']} ({record['file']}): {record['status']} {record['score']:g}/{record['max_score']:g}"]
    lines += [f"  {g}: {v['score']:g}/{v['max_score']:g}" for g, v in record["groups"].items()]
    for check in record["checks"]:
        if check["score"] < check["max_score"]:
            feedback = check["feedback"].replace("\n", " | ")[:300]
            lines.append(f"  - {check['id']} {check['score']:g}/{check['max_score']:g}: {feedback}")
    lines += [f"  message: {m[:300]}" for m in record["messages"]]
    return "\n".join(lines)


def shape_problems(case: str, expected: dict, groups: list[str], check_ids: set[str]) -> list[str]:
    """Mistakes in the expectation file itself."""
    problems = []
    if not (isinstance(expected.get("why"), str) and expected["why"].strip()):
        problems.append(f"{case}: say in `why` what the case is")
    if set(expected.get("groups", {})) != set(groups):
        problems.append(f"{case}: [groups] must list every group {groups}; it lists {sorted(expected.get('groups', {}))}")
    unknown = set(expected.get("checks", {})) - check_ids
    if unknown:
        problems.append(f"{case}: unknown check ids {sorted(unknown)}")
    unknown = set(expected.get("held", [])) - check_ids
    if unknown:
        problems.append(f"{case}: held lists unknown check ids {sorted(unknown)}")
    unknown = set(expected.get("contains", {})) - {"feedback", "messages", "output"}
    if unknown:
        problems.append(f"{case}: [contains] knows feedback, messages and output, not {sorted(unknown)}")
    listed = [key for table in ("groups", "checks") for key, score in expected.get(table, {}).items()
              if isinstance(score, list)]
    listed += [f"contains.{where}" for where, fragments in expected.get("contains", {}).items()
               if any(isinstance(fragment, list) for fragment in fragments)]
    if listed and not (isinstance(expected.get("varies"), str) and expected["varies"].strip()):
        problems.append(f"{case}: {listed} list several outcomes; say in `varies` why they depend on the world")
    unknown = set(expected) - KEYS
    if unknown:
        problems.append(f"{case}: unknown keys {sorted(unknown)} (known: {sorted(KEYS)})")
    for key, table in expected.get("on_jax", {}).items():
        where = f'{case}: [on_jax."{key}"]'
        if not (isinstance(table, dict) and isinstance(table.get("why"), str) and table["why"].strip()):
            problems.append(f"{where} must say in `why` what the file does on that JAX")
            continue
        if ".".join(map(str, release(key))) != key:
            problems.append(f"{where}: not a JAX release")
        if set(table) - {"why", "groups", "checks"}:
            problems.append(f"{where} knows why, groups and checks, not {sorted(set(table) - {'why', 'groups', 'checks'})}")
        if set(table.get("groups", {})) - set(groups) or set(table.get("checks", {})) - check_ids:
            problems.append(f"{where} names unknown groups or checks")
    return problems


def for_jax(expected: dict, version: str | None = None) -> dict:
    """The expectation as it holds where the grader runs JAX `version` (default: the installed one): each
    `[on_jax."X.Y"]` table of that release or an earlier one, oldest first, replaces the scores it names."""
    installed = release(version or metadata.version("jax"))
    merged = {**expected, "groups": dict(expected.get("groups", {})), "checks": dict(expected.get("checks", {}))}
    for key in sorted(expected.get("on_jax", {}), key=release):
        if release(key) <= installed:
            merged["groups"].update(expected["on_jax"][key].get("groups", {}))
            merged["checks"].update(expected["on_jax"][key].get("checks", {}))
    return merged


def _one_of(actual: float, expected: float | list[float]) -> bool:
    return any(actual == pytest.approx(score, abs=1e-6) for score in (expected if isinstance(expected, list) else [expected]))


def _shown(expected: float | list[float]) -> str:
    return " or ".join(f"{score:g}" for score in (expected if isinstance(expected, list) else [expected]))


def record_problems(record: dict, expected: dict) -> list[str]:
    """Where the grader's record differs from the expectation (empty when it matches), on the installed JAX."""
    expected = for_jax(expected)
    problems = []
    if record["status"] != expected["status"]:
        problems.append(f"status is {record['status']!r}, expected {expected['status']!r}")
    for group, score in expected["groups"].items():
        actual = record["groups"][group]["score"]
        if not _one_of(actual, score):
            problems.append(f"group {group}: {actual:g}, expected {_shown(score)}")
    checks = {check["id"]: check for check in record["checks"]}
    for check_id, score in expected.get("checks", {}).items():
        actual = checks[check_id]["score"]
        if not _one_of(actual, score):
            problems.append(f"check {check_id}: {actual:g}, expected {_shown(score)}")
    if any(isinstance(s, list) for s in [*expected["groups"].values(), *expected.get("checks", {}).values()]):
        # the alternatives go together: a world that refuses the check docks its group by exactly its points
        lost = {g: v["max_score"] - v["score"] for g, v in record["groups"].items()}
        docked = {c["id"]: c["max_score"] - c["score"] for c in record["checks"]}
        for check_id, score in expected.get("checks", {}).items():
            group = check_id.split(".", 1)[0]
            if isinstance(score, list) and lost.get(group, 0) != pytest.approx(docked[check_id], abs=1e-6):
                problems.append(f"group {group} lost {lost.get(group, 0):g}, not the {docked[check_id]:g} {check_id} lost")
    output = record.get("output") or {}
    texts = {"feedback": "\n".join(check["feedback"] for check in record["checks"]).lower(),
             "messages": "\n".join(record["messages"]).lower(),
             "output": (output.get("head", "") + "\n" + output.get("tail", "")).lower()}
    if "held" in expected and set(held_checks(record)) != set(expected["held"]):   # held for the instructor's review
        problems.append(f"held checks are {sorted(held_checks(record))}, expected {sorted(expected['held'])}")
    if "flagged" in expected and bool(record.get("review_flags")) != expected["flagged"]:
        problems.append(f"review_flags is {record.get('review_flags')!r}, expected {'some' if expected['flagged'] else 'none'}")
    for where, fragments in expected.get("contains", {}).items():
        for fragment in fragments:
            choices = fragment if isinstance(fragment, list) else [fragment]
            if not any(choice.lower() in texts.get(where, "") for choice in choices):
                problems.append(f"{where} lacks {' or '.join(repr(choice) for choice in choices)}")
    return problems
