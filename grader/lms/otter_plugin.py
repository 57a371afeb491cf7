"""The name otter_config.json gives the sandboxed grader: `{"plugins": [{"grader.lms.otter_plugin.SandboxedGrader":
{"assignment": "<id>", "variant_seed": <optional int>}}]}`.

The grading itself is `grader.lms.otter_runner.SandboxedRunner`, which otter uses for any config naming this plugin
once `grader.lms.otter_runner.install` has run (Gradescope's run_otter.py calls it; `otter run` gets it from the
import hook that `pip install` of this package puts in site-packages). Should otter reach this plugin anyway, the
runner was not installed: grading in otter's kernel would let student code rewrite its own score, so the plugin
stops with a clear message (otter then writes a results.json saying so) instead.

`python -m grader.lms.otter_plugin warm AUTOGRADER_DIR` (setup.sh) measures the reference facts once, at image
build time (the warm state, grader/grading/warm_state.py, in source/.grader-cache).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from otter.plugins import AbstractOtterPlugin
from otter.run.run_autograder.utils import OtterRuntimeError

from grader.grading.warm_state import WarmState
from grader.lms.otter_runner import (
    PLUGIN_NAME,
    load_assignment,
    plugin_settings,
    warm_cache,
)

__all__ = ["PLUGIN_NAME", "SandboxedGrader", "warm_reference_cache"]


class SandboxedGrader(AbstractOtterPlugin):
    def before_grading(self, config: Any) -> None:
        raise OtterRuntimeError("The sandboxed grader's runner is not installed in this environment, so nothing was "
                                "graded. Install the grader package with pip in the environment otter runs in "
                                "(its import hook, grader_otter_hook.pth, comes with it).")


def warm_reference_cache(autograder_dir: str | Path) -> None:
    """Measure the reference facts (and compile a public solution's programs) once at image build time (setup.sh), so
    each submission skips it."""
    source = Path(autograder_dir) / "source"
    settings = plugin_settings(json.loads((source / "otter_config.json").read_text()))
    if settings is None:
        raise SystemExit(f"{source / 'otter_config.json'} does not configure {PLUGIN_NAME}")
    cache = warm_cache(source, otter_run=False)
    assignment, _ = load_assignment(source, settings.get("assignment"), cache)
    state = WarmState(assignment, cache, public_source=assignment.public_solution())
    print(f"reference facts for {assignment.id} cached in {state.folder}")
    if state.compiled:     # a public solution, and a sandbox that keeps programs: compile them into the image too
        try:
            state.starter()
            print(f"compiled programs of {assignment.id}'s public code cached in {state.folder}")
        except Exception as error:   # each submission then compiles them once, as before
            print(f"the public code's programs could not be compiled now ({error}); each submission compiles them")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "warm":
        sys.exit("usage: python -m grader.lms.otter_plugin warm AUTOGRADER_DIR")
    warm_reference_cache(sys.argv[2])
