"""The parent is bounded (DESIGN.md, the trust model): whatever a run or a file supplies, the grader's own process
works linearly on it, writes valid text whatever code points arrive, and one record's trouble stays that record's.

No sandbox here except the last test (one small real batch): a lone surrogate from a run's frames through the
snapshot builder and every writer, a record whose files cannot be written, report sections that fail one by one,
statement lookups over forged statement lists, and notebook cells of thousands of identical lines.
"""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import fields
from pathlib import Path

import pytest

import grader.cli.batch
import grader.config.assignment
import grader.intake.ipython_cells as ipython_cells
import grader.outputs.reports as reports
from grader.grading.engine import CheckResult
from grader.grading.grade import assemble
from grader.intake.discovery import Submission
from grader.intake.ipython_cells import cell_python
from grader.intake.notebook import notebook_cells
from grader.model.record import record_from_json, record_to_json
from grader.outputs.batch_files import BatchFiles
from grader.outputs.reports import FeedbackPages, write_class_report
from grader.outputs.similarity_view import write_similarity_csv
from grader.outputs.writers import grades_csv, write_lms_outputs, write_result
from grader.runs.snapshot import Snapshot, Statement, build_snapshot
from grader.sandbox.raw_run import RawRun
from grader.similarity.report import SimilarityReport

BAD = "\ud800"          # a lone surrogate: JSON carries it, no UTF-8 writer takes it
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def assignment():
    return grader.config.assignment.load("performance-05")


