"""HTML reports: the class report and the per-student feedback pages, on real records and on hostile data.

A module-scoped fixture grades three corpus files (the reference solution, a submission whose variant figure
draws bytes where "unavailable" is expected, an empty file) with `grader.cli.batch.grade_folder`, then calls
`grader.outputs.reports.write_reports` itself into its own folder, so these tests do not depend on how the batch
wires the reports. The last tests open the pages in headless Chromium (installed by scripts/install-test-tools; skipped
with the reason where it is missing, except in CI).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import grader.cli.batch
import grader.config.assignment
from grader.intake.discovery import safe_filename
from grader.outputs import figure_data
from grader.outputs.reports import write_reports
from grader.runs.jobs import variant_seed_for

SUITABLE = variant_seed_for(grader.config.assignment.load("performance-05"), 4242)   # a suitable batch seed

CORPUS = Path(__file__).parent / "assignments" / "performance-05" / "corpus"
CASES = {"reference": "reference.py", "zeros": "memory_zeros_when_unavailable.py", "empty": "empty.py"}
SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
HIDDEN = "HIDDEN-FEEDBACK-7f3a9"
DATA_URI = re.compile(r'<img[^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{200,}"')


@pytest.fixture(scope="module")
def assignment():
    return grader.config.assignment.load("performance-05")


@pytest.fixture(scope="module")
def graded(tmp_path_factory, assignment):
    """(records by case, reference figures, run_info) from one real batch."""
    root = tmp_path_factory.mktemp("reports")
    folder = root / "submissions"
    folder.mkdir()
    for case, name in CASES.items():
        shutil.copyfile(CORPUS / name, folder / f"{case}.py")
    out = root / "out"
    result = grader.cli.batch.grade_folder(assignment, folder, out, workers=2, variant_seed=SUITABLE,
                                       progress=lambda line: None)
    records = {r["submission"]: r for r in result.records}
    assert set(records) == set(CASES)
    reference_figures = _reference_figures(assignment, out, records["reference"], SUITABLE)
    run_info = {"variant_seed": result.variant_seed, "seconds": result.seconds,
                "environment": records["reference"]["environment"]}
    return {"records": records, "reference_figures": reference_figures, "run_info": run_info, "root": root}


def _reference_figures(assignment, out: Path, reference_record: dict, batch_seed: int) -> dict:
    """The reference solution's figures in the batch's worlds (its seeds and batch seed, which a scenario's changes
    derive from): measured by the grader when it can, else the reference record's own."""
    try:
        from grader.grading.reference import reference_figures
    except ImportError:
        reference_figures = None
    if reference_figures is not None:
        seeds = grader.cli.batch.seed_map(assignment, batch_seed)   # as graded, from the session's warm state
        figures = reference_figures(assignment, seeds=seeds, batch_seed=batch_seed)
        if figures:
            return figures
    return reference_record.get("figures") or {}


@pytest.fixture(scope="module")
def pages(graded, assignment):
    """Both pages written for the three records plus two hand-made variants (a hidden check, hostile text)."""
    records = dict(graded["records"])
    hidden = copy.deepcopy(records["reference"])
    hidden["submission"] = "hidden-check"
    hidden["checks"][0]["visibility"] = "hidden"
    hidden["checks"][0]["feedback"] = HIDDEN
    records["hidden-check"] = hidden
    hostile = copy.deepcopy(records["zeros"])
    hostile["submission"] = f"evil{SCRIPT}"
    hostile["checks"][1]["feedback"] = f"you wrote {SCRIPT} and `{SCRIPT}`"
    hostile["messages"].insert(0, f"In the baseline run, line 3: {SCRIPT}")
    hostile["output"] = {"head": f"printed {SCRIPT}\n<img src=x onerror=alert(2)>", "tail": f"end {SCRIPT}",
                         "bytes": 10, "omitted_bytes": 0}
    if isinstance(hostile.get("figures"), dict):
        hostile["figures"]["baseline"] = {"kind": "panels", "panels": [{"kind": SCRIPT, "title": SCRIPT}]}
    records[hostile["submission"]] = hostile
    limited = copy.deepcopy(records["reference"])
    limited["submission"] = "slow"
    limited["runs"]["baseline"] = dict(next(iter(limited["runs"].values())), ending="killed_wall")   # as written
    limited["messages"].insert(0, "In the baseline run, your file hit the 30 s time limit and was stopped; "
                                  "values computed before that were kept.")
    limited["output"] = {"head": "H" * 50000, "tail": "T" * 30000 + "LAST-LINE", "bytes": 3000000,
                         "omitted_bytes": 2920000}
    records["slow"] = limited
    out = graded["root"] / "pages"
    started = time.monotonic()
    written = write_reports(out, list(records.values()), assignment, graded["reference_figures"], graded["run_info"])
    seconds = time.monotonic() - started
    texts = {rid: (out / f"{safe_filename(rid)}.feedback.html").read_text() for rid in records}
    return {"out": out, "written": written, "records": records, "report": (out / "report.html").read_text(),
            "student": texts, "seconds": seconds}


