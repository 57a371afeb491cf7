"""The warm state kept between commands (grader/common/warm_store.py, grader/grading/warm_state.py, warm_up.py).

Most tests build parts with a stand-in for the trusted runs, so they can corrupt, race and prune them freely in
folders of their own. One test warms a fresh cache folder for real: a first batch measures, a second reuses what
the first measured and warms only its new batch's world, a third that has nothing to grade warms nothing.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

import grader.cli.batch
import grader.common.code_digest
import grader.grading.warm_state
from grader.authoring.starter import public_code
from grader.cli.batch import grade_folder
from grader.common.user_cache import CACHE_DIR_ENV, use_cache_dir, user_cache_dir
from grader.common.warm_store import View, WarmStore, link_files, prune_entries
from grader.config.assignment import load
from grader.grading.warm_state import WarmState, scenario_world, warm_key
from grader.grading.warm_up import GatedRunner
from grader.grading.world_check import WorldRejected, WorldVerdict
from grader.outputs.progress import Progress
from grader.runs.jobs import variant_seed_for

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def assignment():
    return load("performance-05")


def programs(staging: Path | None, names=("jit_a-cache", "jit_b-cache")) -> dict:
    """A stand-in for a trusted run: two "compiled programs" and a payload."""
    assert staging is not None
    for name in names:
        (staging / name).write_bytes(name.encode() * 100)
    return {"facts": {"n": 1}}


# ---- the store: published whole, verified, rebuilt -------------------------------------------------------------

def test_a_part_is_published_whole_and_read_back(tmp_path):
    store = WarmStore(tmp_path / "entry", "key-1")
    assert store.read("reference", True) is None
    part = store.build("reference", programs, True)
    assert part.payload == {"facts": {"n": 1}} and sorted(p.name for p in part.folder.iterdir()) == ["jit_a-cache", "jit_b-cache"]
    assert store.read("reference", True) == part
    assert not list((tmp_path / "entry" / "staging").iterdir()), "the staging folder was moved into place"
    document = json.loads((tmp_path / "entry" / "reference.json").read_text())
    assert document["key"] == "key-1" and set(document["files"]) == {"jit_a-cache", "jit_b-cache"}


def _torn_json(entry: Path) -> None:
    (entry / "reference.json").write_text('{"format": 1, "key": "key-1", "pay')


def _edited_payload(entry: Path) -> None:
    document = json.loads((entry / "reference.json").read_text())
    document["payload"]["facts"]["n"] = 2           # the checksum no longer matches
    (entry / "reference.json").write_text(json.dumps(document))


def _same_size_other_bytes(entry: Path) -> None:
    path = entry / "reference" / "jit_a-cache"
    path.write_bytes(b"x" * path.stat().st_size)


CORRUPTIONS = {
    "torn json": _torn_json,
    "edited payload": _edited_payload,
    "program with other bytes": _same_size_other_bytes,
    "program truncated": lambda entry: (entry / "reference" / "jit_a-cache").write_bytes(b"jit"),
    "program missing": lambda entry: (entry / "reference" / "jit_b-cache").unlink(),
    "program added": lambda entry: (entry / "reference" / "jit_c-cache").write_bytes(b"planted"),
    "folder missing": lambda entry: shutil.rmtree(entry / "reference"),
    "json missing": lambda entry: (entry / "reference.json").unlink(),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_corrupt_part_is_never_trusted_and_is_built_again(tmp_path, corruption):
    store = WarmStore(tmp_path / "entry", "key-1")
    store.build("reference", programs, True)
    CORRUPTIONS[corruption](tmp_path / "entry")
    assert store.read("reference", True) is None
    calls = []
    part = store.build("reference", lambda staging: calls.append(1) or programs(staging), True)
    assert calls == [1] and store.read("reference", True) == part
    assert sorted(p.name for p in part.folder.iterdir()) == ["jit_a-cache", "jit_b-cache"]


def test_a_part_of_another_key_or_without_the_programs_needed_is_stale(tmp_path):
    WarmStore(tmp_path / "entry", "other-code").build("reference", programs, True)
    assert WarmStore(tmp_path / "entry", "key-1").read("reference", True) is None
    store = WarmStore(tmp_path / "entry2", "key-1")
    store.build("reference", lambda staging: {"facts": {}}, False)      # kept where programs could not be
    assert store.read("reference", False) is not None and store.read("reference", True) is None
    assert store.read("reference", False, accept=lambda payload: "figures" in payload) is None


def test_a_failed_build_publishes_nothing(tmp_path):
    store = WarmStore(tmp_path / "entry", "key-1")

    def fails(staging):
        programs(staging)
        raise RuntimeError("the reference did not run cleanly")

    with pytest.raises(RuntimeError):
        store.build("reference", fails, True)
    assert store.read("reference", True) is None
    assert not (tmp_path / "entry" / "reference").exists() and not list((tmp_path / "entry" / "staging").iterdir())


def _build_slowly(folder: str, log: str) -> None:
    def make(staging):
        with open(log, "a") as stream:
            stream.write("built\n")
        time.sleep(0.5)
        return programs(staging)

    part = WarmStore(Path(folder), "key-1").build("reference", make, True)
    assert part.folder is not None


def test_two_processes_warming_at_once_build_once_and_both_read_it(tmp_path):
    log = tmp_path / "log"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_build_slowly, args=(str(tmp_path / "entry"), str(log))) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    assert log.read_text() == "built\n"
    assert WarmStore(tmp_path / "entry", "key-1").read("reference", True) is not None


# ---- views, seeds, old entries ---------------------------------------------------------------------------------

def test_a_view_gets_each_parts_programs_as_links_and_is_removed(tmp_path):
    store = WarmStore(tmp_path / "entry", "key-1")
    reference = store.build("reference", programs, True)
    seed = store.build("seed-7", lambda staging: programs(staging, ("jit_c-cache",)), True, base=reference)
    assert sorted(p.name for p in seed.folder.iterdir()) == ["jit_a-cache", "jit_b-cache", "jit_c-cache"]
    assert (seed.folder / "jit_a-cache").stat().st_ino != (reference.folder / "jit_a-cache").stat().st_ino, \
        "a part's builder started from links to a published part: it could have changed it"
    view = View(store)
    assert list(view.folder.iterdir()) == []
    view.add(reference)
    view.add(seed)
    assert sorted(p.name for p in view.folder.iterdir()) == ["jit_a-cache", "jit_b-cache", "jit_c-cache"]
    assert (view.folder / "jit_a-cache").stat().st_ino == (reference.folder / "jit_a-cache").stat().st_ino
    assert link_files(seed.folder, view.folder) == 0                      # adding again adds nothing
    view.close()
    assert not view.folder.exists() and store.read("seed-7", True) == seed


def test_pruning_keeps_the_recent_seeds_and_never_the_one_in_use(tmp_path):
    store = WarmStore(tmp_path / "entry", "key-1")
    for seed in range(6):
        store.build(f"seed-{seed}", programs, True)
        os.utime(tmp_path / "entry" / f"seed-{seed}.json", (1000 + seed, 1000 + seed))
    removed = store.prune("seed-", keep=3, spare=frozenset({"seed-0"}))
    assert sorted(removed) == ["seed-1", "seed-2"]
    assert sorted(p.stem for p in (tmp_path / "entry").glob("seed-*.json")) == ["seed-0", "seed-3", "seed-4", "seed-5"]
    assert not (tmp_path / "entry" / "seed-1").exists()


def test_old_entries_are_removed_recent_ones_kept(tmp_path):
    entries = {name: tmp_path / name for name in ("a-1", "a-2", "a-3", "a-4", "b-1")}
    for index, entry in enumerate(entries.values()):
        (entry / "reference").mkdir(parents=True)
        (entry / "used").touch()
        os.utime(entry / "used", (index, index))      # 1970: long unused
    removed = prune_entries(tmp_path, "a-", entries["a-1"], keep=1, max_age_seconds=3600)
    assert sorted(p.name for p in removed) == ["a-2", "a-3"]       # a-4 is the most recent other one; b-* not ours
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-1", "a-4", "b-1"]


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---- the key ------------------------------------------------------------------------------------------------------

def test_the_key_changes_with_the_graders_code_the_assignment_and_the_versions(assignment, monkeypatch):
    key = warm_key(assignment)
    assert warm_key(load("performance-05")) == key
    monkeypatch.setattr(grader.grading.warm_state, "grader_code_digest", lambda: "other code, same __version__")
    assert warm_key(assignment) != key
    monkeypatch.undo()
    monkeypatch.setattr(grader.grading.warm_state, "environment", lambda: {"jax": "0.0.1"})
    assert warm_key(assignment) != key
    monkeypatch.undo()
    monkeypatch.setattr(assignment, "fingerprint", "another assignment or solution")
    assert warm_key(assignment) != key


def test_the_code_digest_covers_every_file_of_the_package(tmp_path, monkeypatch):
    package = tmp_path / "grader"
    (package / "sandbox" / "child").mkdir(parents=True)
    (package / "sandbox" / "child" / "harness.py").write_text("x = 1\n")
    (package / "report.html.j2").write_text("<p>")
    monkeypatch.setattr(grader.common.code_digest, "PACKAGE_DIR", package)
    digest = grader.common.code_digest.grader_code_digest.__wrapped__()
    (package / "sandbox" / "child" / "harness.py").write_text("x = 2\n")
    assert grader.common.code_digest.grader_code_digest.__wrapped__() != digest


def test_the_cache_folder_is_the_named_one_else_the_users(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "xdg" / "jax-course-grader"
    use_cache_dir(tmp_path / "named")
    assert os.environ[CACHE_DIR_ENV] == str(tmp_path / "named") and user_cache_dir() == tmp_path / "named"


# ---- runs wait for their own world's warm-up --------------------------------------------------------------------

class FakeStart:
    def __init__(self, log):
        self.log = log

    def runner(self):
        # a job names its world only by its set-up calls (the same functions in both worlds): the variant's carry
        # a seed other than the lesson's
        return lambda job, limits: self.log.append(
            "variant" if any(call[1].get("seed") not in (None, 18) for call in job["setup_calls"]) else "baseline")


def test_a_run_waits_for_its_worlds_warm_up_and_no_other(assignment):
    from grader.runs.jobs import make_job

    log: list[str] = []
    gate = threading.Event()
    variant = assignment.scenarios["variant"]
    runner = GatedRunner(FakeStart(log), {scenario_world(assignment, variant, 99): gate})
    jobs = {name: make_job(assignment, assignment.scenarios[name], seed, "x = 1", "f.py")
            for name, seed in (("baseline", 18), ("variant", 99))}
    waiting = threading.Thread(target=runner, args=(jobs["variant"], assignment.limits))
    waiting.start()
    runner(jobs["baseline"], assignment.limits)
    runner(make_job(assignment, variant, 100, "x = 1", "f.py"), assignment.limits)   # another seed: another world
    runner(make_job(assignment, variant, 99, "x = 1", "f.py", batch_seed=100), assignment.limits)   # another batch
    time.sleep(0.2)
    assert log == ["baseline", "variant", "variant"] and waiting.is_alive()
    gate.set()
    waiting.join(5)
    assert log == ["baseline", "variant", "variant", "variant"]


# ---- the warm-up is visible from its first moment -------------------------------------------------------------

def test_progress_shows_the_warm_up_as_a_stage_in_plain_lines():
    lines: list[str] = []
    progress = Progress.lines(lines.append)
    progress.stage("Warming up")
    progress.note("Warm-up: fork server ready (1.0 s).")
    progress.start(2)
    progress.advance({"submission": "ann", "score": 1, "max_score": 2, "status": "graded"})
    assert lines == ["Warming up ...", "Warm-up: fork server ready (1.0 s).", "[1/2] ann: 1/2 (graded)"]


def test_progress_on_a_terminal_ticks_through_the_warm_up_then_draws_the_bar(monkeypatch):
    monkeypatch.setattr("grader.outputs.progress.TICK_SECONDS", 0.05)
    stream = io.StringIO()
    progress = Progress(stream, terminal=True)
    progress.stage("Warming up")
    progress.note("Warm-up: running the reference solution ...")
    time.sleep(0.3)
    progress.start(4)
    progress.finish()
    text = stream.getvalue()
    assert text.startswith("\rWarming up (0 s) ...")                              # at once, before any step
    assert text.count("\rWarming up (0 s): running the reference solution ...") >= 2   # redrawn while it runs
    assert "Warm-up: running the reference solution ...\n" in text                 # and kept as a line
    assert "Warming up: done (" in text and "0/4 graded, starting" in text


# ---- for real: a fresh cache warmed once, then reused ----------------------------------------------------------

@pytest.mark.slow
def test_a_fresh_cache_is_warmed_once_and_reused_by_the_next_batches(assignment, tmp_path, monkeypatch):
    """Batch 1 measures the reference facts and warms its batch's world, where it verifies the reference in its
    primary run; no file needs the lesson's own world, so nothing runs or compiles there; batch 2 (another seed)
    reuses the facts and warms only its world; batch 3 has nothing to grade and warms nothing. Grades are the same
    each time."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    folder, out = tmp_path / "submissions", tmp_path / "out"
    folder.mkdir()
    shutil.copy(assignment.solution_path, folder / "reference.py")
    (folder / "empty.py").write_text("")
    batches = []
    for seed, regrade in ((101, False), (202, True), (303, False)):
        lines: list[str] = []
        result = grade_folder(assignment, folder, out, variant_seed=seed, regrade=regrade, progress=lines.append)
        batches.append((result, "\n".join(lines)))
    (first, log1), (second, log2), (third, log3) = batches
    state = WarmState(assignment, public_source=public_code(assignment))
    kept = "reference facts"   # the lesson world's programs were never needed: none are kept
    primary = "graded in this batch's world (in its primary run): 100/100"
    assert "running the reference solution once" in log1 and primary in log1 and "in every scenario" not in log1
    assert f"{kept} reused ({state.folder})" in log2 and primary in log2 and "in every scenario" not in log2
    assert "running the reference solution" not in log2 and "compiling the lesson's programs" not in log2
    assert "Warm-up" not in log3 and third.reused == 2
    for result in (first, second):
        scores = {record["submission"]: record["score"] for record in result.records}
        assert scores == {"reference": assignment.max_score, "empty": 0}
    assert state.read_reference() is not None
    used = {seed: variant_seed_for(assignment, seed) for seed in (101, 202)}   # the suitable worlds they ask for
    assert (first.variant_seed, second.variant_seed) == (used[101], used[202])
    assert third.variant_seed == used[202]   # nothing to grade: no seed drawn, the report names its records' world
    for seed in used.values():
        verdict = state.read_world(seed)
        assert verdict is not None and verdict.suitable and verdict.seed == seed
    assert "compiling the lesson's programs" not in log1 and state.read_starter() is None
    if state.compiled:
        assert f"variant world of seed {used[101]} ready" in log1
        assert f"variant world of seed {used[202]} ready" in log2
        assert len(entries(state.read_seed(used[202], used[202]).folder)) > 0
    assert not list((state.folder / "views").iterdir()), "a batch's view outlived it"