def _strings(value, seen=None):
    """Every str inside a value (dataclasses, dicts, lists, tuples), keys too."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif hasattr(value, "__dataclass_fields__"):
        for f in fields(value):
            yield from _strings(getattr(value, f.name))


def _valid(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ---- text ----------------------------------------------------------------------------------------------

def test_the_snapshot_builder_makes_every_run_text_valid():
    frames = [
        {"type": "statement", "index": 0, "line": 1, "end_line": 1, "status": "error" + BAD, "assigns": ["x" + BAD],
         "reads": [BAD], "error": {"type": "ValueError" + BAD, "message": BAD, "traceback": "at " + BAD,
                                   "file": BAD}},
        {"type": "value", "name": "x" + BAD, "stmt": 0, "value": {"t": "str", "v": "v" + BAD}},
        {"type": "value", "name": "d", "stmt": 0,
         "value": {"t": "dict", "length": 1, "items": [[BAD, {"t": "list", "length": 1,
                                                             "items": [{"t": "str", "v": BAD}]}]]}},
        {"type": "value", "name": "f", "stmt": 0, "value": {"t": "callable", "type": BAD, "repr": BAD}},
        {"type": "probe", "name": "p" + BAD, "stmt": 0, "inputs": {BAD: 0}, "error": {"type": BAD, "message": BAD}},
        {"type": "syntax_error", "line": 1, "message": BAD},
        {"type": "evidence_problem", "message": BAD},
        {"type": "done", "kind": "sys_exit", "code": "bye" + BAD, "evidence": {"problem": BAD}},
    ]
    control = json.dumps({"setup": "ok"}).encode()
    snapshot = build_snapshot(RawRun(frames=frames, control=control, output_head=b"\xed\xa0\x80 head"),
                              "baseline", 1)
    texts = list(_strings(snapshot))
    assert any("\ufffd" in text for text in texts)      # the frames did arrive
    assert all(_valid(text) for text in texts), [ascii(t) for t in texts if not _valid(t)]
    assert snapshot.statements[0].error and snapshot.statements[0].error["message"] == "\ufffd"


def test_notebook_sources_are_valid_text():
    notebook = json.dumps({"cells": [{"cell_type": "code", "source": ["x = '" + BAD + "'\n", "%time y = 1\n"]}]})
    cells, _ = notebook_cells(notebook)
    assert cells and all(_valid(cell.source) for cell in cells)
    assert "\ufffd" in cells[0].source


def _record(assignment, text: str, submission_id: str = "surrogate"):
    submission = Submission(id=submission_id, path=Path(f"{submission_id}.py"), relative=f"{submission_id}{text}.py")
    checks = [CheckResult(s.id, s.group, s.points / 2, s.points, s.visibility, f"you raised ValueError: {text}")
              for s in assignment.checks]
    record = assemble(assignment, submission, "graded", checks, [f"line 3 raised ValueError: {text}"], 1)
    record["output"] = {"head": f"printed {text}", "tail": text, "bytes": 10, "omitted_bytes": 0}
    return record


def test_every_writer_takes_any_text(assignment, tmp_path):
    """A record quoting a lone surrogate everywhere (feedback, messages, output, file name) through every writer:
    each file is written, is UTF-8, and holds U+FFFD where the surrogate was."""
    records = [_record(assignment, BAD), _record(assignment, "fine", "honest")]
    for record in records:
        write_result(tmp_path, record)
        FeedbackPages(tmp_path, assignment).write(record, {})
    write_lms_outputs(tmp_path, records, assignment)
    (tmp_path / "grades.csv").write_text(grades_csv(records, list(assignment.groups)), encoding="utf-8")
    write_class_report(tmp_path, records, assignment, {})
    report = SimilarityReport(0.6, 2, 0)
    report.notes.append(BAD)
    report.caution += BAD
    write_similarity_csv(tmp_path, report)
    written = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    names = {p.name for p in written}
    assert {"surrogate.json", "surrogate.feedback.md", "surrogate.feedback.html", "report.html", "canvas.csv",
            "final_grades.csv", "similarity.csv"} <= names
    for path in written:
        text = path.read_bytes().decode("utf-8")          # strict: every file is valid UTF-8
        if path.suffix == ".json":
            assert all(_valid(s) for s in _strings(json.loads(text))), path.name   # no surrogate escape either
    assert "\ufffd" in (tmp_path / "surrogate.feedback.md").read_text(encoding="utf-8")
    assert "Could not be drawn" not in (tmp_path / "surrogate.feedback.html").read_text(encoding="utf-8")


def test_a_record_read_back_is_valid_text(assignment):
    """A record written before this fix (a surrogate escape in its JSON) is read back clean: its page can be
    drawn again on a re-run."""
    text = json.dumps(_record(assignment, BAD))        # ensure_ascii: "\\ud800" escapes, as older records hold
    assert "\\ud800" in text
    record = record_from_json(text)
    assert all(_valid(s) for s in _strings(record))
    assert "\\ud800" not in record_to_json(_record(assignment, BAD))


# ---- one record's trouble is its own ---------------------------------------------------------------------

def test_a_record_whose_files_cannot_be_written_becomes_its_own_error(assignment, tmp_path, monkeypatch):
    files = BatchFiles(tmp_path, assignment, lambda seed, scenarios: {})
    honest, broken = _record(assignment, "fine", "honest"), _record(assignment, "boom", "broken")
    original = FeedbackPages.write

    def write(self, record, figures):
        if record["submission"] == "broken" and record["status"] == "graded":
            raise UnicodeEncodeError("utf-8", BAD, 0, 1, "surrogates not allowed")
        return original(self, record, figures)

    monkeypatch.setattr(FeedbackPages, "write", write)
    kept = grader.cli.batch._written(files, honest, assignment, Submission("honest", Path("honest.py"), "honest.py"), 1)
    failed = grader.cli.batch._written(files, broken, assignment, Submission("broken", Path("broken.py"), "broken.py"), 1)
    assert kept is honest and "grader_error" not in kept
    assert failed["status"] == "error" and "UnicodeEncodeError" in failed["grader_error"]
    assert "could not write this submission's files" in failed["messages"][0]
    on_disk = record_from_json((tmp_path / "broken.json").read_text())
    assert on_disk.get("grader_error"), "the record on disk says it is the grader's fault (a re-run grades it again)"
    assert files.finish([kept, failed], None, {}) == []
    assert not files.problems
    rows = list(csv.DictReader(io.StringIO((tmp_path / "grades.csv").read_text())))
    assert {row["submission"] for row in rows} == {"honest", "broken"}
    assert (tmp_path / "report.html").is_file()


def test_a_class_file_that_cannot_be_written_leaves_the_others(assignment, tmp_path, monkeypatch):
    files = BatchFiles(tmp_path, assignment, lambda seed, scenarios: {})
    records = [_record(assignment, "fine", "honest")]
    monkeypatch.setattr(grader.outputs.batch_files, "write_lms_outputs", _raise)
    files.finish(records, None, {})
    assert (tmp_path / "grades.csv").is_file() and (tmp_path / "report.html").is_file()
    assert len(files.problems) == 1 and "LMS files" in files.problems[0]


def _raise(*args, **kwargs):
    raise RuntimeError("this part failed")


@pytest.mark.parametrize("failing", ["similarity", "histogram", "summary"])
def test_each_section_of_the_class_report_renders_on_its_own(assignment, tmp_path, monkeypatch, failing):
    records = [_record(assignment, "fine", "honest"), _record(assignment, "fine too", "other")]
    similarity = SimilarityReport(0.6, 2, 0)
    if failing == "similarity":
        monkeypatch.setattr(reports, "similarity_context", _raise)
    elif failing == "histogram":
        monkeypatch.setattr(reports._figures(), "score_histogram", _raise)
    else:
        monkeypatch.setattr(reports, "class_context", _raise)
    page = write_class_report(tmp_path, records, assignment, {}, similarity).read_text(encoding="utf-8")
    assert "could not be drawn (RuntimeError: this part failed)" in page
    assert ('id="similarity"' in page) == (failing != "similarity")
    assert ('id="submissions"' in page) == (failing != "summary")
    assert ('id="histogram"' in page) == (failing not in ("histogram", "summary"))


# ---- bounded work ----------------------------------------------------------------------------------------

class _CountingList(list):
    passes = 0

    def __iter__(self):
        type(self).passes += 1
        return super().__iter__()


def test_statement_lookups_are_an_index_not_a_scan():
    """Forged frames number statements backwards: each lookup used to scan the whole list."""
    count = 5000
    snapshot = Snapshot("baseline", 1)
    snapshot.statements = _CountingList(Statement(count - 1 - i, i + 1, i + 1, [], "ok") for i in range(count))
    _CountingList.passes = 0
    found = [snapshot.statement(index) for index in range(count)]
    assert all(s is not None and s.index == index for index, s in enumerate(found))
    assert snapshot.statement(count) is None and snapshot.statement(-5) is None
    assert _CountingList.passes <= 1, f"{_CountingList.passes} passes over the statements for {count} lookups"


def test_notebook_realignment_is_linear(monkeypatch):
    """A cell of thousands of identical lines: difflib is never asked to align more than a small middle, and 20,000
    lines convert in well under 100 times what 2,000 take (a quadratic alignment took 100 times; 91 s for 10,000)."""
    asked: list[int] = []
    matcher = ipython_cells.difflib.SequenceMatcher

    class Recording(matcher):   # type: ignore[misc,valid-type]
        def __init__(self, junk, a, b, autojunk=True):
            asked.append(len(a) * len(b))
            super().__init__(junk, a[:50], b[:50], autojunk)   # before the fix: recorded, not paid for

    monkeypatch.setattr(ipython_cells.difflib, "SequenceMatcher", Recording)
    for line in ("x = 1\n", "  x = 1\n", ">>> x = 1\n", "%time x = 1\n", "# the same comment\n"):
        converted = cell_python(line * 20000)
        assert converted.source.count("\n") == 20000
        assert max(asked, default=0) <= ipython_cells.REALIGN_DIFF_LIMIT, (line, max(asked))
    monkeypatch.undo()

    def seconds(lines: int) -> float:
        best = float("inf")
        for _ in range(2):
            started = time.perf_counter()
            cell_python("x = 1\n" * lines)
            best = min(best, time.perf_counter() - started)
        return best

    small, large = seconds(2000), seconds(20000)
    assert large < 40 * small + 0.5, f"2,000 lines {small:.3f} s, 20,000 lines {large:.3f} s"


def test_realignment_keeps_each_line_where_the_student_wrote_it():
    converted = cell_python("x = 1\n%time y = 1\n!ls\nz = 3\n" * 3)
    assert converted.source.splitlines()[::4] == ["x = 1"] * 3
    assert converted.source.splitlines()[3::4] == ["z = 3"] * 3
    assert converted.not_run == [(3, "!ls"), (7, "!ls"), (11, "!ls")]
    prompts = cell_python(">>> a = 1\n>>> b = 2\n" * 1000)     # every line changed: each stays in its place
    assert prompts.source.splitlines()[-2:] == ["a = 1", "b = 2"] and prompts.source.count("\n") == 2000


# ---- a real batch ------------------------------------------------------------------------------------------

def test_a_surrogate_in_one_students_error_stops_no_class_file(assignment, tmp_path):
    """`raise ValueError("\\ud800")` beside an honest file: every class file is written, the student's feedback
    quotes U+FFFD, and a re-run (the record reused, its page drawn again) writes them all again."""
    solution = assignment.solution_path.read_text(encoding="utf-8")
    folder, out = tmp_path / "submissions", tmp_path / "results"
    folder.mkdir()
    (folder / "honest.py").write_text(solution, encoding="utf-8")
    threat = (ROOT / "tests/assignments/performance-05/threats/surrogate_message.py").read_text(encoding="utf-8")
    (folder / "surrogate_message.py").write_text(solution + "\n" + threat, encoding="utf-8")
    result = grader.cli.batch.grade_folder(assignment, folder, out, workers=2, variant_seed=4242,
                                           progress=lambda line: None)
    records = {r["submission"]: r for r in result.records}
    assert set(records) == {"honest", "surrogate_message"} and not result.problems
    assert not any(r.get("grader_error") for r in records.values())
    for name in ("grades.csv", "canvas.csv", "final_grades.csv", "report.html", "similarity.csv",
                 "surrogate_message.feedback.md", "surrogate_message.feedback.html"):
        assert (out / name).read_bytes().decode("utf-8"), name
    assert "\ufffd" in (out / "surrogate_message.feedback.md").read_text(encoding="utf-8")
    (out / "surrogate_message.feedback.html").unlink()       # drawn again from the reused record
    (out / "report.html").unlink()
    again = grader.cli.batch.grade_folder(assignment, folder, out, workers=2, variant_seed=4242,
                                          progress=lambda line: None)
    assert again.reused == 2 and (out / "surrogate_message.feedback.html").is_file() and (out / "report.html").is_file()


def test_a_surrogate_in_code_two_notebooks_share_leaves_the_similarity_view_drawn(assignment, tmp_path):
    """Two notebooks sharing a cell that holds a lone surrogate: read as the grader reads them, compared, and shown
    side by side in report.html and similarity.csv."""
    from grader.similarity.code_match import Boilerplate
    from grader.similarity.documents import Chunk, Document
    from grader.similarity.report import build_report, settings_for

    cell = "".join(f"v{n} = x.alpha{n}(x.beta{n}, '{BAD}').gamma{n}(x.delta{n}) + x.eps{n}(x.zeta{n})\n"
                   for n in range(6))
    notebook = json.dumps({"cells": [{"cell_type": "code", "source": cell}]})
    documents = [Document(name, f"{name}.ipynb", [Chunk(1, c.source) for c in notebook_cells(notebook)[0]])
                 for name in ("ann", "ben")]
    settings = settings_for(assignment)
    report = build_report(documents, [], Boilerplate([], settings.kgram), settings, {}, "", settings.threshold)
    assert report.flagged == 1 and report.pairs[0].code.regions
    raw = [Document(name, f"{name}.ipynb", [Chunk(1, cell)]) for name in ("cat", "dan")]   # an older sidecar's code
    report.pairs += build_report(raw, [], Boilerplate([], settings.kgram), settings, {}, "", settings.threshold).pairs
    write_similarity_csv(tmp_path, report)
    page = write_class_report(tmp_path, [_record(assignment, "fine", "ann")], assignment, {}, report)
    text = page.read_bytes().decode("utf-8")
    assert 'id="similarity"' in text and "could not be drawn" not in text and "\ufffd" in text
    assert (tmp_path / "similarity.csv").read_bytes().decode("utf-8").count("\npair,") == 2   # places, no code


def test_a_run_writing_a_byte_at_a_time_wakes_the_pump_a_bounded_number_of_times(monkeypatch):
    """The pump that drains a run's pipes pauses after small reads once past SMALL_READS_FREE of them, so a run
    that writes a frame per statement or a print per character (here 20,000 spaced writes) wakes the grader a
    bounded number of times per second, not once per write; every byte is still read."""
    import os
    import select
    import subprocess
    import sys

    import grader.sandbox.process as process
    from grader.model.limits import Limits

    monkeypatch.setattr(process, "SMALL_READS_FREE", 200)
    calls = []
    real_select = select.select
    monkeypatch.setattr(process.select, "select", lambda *a: calls.append(1) or real_select(*a))
    writer = subprocess.Popen([sys.executable, "-c", "import os, time\nfor _ in range(20000):\n"
                               "    os.write(1, b'x'); time.sleep(0.0001)"], stdout=subprocess.PIPE)
    raw = RawRun()
    started = time.monotonic()
    channel_read, channel_write = os.pipe()
    os.close(channel_write)
    process.pump(writer.stdout.fileno(), channel_read, Limits(), raw, lambda: 60.0, lambda: writer.poll() is not None,
                 lambda: None)
    elapsed = time.monotonic() - started
    writer.wait()
    assert raw.output_bytes == 20000
    assert len(calls) <= 200 + elapsed / process.SMALL_READ_PAUSE * 1.5 + 100, (len(calls), elapsed)
    assert len(calls) < 10000


# ---- one big clean notebook through `grader grade` (issue 56) -------------------------------------------------

def _solution_notebook(extra_cells: list[str]) -> str:
    """The reference solution as one notebook cell, then `extra_cells` (code that runs cleanly)."""
    cells = [(ROOT / "solutions" / "performance-05.py").read_text(encoding="utf-8"), *extra_cells]
    return json.dumps({"cells": [{"cell_type": "code", "source": source, "metadata": {}, "outputs": [],
                                  "execution_count": None} for source in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _megabyte_of_definitions() -> list[str]:
    """Distinct code that runs cleanly: long function definitions never called (a few top-level statements per
    cell, well within the run's data limits), 1 MiB in all, in about 270 cells."""
    def cell(i):
        return "".join(f"def value_{i}_{k}(x):\n" + "".join(
            f"    y{n} = helper_{i}(x.alpha{i}_{k}_{n}(x, {n}), beta_{i} * {n}) + gamma_{i}[{n}]\n" for n in range(10))
            + "    return y0\n" for k in range(4))
    cells, total = [], 0
    while total < 1 << 20:
        cells.append(cell(len(cells)))
        total += len(cells[-1])
    return cells


@pytest.mark.slow
def test_a_clean_megabyte_notebook_costs_its_batch_seconds_and_similar_stays_quick(tmp_path):
    """Issue 56, end to end: a notebook that runs cleanly and scores full marks, 1 MiB of distinct code, adds under 2
    CPU-s to its batch's parent (the same batch with the solution as an ordinary notebook is the yardstick), the
    gradebook files are there when the batch ends, and `grader similar` on its results finishes in seconds.
    Every batch takes one fixed variant seed: a drawn seed refills the seed stock in the parent, a search whose cost
    varies from batch to batch by more than a second and has nothing to do with the notebook."""
    from grader.cli.main import main

    def batch(name: str, notebook: str) -> tuple[float, Path]:
        folder = tmp_path / name
        folder.mkdir()
        for who in ("ann", "ben"):
            (folder / f"{who}.py").write_text((ROOT / "solutions" / "performance-05.py").read_text(encoding="utf-8"))
        (folder / "nora.ipynb").write_text(notebook, encoding="utf-8")
        out = tmp_path / f"{name}-out"
        started = time.process_time()
        assert main(["grade", str(folder), "--out", str(out), "--workers", "2", "--variant-seed", "20261206"]) == 0
        return time.process_time() - started, out

    cells = _megabyte_of_definitions()
    while len(_solution_notebook(cells).encode()) > 1 << 20:   # the largest notebook a submission may be
        cells.pop()
    plain, big = [], []
    for turn in range(2):   # each the least of two batches: a hiccup of a busy host is not the notebook's cost
        plain.append(batch(f"plain{turn}", _solution_notebook([]))[0])
        seconds, out = batch(f"big{turn}", _solution_notebook(cells))
        big.append(seconds)
        record = json.loads((out / "nora.json").read_text())
        assert record["score"] == record["max_score"], record["messages"]
    assert min(big) - min(plain) < 2.0, (plain, big)
    assert (out / "grades.csv").is_file() and (out / "canvas.csv").is_file()
    started = time.process_time()
    assert main(["similar", str(out)]) == 0
    assert time.process_time() - started < 10.0
