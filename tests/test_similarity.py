"""The instructor's similarity report: planted copies found, independent honest files not flagged, shared wrong or
unusual values found, right answers and honest coincidences never counted, nothing shown to students.

The batch is data (tests/assignments/performance-05/similarity.toml): every honest corpus case, planted copies of
some of them (renamed, reordered, reformatted, notebook <-> script), and files that share odd values while their
code differs. The fast tests compare code with records made here (no grading); the slow one grades a third of the
honest files with the planted and value files for real, so the values are the runs' own, and then looks at every
student-facing output for a leak.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from similarity_planting import disguise, edit
from test_reports import _screenshot

import grader.config.assignment
from grader.cli.main import main
from grader.config.similarity import similarity_problems
from grader.grading.engine import CheckResult
from grader.grading.grade import assemble
from grader.grading.record_limits import RECORD_BYTES
from grader.intake.discovery import decode_source, discover
from grader.intake.notebook import joined_source, notebook_cells
from grader.model.record import Record
from grader.outputs.writers import write_result
from grader.similarity.code_match import Boilerplate
from grader.similarity.documents import Chunk, Document
from grader.similarity.fingerprints import fingerprints, winnow
from grader.similarity.report import build_report, settings_for, similarity_for
from grader.similarity.store import boilerplate_chunks, write_sidecar
from grader.similarity.tokens import units_of
from grader.similarity.value_match import natural

TESTS = Path(__file__).resolve().parent
CASES = TESTS / "assignments" / "performance-05"
CORPUS = CASES / "corpus"
PLAN = tomllib.loads((CASES / "similarity.toml").read_text())


@pytest.fixture(scope="module")
def assignment():
    return grader.config.assignment.load("performance-05")


def honest_cases() -> dict[str, Path]:
    """Corpus cases written as honest, independent solutions (their `why` says so), as file or folder."""
    found = {}
    for expected in sorted(CORPUS.glob("*.expected.toml")):
        name = expected.name.removesuffix(".expected.toml")
        if name.startswith(("n26_", "e35_", "e39_", "e40_", "dir55_", "hvp55_", "notebook55_", "resid55_", "panel55_",
                            "preimport55_", "secrets55_", "blind67_")):   # written in one sitting, each from the solution: not independent
            continue
        if tomllib.loads(expected.read_text()).get("why", "").startswith("honest"):
            entry = next(p for p in [CORPUS / f"{name}.py", CORPUS / f"{name}.ipynb", CORPUS / name] if p.exists())
            found[name] = entry
    return found


def _script(entry: Path) -> str:
    text = decode_source(entry.read_bytes()) or ""     # as the grader reads it (a PEP 263 coding line honoured)
    return joined_source(notebook_cells(text)[0]) if entry.suffix == ".ipynb" else text


def ring_members() -> list[list[str]]:
    """The submissions of each [[rings]] entry, as build_batch names them."""
    return [[f"ring_{entry['source']}_{n}" for n in range(1, len(entry["disguises"]) + 1)] for entry in PLAN["rings"]]


def build_batch(folder: Path, contract: list[str], every: int = 1) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Write the batch; returns the planted pairs (copy, source; and every pair of a ring) and the value files'
    sources. `every`: of the honest cases that no planted, ring or value file is made from, every `every`-th (in
    name order) is written."""
    honest = honest_cases()
    value_sources = {entry["name"]: entry["source"] for entry in PLAN["values"]}
    ring_sources = {entry["source"] for entry in PLAN["rings"]}
    used = set(value_sources.values()) | {entry["source"] for entry in PLAN["planted"]} | ring_sources
    others = sorted(set(honest) - used)
    for name, entry in honest.items():
        if name in value_sources.values() or name in ring_sources:
            continue                           # a [[values]] file or a ring stands in for its source
        if name not in used and others.index(name) % every:
            continue
        target = folder / entry.name
        shutil.copytree(entry, target) if entry.is_dir() else shutil.copy(entry, target)
    planted = []
    for number, entry in enumerate(PLAN["planted"]):
        text, suffix = disguise(_script(honest[entry["source"]]), entry["disguise"], tuple(contract), salt=str(number))
        name = f"planted_{entry['source']}"
        (folder / f"{name}{suffix}").write_text(text)
        planted.append((name, entry["source"]))
    for entry, members in zip(PLAN["rings"], ring_members()):
        for number, (ways, name) in enumerate(zip(entry["disguises"], members)):
            text, suffix = disguise(_script(honest[entry["source"]]), ways, tuple(contract), salt=f"ring{number}")
            (folder / f"{name}{suffix}").write_text(text)
        planted += [(a, b) for i, a in enumerate(members) for b in members[i + 1:]]
    for entry in PLAN["values"]:
        text = _script(honest[entry["source"]])
        for old, new in entry.get("replace", {}).items():
            assert old in text, f"{entry['name']}: {old!r} is not in {entry['source']}"
            text = text.replace(old, new)
        if "append" in entry:
            text += "\n" + entry["append"] + "\n"
        (folder / f"{entry['name']}.py").write_text(text)
    return planted, value_sources


