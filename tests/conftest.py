"""Session-wide set-up: every test grades with the one warm state the grader keeps between commands.

The warm state (grader/grading/warm_state.py: each assignment's reference facts and figures, its compiled programs,
the variant's per seed) lives in the cache folder `$GRADER_CACHE_DIR`. Set here for the whole run (unless the
caller set it), it is shared by every test module, both pytest-xdist workers (whose first builder holds the part's
lock while the other waits) and the commands the tests start (`grader`, `otter run`, the Gradescope entry point
inherit the variable), and it outlives the run: a second run of unchanged code measures nothing. The warm state's
key holds a digest of the grader's own files, so a run never trusts what other code measured.

Tests of the warm state itself (building, corruption, concurrent builders) use folders of their own.
"""

from __future__ import annotations

import os
import secrets

from grader.cli.world_ahead import ENABLED_ENV as PREPARE_AHEAD_ENV
from grader.common.user_cache import CACHE_DIR_ENV, user_cache_dir
from grader.runs.jobs import VARIANT_SEED_ENV

pytest_plugins = ("suite_time",)   # the suite's own time, said at the end of a run (tests/suite_time.py)


def pytest_configure(config) -> None:
    os.environ[CACHE_DIR_ENV] = str(user_cache_dir())   # the variable, if set, or the user's cache: now explicit
    # no batch leaves its next world compiling after it (cli/world_ahead.py): a test's work ends with the test
    # (tests of the preparation itself turn it on for themselves)
    os.environ[PREPARE_AHEAD_ENV] = "0"
    # One world for the session's batches and checks that ask for none (the number drawn once per run, so each run of
    # the suite still grades in a new world): its programs are compiled and the reference judged in it once, not once
    # per batch (about 4 CPU-s a batch). Both pytest-xdist workers share it: the controller sets it before they
    # start. Tests of drawing seeds and of the next world take the variable away for themselves.
    if not os.environ.get(VARIANT_SEED_ENV) and not hasattr(config, "workerinput"):
        os.environ[VARIANT_SEED_ENV] = str(secrets.randbelow(2**31 - 2) + 1)


# Modules from the costliest down, as measured (`--durations`, whole-tree CPU seconds) on 2 cores: pytest-xdist hands
# whole modules (--dist loadfile) to its workers in this order (--no-loadscope-reorder), so the longest start first
# and the short ones fill in at the end, instead of a long module starting last and running alone. Modules not
# listed follow in their usual order.
COSTLIEST_FIRST = [
    "test_corpus.py", "test_threats.py", "test_paths_agree.py", "test_threats_lms.py", "test_similarity.py",
    "test_sandbox.py", "test_student_check.py", "test_student_everywhere.py", "test_portable_runs.py",
    "test_cluster.py", "test_crash_safety.py", "test_autograder_zip.py",
    "test_busy_machine.py", "test_student_venv.py", "test_cli.py", "test_check_fuzz.py", "test_build.py",
    "test_config_validation.py", "test_warm_state.py", "test_world_ahead.py", "test_reports.py", "test_second_lesson.py",
    "test_compile_cache.py", "test_derivative_nudges.py", "test_record_schema.py", "test_evidence.py",
]


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {name: index for index, name in enumerate(COSTLIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: a module's own order is kept