class NoServer:
    def __init__(self, *args, **kwargs):
        pass

    def runner(self):
        return None

    def close(self):
        pass


@pytest.mark.parametrize("failing", ["the variant's programs", "the world's verdict"])
def test_a_batch_warm_up_that_fails_is_the_batchs_failure_and_never_leaves_runs_waiting(assignment, tmp_path,
                                                                                         monkeypatch, failing):
    """The public starter cannot be run in the variant world of the batch, or the reference does not run cleanly in
    the batch's worlds: runs of that world are let go (they would compile for themselves), and the failure reaches
    whoever asks for the figures (the batch stops)."""
    import grader.grading.warm_up as warm_up
    from grader.config.assignment import ConfigError

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(warm_up, "ServerStart", NoServer)
    monkeypatch.setattr(grader.grading.warm_state.compile_cache, "can_cache", lambda: True)
    state = WarmState(assignment, public_source="x = 1\n")
    state.store.build("reference", lambda staging: {"facts": {"reports": {"t": "none"}, "memory": {"t": "none"}}},
                      False)
    state.store.build(state._starter_name(), programs, True)

    def fails(self, *args):
        raise ConfigError(f"{failing} could not be made for seed 5")

    def builds(self, runs, staging):
        return programs(staging, ("jit_variant-cache",))

    def judges(assignment, facts, batch_seed, runner):
        if failing == "the world's verdict":
            raise ConfigError(f"{failing} could not be made for seed 5")
        return WorldVerdict(batch_seed, 100.0, 100.0, (), {"baseline": None, "variant": None})

    monkeypatch.setattr(WarmState, "_compile_starter", fails if failing == "the variant's programs" else builds)
    monkeypatch.setattr(grader.grading.warm_state, "judge_world", judges)
    seeds = {"baseline": assignment.lesson_seed, "variant": 5}
    with warm_up.warmed_up(assignment, seeds, lambda text: None, public_source="x = 1\n", batch_seed=5) as warm:
        for thread in warm.threads:
            thread.join(10)
        assert isinstance(warm.failure(), ConfigError)
        assert all(gate.is_set() for gate in warm.runner.gates.values()) and warm.runner.gates
        with pytest.raises(ConfigError, match="seed 5"):
            warm.figures()
    assert (state.read_seed(5, 5) is None) == (failing == "the variant's programs")
    assert (state.read_world(5) is None) == (failing == "the world's verdict")


