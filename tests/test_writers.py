"""Writers (atomic files, grade CSV, Markdown feedback) and the batch's re-run logic, without any JAX run."""

from __future__ import annotations

import csv
import io
import json

import pytest

from grader.cli import batch
from grader.common.files import atomic_write, write_if_changed
from grader.common.user_cache import CACHE_DIR_ENV
from grader.config import assignment as assignment_module
from grader.grading import reference
from grader.grading import warm_state as warm_state_module
from grader.grading.warm_state import REFERENCE, WarmState
from grader.grading.world_check import WorldVerdict
from grader.outputs.writers import feedback_markdown, grades_csv, write_result
from grader.runs.jobs import variant_seed_for
from grader.sandbox.child.encoding import encode_value

GROUPS = ["runs", "gradients", "hvp"]


def record(submission="alice", score=7.5, status="graded", checks=None, messages=None, **extra):
    checks = checks if checks is not None else [
        {"id": "runs.no_errors", "group": "runs", "score": 3.0, "max_score": 3.0, "visibility": "visible",
         "feedback": "Every top-level statement ran without an error."},
        {"id": "gradients.cotangent", "group": "gradients", "score": 0.0, "max_score": 3.0, "visibility": "visible",
         "feedback": "`cotangent` does not match.\nCheck the loop."},
        {"id": "hvp.secret", "group": "hvp", "score": 4.5, "max_score": 9.0, "visibility": "hidden",
         "feedback": "HIDDEN-FEEDBACK"},
        {"id": "hvp.later", "group": "hvp", "score": 0.0, "max_score": 5.0, "visibility": "after_published",
         "feedback": "LATER-FEEDBACK"},
    ]
    return {"submission": submission, "file": f"{submission}.py", "assignment": "performance-05", "title": "Memory",
            "status": status, "score": score, "max_score": 20.0,
            "groups": {"runs": {"score": 3.0, "max_score": 3.0}, "gradients": {"score": 0.0, "max_score": 3.0},
                       "hvp": {"score": 4.5, "max_score": 14.0}},
            "checks": checks, "messages": messages if messages is not None else [], **extra}


# ---- atomic_write ------------------------------------------------------------------------------------

def test_atomic_write_creates_replaces_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "deep" / "er" / "result.json"
    atomic_write(target, "first\n")
    assert target.read_text() == "first\n"
    atomic_write(target, "second ünïcode\r\n")
    assert target.read_bytes() == "second ünïcode\r\n".encode()   # no newline translation
    assert sorted(p.name for p in target.parent.iterdir()) == ["result.json"]


def test_atomic_write_failure_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "result.json"
    atomic_write(target, "good")
    with pytest.raises(TypeError):
        atomic_write(target, 12345)   # type: ignore[arg-type]   # fails inside the write: nothing may be left
    assert target.read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_no_text_can_fail_a_write(tmp_path):
    """A lone surrogate (a student's `raise ValueError("\\ud800")`) is written as U+FFFD, never an exception."""
    target = tmp_path / "result.json"
    atomic_write(target, "bad \ud800 surrogate \U0001f600")
    assert target.read_text(encoding="utf-8") == "bad \ufffd surrogate \U0001f600"
    assert write_if_changed(target, "bad \udfff surrogate \U0001f600") is False   # the same text as written
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_write_result_writes_json_and_feedback(tmp_path):
    write_result(tmp_path, record(submission="bob smith"))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["bob_smith.feedback.md", "bob_smith.json"]
    loaded = json.loads((tmp_path / "bob_smith.json").read_text())
    assert loaded["submission"] == "bob smith" and loaded["score"] == 7.5
    assert "runs.no_errors" in (tmp_path / "bob_smith.feedback.md").read_text()


def test_student_feedback_file_leaves_out_hidden_checks(tmp_path):
    """`<id>.feedback.md` is the student's report (README): a `hidden` check's feedback must not be in it."""
    write_result(tmp_path, record(submission="carol"))
    text = (tmp_path / "carol.feedback.md").read_text()
    assert "runs.no_errors" in text
    assert "HIDDEN-FEEDBACK" not in text and "hvp.secret" not in text
    assert "HIDDEN-FEEDBACK" in (tmp_path / "carol.json").read_text()     # the instructor's record keeps it


# ---- grades.csv ------------------------------------------------------------------------------------------

