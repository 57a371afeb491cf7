"""The `[similarity]` table of assignment.toml: what the instructor's similarity report compares, and how.

Everything lesson-specific the report needs comes from here: which contract names are exercise values and
which checks judge each one (a value is "right" when every check judging it scored full marks), which of them
are free choices (a step size, a direction: a rare one is telling even when right), and which files every
student was given or steered to (boilerplate, excluded from code similarity). Without the table the defaults
below apply: every name a check reads, judged by the checks that read it; the built starters and the
reference solution as boilerplate; the report built by `grader grade`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KEYS = ("enabled", "threshold", "boilerplate", "values", "choices", "kgram", "window", "substantial_tokens",
        "common_fraction", "common_min", "top")


@dataclass(frozen=True)
class SimilaritySettings:
    enabled: bool = True                 # `grader grade` builds the report (else only `grader similar OUT`)
    threshold: float = 0.6               # a pair scoring this or more is flagged
    boilerplate: tuple[str, ...] = ()    # files relative to the project root (empty: the defaults, see below)
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)   # exercise value -> the checks judging it
    choices: tuple[str, ...] = ()        # values a student chooses freely: a rare choice counts even when right
    kgram: int = 10                      # tokens in a fingerprinted k-gram (shorter shared runs are noise)
    window: int = 4                      # winnowing window: any shared run of kgram + window - 1 tokens is found
    substantial_tokens: int = 40         # shared own tokens for a full code score (less: scaled down)
    common_fraction: float = 0.05        # code or a value found in more than this share of submissions is common
    common_min: int = 5                  # ... and in more than this many (a small class has no reliable shares)
    top: int = 50                        # pairs listed in the report and the CSV


def similarity_settings(config: dict[str, Any], assignment_id: str, solution: str) -> SimilaritySettings:
    """The table read into settings, defaults filled in (the table is validated first, at load)."""
    table = dict(config.get("similarity", {}))
    values = table.get("values")
    if values is None:
        values = _default_values(config)
    boilerplate = table.get("boilerplate")
    if boilerplate is None:
        boilerplate = [f"student_templates/{assignment_id}.py", f"student_templates/{assignment_id}.ipynb", solution]
    return SimilaritySettings(
        enabled=bool(table.get("enabled", True)), threshold=float(table.get("threshold", 0.6)),
        boilerplate=tuple(boilerplate), values={name: tuple(checks) for name, checks in values.items()},
        choices=tuple(table.get("choices", ())), kgram=int(table.get("kgram", 10)), window=int(table.get("window", 4)),
        substantial_tokens=int(table.get("substantial_tokens", 40)),
        common_fraction=float(table.get("common_fraction", 0.05)), common_min=int(table.get("common_min", 5)),
        top=int(table.get("top", 50)))


def _default_values(config: dict[str, Any]) -> dict[str, list[str]]:
    """Every contract name a check names in `needs`, judged by those checks (`needs = ["*"]` judges nothing)."""
    values: dict[str, list[str]] = {}
    for check in config.get("checks", []):
        for name in check.get("needs", []):
            if name != "*":
                values.setdefault(name, []).append(check["id"])
    return values


def similarity_problems(config: dict[str, Any]) -> list[str]:
    """Problems of the [similarity] table, each naming the key and the fix."""
    table = config.get("similarity", {})
    where = "[similarity]"
    problems = [f"{where}: unknown key {key!r}: the allowed keys are {', '.join(KEYS)}; fix its spelling or remove it"
                for key in table if key not in KEYS]
    contract = config.get("assignment", {}).get("contract", [])
    check_ids = {c.get("id") for c in config.get("checks", []) if isinstance(c, dict)}
    if not isinstance(table.get("enabled", True), bool):
        problems.append(f"{where} enabled = {table['enabled']!r}: write true or false")
    threshold = table.get("threshold", 0.6)
    if not _number(threshold) or not 0 < threshold <= 1:
        problems.append(f"{where} threshold = {threshold!r}: a score between 0 (excluded) and 1, e.g. 0.6")
    for key in ("boilerplate", "choices"):
        if not _strings(table.get(key, [])):
            problems.append(f"{where} {key}: must be a list of strings")
    values = table.get("values", {})
    if not isinstance(values, dict):
        problems.append(f"{where} values: must be a table [similarity.values] of name = [check ids]")
        values = {}
    for name, checks in values.items():
        if name not in contract:
            problems.append(f"{where} values: {name!r} is not in [assignment] contract; name a contract name")
        if not _strings(checks) or not checks:
            problems.append(f"{where} values {name} = {checks!r}: list the ids of the checks that judge it")
        else:
            problems += [f"{where} values {name}: no check has id {check!r}; use an id from [[checks]]"
                         for check in checks if check not in check_ids]
    for name in table.get("choices", []) if _strings(table.get("choices", [])) else []:
        if name not in contract:
            problems.append(f"{where} choices: {name!r} is not in [assignment] contract; name a contract name")
    for key, low in (("kgram", 2), ("window", 1), ("substantial_tokens", 1), ("common_min", 2), ("top", 1)):
        value = table.get(key, low)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            problems.append(f"{where} {key} = {value!r}: must be a whole number >= {low}")
    fraction = table.get("common_fraction", 0.05)
    if not _number(fraction) or not 0 < fraction <= 1:
        problems.append(f"{where} common_fraction = {fraction!r}: a share between 0 (excluded) and 1, e.g. 0.05")
    return problems


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