def full_marks_results(assignment, batch: Path, out: Path) -> list:
    """Records and sidecars as a batch would write them, without running anything: every check at full marks."""
    records = []
    for submission in discover(batch, assignment.submission_filename, assignment.max_submission_bytes):
        checks = [CheckResult(s.id, s.group, s.points, s.points, s.visibility, "ok") for s in assignment.checks]
        record = assemble(assignment, submission, "graded", checks, [], 1)
        write_result(out, record)
        write_sidecar(out, submission, None)
        records.append(record)
    return records


@pytest.fixture(scope="module")
def code_batch(assignment, tmp_path_factory):
    root = tmp_path_factory.mktemp("similarity")
    batch, out = root / "submissions", root / "results"
    batch.mkdir()
    planted, _ = build_batch(batch, assignment.contract)
    full_marks_results(assignment, batch, out)
    return {"batch": batch, "out": out, "planted": planted, "report": similarity_for(out, assignment)}


@pytest.fixture(scope="module")
def third_batch(assignment, tmp_path_factory):
    """The planted, ring and value files beside a third of the other honest files (about fifty submissions, where
    5 % of the class is less than six; the slow test grades a sixth of them for real)."""
    root = tmp_path_factory.mktemp("similarity-third")
    batch, out = root / "submissions", root / "results"
    batch.mkdir()
    planted, _ = build_batch(batch, assignment.contract, every=3)
    full_marks_results(assignment, batch, out)
    return {"batch": batch, "out": out, "planted": planted, "report": similarity_for(out, assignment)}


def _key(pair) -> frozenset:
    return frozenset((pair.a.id, pair.b.id))


# ---- code similarity ------------------------------------------------------------------------------------

def test_every_planted_copy_is_flagged_and_ranks_above_every_honest_pair(code_batch):
    report = code_batch["report"]
    planted = {frozenset(pair) for pair in code_batch["planted"]}
    ranks = {_key(pair): rank for rank, pair in enumerate(report.pairs)}
    missing = [sorted(p) for p in planted if p not in ranks]
    assert not missing, f"planted pairs not listed: {missing}"
    scores = {_key(pair): pair.score for pair in report.pairs}
    weakest = min(scores[p] for p in planted)
    assert weakest >= report.threshold, {tuple(sorted(p)): scores[p] for p in planted}
    honest = [(sorted(_key(pair)), pair.score) for pair in report.pairs if _key(pair) not in planted]
    assert all(score < weakest for _, score in honest), f"honest pairs at or above a planted one: {honest[:5]}"
    flagged_honest = [(names, score) for names, score in honest if score >= report.threshold]
    assert not flagged_honest, f"independent honest pairs flagged: {flagged_honest}"
    assert report.flagged == len(planted)


@pytest.mark.parametrize("which", ["code_batch", "third_batch"])
def test_a_ring_sharing_its_own_code_is_one_cluster_whatever_its_size(which, request):
    """Six students with the same own code: not an idiom of the class (however few the others), every pair flagged
    and the six one cluster."""
    report = request.getfixturevalue(which)["report"]
    assert report.documents < 6 / 0.05 if which == "third_batch" else True   # six is above 5 % of this class
    flagged = {_key(pair) for pair in report.pairs if pair.flagged}
    clusters = [sorted(cluster.members) for cluster in report.clusters]
    for members in ring_members():
        pairs = {frozenset((a, b)) for i, a in enumerate(members) for b in members[i + 1:]}
        assert pairs <= flagged, f"ring pairs not flagged: {sorted(sorted(p) for p in pairs - flagged)}"
        assert sorted(members) in clusters, f"no cluster {members}: {clusters}"


def test_a_flagged_pair_shows_its_matching_code_side_by_side(code_batch):
    report = code_batch["report"]
    pair = next(p for p in report.pairs if _key(p) == frozenset(("planted_dir_class_checker", "dir_class_checker")))
    assert pair.code.regions, "no matching regions"
    texts = "\n".join(r.a_text + r.b_text for r in pair.code.regions)
    assert "def finite(self)" in texts and "self.step" in texts
    assert all(r.a_lines[0] <= r.a_lines[1] and r.b_lines[0] <= r.b_lines[1] for r in pair.code.regions)


@pytest.mark.parametrize("ways", [["rename"], ["reformat"], ["rename", "reformat"], ["notebook"]])
def test_disguises_do_not_change_the_normalised_statements(ways, assignment):
    source = (CORPUS / "dir_class_checker.py").read_text()
    text, suffix = disguise(source, ways, tuple(assignment.contract))
    chunks = [c.source for c in notebook_cells(text)[0]] if suffix == ".ipynb" else [text]
    disguised = sorted(u.tokens for chunk in chunks for u in units_of(chunk))
    assert disguised == sorted(u.tokens for u in units_of(source))