def test_the_lesson_worlds_programs_are_built_only_once_a_run_there_waits(assignment, tmp_path, monkeypatch):
    """Nothing kept but the facts: the batch's variant world's programs are built at once (every file runs there
    first), with the lesson's own world's in this batch (its set-up carries the batch's parameters); the lesson's
    own world's without a batch (what a student's check reads) only when the first run there waits for them, once
    however many wait, and they are kept for later commands."""
    import grader.grading.warm_up as warm_up

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(warm_up, "ServerStart", NoServer)
    monkeypatch.setattr(grader.grading.warm_state.compile_cache, "can_cache", lambda: True)
    state = WarmState(assignment, public_source="x = 1\n")
    state.store.build("reference", lambda staging: {"facts": {"reports": {"t": "none"}, "memory": {"t": "none"}}},
                      False)
    built: list[list[str]] = []

    def builds(self, runs, staging):
        built.append([scenario.name for scenario, _, _ in runs])
        time.sleep(0.2)
        return programs(staging, (f"jit_{runs[0][0].name}-cache",))

    monkeypatch.setattr(WarmState, "_compile_starter", builds)
    monkeypatch.setattr(grader.grading.warm_state, "judge_world", lambda assignment, facts, batch_seed, runner:
                        WorldVerdict(batch_seed, 100.0, 100.0, (), {"baseline": None, "variant": None}))
    seeds = {"baseline": assignment.lesson_seed, "variant": 5}
    with warm_up.warmed_up(assignment, seeds, lambda text: None, public_source="x = 1\n", batch_seed=5) as warm:
        for thread in list(warm.threads):
            thread.join(10)
        assert built == [["variant", "baseline"]] and state.read_starter() is None
        gate = warm.runner.gates[scenario_world(assignment, assignment.scenarios["baseline"], assignment.lesson_seed, 5)]
        assert not gate.is_set()
        waiting = [threading.Thread(target=gate.wait) for _ in range(3)]
        for thread in waiting:
            thread.start()
        for thread in waiting:
            thread.join(10)
        assert gate.is_set() and built == [["variant", "baseline"], ["baseline"]]
    assert state.read_starter() is not None and state.read_seed(5, 5) is not None


