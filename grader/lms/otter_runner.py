"""otter's autograder, run by the sandboxed grader: `otter run -a ZIP FILE` and Gradescope grade exactly as
`grader grade` does, and always write a results.json.

otter's own Python runner picks the submission file (refusing a second file), reads a notebook with nbformat
(failing on one that is not JSON) and runs it in its kernel, all before any plugin is called. For an autograder
zip whose otter_config.json names the sandboxed grader's plugin, `install` makes otter create a
`SandboxedRunner` instead: the submission folder is read with `grader.intake.discovery`'s rules (the Gradescope layout
is a folder; `otter run` hands over one file), graded in the sandbox (`grader.grading.grade`), and the record becomes
otter's GradingResults, whose Gradescope form is `grader.lms.gradescope.results_json` with otter's options
applied. Whatever the input, a record comes out, so a results.json does too; a fault of the grader itself
becomes an error record, never a crash. Other otter assignments are untouched.

How otter finds it:
- Gradescope: the zip's `run_otter.py` calls `install()` before otter's `main`;
- `otter run`: `pip install` of this package puts a small import hook in site-packages (`grader_otter_hook.pth`,
  see setup.py and otter_import_hook.py) that does the same when otter's autograder module is imported. otter reads
  no entry point or plugin before it has chosen its runner, so nothing lighter can reach it.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import time
import traceback
from pathlib import Path
from typing import Any

from otter.run.run_autograder.runners.abstract_runner import AbstractLanguageRunner
from otter.run.run_autograder.utils import OtterRuntimeError, print_output
from otter.test_files import GradingResults, TestCase, TestCaseResult, TestFile

from grader.common.text import clean_data
from grader.common.user_cache import named_cache_dir, user_cache_dir
from grader.config.assignment import Assignment, load
from grader.config.late import late_policy
from grader.grading.grade import grade_one
from grader.grading.reference import reference_facts
from grader.grading.single import grade_in_verified_world
from grader.intake.discovery import Submission, load_submission_folder
from grader.lms.gradescope import (
    OtterSettings,
    check_output,
    results_json,
    submission_output,
)
from grader.lms.late import autograder_time, charged
from grader.model.record import CheckRecord, Record
from grader.model.verdicts import grader_fault, passed
from grader.runs.jobs import fresh_variant_seed, variant_seed_for
from grader.sandbox.isolation import WeakIsolation, isolation_for_command

PLUGIN_NAME = "grader.lms.otter_plugin.SandboxedGrader"   # as otter_config.json names it
CACHE_FOLDER = ".grader-cache"          # under <autograder>/source: reference facts, warmed by setup.sh
TARGET_MODULE = "otter.run.run_autograder"
HOOK_MODULE = "grader_otter_hook"


def plugin_settings(otter_config: Any) -> dict | None:
    """Our plugin's entry in an otter config (a dict or an AutograderConfig), or None when it is not ours."""
    plugins = otter_config.get("plugins", []) if isinstance(otter_config, dict) else getattr(otter_config, "plugins", [])
    for plugin in plugins or []:
        if isinstance(plugin, dict) and PLUGIN_NAME in plugin:
            return dict(plugin[PLUGIN_NAME] or {})
        if plugin == PLUGIN_NAME:
            return {}
    return None


class CheckFile(TestFile):
    """One of our checks as an otter test file with one test case; scores come from our record."""

    @classmethod
    def from_check(cls, check: CheckRecord) -> CheckFile:
        case = TestCase(name=check["id"], body=None, hidden=check["visibility"] != "visible",
                        points=check["max_score"], success_message=None, failure_message=None)
        test_file = cls(check["id"], check["id"], [case], all_or_nothing=False)
        test_file.test_case_results = [TestCaseResult(test_case=case, message=check_output(check),
                                                      passed=passed(check["score"], check["max_score"]))]
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
    """otter's results object for one of our records; its Gradescope form is our results.json."""

    record: Record               # set by from_record, the only way one is made
    execution_time: float = 0.0
    titles: dict = {}

    @classmethod
    def from_record(cls, record: Record, execution_time: float, titles: dict[str, str]) -> SandboxedGradingResults:
        results = cls.__new__(cls)
        GradingResults.__init__(results, [])
        for check in record["checks"]:
            results.results[check["id"]] = CheckFile.from_check(check)
        results.set_output(submission_output(record))
        results.record, results.execution_time, results.titles = record, execution_time, titles
        return results

    def to_gradescope_dict(self, ag_config: Any) -> dict[str, Any]:
        return results_json(self.record, self.execution_time, OtterSettings.from_config(ag_config), self.titles)