def test_reordering_helpers_does_not_change_the_fingerprints():
    source = (CORPUS / "restructured.py").read_text()
    reordered, _ = disguise(source, ["reorder"])
    prints = [set(fingerprints(units_of(text), 10, 4).hashes.tolist()) for text in (source, reordered)]
    assert prints[0] == prints[1]


def test_winnowing_keeps_a_fingerprint_in_every_window_and_finds_every_long_shared_run():
    rng = np.random.default_rng(0)
    hashes = rng.integers(0, 2**63, size=500, dtype=np.uint64)
    kept = winnow(hashes, 4)
    assert all(np.any((kept >= start) & (kept < start + 4)) for start in range(len(hashes) - 3))
    assert len(kept) < 0.6 * len(hashes)
    shared = [f"t{i}" for i in rng.integers(0, 50, size=13)]     # k + w - 1 = 13 tokens in common
    a = [f"a{i}" for i in range(40)] + shared + [f"a{i}" for i in range(40, 80)]
    b = [f"b{i}" for i in range(25)] + shared + [f"b{i}" for i in range(25, 60)]
    prints = []
    for tokens in (a, b):
        found = fingerprints(units_of(" ".join(tokens)), 10, 4)
        prints.append({int(found.hashes[p]) for p in found.kept})
    assert prints[0] & prints[1]


@pytest.mark.parametrize("source", [
    "x = 1\0\n", "def f(:\n    return 1\n" * 200, "(" * 5000 + ")" * 5000, 'x = "unclosed\n' * 100,
    "# BEGIN EXERCISE x\n" * 50000, "\n".join(f"v{i} = {i}" for i in range(60000)), "\udcff\x00\x01 binary",
])
def test_hostile_code_is_tokenised_within_bounds(source):
    started = time.process_time()     # CPU, not wall: a loaded CI machine must not fail it
    units = units_of(source)
    assert sum(len(u.tokens) for u in units) <= 40000
    assert time.process_time() - started < 5


# ---- value similarity -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    (1e-3, True), (float(np.float32(1e-3)), True), (1e-4, True), (2**-10, True),
    (float(np.finfo(np.float32).eps) ** (1 / 3), True), (7, True), ([1.0] * 16, True),
    (np.linspace(-1, 1, 16).astype(np.float32).astype(float).tolist(), True), (list(range(16)), True),
    (0.0037, False), (3.14159, False), (4.2217931, False), ([0.3, -1.2, 0.7, 0.05], False), ({"temp": 2368}, False),
    ("Compiler memory estimate", True), ("my own panel title", False),
])
def test_values_honest_students_pick_alike_are_natural(value, expected):
    assert natural(value, "panels.append({'title':'Compiler memory estimate'})") is expected


def _doc(name: str, values: dict, failed: tuple[str, ...] = ()) -> Document:
    judged = frozenset(c for checks in VALUES.values() for c in checks)
    return Document(name, f"{name}.py", [Chunk(None, f"print({name!r})\n")], values, frozenset(failed), judged)


VALUES = {"eps": ("directional.eps_sensible",), "finite": ("directional.central_difference",),
          "direction": ("hvp.direction_nonuniform",), "hvp_plain": ("hvp.plain_matches_oracle",)}
EXERCISE = {"eps": "directional", "finite": "directional", "direction": "hvp", "hvp_plain": "hvp"}


def _value_report(assignment, documents):
    settings = replace(settings_for(assignment), values=VALUES, choices=("eps", "direction"))
    boilerplate = Boilerplate([], settings.kgram)
    return build_report(documents, [], boilerplate, settings, EXERCISE, "", settings.threshold)


def test_shared_wrong_values_in_two_exercises_are_flagged_and_right_answers_never_count(assignment):
    right = {"eps": 1e-3, "finite": 0.43210987, "direction": [0.1, 0.9, -0.3], "hvp_plain": [1.23456, 2.34567]}
    honest = [_doc(f"honest{i}", dict(right)) for i in range(8)]           # everyone right: nothing counts
    odd = {"eps": 0.0037, "finite": 0.51234567, "direction": [0.3, -1.2, 0.7], "hvp_plain": [9.87654, 8.76543]}
    copied = [_doc("copier_a", dict(odd), ("directional.central_difference", "hvp.plain_matches_oracle")),
              _doc("copier_b", dict(odd), ("directional.central_difference", "hvp.plain_matches_oracle"))]
    report = _value_report(assignment, honest + copied)
    flagged = [p for p in report.pairs if p.flagged]
    assert [_key(p) for p in flagged] == [frozenset(("copier_a", "copier_b"))]
    assert {v.exercise for v in flagged[0].values} == {"directional", "hvp"}
    assert {v.reason for v in flagged[0].values} == {"wrong", "unusual choice"}
    assert not [p for p in report.pairs if "honest" in p.a.id + p.b.id]


def test_honest_coincidences_do_not_count(assignment):
    """The lesson's eps and direction, round numbers, and a wrong value half the class shares."""
    common_wrong = {"finite": 0.61728394}                        # e.g. the same forward difference, everyone's
    documents = [_doc(f"s{i}", {"eps": 1e-4, "direction": [1.0] * 16, **common_wrong},
                      ("directional.central_difference", "hvp.direction_nonuniform")) for i in range(12)]
    report = _value_report(assignment, documents)
    assert not report.pairs, [(p.a.id, p.b.id, p.values) for p in report.pairs]


