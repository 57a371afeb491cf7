"""The replays' time is never the file's (grader/sandbox/file_end.py).

A file whose own code ends inside its wall limit runs to its end even when the replays the grader runs after it take
longer than what is left: on every runner (a fresh sandboxed process, the fork server, and the portable
strategy of a student's check without a sandbox). The frame that says the
file has ended comes from the run, so a file that sends it early and goes on running is cut where its own limit
would have cut it, and whatever it bound after that counts for nothing.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from grader.config.assignment import load
from grader.runs.jobs import make_job, run_scenario
from grader.runs.snapshot import build_snapshot
from grader.sandbox.child.cpu_wait import StretchedDeadline
from grader.sandbox.file_end import ARRIVAL_GRACE_SECONDS, settle
from grader.sandbox.fork_server import ForkServer
from grader.sandbox.frames import FrameReader
from grader.sandbox.portable import Portable
from grader.sandbox.process import run_job
from grader.sandbox.raw_run import RawRun
from tests.case_expectations import ROOT

ASSIGNMENT = load("performance-05", ROOT)
VARIANT = ASSIGNMENT.scenarios["variant"]
# A wall limit the file's own code fits in, which its own code and the replays together do not; a statement's grace
# long enough for each panel replay below.
WALL, SOFT, GRACE = 8.0, 7.0, 4.0
TIGHT = dataclasses.replace(ASSIGNMENT, limits=dataclasses.replace(
    ASSIGNMENT.limits, wall_seconds=WALL, soft_seconds=SOFT, statement_grace_seconds=GRACE,
    cpu_wait_allowance_seconds=0))
PANEL_SECONDS = 2.5   # each of the three panel replays runs the file's panel code again: 7.5 s in all

# Own code: about 3.5 s after the set-up. Then three replays of the panel code (2.5 s each): past WALL in all.
SLOW_PANELS = (
    "memory = [None, {'temp_size_in_bytes': 3, 'output_size_in_bytes': 1}]\n"
    "import time\n"
    "time.sleep(1)\n"
    "def draw():\n"
    f"    time.sleep({PANEL_SECONDS})\n"
    "    return [1, 'bytes' if all(m is not None for m in memory) else 'avail']\n"
    "panels = draw()\n"
    "visual_data = {'panels': panels}\n"
)

# Says its own code ended (a frame of the harness's kind, sent through the harness's own channel object), then goes
# on running statements well past WALL, and binds `after` at the end.
FORGED_END = (
    "import gc, time\n"
    "channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel' and hasattr(o, 'send'))\n"
    "channel.send({'type': 'own_end', 'kind': 'completed', 'soft_limit_hit': False})\n"
    + "time.sleep(2)\n" * 6 +
    "after = 1\n"
)


@pytest.fixture(scope="module", params=["process", "fork server", "portable"])
def runner(request):
    if request.param == "process":
        yield run_job
        return
    if request.param == "portable":   # a student's check without a sandbox (its deadline is kept in its own thread)
        yield lambda job, limits: run_job(job, limits, isolation=Portable())
        return
    with ForkServer() as server:
        yield server.run_job


def test_the_replays_time_is_granted_from_the_config():
    job = make_job(ASSIGNMENT, VARIANT, 7, "x = 1\n", ASSIGNMENT.submission_filename)
    grace = ASSIGNMENT.limits.statement_grace_seconds
    replays = [r for r in ASSIGNMENT.replays.values() if "variant" in r.scenarios]
    assert replays and job["after_file_seconds"] == sum(r.seconds or grace for r in replays) + grace
    assert len(job["replays"]) == len(replays)


@pytest.mark.slow
def test_a_file_that_ends_in_time_runs_to_its_end_however_long_the_replays_take(runner):
    snapshot, raw = run_scenario(TIGHT, VARIANT, 7, SLOW_PANELS, TIGHT.submission_filename, runner=runner,
                                 batch_seed=7)
    assert snapshot.ending == "completed" and not raw.killed_at_wall_limit, (snapshot.ending, raw.seconds)
    for name in ("all_available", "plain_missing", "remat_missing"):   # each reported, none ran out of time
        assert "values" in snapshot.replays[name], snapshot.replays[name]
    assert raw.seconds > WALL   # the run outlived the file's own limit: the replays' time was granted


@pytest.mark.slow
def test_a_file_that_says_it_ended_and_runs_on_is_cut_at_its_own_limit():
    """On one runner: what decides is the same code for all three (file_end.settle), and the test above shows
    that each of them grants the time a forged frame asks for."""
    snapshot, raw = run_scenario(TIGHT, VARIANT, 7, FORGED_END, TIGHT.submission_filename, runner=run_job,
                                 batch_seed=7)
    assert snapshot.ending == "killed_wall", (snapshot.ending, raw.seconds)
    assert "after" not in snapshot.values
    assert all(s.line < FORGED_END.count("\n") for s in snapshot.statements)


# ---- settle, on frames alone -------------------------------------------------------------------------------

def frames_run(kinds_and_seconds: list[tuple[str, float]], killed: bool = False) -> RawRun:
    """A RawRun as a runner leaves it: its frames, when each frame of the file's own code arrived, where `own_end` is."""
    raw = RawRun(killed_at_wall_limit=killed, control=b'{"setup": "ok"}\n')
    for index, (kind, seconds) in enumerate(kinds_and_seconds):
        frame: dict = {"type": kind}
        if kind == "statement":
            frame.update(index=index, line=index + 1, end_line=index + 1, status="ok")
            raw.own_frame_times.append((index, seconds))
        elif kind == "value":
            frame.update(name=f"v{index}", stmt=0, value={"t": "int", "v": index})
            raw.own_frame_times.append((index, seconds))
        elif kind in ("own_end", "done"):
            frame["kind"] = "completed"
            if kind == "own_end" and raw.own_end_index is None:
                raw.own_end_index = index
        raw.frames.append(frame)
    return raw