def load_assignment(root: Path, assignment_id: str | None, cache: Path | None = None) -> tuple[Assignment, dict]:
    """The assignment shipped in the zip and its reference facts (cached, by default under source/.grader-cache)."""
    assignment = load(assignment_id, root)
    return assignment, reference_facts(assignment, cache or warm_cache(root, otter_run=False))


def warm_cache(source: Path, otter_run: bool) -> Path:
    """Where the warm state is kept: the folder named by `$GRADER_CACHE_DIR` when set; else, for `otter run`, the
    user's cache folder, and on Gradescope source/.grader-cache (filled by setup.sh when the image is built)."""
    return named_cache_dir() or (user_cache_dir() if otter_run else source / CACHE_FOLDER)


class SandboxedRunner(AbstractLanguageRunner):
    """otter's runner for our assignments: otter's kernel never runs; the sandboxed grader does the grading."""

    def prepare_files(self) -> None:
        os.makedirs("results", exist_ok=True)   # nothing is copied into the submission: it is graded as it came

    def run(self) -> SandboxedGradingResults:
        started = time.monotonic()
        settings = plugin_settings(self.ag_config) or {}
        source = Path("source").absolute()
        cache = warm_cache(source, getattr(self.ag_config, "otter_run", False))
        try:   # below namespaces only when asked for by name ($GRADER_ALLOW_WEAK_ISOLATION, the plugin's setting)
            print_output(isolation_for_command(bool(settings.get("allow_weak_isolation", False))))
        except WeakIsolation as error:
            raise _unprepared(error) from None
        try:
            assignment = load(settings.get("assignment"), source)
        except Exception as error:  # a broken autograder: details to stdout (instructor only), plain words to students
            raise _unprepared(error) from None
        requested = settings.get("variant_seed", getattr(self.ag_config, "seed", None))
        submission = self.submission(assignment)
        if submission.problem:   # nothing will run: no warm-up
            seed = variant_seed_for(assignment, int(requested)) if requested is not None else fresh_variant_seed(assignment)
            record = grade_one(assignment, submission, {}, seed)
        else:
            try:
                # In a world the reference solution scores full marks in (grading/single.py). Compiled programs only
                # from public code: a public solution (shipped in the zip); the starter is rendered by the authoring
                # stage, not here, so a private solution's runs compile for themselves.
                record = grade_in_verified_world(assignment, submission, print_output, cache,
                                                 None if requested is None else int(requested),
                                                 assignment.public_solution(), print_output)
            except Exception as error:  # the reference did not run: the autograder is broken, not the student
                raise _unprepared(error) from None
        record = clean_data(record)   # valid text whatever the run sent: otter prints and writes it
        # the course's late policy, from Gradescope's submission_metadata.json (here, in the autograder folder), as
        # `grader grade` applies it from the export's metadata: one total on both paths
        record = charged(record, late_policy(assignment.config), autograder_time(Path(".")))
        Path("results/record.json").write_text(json.dumps(record, indent=2, default=str))   # for the instructor
        if grader_fault(record):   # no score the grader did not earn: the autograder fails, and says it is its fault
            print_output("\n" + report(record))
            raise OtterRuntimeError("The autograder could not grade this submission through its own fault (not "
                                    "yours); your instructor can see the details in the autograder output and will "
                                    "run it again.")
        results = SandboxedGradingResults.from_record(record, time.monotonic() - started,
                                                      {spec.id: spec.title for spec in assignment.checks})
        print_output("\n" + report(record))
        return results

    def resolve_submission_path(self) -> str:   # otter's choice of file is not used: see `submission`
        return "submission"

    def validate_submission(self, submission_path: str) -> None:
        return None

    def write_pdf(self, submission_path: str) -> str:
        raise OtterRuntimeError("PDF export is not supported by the sandboxed grader")

    def submission(self, assignment: Assignment) -> Submission:
        """The submission folder, read as `grader grade` reads a submission folder: one file is that file; with
        several, the assignment's file is graded and the others are noted."""
        return load_submission_folder(Path("submission").absolute(), assignment.submission_filename,
                                      assignment.max_submission_bytes)