def test_three_holders_of_one_wrong_value_are_a_cluster_but_not_flagged(assignment):
    typed = [_doc(f"typed{i}", {"finite": 4.2217931}, ("directional.central_difference",)) for i in range(3)]
    others = [_doc(f"other{i}", {"finite": 0.1 + i / 7}, ("directional.central_difference",)) for i in range(6)]
    report = _value_report(assignment, typed + others)
    assert not report.flagged
    assert [c.members for c in report.clusters] == [["typed0", "typed1", "typed2"]]


# ---- options, CLI, report, CSV --------------------------------------------------------------------------

def test_bad_similarity_tables_are_reported_with_the_fix(assignment):
    config = dict(assignment.config)
    config["similarity"] = {"treshold": 0.5, "threshold": 2, "values": {"nope": ["no.such.check"]}, "choices": ["zz"]}
    problems = "\n".join(similarity_problems(config))
    for fragment in ("unknown key 'treshold'", "threshold = 2", "'nope' is not in [assignment] contract",
                     "no check has id 'no.such.check'", "choices: 'zz'"):
        assert fragment in problems


def test_grader_similar_builds_the_report_without_regrading(code_batch, tmp_path, capsys):
    out = tmp_path / "results"
    shutil.copytree(code_batch["out"], out)
    records = {p.name: p.read_bytes() for p in out.glob("*.json")}
    assert main(["similar", str(out), "--threshold", "0.6"]) == 0
    assert {p.name: p.read_bytes() for p in out.glob("*.json")} == records, "a record changed"
    rows = list(csv.DictReader(io.StringIO((out / "similarity.csv").read_text())))
    assert rows[0]["kind"] == "note" and "not a verdict" in rows[0]["a"]
    flagged = {frozenset((r["a"], r["b"])) for r in rows if r["kind"] == "pair" and r["flagged"] == "yes"}
    assert flagged == {frozenset(p) for p in code_batch["planted"]}
    page = (out / "report.html").read_text()
    assert 'id="similarity"' in page and "reason to look, not a verdict" in page and "side-by-side" in page
    assert "not a verdict" in capsys.readouterr().out


def test_an_earlier_terms_submissions_are_an_extra_comparison_set(code_batch, tmp_path):
    earlier = tmp_path / "fall-2025"
    earlier.mkdir()
    text, _ = disguise((CORPUS / "dir_class_checker.py").read_text(), ["rename"], salt="earlier")
    (earlier / "alumnus.py").write_text(text)
    out = tmp_path / "results"
    shutil.copytree(code_batch["out"], out)
    assert main(["similar", str(out), "--earlier", str(earlier)]) == 0
    rows = list(csv.DictReader(io.StringIO((out / "similarity.csv").read_text())))
    assert any(r["flagged"] == "yes" and "alumnus (earlier term fall-2025)" in (r["a"], r["b"]) for r in rows)
    assert not any("earlier term" in r["a"] and "earlier term" in r["b"] for r in rows)


def test_similar_refuses_a_folder_without_records(tmp_path, capsys):
    assert main(["similar", str(tmp_path)]) == 2
    assert "no grading records" in capsys.readouterr().err


def test_the_similarity_section_renders_in_headless_chromium(code_batch, tmp_path):
    out = tmp_path / "results"
    shutil.copytree(code_batch["out"], out)
    assert main(["similar", str(out)]) == 0
    page = out / "report.html"
    section = page.read_text()
    start = section.index('<h2 id="similarity">')
    alone = tmp_path / "section.html"     # the section at the top, so the screenshot shows it
    alone.write_text(section[:section.index("<h1>")] + section[start:section.index("<h2>All submissions</h2>")]
                     + "</body></html>")
    pixels = _screenshot(alone, tmp_path / "shot.png", tmp_path / "profile")
    assert pixels.std() > 0.1 and (pixels < 0.3).mean() > 0.005 and (pixels > 0.9).mean() > 0.3


# ---- a real graded batch --------------------------------------------------------------------------------

