"""Build the similarity report of a batch: load what was kept, compare code and values, rank pairs, group clusters.

Scores are between 0 and 1. The code score and the value score (`value_match.value_score`) combine as
independent signs do: 1 - (1 - code) * (1 - values), so either alone can reach the threshold (a near copy;
telling values shared in two exercises) and a weaker sign of each adds up. Work grows with the pairs that share
something (an index of fingerprints and of values), and each document is tokenised once: linear in N for a
class whose members mostly do not share code, quadratic only in the size of groups that do.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.config.assignment import Assignment
from grader.config.similarity import SimilaritySettings, similarity_settings
from grader.intake.discovery import Submission
from grader.runs.snapshot import Snapshot
from grader.similarity.code_match import Boilerplate, CodeMatch, match, prepare, regions, shared_pairs
from grader.similarity.documents import Document
from grader.similarity.store import boilerplate_chunks, load_earlier, load_results, write_sidecar
from grader.similarity.value_match import (
    SharedValue,
    compared_run,
    exercise_values,
    shared_values,
    value_names,
    value_score,
)

CAUTION = ("Similarity is a reason to look, not a verdict. Students who follow the same lesson write alike, and two "
           "honest students can make the same mistake; decide only after reading both submissions side by side and "
           "hearing the students. Nothing here changes a grade, and students never see it.")


@dataclass
class Side:
    id: str
    file: str
    term: str          # "" for this batch, else the earlier term's label


@dataclass
class PairResult:
    a: Side
    b: Side
    score: float
    code: CodeMatch
    values: list[SharedValue]
    value_score: float
    flagged: bool


@dataclass
class Cluster:
    members: list[str]
    top_score: float
    values: list[SharedValue]       # telling values every member shares


@dataclass
class SimilarityReport:
    threshold: float
    documents: int
    earlier: int
    pairs: list[PairResult] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)
    flagged: int = 0
    compared_pairs: int = 0
    notes: list[str] = field(default_factory=list)
    boilerplate: list[str] = field(default_factory=list)
    seconds: float = 0.0
    caution: str = CAUTION


@dataclass
class SimilarityOptions:
    """What the instructor asked for on the command line (None: the assignment's [similarity] setting)."""
    enabled: bool | None = None
    threshold: float | None = None
    earlier: list[Path] = field(default_factory=list)


def settings_for(assignment: Assignment) -> SimilaritySettings:
    return similarity_settings(assignment.config, assignment.id, assignment.config["assignment"]["solution"])


def run_keeper(out: Path, submission: Submission, assignment: Assignment) -> Callable[[dict[str, Snapshot]], None]:
    """What the batch hands to `grade`: keep this submission's code and the compared run's exercise values (sidecar)."""
    names = value_names(settings_for(assignment))

    def keep(snapshots: dict[str, Snapshot]) -> None:
        # (the sidecar keeps the code's units: tokenised now, beside the other runs, not after the last)
        write_sidecar(out, submission, exercise_values(compared_run(assignment, snapshots), names, assignment.bindings))
    return keep


def safe_similarity(out: Path, assignment: Assignment, options: SimilarityOptions) -> SimilarityReport:
    """The report, or one that says why it could not be built (a bug here never stops a batch or costs a grade)."""
    try:
        return similarity_for(out, assignment, options.earlier, options.threshold)
    except Exception as error:
        report = SimilarityReport(options.threshold or 0.0, 0, 0)
        report.notes.append(f"The similarity report could not be built ({type(error).__name__}: {str(error)[:300]}); "
                            "grades and feedback are not affected. Run `grader similar OUT` after fixing it.")
        return report


def similarity_for(out: Path, assignment: Assignment, earlier: list[Path] | None = None,
                   threshold: float | None = None) -> SimilarityReport:
    """The report of the results folder `out` (its records and OUT/similarity/), against earlier terms too."""
    started = time.monotonic()
    settings = settings_for(assignment)
    loaded = load_results(out)
    previous, notes = [], list(loaded.notes)
    for folder in earlier or []:
        if Path(folder).resolve() == Path(out).resolve():   # the CLI refuses it; never let it pair the class with itself
            notes.append(f"earlier term {folder} is this class's own results folder: left out.")
            continue
        more = load_earlier(folder, assignment.submission_filename, assignment.max_submission_bytes)
        previous += more.documents
        notes += more.notes
    chunks, missing = boilerplate_chunks(assignment.root, settings.boilerplate)
    exercise_of = {name: _exercise(assignment, checks) for name, checks in settings.values.items()}
    exercise_of.update({name: exercise_of.get(name, name) for name in settings.choices})
    report = build_report(loaded.documents, previous, Boilerplate(chunks, settings.kgram), settings,
                          exercise_of, "\n".join(c.source for c in chunks),
                          settings.threshold if threshold is None else threshold)
    report.notes = notes + missing + report.notes
    report.boilerplate = list(settings.boilerplate)
    report.seconds = time.monotonic() - started
    return report


def _exercise(assignment: Assignment, checks: tuple[str, ...]) -> str:
    groups = {spec.id: spec.group for spec in assignment.checks}
    return next((groups[c] for c in checks if c in groups), checks[0] if checks else "")


def common_limit(settings: SimilaritySettings, documents: int) -> int:
    return max(settings.common_min, math.ceil(settings.common_fraction * documents))


def build_report(current: list[Document], earlier: list[Document], boilerplate: Boilerplate,
                 settings: SimilaritySettings, exercise_of: dict[str, str], given_text: str,
                 threshold: float) -> SimilarityReport:
    """Earlier terms add pairs (each of this class's submissions against each earlier one) and never change a
    pair within the class: what counts as an idiom there is decided by this class alone."""
    documents = current + earlier
    inside = common_limit(settings, len(current))
    limit = common_limit(settings, len(documents))
    prepared = prepare(documents, boilerplate, settings)   # idioms: the given code only, never a count of holders
    code_pairs = shared_pairs(prepared, len(current), limit, settings.substantial_tokens)
    value_pairs = shared_values(documents, len(current), settings, limit, exercise_of, given_text, inside)
    scored = []
    for key in set(code_pairs) | set(value_pairs):
        a, b = key
        shared = code_pairs.get(key, [])
        code = match(prepared[a], prepared[b], shared, settings) if shared else CodeMatch(0.0, 0.0, 0, 0.0)
        values = value_pairs.get(key, [])
        from_values = value_score(values)
        score = round(1 - (1 - code.score) * (1 - from_values), 4)
        if score > 0:
            scored.append((score, a, b, code, values, from_values))
    scored.sort(key=lambda item: (-item[0], documents[item[1]].label, documents[item[2]].label))
    flagged = sum(1 for item in scored if item[0] >= threshold)
    report = SimilarityReport(threshold, len(current), len(earlier), flagged=flagged, compared_pairs=len(scored))
    for score, a, b, code, values, from_values in scored[:max(settings.top, flagged)]:
        if code_pairs.get((a, b)):
            code.regions = regions(prepared[a], prepared[b], documents[a].chunks, documents[b].chunks, code_pairs[(a, b)])
        report.pairs.append(PairResult(_side(documents[a]), _side(documents[b]), score, code, values, from_values,
                                       score >= threshold))
    report.clusters = clusters(report.pairs) + value_clusters(value_pairs, documents, scored)
    if not current:
        report.notes.append("No submission with stored code was found: nothing was compared.")
    return report


def _side(document: Document) -> Side:
    return Side(document.id, document.file, document.term)


def clusters(pairs: list[PairResult]) -> list[Cluster]:
    """Groups of three or more submissions joined by flagged pairs, largest first."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    flagged = [pair for pair in pairs if pair.flagged]
    for pair in flagged:
        parent[root(_label(pair.a))] = root(_label(pair.b))
    groups: dict[str, list[str]] = {}
    for name in list(parent):
        groups.setdefault(root(name), []).append(name)
    found = []
    for members in groups.values():
        if len(members) < 3:
            continue
        inside = [p for p in flagged if _label(p.a) in members and _label(p.b) in members]
        common = set.intersection(*[{(v.shown, v.exercise) for v in p.values} for p in inside]) if inside else set()
        values = [v for v in inside[0].values if (v.shown, v.exercise) in common] if inside else []
        found.append(Cluster(sorted(members), max(p.score for p in inside), values))
    return sorted(found, key=lambda c: (-len(c.members), -c.top_score, c.members))


def value_clusters(value_pairs: dict[tuple[int, int], list[SharedValue]], documents: list[Document],
                   scored: list) -> list[Cluster]:
    """Three or more submissions holding the same telling value (a shared wrong number, an odd choice)."""
    holders: dict[tuple[str, str], set[int]] = {}
    first: dict[tuple[str, str], SharedValue] = {}
    for (a, b), values in value_pairs.items():
        for value in values:
            key = (value.shown, value.exercise)
            holders.setdefault(key, set()).update((a, b))
            first.setdefault(key, value)
    best = {(a, b): score for score, a, b, *_ in scored}
    found = []
    for key, members in holders.items():
        if len(members) >= 3:
            top = max((best.get((a, b), 0.0) for a in members for b in members if a < b), default=0.0)
            found.append(Cluster(sorted(documents[m].label for m in members), top, [first[key]]))
    return sorted(found, key=lambda c: (-len(c.members), -c.top_score, c.members))


def _label(side: Side) -> str:
    return f"{side.term}/{side.id}" if side.term else side.id