def test_grades_csv_round_trips_through_the_csv_module():
    records = [record("zed", score=20.0), record('o"brien, jr', score=7.5), record("amy", score=0.0, status="error"),
               record("third", score=20.0 / 3)]
    text = grades_csv(records, GROUPS)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["submission", *GROUPS, "total", "max_score", "percent", "status", "late", "autograde", "adjusted", "late_penalty", "held"]
    assert [row[0] for row in rows[1:]] == ["amy", 'o"brien, jr', "third", "zed"]
    parsed = {row["submission"]: row for row in csv.DictReader(io.StringIO(text))}
    assert len(parsed) == 4
    zed = parsed["zed"]
    assert float(zed["total"]) == 20.0 and float(zed["max_score"]) == 20.0 and float(zed["percent"]) == 100.0
    assert zed["status"] == "graded"
    assert float(zed["runs"]) == 3.0 and float(zed["gradients"]) == 0.0 and float(zed["hvp"]) == 4.5
    assert float(parsed['o"brien, jr']["percent"]) == 37.5
    assert parsed["amy"]["status"] == "error" and float(parsed["amy"]["total"]) == 0.0
    assert float(parsed["third"]["total"]) == pytest.approx(20.0 / 3, rel=1e-5)
    assert float(parsed["third"]["percent"]) == pytest.approx(100.0 / 3, abs=0.01)


def test_grades_csv_missing_group_and_zero_max():
    rec = record("solo")
    del rec["groups"]["hvp"]
    rec["max_score"] = 0.0
    rows = list(csv.DictReader(io.StringIO(grades_csv([rec], GROUPS))))
    assert float(rows[0]["hvp"]) == 0.0 and float(rows[0]["percent"]) == 0.0
    assert grades_csv([], GROUPS).splitlines() == [",".join(["submission", *GROUPS, "total", "max_score", "percent", "status", "late", "autograde", "adjusted", "late_penalty", "held"])]


# ---- feedback ----------------------------------------------------------------------------------------------

def test_feedback_markdown_lists_each_visible_check():
    rec = record(messages=["In the variant run, your file called sys.exit(1)."],
                 output={"head": "HEAD-OUT", "tail": "TAIL-OUT", "omitted_bytes": 123})
    text = feedback_markdown(rec, visibilities=("visible",))
    for check in rec["checks"]:
        if check["visibility"] == "visible":
            assert check["id"] in text and check["feedback"].splitlines()[0] in text
    assert "HIDDEN-FEEDBACK" not in text and "hvp.secret" not in text and "LATER-FEEDBACK" not in text
    assert "**PASS** `runs.no_errors`" in text and "**FAIL** `gradients.cotangent`" in text
    assert "\n  Check the loop." in text                      # a multi-line message stays inside its bullet
    assert "7.5 / 20" in text and "| runs | 3 / 3 |" in text
    assert "sys.exit(1)" in text and "HEAD-OUT" in text and "TAIL-OUT" in text and "123 bytes omitted" in text


def test_feedback_markdown_partial_and_error_records():
    text = feedback_markdown(record(), visibilities=("visible", "hidden", "after_published"))
    assert "**PARTIAL** `hvp.secret`" in text
    assert "hvp.secret" not in feedback_markdown(record())   # the default is what a student may see
    error = record(status="error", score=0.0, messages=["erin.py is empty."],
                   checks=[{"id": "runs.no_errors", "group": "runs", "score": 0.0, "max_score": 3.0,
                            "visibility": "visible", "feedback": "Not graded: erin.py is empty."}])
    text = feedback_markdown(error)
    assert "could not be graded: erin.py is empty." in text and "**FAIL** `runs.no_errors`" in text


def test_a_hidden_check_says_whether_it_passed_so_every_group_score_is_accounted_for():
    checks = record()["checks"] + [{"id": "hvp.secret_two", "group": "hvp", "score": 2.0, "max_score": 2.0,
                                    "visibility": "hidden", "feedback": "HIDDEN-TWO"}]
    text = feedback_markdown(record(checks=checks))
    assert "- **PARTIAL** a hidden check did not pass (4.5/9); its details are not shown." in text
    assert "- **PASS** a hidden check passed (2/2); its details are not shown." in text
    assert "hvp.secret" not in text and "HIDDEN" not in text
    hvp = text[text.index("## hvp"):]
    assert hvp.index("a hidden check did not pass") < hvp.index("`hvp.later`")     # in its place in the group


ISOLATION = ("Isolation used: bubblewrap fork server: each run gets its own pid, mount, network, ipc and uts "
             "namespaces, read-only system, grader and instructor files invisible, rlimits, a uid of its own.")


