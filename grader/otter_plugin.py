"""otter-grader plugin: `otter run` and Gradescope grade with our sandboxed grader, never in otter's kernel.

otter 7 offers one extension point that runs both under `otter run -a autograder.zip FILE` and on
Gradescope (whose `run_autograder` calls `otter.run.run_autograder.main`): plugins listed in the zip's
`otter_config.json`. `otter run` never executes the zip's `run_autograder`, and `create_runner` only
knows its own Python and R runners, so a plugin is the hook. `PythonRunner.run` calls, in order:

- `before_grading(config)`: we grade the submission here, with the assignment and reference solution
  shipped in the zip (`<autograder>/source/`), each scenario in its own sandboxed child (`grader.grading`).
  The reference facts are cached in source/.grader-cache (Gradescope: setup.sh measures them once) or,
  under `otter run`, in the user cache that `grader check` uses.
  We also delete a submitted `.OTTER_LOG`, which otter would otherwise unpickle in its own process.
- `before_execution(notebook)`: we return an empty notebook, so otter's kernel runs only otter's own
  setup and export cells, and we move every submitted file out of the kernel's working folder first
  (a submitted `otter/` package, or an `otter.py` beside a notebook, would otherwise be what that
  kernel imports as otter, and otter unpickles the kernel's results in its own process).
- `after_grading(results)`: we replace otter's (empty) results by one otter test file per check, with
  our scores, so otter's summaries, `results.pkl` and grade CSVs carry our grades, and make
  `to_gradescope_dict` return `grader.gradescope.results_json(record)`: otter's own version gives every
  test the same visibility, ours keeps each check's visibility (visible / hidden / after_published).

Configuration, in otter_config.json: `{"plugins": [{"grader.otter_plugin.SandboxedGrader":
{"assignment": "<id>", "variant_seed": <optional int>}}]}`.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from otter.plugins import AbstractOtterPlugin
from otter.run.run_autograder.utils import OtterRuntimeError, print_output
from otter.test_files import GradingResults, TestCase, TestCaseResult, TestFile

from .assignment import Assignment, load
from .batch import grade_one
from .cli import user_cache_dir
from .discovery import load_single
from .gradescope import check_output, results_json, submission_output
from .reference import reference_facts
from .runs import fresh_variant_seed

PLUGIN_NAME = "grader.otter_plugin.SandboxedGrader"   # as otter_config.json names it (also under -m)
CACHE_FOLDER = ".grader-cache"          # under <autograder>/source: reference facts, warmed by setup.sh
ASIDE_FOLDER = "submission-files"       # under <autograder>: the submitted files, out of the kernel's way
OTTER_LOG = ".OTTER_LOG"                # otter.check.notebook.OTTER_LOG_FILENAME
KEEP_IN_SUBMISSION = {"tests"}          # otter's copy of source/tests (empty for us)


class CheckFile(TestFile):
    """One of our checks as an otter test file with one test case; scores come from our record."""

    @classmethod
    def from_check(cls, check: dict) -> "CheckFile":
        case = TestCase(name=check["id"], body=None, hidden=check["visibility"] != "visible",
                        points=check["max_score"], success_message=None, failure_message=None)
        test_file = cls(check["id"], check["id"], [case], all_or_nothing=False)
        test_file.test_case_results = [TestCaseResult(test_case=case, message=check_output(check),
                                                      passed=check["score"] >= check["max_score"])]
        test_file.update_score(check["score"])   # partial credit within a check
        return test_file

    @classmethod
    def from_file(cls, path):
        raise TypeError("checks come from the sandboxed grader, not from test files")

    @classmethod
    def from_metadata(cls, s, path):
        raise TypeError("checks come from the sandboxed grader, not from notebook metadata")

    def run(self, global_environment):
        raise TypeError("checks never run in otter's kernel")


class SandboxedGradingResults(GradingResults):
    """otter's results object whose Gradescope form is our results.json (per-check visibility)."""

    def to_gradescope_dict(self, ag_config: Any) -> dict[str, Any]:
        return copy.deepcopy(self.get_plugin_data(PLUGIN_NAME)["gradescope"])


def source_root(submission_path: str | Path) -> Path:
    """`<autograder>/source`: otter always grades `<autograder>/submission/<file>`."""
    return Path(submission_path).absolute().parent.parent / "source"   # never follow a submitted link