def test_the_fork_server_outlives_the_thread_that_started_it(assignment):
    """bubblewrap dies with its parent, and its parent is the thread that started it: a server started by a
    thread that then ended would be killed at once, and every run would fall back to a fresh interpreter."""
    from grader.runs.jobs import make_job
    from grader.runs.runners import ServerStart

    notes: list[str] = []
    start = ServerStart(None, notes.append)
    try:
        runner = start.runner()
        assert runner is not None, notes
        time.sleep(1.0)                          # long after the start
        for _ in range(2):
            raw = runner(make_job(assignment, assignment.scenarios["baseline"], 18, "x = 1\n", "f.py"), assignment.limits)
            assert raw.setup_ok and raw.returncode == 0 and raw.cpu_seconds is not None, (raw.setup, raw.returncode)
        assert start.server is not None and start.server.generation == 1, "the server died and was replaced"
    finally:
        start.close()
    assert start._thread.is_alive() is False

def _lesson_world_warm_up(assignment, tmp_path, monkeypatch, verdicts):
    """A warm-up with the facts and both worlds' programs kept, no fork server, and judge_world answered by
    `verdicts(every, runner)`; runs that reach the sandbox return at once. Returns (the context, judged flags)."""
    import grader.grading.warm_up as warm_up

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(warm_up, "ServerStart", NoServer)
    monkeypatch.setattr(GatedRunner, "fresh", lambda self, job, limits: "ran")
    monkeypatch.setattr(grader.grading.warm_state.compile_cache, "can_cache", lambda: True)
    state = WarmState(assignment, public_source="x = 1\n")
    state.store.build("reference", lambda staging: {"facts": {"reports": {"t": "none"}, "memory": {"t": "none"}}},
                      False)
    state.store.build(state._starter_name(), programs, True)
    state.store.build(state._seed_name(5, 5), programs, True)
    judged: list[bool] = []

    def judges(assignment, facts, batch_seed, runner, every=False):
        judged.append(every)
        return verdicts(every, runner)

    monkeypatch.setattr(grader.grading.warm_state, "judge_world", judges)
    seeds = {"baseline": assignment.lesson_seed, "variant": 5}
    return warm_up.warmed_up(assignment, seeds, lambda text: None, public_source="x = 1\n", batch_seed=5), judged