def test_a_file_that_stopped_early_is_told_so_before_any_check():
    stop = ("Your file has a syntax error at line 2 (SyntaxError: '(' was never closed): Python could not read it "
            "past that line, so only the statements before it ran and every value assigned after it is missing.")
    rec = record(messages=[stop, ISOLATION], runs={"baseline": {"ending": "syntax_error"}, "variant": {"ending": "syntax_error"}})
    text = feedback_markdown(rec)
    assert text.index("## Read this first: your file stopped early") < text.index(stop) < text.index("| Group |")
    assert text.count(stop) == 1 and "## Notes on your run" not in text
    completed = record(messages=[ISOLATION], runs={"baseline": {"ending": "completed"}})
    text = feedback_markdown(completed)
    assert "Read this first" not in text and text.index("| Group |") < text.index("## Notes on your run")


def test_the_variant_is_described_once_at_the_top_of_the_page():
    about = "About the variant run: the lesson's RNG seed replaced by a fresh seed."
    checks = [{"id": "memory.x", "group": "memory", "score": 0.0, "max_score": 4.0, "visibility": "visible",
               "feedback": "In the variant run: `memory` has no dict."}]
    rec = record(messages=[ISOLATION, about], runs={"baseline": {"ending": "completed"}}, checks=checks)
    text = feedback_markdown(rec)
    assert text.count("About the variant run") == 1
    assert text.index(about) < text.index("| Group |") < text.index("In the variant run: `memory`")
    assert about not in text[text.index("## Notes on your run"):]


def test_the_isolation_note_is_said_once_and_briefly_to_the_student():
    text = feedback_markdown(record(messages=[ISOLATION]))
    assert text.count("Isolation used") == 1 and "- Isolation used: bubblewrap fork server.\n" in text
    assert "namespaces" not in text


# ---- batch re-runs ------------------------------------------------------------------------------------------

FACTS = {"reports": [["f32[16,16] from a constant"] * 9, ["f32[16] from the argument v"] * 6],
         "memory": [{"argument_size_in_bytes": 64, "output_size_in_bytes": 64, "temp_size_in_bytes": 256,
                     "alias_size_in_bytes": 0}] * 2}


# A batch seed the assignment finds suitable (a seed asked for by number is mapped to one: grader.runs.jobs)
SUITABLE = variant_seed_for(assignment_module.load("performance-05"), 4242)


@pytest.fixture(scope="module")
def assignment():
    return assignment_module.load("performance-05")


@pytest.fixture
def kept_state(tmp_path, monkeypatch, assignment) -> WarmState:
    """A cache folder of this test's own whose warm state already holds the reference facts (FACTS) and the verdicts
    of the worlds of the lesson's seed and of a suitable batch seed (SUITABLE), with the reference's figures;
    running the reference (a JAX run) fails the test."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    state = WarmState(assignment)
    encoded = {name: encode_value(value, 10**6) for name, value in FACTS.items()}
    state.store.build(REFERENCE, lambda staging: {"facts": encoded}, False)
    for batch_seed in (assignment.lesson_seed, SUITABLE):   # each world judged already: full marks, no figure
        verdict = WorldVerdict(batch_seed, assignment.max_score, assignment.max_score, (),
                               {"baseline": None, "variant": None})
        state.store.build(state._world_name(batch_seed), lambda staging, v=verdict: v.payload(), False)

    def measure(*args, **kwargs):
        raise AssertionError("the reference solution was run; the warm state should have been used")

    monkeypatch.setattr(WarmState, "_run_reference", measure)
    monkeypatch.setattr(warm_state_module, "judge_world", measure)
    return state


@pytest.fixture
def warm_ups(monkeypatch) -> list:
    """Counts the batch's warm-ups (each starts a fork server and reads the reference facts)."""
    calls = []
    real = batch.warmed_up

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(batch, "warmed_up", spy)
    return calls


def test_reference_facts_are_read_from_the_warm_state(assignment, kept_state):
    assert reference.reference_facts(assignment) == FACTS
    assert reference.reference_figures(assignment, seeds={"baseline": 18, "variant": SUITABLE}, batch_seed=SUITABLE) == \
        reference.reference_figures(assignment) == {"baseline": None, "variant": None}


