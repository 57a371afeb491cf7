"""The file's own time and the grader's work after it: replays never cost a file its ending.

Once a file's own statements (and the probes on them) are done, the harness runs the assignment's replays: parts of
the file run again with values the grader chose (sandbox/child/replay.py). That is the grader's work, and it used to
share the file's wall limit, so a file that ended in time could still be killed during a replay and lose the marks
for running to its end. Now the harness says when the file's own code has ended (an `own_end` frame, the same
outcome the last frame gives), and the runner then grants the replays' time on top of the wall limit, once: the
replays' own budgets (`seconds`, else a statement's grace) plus one grace, `after_file_seconds`.

The frame comes from the run, so nothing rests on it alone. Granted once, it buys at most that much time. A file
that sends it early and goes on running its own code is caught by what follows it: a statement's record or a value
it bound (frames.OWN_CODE_FRAMES, which the harness never sends after `own_end`) means the file's own code had not
ended. Such a run is then cut where its own wall limit would have cut it: the frames from the first of those that
arrived after that limit are dropped, and it ended at the wall limit (`settle`). Where `own_end` is the last word
of the file's own code and the run then ended without its last frame (killed in the granted time, a replay that
brought the process down), the file's ending is the one it reported: the replays that never reported decide
nothing, as one that runs out of time decides nothing.
"""

from __future__ import annotations

from grader.model.job import Job
from grader.sandbox.raw_run import RawRun

# Added to the file's own limit before a late frame counts against a run that sent `own_end` too early: the reader
# times frames from its own start, which each runner sets a moment apart from the start of its deadline, and may see
# a frame a little late. It bears only on such runs, never on an honest one.
ARRIVAL_GRACE_SECONDS = 1.0


def after_file_seconds(job: Job) -> float:
    """The time granted for the grader's work after the file's end (runs/jobs.py sets it from the replays)."""
    value = job.get("after_file_seconds") or 0
    return float(value) if isinstance(value, (int, float)) and value > 0 else 0.0


def settle(raw: RawRun, wall_seconds: float) -> None:
    """Decide what `own_end` says about this run (see the module's docstring), once the run has ended.

    `wall_seconds` is the file's own wall limit (the run's allowance for waiting for a CPU is added to it)."""
    index = raw.own_end_index
    if index is None or index >= len(raw.frames):
        return
    if not any(position > index for position, _ in raw.own_frame_times):
        raw.own_end = raw.frames[index]
        return
    due = wall_seconds + raw.cpu_wait_allowance_seconds + ARRIVAL_GRACE_SECONDS
    late = next((position for position, seconds in raw.own_frame_times if seconds > due), None)
    if late is not None:   # the file's own code ran past its limit on time it had claimed for the grader's work
        raw.frames = raw.frames[:late]
        raw.killed_at_wall_limit = True