@pytest.mark.slow
def test_graded_batch_finds_planted_code_and_values_and_shows_students_nothing(assignment, tmp_path):
    batch, out = tmp_path / "submissions", tmp_path / "results"
    batch.mkdir()
    # Graded for real: the planted and value files with their sources and a sixth of the other honest files (each
    # costs two sandboxed runs; every honest pair's code is compared without grading above).
    planted, _ = build_batch(batch, assignment.contract, every=6)
    assert main(["grade", str(batch), "--out", str(out), "--variant-seed", "7"]) in (0, 1)
    rows = list(csv.DictReader(io.StringIO((out / "similarity.csv").read_text())))
    flagged = {frozenset((r["a"], r["b"])) for r in rows if r["kind"] == "pair" and r["flagged"] == "yes"}
    wanted = {frozenset(p) for p in planted} | {frozenset(p) for p in PLAN["expected"]["pairs"]}
    assert flagged == wanted, f"missing: {wanted - flagged}; unexpected: {flagged - wanted}"
    clusters = [sorted(r["a"].split()) for r in rows if r["kind"] == "cluster"]
    for cluster in PLAN["expected"]["clusters"] + ring_members():
        assert sorted(cluster) in clusters
    values = json.loads((out / "similarity" / "odd_choices_a.json").read_text())["values"]
    assert values["eps"] == pytest.approx(0.0037)
    # Nothing of it reaches a student: feedback, Gradescope results, grade CSVs, records.
    student_facing = [*out.glob("*.feedback.md"), *out.glob("*.feedback.html"), *(out / "gradescope").glob("*.json"),
                      out / "grades.csv", out / "final_grades.csv", out / "canvas.csv"]
    for path in student_facing:
        text = path.read_text().lower()
        assert "similar" not in text and "not a verdict" not in text, path.name
    partners: dict[str, set[str]] = {}
    for row in rows:
        if row["kind"] == "pair":
            partners.setdefault(row["a"], set()).add(row["b"])
            partners.setdefault(row["b"], set()).add(row["a"])
    for student, others in partners.items():
        for page in (out / f"{student}.feedback.md", out / f"{student}.feedback.html", out / "gradescope" / f"{student}.json"):
            text = page.read_text()
            named = [other for other in others if re.search(rf"(?<!\w){re.escape(other)}(?!\w)", text)]
            assert not named, f"{page.name} names {named}"
    for path in out.glob("*.json"):
        record = json.loads(path.read_text())
        assert set(record) <= set(Record.__annotations__), f"{path.name}: {set(record) - set(Record.__annotations__)}"


def _own_code(tag: str) -> str:
    """Statements no other tag shares (attribute names are kept by the normalisation, chosen names are not)."""
    return "".join(f"v{n} = x.alpha{tag}{n}(x.beta{tag}{n}, x.gamma{tag}{n}).delta{tag}{n}(x.eps{tag}{n}) "
                   f"+ x.zeta{tag}{n}(x.eta{tag}{n}, x.theta{tag}{n})\n" for n in range(4))


def test_code_the_whole_class_shares_is_no_idiom_and_is_not_expanded_into_every_pair(assignment):
    """Eighty students share one helper beside code of their own; six more hand in the same code. The helper is
    not dropped as an idiom (only given code is), yet its 3,000-odd pairs are never enumerated; the six are
    flagged pair by pair and reported as one cluster."""
    common = "def shared(a, b):\n    return np.linalg.norm(a - b) / np.sqrt(a.size) + np.abs(a).max()\n"
    documents = [Document(f"s{i}", f"s{i}.py", [Chunk(None, common + _own_code(str(i)))]) for i in range(80)]
    documents += [Document(f"ring{i}", f"ring{i}.py", [Chunk(None, common + _own_code("ring"))]) for i in range(6)]
    settings = settings_for(assignment)
    report = build_report(documents, [], Boilerplate([], settings.kgram), settings, EXERCISE, "", settings.threshold)
    ring = {f"ring{i}" for i in range(6)}
    assert sorted(ring) in [sorted(c.members) for c in report.clusters]
    assert {_key(p) for p in report.pairs if p.flagged} == {frozenset((a, b)) for a in ring for b in ring if a < b}
    assert report.compared_pairs < 200, f"{report.compared_pairs} pairs compared: the shared helper was expanded"


RING_SOURCE = "hvp_helper_jvp_of_grad"


def edited_ring(contract: tuple[str, ...], size: int = 8) -> list[Document]:
    """`size` copies of one honest file, each renamed and edited its own way (operands swapped, independent
    statements swapped, `pass` padding, comments; every other one with its helpers moved too)."""
    source = _script(honest_cases()[RING_SOURCE])
    ring = []
    for number in range(size):
        text, _ = disguise(source, ["rename"] + (["reorder"] if number % 2 else []), contract, salt=f"edit{number}")
        ring.append(_code_doc(f"edited_{number}", edit(text, seed=number)))
    return ring


@pytest.fixture(scope="module")
def edited_ring_report(assignment):
    """The edited ring of eight in a class of every independent honest file (records built here: no grading)."""
    settings = settings_for(assignment)
    honest = [_code_doc(name, _script(entry)) for name, entry in honest_cases().items()
              if name != RING_SOURCE and entry.is_file()]
    chunks, _ = boilerplate_chunks(assignment.root, settings.boilerplate)
    documents = honest + edited_ring(tuple(assignment.contract))
    report = build_report(documents, [], Boilerplate(chunks, settings.kgram), settings, EXERCISE,
                          "\n".join(c.source for c in chunks), settings.threshold)
    return report, {d.id for d in honest}