def test_batch_rerun_reuses_records_unless_regrade(tmp_path, assignment, kept_state, warm_ups):
    folder, out = tmp_path / "submissions", tmp_path / "out"
    folder.mkdir()
    (folder / "erin.py").write_text("")
    quiet = {"progress": lambda line: None, "variant_seed": SUITABLE, "workers": 1}

    first = batch.grade_folder(assignment, folder, out, **quiet)
    assert warm_ups == [] and first.reused == 0 and len(first.records) == 1   # a file that cannot run needs none
    rec = first.records[0]
    assert rec["status"] == "error" and rec["score"] == 0 and rec["max_score"] == assignment.max_score
    assert rec["messages"][0] == "erin.py is empty."
    assert all(check["score"] == 0 for check in rec["checks"]) and len(rec["checks"]) == len(assignment.checks)
    for key in ("submission", "file", "status", "score", "max_score", "groups", "checks", "messages", "environment",
                "variant_seed", "sha256"):
        assert key in rec
    on_disk = json.loads((out / "erin.json").read_text())
    assert on_disk["submission"] == "erin" and on_disk["variant_seed"] == SUITABLE
    assert (out / "erin.feedback.md").is_file()
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text())))
    assert [(r["submission"], r["status"]) for r in rows] == [("erin", "error")]
    mtime = (out / "erin.json").stat().st_mtime_ns

    pages = {name: (out / name).stat().st_mtime_ns for name in ("erin.feedback.html", "report.html", "grades.csv")}
    second = batch.grade_folder(assignment, folder, out, **quiet)
    assert warm_ups == []                      # nothing pending: no warm-up, no reference facts
    assert second.reused == 1 and second.records == [on_disk]
    assert (out / "erin.json").stat().st_mtime_ns == mtime
    assert {name: (out / name).stat().st_mtime_ns for name in pages} == pages   # nothing changed: nothing rewritten

    third = batch.grade_folder(assignment, folder, out, regrade=True, **quiet)
    assert warm_ups == [] and third.reused == 0 and third.records[0]["status"] == "error"
    assert (out / "erin.json").stat().st_mtime_ns != mtime

    # a changed file is graded again even without regrade
    (folder / "erin.py").write_bytes(b"x = 1\x00")
    fourth = batch.grade_folder(assignment, folder, out, **quiet)
    assert fourth.reused == 0 and "binary" in fourth.records[0]["messages"][0]
    assert json.loads((out / "erin.json").read_text())["sha256"] != on_disk["sha256"]
    leftovers = [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_batch_regrades_when_the_record_on_disk_is_stale_or_torn(tmp_path, assignment, kept_state):
    folder, out = tmp_path / "submissions", tmp_path / "out"
    folder.mkdir()
    (folder / "erin.py").write_text("   \n")
    quiet = {"progress": lambda line: None, "variant_seed": SUITABLE, "workers": 1}
    batch.grade_folder(assignment, folder, out, **quiet)
    saved = json.loads((out / "erin.json").read_text())
    saved["fingerprint"] = "something-older"
    (out / "erin.json").write_text(json.dumps(saved))
    assert batch.grade_folder(assignment, folder, out, **quiet).reused == 0
    (out / "erin.json").write_text("{torn")
    assert batch.grade_folder(assignment, folder, out, **quiet).reused == 0
    assert batch.grade_folder(assignment, folder, out, **quiet).reused == 1


def test_csv_cells_never_start_a_formula():
    from grader.lms.otter_csv import safe_cell

    for text in ("=HYPERLINK(\"x\")", "+1", "-2+3", "@SUM(A1)", "\t=1", "\uff1d1"):
        assert safe_cell(text).startswith("'"), text
    assert safe_cell("alice") == "alice" and safe_cell("bob-2") == "bob-2"


def test_markdown_lines_from_a_run_are_inert_and_fences_cannot_close_early():
    from grader.common.markdown import fence, md_block, md_line

    for text in ("# 100 / 100", "> quote", "| a | b |", "```", "1. item", "- item", "<script>x</script>"):
        rendered = md_line(text)
        assert rendered != text and "<script>" not in rendered, rendered
    assert md_block("ok\n# forged").splitlines()[1].lstrip().startswith("\\#")
    block = fence("a\n````\nb")
    assert block[0].startswith("`````") and block[-1] == "`````"


def test_the_channel_refuses_too_many_objects_before_parsing_them():
    import struct

    from grader.sandbox.frames import FrameReader

    reader = FrameReader(budget=64 * 2**20, max_objects=1000)
    payload = b'{"type": "value", "v": [' + b"{}," * 5000 + b"{}]}"
    reader.feed(struct.pack(">I", len(payload)) + payload)
    assert reader.frames == [] and "more than 1000 objects" in reader.problem


def test_the_channel_keeps_no_frame_nobody_reads():
    """Frames of a type the snapshot never reads (4-byte-wide strings, 8 MiB a frame) are parsed and dropped: the
    grader's memory does not hold what a run sends for nothing."""
    import json
    import struct
    import tracemalloc

    from grader.sandbox.frames import FrameReader

    reader = FrameReader(budget=64 * 2**20)
    junk = json.dumps({"type": "junk", "text": "\U0001F600" * (2 * 2**20 - 64)}, ensure_ascii=False).encode()
    kept = json.dumps({"type": "value", "name": "x", "stmt": 1, "value": 1}).encode()
    tracemalloc.start()
    for payload in (junk, junk, junk, kept):
        reader.feed(struct.pack(">I", len(payload)) + payload)
    retained, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert reader.problem is None and reader.ignored == 3
    assert [frame["type"] for frame in reader.frames] == ["value"]
    assert retained < 2**20, f"{retained} bytes retained after three ignored 8 MiB frames"


def test_a_flood_of_statement_frames_costs_the_grader_under_a_kilobyte_each():
    """A file of 15,000 top-level `...` statements (the marker bomb) makes the harness send a statement frame for
    each, all kept for the snapshot: the keys every frame repeats are held once, not once per frame."""
    import json
    import struct
    import tracemalloc

    from grader.sandbox.frames import FrameReader

    frames = [{"type": "statement", "index": i, "cell": None, "line": i + 1, "end_line": i + 1, "assigns": [],
               "reads": [], "mutates": [], "placeholder": True, "status": "ok", "evaluations_omitted": 0,
               "sightings_omitted": 0, "seconds": 0.0001} for i in range(15000)]
    wire = b"".join(struct.pack(">I", len(b)) + b for b in (json.dumps(f).encode() for f in frames))
    reader = FrameReader(budget=64 * 2**20, max_objects=10**6)
    tracemalloc.start()
    for start in range(0, len(wire), 65536):
        reader.feed(wire[start:start + 65536])
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert reader.problem is None and len(reader.frames) == 15000 and reader.frames[-1] == frames[-1]
    assert held / 15000 < 1024, f"{held / 15000:.0f} bytes held per statement frame"


def test_the_channel_keeps_rebound_values_only_within_its_budget():
    """A name bound again and again with 1 MB values: the newest value of every name stays whole, earlier ones are
    kept up to SUPERSEDED_VALUE_BYTES in all (the first ones) and then become `too_large` markers (counted for the record's note),
    so neither the frames nor the snapshot's history hold every one; small rebinding (an honest run) keeps all."""
    import json
    import struct

    from grader.runs.snapshot import Opaque, build_snapshot
    from grader.sandbox.frames import SUPERSEDED_VALUE_BYTES, FrameReader
    from grader.sandbox.raw_run import RawRun

    def value(name: str, stmt: int, body: str) -> bytes:
        payload = json.dumps({"type": "value", "name": name, "stmt": stmt, "value": {"t": "str", "v": body}}).encode()
        return struct.pack(">I", len(payload)) + payload

    big = "w" * 2**20
    reader = FrameReader(budget=64 * 2**20)
    for stmt in range(12):
        reader.feed(value("w", stmt, f"{stmt:02d}" + big))
    for stmt in range(12, 40):
        reader.feed(value("small", stmt, str(stmt)))
    kept = [f for f in reader.frames if f["name"] == "w" and f["value"]["t"] == "str"]
    assert reader.problem is None
    assert len(kept) * 2**20 <= SUPERSEDED_VALUE_BYTES + 2**20 + 4096 and kept[-1]["stmt"] == 11
    assert reader.values_not_kept == 12 - len(kept) > 0
    assert all(f["value"]["t"] == "str" for f in reader.frames if f["name"] == "small")
    snapshot = build_snapshot(RawRun(frames=reader.frames, values_not_kept=reader.values_not_kept), "baseline", 1)
    assert snapshot.values["w"].startswith("11w") and snapshot.values_not_kept == reader.values_not_kept
    history = [v for _, v in snapshot.history["w"]]
    assert history[0].startswith("00w") and history[-1].startswith("11w")    # the first binding is kept whole
    assert sum(isinstance(v, Opaque) and v.kind == "too_large" for v in history) == reader.values_not_kept
    assert [v for _, v in snapshot.history["small"]] == [str(n) for n in range(12, 40)]