def _job(assignment, scenario: str, seed: int):
    from grader.runs.jobs import make_job
    return make_job(assignment, assignment.scenarios[scenario], seed, "", assignment.submission_filename, batch_seed=5)


def test_the_world_is_judged_in_every_scenario_only_once_a_students_run_goes_outside_the_primary(
        assignment, tmp_path, monkeypatch):
    """The reference is judged in its primary run at once; a student's run in the variant world starts nothing
    more; the first student's run in the lesson's world starts the judgement in every scenario (once, however
    many runs go there), and the judgement's own runs there start nothing. Both verdicts are kept."""
    baseline_job = _job(assignment, "baseline", assignment.lesson_seed)

    def verdicts(every, runner):
        runner(baseline_job, assignment.limits)   # a judgement's own run in the lesson's world starts nothing
        time.sleep(0.1)
        return WorldVerdict(5, 100.0, 100.0, (), {"variant": None, **({"baseline": None} if every else {})}, (),
                            ("baseline", "variant") if every else ("variant",))

    context, judged = _lesson_world_warm_up(assignment, tmp_path, monkeypatch, verdicts)
    with context as warm:
        assert warm.verdict(scenarios=("variant",)).scenarios == ("variant",) and judged == [False]
        assert warm.runner(_job(assignment, "variant", 5), assignment.limits) == "ran"
        for thread in list(warm.threads):
            thread.join(10)
        assert judged == [False] and warm.figures(("variant",)) == {"variant": None}
        assert [warm.runner(baseline_job, assignment.limits) for _ in range(3)] == ["ran"] * 3
        for thread in list(warm.threads):
            thread.join(10)
        assert judged == [False, True]     # started by the run, before any record asked
        assert warm.verdict(scenarios=("baseline", "variant")).scenarios == ("baseline", "variant")
        assert warm.figures(("baseline", "variant")) == {"variant": None, "baseline": None}
    state = WarmState(assignment, public_source="x = 1\n")
    assert state.read_world(5).scenarios == ("variant",)
    assert state.read_world(5, ("baseline", "variant")).scenarios == ("baseline", "variant")


