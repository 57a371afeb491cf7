"""One grade on every path: `grader grade`, the real `otter run -a ZIP FILE`, and Gradescope's entry point on an
`/autograder` layout give the same per-check scores and the same messages, and every path writes a results.json.

A representative set of the corpus goes through all three: what the paths do differently (how a file or folder
arrives, notebooks, file kinds and encodings, where the file is, how a run ends, how results are written), with
two wrong methods (one in a notebook) and their feedback; each otter and Gradescope run is a fresh interpreter,
so every case costs seconds, and the grading itself is the same code on every path (tests/test_corpus.py covers
it): files that cannot be graded (empty, blank, binary, not UTF-8, not Python, a notebook that is not JSON or has
no code), Gradescope folders (extra files, no Python, a wrong name, two files), a coding line, `__file__`, runs
that raise, exit or stop at a syntax error. The one corpus entry left out is the symbolic link: an LMS delivers
files, never links (otter copies the file the link points to).

Messages are compared without the isolation line (a fresh interpreter and the fork server describe themselves
differently) and with a folder's own name written as <folder> (Gradescope calls every folder `submission`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from lms_paths import gradescope_run, otter_run
from seeded_zip import SEED, with_seed  # noqa: E402

from grader.cli.batch import grade_folder
from grader.config.assignment import load
from grader.lms.autograder_zip import PLUGIN_NAME, write_autograder_zip
from grader.model.verdicts import ISOLATION_PREFIX

CORPUS = Path(__file__).parent / "assignments" / "performance-05" / "corpus"
CASES = [
    "reference.py", "notebook_reference.ipynb", "gradescope_layout", "gradescope_extra_file", "two_files",
    "no_python", "folder_wrong_name", "broken_notebook.ipynb", "notebook_no_code.ipynb", "empty.py", "blank.py",
    "binary.py", "not_utf8.py", "notes.txt", "latin1_with_coding_line.py", "reads_own_file.py",
    "syntax_error_last.py", "raises_midway.py", "os_exit_midway.py", "automatic_copied_from_finite.py",
    "notebook_hvp_plain_differentiates_remat.ipynb",
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    assignment = load("performance-05")
    work = tmp_path_factory.mktemp("paths")
    submissions = work / "submissions"
    submissions.mkdir()
    for case in CASES:
        source = CORPUS / case
        (shutil.copytree if source.is_dir() else shutil.copy)(source, submissions / case)
    out = work / "out"
    batch = grade_folder(assignment, submissions, out, variant_seed=SEED, progress=lambda line: None)
    records = {record["file"].split("/")[0]: record for record in batch.records}
    zip_path = with_seed(write_autograder_zip(assignment, work / "build"), work / "seeded.zip")

    def both(case: str) -> tuple[str, dict, dict]:
        entry = submissions / case
        return (case, otter_run(zip_path, entry, work / "otter" / case).results,
                gradescope_run(zip_path, entry, work / "gradescope" / case).results)

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {case: (otter, gradescope) for case, otter, gradescope in pool.map(both, CASES)}
    return {"records": records, "runs": runs}


def check_scores(results: dict) -> list[float]:
    return [test["score"] for test in results["tests"] if test["name"] != "Public Tests"]


def messages(lines: list[str], folder: str) -> list[str]:
    return [line.replace(f"{folder}/", "<folder>/").replace("submission/", "<folder>/") for line in lines
            if not line.startswith(ISOLATION_PREFIX)]


def output_messages(results: dict) -> list[str]:
    return [line[2:] for line in results["output"].splitlines()[1:] if line.startswith("- ")]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_the_three_paths_give_one_grade(paths, case):
    record = paths["records"][case]
    otter, gradescope = paths["runs"][case]
    expected = [check["score"] for check in record["checks"]]
    assert check_scores(otter) == expected, f"otter run differs from grader grade for {case}"
    assert check_scores(gradescope) == expected, f"Gradescope differs from grader grade for {case}"
    assert otter["score"] == gradescope["score"] == record["score"]
    wanted = messages(record["messages"], case)
    assert messages(output_messages(gradescope), case) == wanted
    assert messages(output_messages(otter), case) == wanted


@pytest.mark.slow
def test_every_path_wrote_a_results_json_for_every_input(paths):
    assert set(paths["runs"]) == set(CASES) == set(paths["records"])
    errors = [case for case, record in paths["records"].items() if record["status"] == "error"]
    assert len(errors) >= 8          # the malformed inputs really are in the set
    for case in errors:
        otter, gradescope = paths["runs"][case]
        assert otter["score"] == gradescope["score"] == 0 and "could not be graded" in gradescope["output"]


def test_a_broken_autograder_still_writes_results_in_plain_words(tmp_path):
    """No assignment in source/: the grader's own failure, a results.json saying so, details for the instructor."""
    for name in ("source", "submission", "results"):
        (tmp_path / name).mkdir()
    (tmp_path / "source" / "otter_config.json").write_text(
        json.dumps({"lang": "python", "plugins": [{PLUGIN_NAME: {"assignment": "performance-05"}}]}))
    (tmp_path / "submission" / "performance-05.py").write_text("x = 1\n")
    (tmp_path / "submission_metadata.json").write_text("{}")
    done = subprocess.run([sys.executable, "-m", "grader.lms.otter_runner", "gradescope", str(tmp_path)], cwd="/",
                          capture_output=True, text=True, timeout=300)
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and "could not prepare this assignment" in json.dumps(results)
    assert "grader: could not prepare the assignment" in done.stdout