def test_an_edited_ring_of_eight_is_one_cluster_with_every_member(edited_ring_report):
    """Renamed, reordered, operands swapped, padded with `pass`: every pair of the eight flagged, one cluster."""
    report, _ = edited_ring_report
    ring = {f"edited_{n}" for n in range(8)}
    scores = sorted(p.score for p in report.pairs if {p.a.id, p.b.id} <= ring)
    flagged = [p for p in report.pairs if p.flagged and {p.a.id, p.b.id} <= ring]
    assert len(flagged) == 28, f"{len(flagged)} of 28 ring pairs flagged; scores {scores}"
    assert sorted(ring) in [sorted(c.members) for c in report.clusters], report.clusters


def test_independent_honest_files_beside_an_edited_ring_are_not_flagged(edited_ring_report):
    report, honest = edited_ring_report
    pairs = [(p.a.id, p.b.id, p.score) for p in report.pairs if p.a.id in honest and p.b.id in honest]
    assert len(honest) > 40
    assert not [pair for pair in pairs if pair[2] >= report.threshold], pairs[:5]


def test_edits_that_keep_the_program_keep_its_normalised_statements():
    source = "import numpy as np\ndef f(a, b):\n    x = a + 2 * b\n    y = np.sum(b)\n    return x == y\n"
    edited = ("import numpy as np\ndef f(a, b):\n    pass\n    y = np.sum(b)\n    \"a note\"\n    1\n"
              "    x = b * 2 + a  # swapped\n    x = x\n    return y == x\n")
    assert [u.tokens for u in units_of(edited)] == [u.tokens for u in units_of(source)]
    given = "panels.append({'kind': 'bar', 'series': [{'label': 'a', 'y': flags}]})\nempty = {}\n"
    restyled = "panels.append(dict(kind='bar', series=[dict(label='a', y=flags)]))\nempty = dict()\n"
    assert [u.tokens for u in units_of(restyled)] == [u.tokens for u in units_of(given)]
    for kept, not_the_same in (("merged = dict(base, kind='bar')\n", "merged = {'kind': 'bar'}\n"),
                               ("merged = dict(**base)\n", "merged = {}\n"), ("pairs = dict([('a', 1)])\n", "pairs = {}\n")):
        assert [u.tokens for u in units_of(kept)] != [u.tokens for u in units_of(not_the_same)]
    dependent = "def f(a):\n    a.append(1)\n    n = len(a)\n    return n\n"
    swapped = "def f(a):\n    n = len(a)\n    a.append(1)\n    return n\n"
    assert [u.tokens for u in units_of(dependent)] != [u.tokens for u in units_of(swapped)]


# ---- earlier terms --------------------------------------------------------------------------------------

def _within_class(report) -> dict:
    return {_key(p): p.score for p in report.pairs if not p.a.term and not p.b.term}


def _code_doc(name: str, body: str, term: str = "") -> Document:
    return Document(name, f"{name}.py", [Chunk(None, body)], None, frozenset(), frozenset(), term)


SHARED_CODE = "\n".join(f"def helper_{i}(values, scale):\n    total = sum(v * scale ** {i} for v in values if v > {i})\n"
                        f"    return [total / (k + {i}) for k in range(len(values))]\n" for i in range(6))


def test_earlier_terms_change_no_pair_within_the_class(assignment):
    """Code and values an earlier term holds many times are still this class's own to compare: a pair within the
    class scores the same with and without earlier terms (earlier terms only add pairs of their own)."""
    settings = replace(settings_for(assignment), values=VALUES, choices=("eps", "direction"))
    boilerplate = Boilerplate([], settings.kgram)
    odd = {"eps": 0.0037, "finite": 0.51234567}
    wrong = ("directional.central_difference",)
    current = [_doc("copier_a", dict(odd), wrong), _doc("copier_b", dict(odd), wrong),
               _code_doc("coder_a", SHARED_CODE), _code_doc("coder_b", SHARED_CODE.replace("total", "acc"))]
    current += [_doc(f"honest{i}", {"eps": 1e-3, "finite": 0.1 + i / 7}) for i in range(4)]
    earlier = [replace(_doc(f"old{i}", dict(odd), wrong), term="fall") for i in range(10)]
    earlier += [_code_doc(f"oldcode{i}", SHARED_CODE, term="fall") for i in range(10)]
    alone = build_report(current, [], boilerplate, settings, EXERCISE, "", settings.threshold)
    both = build_report(current, earlier, boilerplate, settings, EXERCISE, "", settings.threshold)
    assert frozenset(("copier_a", "copier_b")) in _within_class(alone)
    assert frozenset(("coder_a", "coder_b")) in _within_class(alone)
    assert _within_class(both) == _within_class(alone)
    assert (both.documents, both.earlier) == (len(current), len(earlier))


def test_the_class_own_folders_are_refused_as_an_earlier_term(tmp_path, capsys):
    submissions, out = tmp_path / "submissions", tmp_path / "results"
    submissions.mkdir()
    out.mkdir()
    (out / ".grader-results").write_text(json.dumps({"submissions": str(submissions), "assignment": "performance-05"}))
    for folder in (out, submissions):
        assert main(["similar", str(out), "--earlier", str(folder)]) == 2
        assert "not an earlier term" in capsys.readouterr().err
    assert main(["grade", str(submissions), "--out", str(out), "--earlier", str(submissions)]) == 2
    assert "this class's own submissions folder" in capsys.readouterr().err