def test_every_page_is_written(pages):
    out = pages["out"]
    expected = {out / "report.html"} | {out / f"{safe_filename(r)}.feedback.html" for r in pages["records"]}
    assert set(pages["written"]) == expected
    assert all(p.is_file() and p.stat().st_size > 1000 for p in expected)
    assert pages["seconds"] < 60, f"writing {len(expected)} pages took {pages['seconds']:.1f} s"


def test_pages_run_nothing_and_load_nothing(pages):
    for text in [pages["report"], *pages["student"].values()]:
        assert "<script" not in text.lower()
        assert not re.search(r"<[a-z][^>]*\son\w+\s*=", text, re.I), "no element may carry an event handler"
        assert "Content-Security-Policy" in text and "default-src 'none'" in text
        assert not re.search(r'(src|href)="(https?:|//)', text), "a page must not load anything remote"


# ---- class report --------------------------------------------------------------------------------------

def test_class_report_shows_distribution_pass_rates_feedback_errors_and_environment(pages, graded, assignment):
    report = pages["report"]
    assert 'id="histogram"' in report and DATA_URI.search(report)
    assert len(DATA_URI.findall(report)) >= 2  # the score distribution and the check pass rates
    graded_records = [r for r in pages["records"].values() if r["status"] == "graded"]
    for spec in assignment.checks:
        row = re.search(rf'<tr id="check-{re.escape(spec.id)}">(.*?)</tr>', report, re.S)
        assert row, f"{spec.id} missing from the class report"
        full = sum(1 for r in graded_records for c in r["checks"] if c["id"] == spec.id and c["score"] >= c["max_score"])
        assert f"{full} / {len(graded_records)}" in row.group(1)
        assert f"{100 * full / len(graded_records):.0f}%" in row.group(1)
    for group in assignment.groups:
        assert f'<tr id="group-{group}">' in report
    # the zeros case (and its hostile copy) fail memory_unavailable.recorded_as_none with the same feedback
    feedback = next(c["feedback"] for c in graded["records"]["zeros"]["checks"]
                    if c["id"] == "memory_unavailable.recorded_as_none")
    section = report.split('id="feedback"', 1)[1].split("</table>", 1)[0]
    assert re.search(r'<td class="num">2</td><td><code>memory_unavailable.recorded_as_none</code></td>', section)
    assert _plain(feedback)[:40] in _plain(section)
    problems = report.split('id="problems"', 1)[1].split("</table>", 1)[0]
    assert ">empty</a>" in problems and "empty" in graded["records"]["empty"]["messages"][0]
    assert _plain(graded["records"]["empty"]["messages"][0]) in _plain(problems)
    slow = re.search(r"<tr><td><a href=\"slow.feedback.html\">slow</a></td><td>hit a limit</td>(.*?)</tr>", problems, re.S)
    assert slow and "30 s time limit" in slow.group(1)
    assert ">reference</a>" not in problems
    environment = report.split('id="environment"', 1)[1].split("</table>", 1)[0]
    assert graded["run_info"]["environment"]["jax"] in environment
    assert str(SUITABLE) in environment
    isolation = next(m for m in graded["records"]["reference"]["messages"] if m.startswith("Isolation used: "))
    assert isolation.removeprefix("Isolation used: ").rstrip(".") in _plain(environment)