def load_assignment(root: Path, assignment_id: str | None, cache: Path | None = None) -> tuple[Assignment, dict]:
    """The assignment shipped in the zip and its reference facts (cached, by default under source/.grader-cache)."""
    assignment = load(assignment_id, root)
    return assignment, reference_facts(assignment, cache or root / CACHE_FOLDER)


def cache_folder(config: Any, root: Path) -> Path:
    """Gradescope: source/.grader-cache, warmed by setup.sh. `otter run` extracts the zip afresh each time,
    so it uses the user cache `grader check` uses (keyed by versions and assignment fingerprint)."""
    return user_cache_dir() if getattr(config, "otter_run", False) else root / CACHE_FOLDER


class SandboxedGrader(AbstractOtterPlugin):
    record: dict | None = None
    execution_time: float = 0.0

    def before_grading(self, config: Any) -> None:
        started = time.monotonic()
        folder = Path(self.submission_path).parent
        (folder / OTTER_LOG).unlink(missing_ok=True)
        try:
            root = source_root(self.submission_path)
            assignment, facts = load_assignment(root, self.plugin_config.get("assignment"), cache_folder(config, root))
        except Exception as error:  # a broken autograder: details to stdout (instructor only), plain words to the student
            print_output(f"grader: could not prepare the assignment: {error}")
            raise OtterRuntimeError("The autograder could not prepare this assignment; "
                                    "your instructor can see the details in the autograder output.") from None
        submission = load_single(Path(self.submission_path), assignment.submission_filename,
                                 assignment.max_submission_bytes)
        if Path(self.submission_path).stem != Path(assignment.submission_filename).stem:
            submission.notes.append(f"The file is named {Path(self.submission_path).name}; "
                                    f"the assignment asks for {assignment.submission_filename} (graded anyway).")
        seed = self.plugin_config.get("variant_seed")
        self.record = grade_one(assignment, submission, facts, int(seed) if seed is not None else fresh_variant_seed(assignment))
        self.execution_time = time.monotonic() - started

    def before_execution(self, submission: Any) -> Any:
        self._move_submitted_files_aside()
        if isinstance(submission, str):
            return ""
        emptied = nbformat.v4.new_notebook()
        emptied.metadata = nbformat.from_dict(copy.deepcopy(submission.get("metadata", {})))  # kernel choice, unvalidated
        return emptied

    def after_grading(self, results: GradingResults) -> None:
        record = self.record
        results.clear_results()
        for check in record["checks"]:
            results.results[check["id"]] = CheckFile.from_check(check)
        results.set_output(submission_output(record))
        results.set_plugin_data(PLUGIN_NAME, {"record": record, "gradescope": results_json(record, self.execution_time)})
        results._catastrophic_error = None  # otter's empty-notebook run is not part of the grade
        results.__class__ = SandboxedGradingResults

    def generate_report(self) -> str:
        """Printed to the autograder's stdout (hidden from students): scores only, no feedback."""
        record = self.record
        lines = [f"Sandboxed grader: {record['score']:g} / {record['max_score']:g} ({record['status']}), "
                 f"variant seed {record['variant_seed']}"]
        lines += [f"  {c['id']:<48} {c['score']:>6g} / {c['max_score']:<6g} {c['visibility']}" for c in record["checks"]]
        return "\n".join(lines)

    def _move_submitted_files_aside(self) -> None:
        folder = Path(self.submission_path).parent
        aside = folder.parent / ASIDE_FOLDER
        aside.mkdir(exist_ok=True)
        for entry in folder.iterdir():
            if entry.name not in KEEP_IN_SUBMISSION:
                shutil.move(str(entry), str(aside / entry.name))


def warm_reference_cache(autograder_dir: str | Path) -> None:
    """Measure the reference facts once at image build time (setup.sh), so each submission skips it."""
    source = Path(autograder_dir) / "source"
    config = json.loads((source / "otter_config.json").read_text())
    settings = [p[PLUGIN_NAME] for p in config.get("plugins", []) if isinstance(p, dict) and PLUGIN_NAME in p]
    if not settings:
        raise SystemExit(f"{source / 'otter_config.json'} does not configure {PLUGIN_NAME}")
    assignment, _ = load_assignment(source, settings[0].get("assignment"))
    print(f"reference facts for {assignment.id} cached in {source / CACHE_FOLDER}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "warm":
        sys.exit("usage: python -m grader.otter_plugin warm AUTOGRADER_DIR")
    warm_reference_cache(sys.argv[2])