def test_the_summary_line_counts_the_class_and_earlier_terms_apart():
    from grader.cli.similar import compared
    assert compared(5, 4) == "5 submissions of this class compared with 4 from earlier terms"
    assert compared(1, 0) == "1 submission of this class compared"


def test_padding_a_copy_with_a_long_comment_or_blank_lines_does_not_hide_it(assignment):
    """Issue 56: two copies of one student's code, each behind a 100,000-character comment header (or 200,000 blank
    lines), are flagged as the same pair without the padding is, with the same score: comments and blank lines are
    neither read as code nor counted against the characters of code read."""
    settings = settings_for(assignment)
    header = "# " + "padding " * 12_500 + "\n"
    documents = [_code_doc("plain_a", SHARED_CODE), _code_doc("plain_b", SHARED_CODE.replace("total", "acc")),
                 _code_doc("header_a", header + SHARED_CODE), _code_doc("header_b", header + SHARED_CODE.replace("total", "acc")),
                 _code_doc("blank_a", "\n" * 200_000 + SHARED_CODE), _code_doc("blank_b", "\n" * 200_000 + SHARED_CODE.replace("total", "acc"))]
    documents += [_code_doc(f"honest{i}", _own_code(str(i))) for i in range(6)]
    report = build_report(documents, [], Boilerplate([], settings.kgram), settings, EXERCISE, "", settings.threshold)
    scores = {_key(p): (p.flagged, round(p.score, 6)) for p in report.pairs}
    plain = scores[frozenset(("plain_a", "plain_b"))]
    assert plain[0], scores
    assert scores[frozenset(("header_a", "header_b"))] == plain
    assert scores[frozenset(("blank_a", "blank_b"))] == plain