def _unprepared(error: BaseException) -> OtterRuntimeError:
    """A broken autograder: the details to stdout (instructor only), plain words to the student."""
    print_output(f"grader: could not prepare the assignment: {error}")
    return OtterRuntimeError("The autograder could not prepare this assignment; "
                             "your instructor can see the details in the autograder output.")


def report(record: Record) -> str:
    """Printed to the autograder's stdout: scores only, no feedback, and no seed (otter's `show_stdout` shows it to
    students; the seed is in results/record.json for the instructor)."""
    lines = [f"Sandboxed grader: {record['score']:g} / {record['max_score']:g} ({record['status']})"]
    lines += [f"  {c['id']:<48} {c['score']:>6g} / {c['max_score']:<6g} {c['visibility']}" for c in record["checks"]]
    if record.get("grader_error"):
        lines.append("grader error:\n" + record["grader_error"])
    return "\n".join(lines)


def sandboxed_runner(otter_config: dict, **kwargs: Any) -> SandboxedRunner | None:
    """A SandboxedRunner for a config that names our plugin, else None (otter's own runner is used)."""
    if plugin_settings(otter_config) is None:
        return None
    from otter.run.run_autograder.autograder_config import AutograderConfig

    return SandboxedRunner(AutograderConfig({**otter_config, **kwargs}))


def install(module: Any = None) -> None:
    """Make otter's autograder create a SandboxedRunner for configs that name our plugin."""
    if module is None:
        import otter.run.run_autograder as otter_autograder

        module = otter_autograder
    original = module.create_runner
    if getattr(original, "_sandboxed", False):
        return

    def create_runner(otter_config: dict, **kwargs: Any):
        return sandboxed_runner(otter_config, **kwargs) or original(otter_config, **kwargs)

    create_runner._sandboxed = True   # type: ignore[attr-defined]
    module.create_runner = create_runner


def run_gradescope(autograder_dir: str = "/autograder") -> None:
    """Gradescope's entry point: otter's main with our runner; a results.json whatever happens."""
    install()
    from otter.run.run_autograder import main

    try:
        main(autograder_dir)
    except BaseException as error:   # otter has written results.json for its own errors; write one for the rest
        results = Path(autograder_dir) / "results" / "results.json"
        if not results.is_file():
            results.parent.mkdir(parents=True, exist_ok=True)
            results.write_text(json.dumps(clean_data(failure_results(error)), indent=2))
        traceback.print_exc()


def failure_results(error: BaseException) -> dict:
    return {"score": 0, "execution_time": 0, "output_format": "text", "stdout_visibility": "hidden",
            "output": "The autograder failed on this submission; your instructor has been told. (Not your fault.)",
            "tests": [{"name": "Autograder error", "score": 0, "max_score": 0, "status": "failed", "visibility": "hidden",
                       "output": f"{type(error).__name__}: {error}"[:4000]}]}


def install_hook(site_packages: Path | None = None) -> Path:
    """Write the import hook and its .pth line into a folder (idempotent); returns the .pth path.

    `pip install` already does this (setup.py); this is for a folder pip did not install into (a test putting the
    checkout's own hook first on PYTHONPATH, an environment that imports the package from a path)."""
    folder = site_packages or Path(sysconfig.get_paths()["purelib"])
    source = Path(__file__).with_name("otter_import_hook.py")
    (folder / f"{HOOK_MODULE}.py").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    pth = folder / f"{HOOK_MODULE}.pth"
    pth.write_text(f"import {HOOK_MODULE}; {HOOK_MODULE}.install()\n")
    return pth


if __name__ == "__main__":
    if sys.argv[1:] == ["install-hook"]:
        print(install_hook())
    elif len(sys.argv) == 3 and sys.argv[1] == "gradescope":
        run_gradescope(sys.argv[2])
    else:
        sys.exit("usage: python -m grader.lms.otter_runner install-hook | gradescope AUTOGRADER_DIR")