def _plain(html_text: str) -> str:
    """Text with tags dropped and the few entities Jinja writes undone, for comparing with record strings."""
    text = re.sub(r"<[^>]+>", "", html_text)
    for entity, char in (("&#39;", "'"), ("&#34;", '"'), ("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return text.replace("`", "")


# ---- per-student page ----------------------------------------------------------------------------------

def test_student_page_shows_groups_visible_feedback_figures_and_output(pages, graded, assignment):
    for case in ("reference", "zeros"):
        record = graded["records"][case]
        page = pages["student"][case]
        groups = page.split('id="groups"', 1)[1].split("</table>", 1)[0]
        for name, value in record["groups"].items():
            assert f"<code>{name}</code>" in groups
            assert f"{value['score']:g} / {value['max_score']:g}" in groups
        for check in record["checks"]:
            assert f'id="check-{check["id"]}"' in page
            assert _plain(check["feedback"])[:60] in _plain(page)
        assert 'id="output-head"' in page and _plain(record["output"]["head"])[:40] in _plain(page)
        if record["output"].get("tail"):
            assert 'id="output-tail"' in page
    if not graded["reference_figures"]:
        pytest.fail("no reference figures: the assignment should name its figure ([report] figure)")
    for case in ("reference", "zeros"):
        # the runs this file got: the variant alone for the reference, both for a file that failed a check there
        scenarios = [name for name in graded["reference_figures"] if name in graded["records"][case]["runs"]]
        page = pages["student"][case]
        student = re.findall(r'<figure class="student-figure">.*?</figure>', page, re.S)
        reference = re.findall(r'<figure class="reference-figure">.*?</figure>', page, re.S)
        assert len(student) == len(reference) == len(scenarios)
        if "figures" in graded["records"][case]:
            assert all(DATA_URI.search(f) for f in student + reference), f"{case}: a figure image is missing"
    if "figures" in graded["records"]["zeros"]:
        images = {case: re.findall(r'src="(data:image/png;base64,[^"]+)"', pages["student"][case]) for case in CASES}
        ref_student, ref_reference = images["reference"][0::2], images["reference"][1::2]
        assert ref_student == ref_reference, "the reference solution's own figures should equal the reference's"
        zeros_student, zeros_reference = images["zeros"][0::2], images["zeros"][1::2]
        variant = scenarios.index("variant")
        assert zeros_student[variant] != zeros_reference[variant], "the bytes-instead-of-unavailable panel differs"
        # ... and the page says so in words: its panel 2 is titled as bytes where the reference says unavailable
        differs = pages["student"]["zeros"].split("How yours differs", 1)
        assert len(differs) == 2 and "Panel 2: your title is" in _plain(differs[1])
        assert "How yours differs" not in pages["student"]["reference"]


def test_a_long_output_is_cut_to_its_head_and_tail(pages):
    page = pages["student"]["slow"]
    head = page.split('id="output-head">', 1)[1].split("</pre>", 1)[0]
    tail = page.split('id="output-tail">', 1)[1].split("</pre>", 1)[0]
    assert head == "H" * 20000 and tail.endswith("LAST-LINE") and len(tail) == 20000
    assert "2920000 bytes not kept by the grader, 40009 more" in page


def test_student_page_of_an_error_record(pages, graded):
    page = pages["student"]["empty"]
    assert 'id="error"' in page and _plain(graded["records"]["empty"]["messages"][0]) in _plain(page)
    assert "Your file was not run" in page
    assert 'id="output-head"' not in page


def test_hidden_checks_are_left_out_of_the_student_page(pages):
    page = pages["student"]["hidden-check"]
    assert HIDDEN not in page
    hidden_id = pages["records"]["hidden-check"]["checks"][0]["id"]
    assert f'id="check-{hidden_id}"' not in page and hidden_id not in page
    assert 'id="check-runs.reached_end"' in page  # the rest is there
    assert "a hidden check" in page and "A hidden check passed; its details are not shown." in page   # counted


def test_student_text_is_escaped_everywhere(pages):
    hostile_id = f"evil{SCRIPT}"
    page = pages["student"][hostile_id]
    assert SCRIPT not in page and "<script" not in page.lower()
    assert page.count(ESCAPED) >= 5  # id, feedback (twice), a message, output head and tail
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert f"<code>{ESCAPED}</code>" in page  # backticks still become <code>, around escaped text
    assert SCRIPT not in pages["report"] and ESCAPED in pages["report"]
    assert (pages["out"] / f"{safe_filename(hostile_id)}.feedback.html").is_file()


# ---- hostile figures -----------------------------------------------------------------------------------

def _deep(levels: int) -> dict:
    value: dict = {"kind": "panels"}
    for _ in range(levels):
        value = {"a": value}
    return value


HOSTILE = {
    "none": (None, "was not defined"),
    "string": ("x", "it is the string 'x'"),
    "no_panels": ({"kind": "panels"}, "has no panels"),
    "empty_panels": ({"kind": "panels", "panels": []}, "has no panels"),
    "string_y": ({"kind": "panels", "panels": [{"kind": "bar", "y": "a"}]}, "has no numeric y values"),
    "many_labels": ({"kind": "panels", "panels": [{"kind": "bar", "title": "wide", "labels": [f"l{i}" for i in range(10000)],
                                                   "series": [{"label": "s", "y": list(range(10000))}]}]},
                    "only the first 40 are drawn"),
    "deep": (_deep(50), "has no 'kind'"),
    "none_in_y": ({"kind": "panels", "panels": [{"kind": "bar", "title": "gaps", "labels": ["a", "b", "c"],
                                                 "series": [{"label": "s", "y": [1, None, 3]}]}]}, "1 missing"),
    "strings_in_y": ({"kind": "panels", "panels": [{"kind": "bar", "series": [{"y": ["1", "2"]}]}]},
                     "not a number"),
    "unknown_kind": ({"kind": "scatter", "points": [[1, 2]]}, "has kind 'scatter'"),
    "line_panel": ({"kind": "panels", "panels": [{"kind": "line", "y": [1, 2]}]}, "only 'bar' panels are drawn"),
    "many_panels": ({"kind": "panels", "panels": [{"kind": "bar", "series": [{"y": [i]}]} for i in range(10000)]},
                    "only the first 6 are drawn"),
    "huge_values": ({"kind": "panels", "panels": [{"kind": "bar", "series": [{"y": [1e308, -1e308, 10**400, 2]}]}]},
                    "too large to draw"),
    "list": ([1, 2, 3], "it is a list of 3"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_read_figure_says_in_words_what_it_cannot_draw(case):
    figure, words = HOSTILE[case]
    read = figure_data.read_figure(figure, "visual_data")
    assert any(words in note for note in read.notes), read.notes


def test_hostile_figures_render_pages_that_say_what_was_not_drawn(pages, graded, assignment, tmp_path):
    base = graded["records"]["reference"]
    records = []
    for case, (figure, _) in HOSTILE.items():
        record = copy.deepcopy(base)
        record["submission"] = f"hostile-{case}"
        record["figures"] = {name: copy.deepcopy(figure) for name in graded["reference_figures"] or ["baseline"]}
        records.append(record)
    started = time.monotonic()
    write_reports(tmp_path, records, assignment, graded["reference_figures"], graded["run_info"])
    assert time.monotonic() - started < 60
    for case, (figure, words) in HOSTILE.items():
        page = (tmp_path / f"hostile-{case}.feedback.html").read_text()
        assert "could not be drawn" not in page, f"{case}: the page fell back to an error page"
        assert 'id="groups"' in page
        assert _plain(words) in _plain(page), f"{case}: {words!r} not said on the page"
        drawable = figure_data.read_figure(figure).panels
        student_images = [f for f in re.findall(r'<figure class="student-figure">.*?</figure>', page, re.S)
                          if DATA_URI.search(f)]
        assert bool(student_images) == bool(drawable), case


# ---- a real browser ------------------------------------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def _chromium() -> str:
    """The browser, else a skip saying what is missing; in CI (`CI=true`), where it is installed on purpose, a
    missing browser fails the test instead of hiding it."""
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    message = ("chromium is not installed: run scripts/install-test-tools (it installs Debian's `chromium` package, "
               "~420 MiB); only the tests that open the pages in a browser need it")
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(message + "; CI installs it, so here it must be present.")
    pytest.skip(message)


@pytest.mark.parametrize("ci, outcome", [("", pytest.skip.Exception), ("true", pytest.fail.Exception)])
def test_a_missing_browser_is_skipped_with_a_reason_except_in_ci(monkeypatch, ci, outcome):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="scripts/install-test-tools"):
        _chromium()


def _screenshot(page: Path, png: Path, profile: Path) -> np.ndarray:
    command = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
               "--window-size=1200,1600", page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert png.is_file(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    from PIL import Image  # Pillow comes with matplotlib

    with Image.open(png) as image:
        return np.asarray(image.convert("L"), dtype=float) / 255.0


@pytest.mark.parametrize("which", ["report", "student"])
def test_pages_render_in_headless_chromium(pages, tmp_path, which):
    page = pages["out"] / ("report.html" if which == "report" else "zeros.feedback.html")
    pixels = _screenshot(page, tmp_path / "shot.png", tmp_path / "profile")
    assert pixels.shape == (1600, 1200)
    assert pixels.std() > 0.1, f"the screenshot is blank (std {pixels.std():.3f})"
    dark = (pixels < 0.3).mean()
    assert dark > 0.005, f"too few dark pixels ({dark:.4f}): no text or figures were drawn"
    assert (pixels > 0.9).mean() > 0.3, "the page background should be mostly white"


def test_most_common_feedback_counts_texts_that_differ_only_in_their_numbers_together():
    """Issue 57: each student's feedback quotes their own values, so counting exact texts gave every line a count of
    1. Texts that differ only in their numbers are one kind; different wording stays apart."""
    from grader.outputs.reports import feedback_kind

    a = "temp_size_in_bytes for plain is 2308628, but the compiler reports 324 bytes when you run your file."
    b = "temp_size_in_bytes for plain is -17, but the compiler reports 1.5e3 bytes when you run your file."
    c = "temp_size_in_bytes for plain is missing."
    assert feedback_kind(a) == feedback_kind(b) != feedback_kind(c)
    assert feedback_kind("first line 3\nsecond line 4") == feedback_kind("first line 9\nother")