def test_an_own_end_after_the_files_last_statement_gives_the_ending_when_the_replays_are_killed():
    raw = frames_run([("statement", 1.0), ("statement", 2.0), ("own_end", 2.1), ("replay", 0)], killed=True)
    settle(raw, WALL)
    assert raw.own_end is not None and len(raw.frames) == 4
    assert build_snapshot(raw, "variant", 7).ending == "completed"


def test_a_run_killed_without_own_end_was_killed():
    raw = frames_run([("statement", 1.0), ("statement", 2.0)], killed=True)
    settle(raw, WALL)
    assert raw.own_end is None and build_snapshot(raw, "variant", 7).ending == "killed_wall"


def test_an_own_end_followed_by_statements_past_the_limit_is_cut_there():
    due = WALL + ARRIVAL_GRACE_SECONDS
    raw = frames_run([("statement", 1.0), ("own_end", 1.1), ("statement", due - 0.5), ("statement", due + 0.5),
                      ("statement", due + 2), ("done", due + 2.1)])
    settle(raw, WALL)
    assert raw.own_end is None and raw.killed_at_wall_limit and len(raw.frames) == 3
    snapshot = build_snapshot(raw, "variant", 7)
    assert snapshot.ending == "killed_wall" and len(snapshot.statements) == 2


def test_values_after_own_end_without_their_statements_are_the_files_own_code_too():
    """A file that hides its later statements' records still sends their values: cut where its limit was."""
    due = WALL + ARRIVAL_GRACE_SECONDS
    raw = frames_run([("statement", 1.0), ("own_end", 1.1), ("value", due - 1), ("value", due + 3), ("replay", 0)])
    settle(raw, WALL)
    assert raw.own_end is None and raw.killed_at_wall_limit and len(raw.frames) == 3
    snapshot = build_snapshot(raw, "variant", 7)
    assert snapshot.ending == "killed_wall" and "v3" not in snapshot.values and "v2" in snapshot.values


def test_an_own_end_followed_by_statements_in_time_changes_nothing():
    raw = frames_run([("statement", 1.0), ("own_end", 1.1), ("statement", 2.0), ("done", 2.1)])
    settle(raw, WALL)
    assert raw.own_end is None and not raw.killed_at_wall_limit and len(raw.frames) == 4
    assert build_snapshot(raw, "variant", 7).ending == "completed"


def test_the_reader_hears_the_first_own_end_once_and_times_what_only_the_files_code_sends():
    heard: list[int] = []
    reader = FrameReader(1 << 20)
    reader.on_own_end = lambda: heard.append(len(reader.frames))
    for frame in ({"type": "statement"}, {"type": "own_end"}, {"type": "own_end"}, {"type": "replay"},
                  {"type": "statement"}, {"type": "value", "name": "x"}, {"type": "probe", "name": "p"}):
        payload = json.dumps(frame).encode()
        reader.feed(len(payload).to_bytes(4, "big") + payload)
    assert heard == [2] and reader.own_end_index == 1
    assert [index for index, _ in reader.own_frame_times] == [0, 4, 5]


def test_the_grant_is_given_once():
    clock = [0.0]
    wall = StretchedDeadline(10, 0, lambda: None, clock=lambda: clock[0])
    wall.extend(5)
    wall.extend(5)
    assert wall.remaining() == 15