def test_a_record_run_in_every_scenario_asks_for_that_verdict_and_a_shortfall_there_rejects_the_world(
        assignment, tmp_path, monkeypatch):
    """No run heard (a record that comes from elsewhere, or the hook missed): the record's own question starts the
    judgement in every scenario. The reference falls short only in the lesson's world: the primary verdict still
    speaks for one-run records, but the batch's failure is the world's rejection, which names the shortfall."""
    def verdicts(every, runner):
        if every:
            return WorldVerdict(5, 97.0, 100.0, ("memory.values: 0/3: short in the lesson's world",), {}, (),
                                ("baseline", "variant"))
        return WorldVerdict(5, 100.0, 100.0, (), {}, (), ("variant",))

    context, judged = _lesson_world_warm_up(assignment, tmp_path, monkeypatch, verdicts)
    with context as warm:
        assert warm.verdict(scenarios=("variant",)).suitable and warm.failure() is None
        assert not warm.judged(("baseline", "variant")) or judged == [False, True]
        with pytest.raises(WorldRejected, match="short in the lesson's world"):
            warm.verdict(scenarios=("baseline", "variant"))
        assert judged == [False, True] and isinstance(warm.failure(), WorldRejected)


def test_a_one_file_command_picks_only_worlds_the_reference_fell_short_in_nowhere(assignment, tmp_path):
    """Kept verdicts: full marks in the primary run (11); full marks there but short in every scenario (12); full
    marks in every scenario (13); short in the primary run (14). A one-file command may reuse 11 and 13."""
    state = WarmState(assignment, tmp_path / "cache", public_source="x = 1\n")
    kept = {(11, False): 100.0, (12, False): 100.0, (12, True): 97.0, (13, True): 100.0, (14, False): 96.0}
    for (seed, every), score in kept.items():
        verdict = WorldVerdict(seed, score, 100.0, () if score == 100.0 else ("x: 0/1: short",), {}, (),
                               ("baseline", "variant") if every else ("variant",))
        state.store.build(state._world_name(seed, every), lambda staging, v=verdict: v.payload(), False)
    assert state.verified_seeds() == [11, 13]