def test_a_sidecar_stays_under_the_records_size_guard(tmp_path):
    """Issue 56: a run may bind an exercise name to megabytes; the sidecar keeps the values that fit the record's
    guard and leaves the rest out (never compared), so what the similarity stage reads per student is bounded."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "big.py").write_text("x = 1\n")
    submission = discover(folder, "performance-05.py", 1 << 20)[0]
    huge = {"finite": 0.125, "hvp_plain": [float(i) for i in range(2_000_000)], "eps": 0.001,
            **{f"extra{i}": [float(i)] * 8000 for i in range(40)}}
    write_sidecar(tmp_path / "out", submission, huge)
    stored = json.loads(next((tmp_path / "out" / "similarity").glob("*.json")).read_text())
    assert stored["values"]["finite"] == 0.125 and stored["values"]["eps"] == 0.001
    assert "hvp_plain" not in stored["values"]
    assert len(json.dumps(stored["values"])) <= RECORD_BYTES


def test_a_megabyte_notebook_costs_the_report_seconds_not_minutes(assignment):
    """Issue 56: a notebook of many cells (1 MiB of distinct code) is read up to the per-document token cap, and its
    preparation is one pass per document, not one per fingerprint. Before, one 640 KB document took 34 CPU-s (and a
    1 MiB one about 45 minutes); the bound here is generous for a slow machine."""
    def cell(i):
        return "".join(f"value_{i}_{n} = helper_{i}(x.alpha{i}_{n}(x, {n}), beta_{i} * {n}) + gamma_{i}[{n}] ** 2\n"
                       for n in range(40))
    chunks, total = [], 0
    while total < 1 << 20:
        chunks.append(Chunk(len(chunks), cell(len(chunks))))
        total += len(chunks[-1].source)
    documents = [Document("big", "big.ipynb", chunks)]
    documents += [Document(f"s{k}", f"s{k}.py", [Chunk(None, cell(10**6 + k))]) for k in range(5)]
    settings = settings_for(assignment)
    started = time.process_time()
    report = build_report(documents, [], Boilerplate([], settings.kgram), settings, EXERCISE, "", settings.threshold)
    assert time.process_time() - started < 6.0
    assert report.documents == len(documents) and not [p for p in report.pairs if p.flagged]


def _notebook(cells: list[str]) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": source, "metadata": {}, "outputs": [],
                                  "execution_count": None} for source in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_an_earlier_term_costs_what_its_caps_allow_and_is_never_tokenised_again(assignment, tmp_path, monkeypatch):
    """Issue 56: `grader similar --earlier` carried one term's cost into the next: every run tokenised each earlier
    file again (0.6 CPU-s for a 1 MiB notebook, with no cap on the files of a term), and read each earlier sidecar
    and record whole, whatever an older grader had put in them. A term's units are now kept in its sidecars when it
    is graded and read back; a sidecar or record over its cap is not read, and values are bounded as when written."""
    from grader.similarity import code_match, store, tokens

    def cell(i: int) -> str:
        return "".join(f"value_{i}_{n} = helper_{i}(x.alpha{i}_{n}(x, {n}), beta_{i} * {n}) + gamma_{i}[{n}] ** 2\n"
                       for n in range(40))

    cells, total = [], 0
    while total < 1 << 20:
        cells.append(cell(len(cells)))
        total += len(cells[-1])
    fall = tmp_path / "fall"
    fall.mkdir()
    (fall / "big.ipynb").write_text(_notebook(cells))
    (fall / "junk.py").write_text(cell(10**7))
    (fall / "bloated.py").write_text(cell(10**8))
    earlier = tmp_path / "fall-results"
    for submission in discover(fall, assignment.submission_filename, 4 << 20):
        write_sidecar(earlier, submission, None)
    # What an older grader could leave: a sidecar holding a huge value; a huge record beside an ordinary sidecar.
    junk = store.sidecar_path(earlier, "junk")
    data = json.loads(junk.read_text())
    data["values"] = {"hvp_plain": list(range(2_000_000))}
    junk.write_text(json.dumps(data))
    (earlier / "bloated.json").write_text(json.dumps({"submission": "bloated", "status": "graded",
                                                      "checks": [{"id": "x", "score": 0, "max_score": 1}] * 400_000}))
    batch, out = tmp_path / "submissions", tmp_path / "results"
    batch.mkdir()
    for k in range(3):
        (batch / f"s{k}.py").write_text(cell(10**6 + k))
    full_marks_results(assignment, batch, out)

    tokenised: list[int] = []
    real_all_units = code_match.all_units

    def counting(chunks):
        tokenised.append(sum(len(chunk.source) for chunk in chunks))
        return real_all_units(chunks)

    monkeypatch.setattr(code_match, "all_units", counting)
    tokens._units_of.cache_clear()     # a fresh `grader similar`: nothing remembered from the writes above
    similarity_for(out, assignment, [])
    started = time.process_time()
    report = similarity_for(out, assignment, [earlier])
    spent = time.process_time() - started
    print(f"an earlier term with a 1 MiB notebook: {spent:.2f} CPU-s; tokenised: {tokenised}")
    assert report.earlier == 2, report.notes       # the notebook and bloated.py (without its record); junk left out
    assert any("junk" in note and "not read" in note for note in report.notes), report.notes
    assert not [size for size in tokenised if size > 100_000], "an earlier term's file was tokenised again"
    assert spent < 2.0


def test_units_kept_in_a_sidecar_are_the_tokenisers_and_others_are_not_trusted(tmp_path):
    from grader.similarity.code_match import all_units
    from grader.similarity.store import decode_units, encode_units

    chunks = [Chunk(1, "import jax\nx = jax.numpy.ones(3)\n"), Chunk(2, "def f(a):\n    return a * 2 + x\n")]
    units = all_units(chunks)
    kept = json.loads(json.dumps(encode_units(units)))
    assert decode_units(kept, len(chunks)) == units
    assert decode_units(kept, 1) is None                                  # a unit of a chunk the sidecar lacks
    assert decode_units({**kept, "version": "another"}, len(chunks)) is None
    assert decode_units({**kept, "words": kept["words"][:1]}, len(chunks)) is None
    assert decode_units({**kept, "units": [[0, [0], [[1, 5, 2]]]]}, len(chunks)) is None   # lines backwards
    assert decode_units("nonsense", len(chunks)) is None


def test_sidecars_without_units_are_tokenised_within_a_terms_cap_and_kept_by_grader_similar(assignment, tmp_path,
                                                                                             monkeypatch):
    """An older grader's sidecars keep no units: an earlier term of them is tokenised up to EARLIER_TOKENISE_BYTES of
    code (the rest is left out, and said so), and `grader similar` on that term's own folder keeps their units."""
    from grader.similarity import store

    old, batch, out = tmp_path / "spring", tmp_path / "submissions", tmp_path / "results"
    for folder in (old, batch):
        folder.mkdir()
    for k in range(4):
        (old / f"o{k}.py").write_text(_own_code(f"old{k}"))
    (batch / "now.py").write_text(_own_code("now"))
    full_marks_results(assignment, old, out.with_name("spring-results"))
    full_marks_results(assignment, batch, out)
    earlier = out.with_name("spring-results")
    for path in (earlier / "similarity").glob("*.json"):    # as an older grader wrote them
        data = json.loads(path.read_text())
        del data["units"]
        path.write_text(json.dumps(data))
    one_file = len(_own_code("old0"))
    monkeypatch.setattr(store, "EARLIER_TOKENISE_BYTES", 2 * one_file + one_file // 2)
    report = similarity_for(out, assignment, [earlier])
    assert report.earlier == 2 and any("without kept units" in note for note in report.notes), report.notes
    similarity_for(earlier, assignment, [])                   # `grader similar` on that term, with this grader
    assert all("units" in json.loads(p.read_text()) for p in (earlier / "similarity").glob("*.json"))
    report = similarity_for(out, assignment, [earlier])
    assert report.earlier == 4 and not report.notes, report.notes
