"""grader.sandbox.process.run_job + grader.runs.snapshot.build_snapshot on small hand-written jobs (no JAX in the child).

Every test runs twice: with a fresh sandboxed interpreter per run (`sandbox.run_job`) and with the fork server
(`zygote.ForkServer.run_job`), which must keep every guarantee the first gives.

Each job is a few lines of student code; the child is the real harness in the real sandbox with small
limits, so a runaway costs seconds, not the default 30 s.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from busy_machine import busy_machine
from live_processes import processes_with

from grader.model.job import Job, new_job
from grader.runs.snapshot import Opaque, build_snapshot
from grader.sandbox.fork_server import ForkServer
from grader.sandbox.isolation import Bubblewrap
from grader.sandbox.process import Limits, run_job

FAST = Limits(wall_seconds=8, soft_seconds=3, statement_grace_seconds=1, cpu_seconds=20,
              output_keep_bytes=64 * 1024, value_max_bytes=256 * 1024)
# For the tests that time a limit itself: no time is added for waiting on a busy machine.
EXACT = replace(FAST, cpu_wait_allowance_seconds=0)


def job(source: str, contract, probes_source: str = "", setup_source: str = "", setup_calls=(), limits: Limits = FAST) -> Job:
    return new_job(textwrap.dedent(source).lstrip("\n"), "student.py", contract, limits,
                   setup_source=textwrap.dedent(setup_source), setup_calls=setup_calls,
                   probes_source=textwrap.dedent(probes_source))


RUNNER = {"run_job": run_job}


@pytest.fixture(scope="module", autouse=True, params=[pytest.param("process", marks=pytest.mark.slow), "fork server"])
def runner(request):
    """Point `run` at one way of running jobs for the whole module, then at the other."""
    if request.param == "process":
        RUNNER["run_job"] = run_job
        yield request.param
        return
    with ForkServer() as server:
        RUNNER["run_job"] = server.run_job
        yield request.param
    RUNNER["run_job"] = run_job


def run(source: str, contract, limits: Limits = FAST, **kwargs):
    raw = RUNNER["run_job"](job(source, contract, limits=limits, **kwargs), limits)
    return build_snapshot(raw, "baseline", 18), raw


def statement_at(snap, line):
    return next(s for s in snap.statements if s.line == line)


# ---- values --------------------------------------------------------------------------------------------

def test_values_are_streamed_per_statement_and_decoded():
    snap, raw = run("""
        a = 1
        b = 2.5
        c = float('nan')
        d = float('-inf')
        s = 'héllo'
        l = [1, 2.0, 'x', None, True]
        t = (1, 2)
        m = {'k': [1, 2], 3: 'three'}
        import numpy as np
        arr = np.arange(6, dtype=np.float32).reshape(2, 3)
        ints = np.array([1, 2, 3], dtype=np.int64)
        scalar = np.float32(0.25)
        a = 7
        def f(v): return v
        e = ...
        big = 2**80
    """, ["a", "b", "c", "d", "s", "l", "t", "m", "arr", "ints", "scalar", "f", "e", "big", "never"])
    v = snap.values
    assert snap.ending == "completed" and snap.returncode == 0
    assert v["a"] == 7 and type(v["a"]) is int
    assert snap.history["a"] == [(0, 1), (12, 7)]   # streamed at the statement that set it, again when it changed
    assert v["b"] == 2.5 and type(v["b"]) is float
    assert math.isnan(v["c"]) and v["d"] == -math.inf
    assert v["s"] == "héllo"
    assert v["l"] == [1, 2.0, "x", None, True] and type(v["l"]) is list
    assert v["t"] == (1, 2)
    assert v["m"] == {"k": [1, 2], "3": "three"}
    # arrays keep their own dtype (an int8 array stays 1 byte an element on the grader's side too)
    assert type(v["arr"]) is np.ndarray and v["arr"].dtype == np.float32 and v["arr"].shape == (2, 3)
    assert np.array_equal(v["arr"], np.arange(6).reshape(2, 3))
    assert type(v["ints"]) is np.ndarray and v["ints"].dtype == np.int64 and v["ints"].tolist() == [1, 2, 3]
    assert np.asarray(v["scalar"]).size == 1 and np.asarray(v["scalar"]).item() == 0.25
    assert isinstance(v["f"], Opaque) and v["f"].kind == "callable"
    assert isinstance(v["e"], Opaque) and v["e"].kind == "todo"
    assert float(v["big"]) == 2.0**80
    assert "never" not in v
    assert [s.status for s in snap.statements] == ["ok"] * 16
    assert snap.statements[0].assigns == ["a"]


def test_lying_objects_decode_to_their_real_numbers():
    snap, _ = run("""
        import numpy as np
        class Liar(np.ndarray):
            def __eq__(self, other): return np.ones(self.shape, dtype=bool)
            def __ne__(self, other): return np.zeros(self.shape, dtype=bool)
            def __repr__(self): return 'array([the right answer])'
            def tolist(self): return [42.0] * self.size
        lie = np.array([1.0, 2.0, 3.0]).view(Liar)
        class Float(float):
            def __eq__(self, other): return True
            def __repr__(self): return '0.0074045'
            __hash__ = float.__hash__
        sly = Float(2.5)
        class Int(int):
            def __eq__(self, other): return True
            __hash__ = int.__hash__
        count = Int(9)
    """, ["lie", "sly", "count"])
    assert all(s.status == "ok" for s in snap.statements), snap.statements
    lie = snap.values["lie"]
    assert type(lie) is np.ndarray and lie.dtype == np.float64
    assert lie.tolist() == [1.0, 2.0, 3.0]
    assert not np.any(lie == np.array([9.0, 9.0, 9.0]))
    sly = snap.values["sly"]
    assert type(sly) in (float, np.ndarray) and np.asarray(sly).size == 1 and np.asarray(sly).item() == 2.5
    assert not np.any(sly == 3.0)
    count = snap.values["count"]
    assert type(count) in (int, float, np.ndarray) and np.asarray(count).item() == 9.0 and not np.any(count == 10)


def test_scalars_keep_their_shape():
    """A NumPy scalar, a 0-d array and a float subclass are single numbers: they must not arrive as shape (1,)."""
    snap, _ = run("""
        import numpy as np
        scalar = np.float32(0.25)
        zero_d = np.array(1.5)
        class Float(float):
            pass
        sub = Float(2.5)
    """, ["scalar", "zero_d", "sub"])
    for name, expected in (("scalar", 0.25), ("zero_d", 1.5), ("sub", 2.5)):
        value = snap.values[name]
        assert np.shape(value) == (), (name, value)
        assert float(value) == expected


def test_huge_value_is_marked_too_large_not_streamed():
    snap, _ = run("""
        import numpy as np
        huge = np.zeros(100_000)
        small = 1
    """, ["huge", "small"])
    assert isinstance(snap.values["huge"], Opaque) and snap.values["huge"].kind == "too_large"
    assert snap.values["small"] == 1


# ---- failures, exits, limits ------------------------------------------------------------------------------

def test_failing_statement_is_recorded_and_the_run_goes_on():
    snap, _ = run("""
        a = 1
        def helper(v):
            return v / 0
        b = helper(a)
        c = 3
    """, ["a", "b", "c"])
    assert snap.ending == "completed"
    failed = snap.failed_statements
    assert len(failed) == 1
    assert failed[0].line == 4 and failed[0].status == "error" and failed[0].assigns == ["b"]
    assert failed[0].error["type"] == "ZeroDivisionError"
    assert failed[0].error["line"] == 3                      # the deepest line in the student's file
    assert "student.py" in failed[0].error["traceback"] and "_grader_runtime" not in failed[0].error["traceback"]
    assert snap.values["a"] == 1 and snap.values["c"] == 3 and "b" not in snap.values
    assert snap.statement_assigning("b") is failed[0]


def test_sys_exit_ends_the_run_and_keeps_earlier_values():
    snap, _ = run("""
        a = 1
        import sys
        sys.exit(4)
        after = 2
    """, ["a", "after"])
    assert snap.ending == "sys_exit" and snap.exit_code == 4 and snap.exit_line == 3
    assert snap.values == {"a": 1}
    assert len(snap.statements) == 3


def test_os_exit_keeps_earlier_values():
    snap, _ = run("""
        a = 1
        b = [1, 2]
        import os
        os._exit(3)
        after = 2
    """, ["a", "b", "after"])
    assert snap.ending == "exited_early"
    assert snap.returncode == 3
    assert snap.values == {"a": 1, "b": [1, 2]}


def test_infinite_loop_is_interrupted_at_the_soft_limit_and_the_file_goes_on():
    started = time.monotonic()
    snap, _ = run("""
        before = 1
        while True:
            pass
        after = 2
        try:
            while True:
                pass
        except Exception:
            caught = True
        last = 3
    """, ["before", "after", "caught", "last"], limits=EXACT)
    elapsed = time.monotonic() - started
    assert snap.ending == "completed" and snap.soft_limit_hit
    assert statement_at(snap, 2).status == "timeout"
    assert snap.values["before"] == 1 and snap.values["after"] == 2 and snap.values["last"] == 3
    # the second loop ran only for the per-statement grace, and `except Exception` cannot swallow the interrupt
    assert statement_at(snap, 5).status == "timeout" and "caught" not in snap.values
    assert elapsed < FAST.soft_seconds + 3 * FAST.statement_grace_seconds + 2


def test_a_caught_soft_limit_is_raised_again_until_the_statement_is_left():
    """`except BaseException` around a runaway loop, then more looping in the handler (or in a `finally`): the
    interrupt comes back, so the statement ends at the soft limit plus a moment, and the file goes on."""
    started = time.monotonic()
    snap, _ = run("""
        try:
            while True:
                pass
        except BaseException:
            caught = 'once'
            while True:
                pass
        try:
            while True:
                pass
        finally:
            while True:
                pass
        after = 2
    """, ["caught", "after"], limits=EXACT)
    elapsed = time.monotonic() - started
    assert snap.values == {"caught": "once", "after": 2}
    assert statement_at(snap, 1).status == "timeout" and statement_at(snap, 8).status == "timeout"
    assert snap.ending == "completed" and elapsed < FAST.soft_seconds + 2 * FAST.statement_grace_seconds + 3


def test_loop_that_ignores_sigalrm_is_killed_at_the_wall_limit():
    limits = replace(EXACT, wall_seconds=3, soft_seconds=1, output_keep_bytes=4096)
    started = time.monotonic()
    snap, raw = run("""
        kept = 'yes'
        import signal
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            pass
        never = 1
    """, ["kept", "never"], limits=limits)
    elapsed = time.monotonic() - started
    assert snap.ending == "killed_wall" and raw.killed_at_wall_limit
    assert snap.values == {"kept": "yes"}
    assert raw.returncode == -signal.SIGKILL
    assert limits.wall_seconds <= elapsed < limits.wall_seconds + 3


NEEDS_ONE_CPU_SECOND = """
    import time
    def work():
        started = time.process_time()
        while time.process_time() - started < 1.0:
            pass
        return True
    done = work()
"""


def test_a_run_kept_waiting_by_a_busy_machine_is_not_timed_out():
    """One CPU second of work under a 2 s soft limit (counted from the first statement) and a 6 s wall limit
    (counted from the interpreter's start), on a machine three times oversubscribed.

    Without the allowance the same run is cut off (so the machine really was too busy to fit the limits); with
    it, the time the run waited for a CPU is added to both limits and it completes. The wall limit leaves room for
    the run's own CPU time, interpreter start-up included, which the allowance never covers."""
    strict = replace(EXACT, soft_seconds=2, wall_seconds=6)
    with busy_machine():
        interrupted, _ = run(NEEDS_ONE_CPU_SECOND, ["done"], limits=strict)
        snap, raw = run(NEEDS_ONE_CPU_SECOND, ["done"], limits=replace(strict, cpu_wait_allowance_seconds=60))
    assert "done" not in interrupted.values, "the machine was not busy enough for this test to mean anything"
    assert snap.values.get("done") is True, (snap.ending, raw.seconds, raw.cpu_wait_allowance_seconds)
    assert snap.ending == "completed" and not snap.soft_limit_hit
    assert raw.seconds > strict.soft_seconds   # it did need more wall time than the limits give on their own


def test_a_run_that_never_ends_is_killed_at_its_limit_plus_at_most_the_allowance():
    """Busy processes of its own and an ignored soft limit: the wall limit, stretched by no more than the time the
    run is found to have waited (itself capped), still ends it. On a quiet machine that is nothing at all: the run
    had the CPUs, its processes only queued behind each other (the arithmetic: test_busy_machine.py)."""
    limits = replace(EXACT, wall_seconds=3, soft_seconds=1, cpu_wait_allowance_seconds=5, output_keep_bytes=4096)
    started = time.monotonic()
    snap, raw = run(f"""
        import os, signal
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        for _ in range({3 * (os.cpu_count() or 1)}):
            if os.fork() == 0:
                while True:
                    pass
        while True:
            pass
    """, [], limits=limits)
    elapsed = time.monotonic() - started
    assert snap.ending == "killed_wall"
    assert 0 <= raw.cpu_wait_allowance_seconds <= limits.cpu_wait_allowance_seconds
    assert elapsed < limits.wall_seconds + raw.cpu_wait_allowance_seconds + 4


SELF_QUEUEING = """
    import os, signal
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    os.sched_setaffinity(0, {CPU})
    for _ in range(7):
        if os.fork() == 0:
            break
    while True:
        pass
"""


def test_a_run_whose_own_processes_queue_behind_each_other_ends_within_its_wall_limit():
    """Issue 56: eight busy processes of one run, all held to the one CPU an honest neighbour's loop is on, while
    the machine's other CPU has room. They wait for each other and for the neighbour, which is the run's own
    doing: a run that wants one CPU had one free all along. Its cgroup's CPU pressure said it was kept waiting
    half the time, and it was given that much more time: before, with others using nothing beyond the one CPU,
    a 3 s wall limit ran 6.3 s (allowance 3.07 s). What others can have cost a run is bounded by the load outside
    its cgroup beyond all the machine's CPUs but one (measured here independently, so that a machine others keep
    busy, where that load is real, cannot fail the test): on a machine otherwise quiet that is nothing, and the run
    ends at its limit (3.18 s, allowance 0)."""
    from busy_machine import machine_busy_now, neighbour_on

    cpu = min(os.sched_getaffinity(0))
    limits = replace(EXACT, wall_seconds=3, soft_seconds=1, cpu_wait_allowance_seconds=30, output_keep_bytes=4096)
    with neighbour_on(cpu):
        (busy_before, cpus), started = machine_busy_now(), time.monotonic()
        snap, raw = run(SELF_QUEUEING.replace("CPU", str(cpu)), [], limits=limits)
        elapsed, busy = time.monotonic() - started, machine_busy_now()[0] - busy_before
    run_cpu = raw.cpu_seconds or 0.0
    beyond = max(0.0, busy - run_cpu - (cpus - 1) * elapsed)   # what others used beyond all CPUs but one
    numbers = {"elapsed": round(elapsed, 2), "allowance": raw.cpu_wait_allowance_seconds, "run_cpu": run_cpu,
               "others_beyond_one_cpu": round(beyond, 2)}
    print(numbers)
    assert snap.ending == "killed_wall", numbers
    if cpus > 1:
        assert run_cpu < 0.8 * elapsed, ("the run was not held to one CPU beside its neighbour", numbers)
    assert raw.cpu_wait_allowance_seconds <= beyond + 1.0, numbers
    assert elapsed < limits.wall_seconds + beyond + 3, numbers


def test_huge_output_keeps_head_and_tail_and_counts_every_byte():
    snap, _ = run("""
        import sys
        print('HEAD-MARK')
        sys.stdout.write('x' * 20_000_000)
        print('TAIL-MARK')
        done = True
    """, ["done"])
    assert snap.values["done"] is True
    assert snap.output_bytes == len("HEAD-MARK\n") + 20_000_000 + len("TAIL-MARK\n")
    assert snap.output_head.startswith("HEAD-MARK\n")
    assert snap.output_tail.endswith("TAIL-MARK\n")
    kept = len(snap.output_head.encode()) + len(snap.output_tail.encode())
    assert kept <= FAST.output_keep_bytes
    assert kept >= FAST.output_keep_bytes - 2


FLOOD_LINES = """
line = "x" * 99
for _ in range(2_000_000):   # 200 MB, a line at a time, as a print in a loop makes it
    print(line)
done = True
"""


def test_a_file_printing_200_mb_runs_within_three_times_its_bare_time(tmp_path):
    """A run's output is drained at pipe speed, its middle counted and discarded, never looked at line by line: a
    file that prints 200 MB a line at a time finishes in the sandbox within 3 times what `python file.py` takes
    through a pipe (measured here, in the same test: a ratio, not a time). Before, each line was a write of its own
    and the reader paused after small reads: 112 MB in 20 s, cut at the soft limit."""
    limits = replace(FAST, wall_seconds=60, soft_seconds=45, cpu_seconds=60)
    script = tmp_path / "flood.py"
    script.write_text(FLOOD_LINES)
    started = time.monotonic()
    bare = subprocess.run([sys.executable, str(script)], stdout=subprocess.PIPE, check=True)
    bare_seconds = time.monotonic() - started
    assert len(bare.stdout) == 200_000_000
    started = time.monotonic()
    snap, raw = run(FLOOD_LINES, ["done"], limits=limits)
    seconds = time.monotonic() - started
    assert snap.values.get("done") is True and snap.ending == "completed", (snap.ending, snap.output_bytes)
    assert snap.output_bytes == 200_000_000
    assert seconds <= 3 * bare_seconds, f"{seconds:.1f} s in the sandbox against {bare_seconds:.1f} s bare"


def test_a_flood_past_the_read_limit_is_not_read_and_costs_the_grader_little():
    """Past `output_read_bytes` the grader reads nothing more of a run's output: the flood's next write waits (it
    never reaches the grader's process), the run ends at its limits, and the grader's thread spent little CPU."""
    limits = replace(EXACT, wall_seconds=4, soft_seconds=2, output_read_bytes=8 * 1024**2)
    started = time.thread_time()
    snap, raw = run("""
        import sys
        kept = 'yes'
        chunk = 'x' * (1 << 20)
        while True:
            sys.stdout.write(chunk)
    """, ["kept"], limits=limits)
    spent = time.thread_time() - started
    assert raw.output_unread and snap.output_unread
    assert limits.output_read_bytes <= snap.output_bytes < limits.output_read_bytes + (1 << 17)
    assert snap.values == {"kept": "yes"}
    assert spent < 1.0, f"the grader's thread spent {spent:.2f} CPU-s on a run it stopped reading"


def test_syntax_error_late_in_the_file_runs_the_prefix():
    snap, _ = run("""
        a = 1
        for i in range(3):
            b = i
        c = (
        d = 4
        e = 5
    """, ["a", "b", "c", "d", "e"])
    assert snap.syntax_error is not None
    assert snap.syntax_error["line"] in (4, 5)
    assert "SyntaxError" in snap.syntax_error["message"]
    assert snap.values == {"a": 1, "b": 2}
    assert snap.ending == "syntax_error"   # a script stops at its syntax error (the prefix ran)


def test_syntax_error_on_the_first_line_runs_nothing():
    snap, _ = run("def (:\nx = 1\n", ["x"])
    assert snap.syntax_error["line"] == 1 and snap.values == {} and snap.statements == []


def test_memory_and_file_size_limits_fail_the_statement_not_the_run():
    limits = Limits(wall_seconds=8, soft_seconds=3, statement_grace_seconds=1, cpu_seconds=20,
                    memory_bytes=300 * 1024**2, file_size_bytes=1024**2, output_keep_bytes=4096)
    snap, _ = run("""
        hog = bytearray(1_000_000_000)
        with open('big.bin', 'wb') as f:
            f.write(b'0' * 3_000_000)
        ok = 1
    """, ["hog", "ok"], limits=limits)
    assert statement_at(snap, 1).status == "error" and statement_at(snap, 1).error["type"] == "MemoryError"
    assert statement_at(snap, 2).status == "error" and statement_at(snap, 2).error["type"] in ("OSError", "IOError")
    assert snap.values == {"ok": 1}


def test_a_run_holds_no_directory_handle():
    """The fork server's supervisor keeps a handle on its /proc (to measure CPU waits); the run must not inherit it."""
    snap, _ = run("""
        import os, stat
        handles = []
        for fd in map(int, os.listdir('/proc/self/fd')):
            try:
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    handles.append(os.readlink(f'/proc/self/fd/{fd}'))
            except OSError:
                pass
    """, ["handles"])
    assert snap.values["handles"] == []


def test_garbage_on_the_data_channel_keeps_what_came_before():
    snap, _ = run("""
        a = 1
        import os, stat, fcntl
        def writable_pipes():
            for fd in map(int, os.listdir('/proc/self/fd')):
                try:
                    if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                        yield fd
                except OSError:
                    pass
        channels = list(writable_pipes())
        for fd in channels: os.write(fd, b'\\x00\\x00\\x00\\x05hello')
        b = 2
    """, ["a", "channels", "b"])
    assert snap.values.get("a") == 1
    assert len(snap.values["channels"]) == 1      # the harness's channel, found the way a student could
    assert "b" not in snap.values
    assert snap.channel_problem and "not JSON" in snap.channel_problem


@pytest.mark.parametrize("frame", [
    {"type": "statement", "index": 0, "line": 1, "assigns": None, "status": "ok"},
    {"type": "statement", "index": 0, "line": 1, "assigns": 5, "status": "ok"},
    {"type": "statement", "index": "0", "line": [1], "assigns": ["a", 3], "status": {"x": 1}, "error": "boom"},
    {"type": "value", "name": "a", "stmt": 0, "value": {"t": "list", "items": [{"t": "array", "npy": "!!"}]}},
    {"type": "value", "name": "a", "stmt": 0},
    {"type": "probe", "name": "p", "error": {"type": {"a": 1}, "line": "x"}},
    {"type": "done", "kind": "completed", "code": [1], "line": "two"},
])
def test_malformed_frames_never_crash_the_parent(frame):
    """The child (student code can write to the channel) is trusted for nothing beyond the schema."""
    from grader.sandbox.raw_run import RawRun

    good = {"type": "value", "name": "kept", "stmt": 0, "value": {"t": "int", "v": 1}}
    snap = build_snapshot(RawRun(frames=[good, frame]), "baseline", 18)
    assert snap.values["kept"] == 1


# ---- probes --------------------------------------------------------------------------------------------

def test_probe_reruns_when_its_inputs_change_and_reports_errors():
    snap, raw = run("""
        n = 1
        def f(k):
            return k + 1
        n = 5
        unrelated = 0
        def f(k):
            raise ValueError('boom')
    """, ["f", "n"], probes_source="""
        def doubled(f, n):
            return f(n) * 2

        def _private(f):
            return 'never called'
    """)
    frames = [frame for frame in raw.frames if frame["type"] == "probe"]
    assert {frame["name"] for frame in frames} == {"doubled"}
    values = [frame["value"]["v"] for frame in frames if "value" in frame]
    assert values == [4, 12]                                     # after `def f`, after `n = 5`; not after `unrelated`
    errors = [frame for frame in frames if "error" in frame]
    assert errors and errors[0]["stmt"] == 4
    assert "doubled" not in snap.probes
    error = snap.probe_errors["doubled"]
    assert error["type"] == "ValueError" and error["message"] == "boom" and error["line"] == 7


def test_probe_waits_for_a_todo_and_survives_a_hang():
    limits = Limits(wall_seconds=8, soft_seconds=1, statement_grace_seconds=1, cpu_seconds=20, output_keep_bytes=4096)
    snap, raw = run("""
        n = ...
        n = 3
        def g(k):
            while True:
                pass
        done = 1
    """, ["n", "g", "done"], limits=limits, probes_source="""
        def square(n):
            return n * n

        def call(g, n):
            return g(n)
    """)
    assert snap.probes["square"] == 9
    square = [frame for frame in raw.frames if frame["type"] == "probe" and frame["name"] == "square"]
    assert square[0]["stmt"] == 1 and "value" in square[0]      # not called while `n` was still `...`
    assert snap.probe_errors["call"]["type"] == "SoftTimeLimit"
    assert snap.values["done"] == 1 and snap.ending == "completed"


def test_sys_exit_inside_a_probed_function_does_not_end_the_file():
    """A probe is the grader calling the student's function: its SystemExit is that probe's error, not the script's exit."""
    snap, _ = run("""
        n = 1
        def f(k):
            import sys
            sys.exit(0)
        after = 2
    """, ["f", "n", "after"], probes_source="""
        def call(f, n):
            return f(n)
    """)
    assert snap.values.get("after") == 2
    assert snap.ending == "completed"
    assert "call" in snap.probe_errors and "call" not in snap.probes


def test_a_value_whose_repr_never_returns_does_not_stall_the_run():
    """Encoding a contract value runs student code (__repr__): it must be bounded like a statement, not only by the wall."""
    limits = Limits(wall_seconds=5, soft_seconds=1, statement_grace_seconds=1, cpu_seconds=20, output_keep_bytes=4096)
    snap, _ = run("""
        class Evil:
            def __repr__(self):
                while True:
                    pass
        x = Evil()
        after = 2
    """, ["x", "after"], limits=limits)
    assert snap.ending == "completed"
    assert snap.values.get("after") == 2
    assert isinstance(snap.values.get("x"), Opaque)


def test_scenario_setup_runs_before_the_student_file():
    snap, _ = run("""
        import numpy as np
        seen = int(np.random.default_rng(18).integers(1 << 30))
        other = int(np.random.default_rng(5).integers(1 << 30))
    """, ["seen", "other"], setup_source="""
        def swap(lesson_seed, seed, **_):
            import numpy as np
            original = np.random.default_rng
            np.random.default_rng = lambda s=None: original(seed if s == lesson_seed else s)
    """, setup_calls=[("swap", {"lesson_seed": 18, "seed": 99})])
    assert snap.values["seen"] == int(np.random.default_rng(99).integers(1 << 30))
    assert snap.values["other"] == int(np.random.default_rng(5).integers(1 << 30))


LIBRARY_NAMED_FILE = """
    import os
    if __name__ != "__main__":   # imported as a library module: forge the grader's set-up report
        os.write(4, b'{"setup": "failed", "message": "OSError: No space left on device"}\\n')
        raise ImportError("imported by the grader")
    import importlib.util
    ran_as = __name__
    with open(__file__, encoding="utf-8") as own:
        own_lines = len(own.read().splitlines())
    importable = importlib.util.find_spec("lazymod") is not None
"""


def test_the_submission_is_not_importable_while_the_grader_sets_up():
    """JAX, NumPy and the standard library import modules lazily during the harness's set-up: a file named like one
    must not run then (the control pipe is open), however it is named; it runs once, as __main__, afterwards."""
    source = textwrap.dedent(LIBRARY_NAMED_FILE).lstrip("\n")
    limits = FAST
    lazy = new_job(source, "lazymod.py", ["ran_as", "own_lines", "importable"], limits,
                   setup_source="def import_like_a_library(name):\n    try:\n        __import__(name)\n"
                                "    except ImportError:\n        pass\n",
                   setup_calls=[("import_like_a_library", {"name": "lazymod"})], data=source.encode())
    raw = RUNNER["run_job"](lazy, limits)
    snap = build_snapshot(raw, "baseline", 18)
    assert raw.setup_ok and snap.setup_error is None, raw.setup
    assert snap.values == {"ran_as": "__main__", "own_lines": len(source.splitlines()), "importable": False}


@pytest.mark.parametrize("name", ["copy.py", "numpy.py", "lazymod.py"])
def test_a_file_named_like_a_module_is_never_that_module(name):
    """An honest `copy.py` (or `numpy.py`) is graded as it would be under the assignment's name: an import of that
    name, by the file itself or by a library it calls, finds the real module (or none), never the submission."""
    source = ("import copy, importlib.machinery, os\n"
              f"spec = importlib.machinery.PathFinder.find_spec({name[:-3]!r})\n"
              "mine = spec is not None and os.path.realpath(spec.origin) == os.path.realpath(__file__)\n"
              "same = copy.deepcopy([1, [2]])\n")
    raw = RUNNER["run_job"](new_job(source, name, ["mine", "same"], FAST, data=source.encode()), FAST)
    assert build_snapshot(raw, "baseline", 18).values == {"mine": False, "same": [1, [2]]}


def test_setup_failure_is_reported():
    snap, _ = run("a = 1\n", ["a"], setup_source="def broken(**_):\n    raise RuntimeError('no')\n",
                  setup_calls=[("broken", {})])
    assert snap.ending == "setup_failed" and "RuntimeError" in snap.setup_error and snap.values == {}


# ---- isolation ------------------------------------------------------------------------------------------

def test_child_does_not_see_the_parents_environment(monkeypatch):
    monkeypatch.setenv("GRADER_TEST_SECRET", "s3cret-value")
    snap, _ = run("""
        import os
        secret = os.environ.get('GRADER_TEST_SECRET')
        environ = dict(os.environ)
    """, ["secret", "environ"])
    assert snap.values["secret"] is None
    environ = snap.values["environ"]
    assert "GRADER_TEST_SECRET" not in environ
    assert not any("s3cret" in str(value) for value in environ.values())
    assert environ.get("VIRTUAL_ENV") is None and "PYTHONPATH" not in environ


def test_child_runs_in_a_fresh_temp_dir_that_is_deleted_afterwards():
    snap, _ = run("""
        import os
        cwd = os.getcwd()
        before = sorted(os.listdir('.'))
        with open('scratch.txt', 'w') as f:
            f.write('data')
        home = os.environ['HOME']
    """, ["cwd", "before", "home"])
    cwd = snap.values["cwd"]
    assert Path(cwd).name.startswith("grader-run-")
    assert snap.values["home"] == cwd
    # Only the submission's own copy (its `__file__`) and, for a fresh interpreter, the grader's runtime are there.
    assert set(snap.values["before"]) <= {"student.py", "_grader_runtime"} and "student.py" in snap.values["before"]
    assert not Path(cwd).exists()
    second, _ = run("import os\ncwd = os.getcwd()\n", ["cwd"])
    assert second.values["cwd"] != cwd


@pytest.mark.skipif(not Bubblewrap().works(), reason="needs bubblewrap (apt-get install bubblewrap), as .ci/run installs")
def test_instructor_files_are_invisible_to_the_child():
    """DESIGN: 'instructor files invisible'. The reference solution must not be readable from student code."""
    from grader.config.assignment import find_root

    solution = find_root() / "solutions" / "performance-05.py"
    assert solution.is_file()
    snap, _ = run(f"""
        try:
            leaked = open({str(solution)!r}).read()[:200]
        except OSError as error:
            leaked = None
    """, ["leaked"])
    assert "leaked" in snap.values
    assert snap.values["leaked"] is None, "student code read the reference solution"


def _assert_none_left(token: str) -> None:
    deadline = time.monotonic() + 3
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = processes_with(token)
    for pid in left:  # never leave strays behind, even when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes outlived the sandbox: {left}"


def test_no_process_the_child_started_survives_the_run():
    snap, raw = run("""
        import subprocess
        sleeper = subprocess.Popen(['sleep', '61.0417'])
        started = 1
    """, ["started"])
    assert snap.values["started"] == 1 and raw.returncode is not None
    _assert_none_left("61.0417")


def test_a_grandchild_that_leaves_the_process_group_is_killed_too():
    """DESIGN: 'the whole process tree killed at the end (a pid namespace or equivalent)'."""
    snap, _ = run("""
        import subprocess
        escaper = subprocess.Popen(['sleep', '62.0417'], start_new_session=True)
        started = 1
    """, ["started"])
    assert snap.values["started"] == 1
    _assert_none_left("62.0417")


def test_isolation_is_described_in_every_run():
    snap, raw = run("a = 1\n", ["a"])
    assert raw.isolation and snap.isolation == raw.isolation


def test_a_dead_fork_server_costs_the_student_nothing():
    """The server dies (killed, out of memory): the next run restarts it and is graded as if nothing happened."""
    with ForkServer() as server:
        first = server.generation
        server._current.process.kill()
        server._current.process.wait()
        raw = server.run_job(job("a = 6 * 7\n", ["a"]), FAST)
        assert build_snapshot(raw, "baseline", 18).values["a"] == 42
        assert server.generation == first + 1 and server._current.process.poll() is None, "the server was not restarted"


IO_SETUP = {"x86_64": 206, "aarch64": 0}.get(os.uname().machine, 206)   # the test's machines: x86_64, arm64


def test_a_replacement_server_outlives_the_thread_that_found_the_old_one_dead(runner):
    """A worker thread finds the server dead and a new one is started; that thread then ends (its submission is
    done). bwrap's parent-death signal follows the thread that started it: the new server must not die with it."""
    if runner != "fork server":
        pytest.skip("about the fork server alone")
    with ForkServer() as server:
        server._current.process.kill()
        server._current.process.wait()
        found: list = []
        worker = threading.Thread(target=lambda: found.append(server.run_job(job("a = 1\n", ["a"]), FAST)))
        worker.start()
        worker.join()
        assert build_snapshot(found[0], "baseline", 18).values == {"a": 1}
        time.sleep(1.0)   # long enough for a parent-death signal to land
        assert server._current.process.poll() is None, "the new server died with the worker thread that started it"
        later = build_snapshot(server.run_job(job("b = 2\n", ["b"]), FAST), "baseline", 18)
        assert later.values == {"b": 2} and server.launches == 2


def test_a_run_that_closes_its_pipes_and_dies_slowly_ends_at_its_limit_and_costs_no_restart(runner):
    """Closing stdout, stderr and the data channel and then lingering past the wall limit is a run that ended at its
    limit, on either runner; for the fork server it is not a server that failed: no restart, no second try, no
    fresh interpreter."""
    # a fresh interpreter's wall limit also covers its import of JAX (seconds on a busy machine) before `kept = 1`
    limits = replace(EXACT, wall_seconds=3 if runner == "fork server" else 12, soft_seconds=1)
    lingering = job("""
        import os, signal, time
        kept = 1
        for fd in (1, 2, 3):
            os.close(fd)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        time.sleep(60)
    """, ["kept"])
    if runner == "fork server":
        with ForkServer() as server:
            raw = server.run_job(lingering, limits)
            assert server.launches == 1, "the run caused a restart"
        assert "fork server" in raw.isolation, "the run was tried again in a fresh interpreter"
    else:
        raw = run_job(lingering, limits)
    snap = build_snapshot(raw, "baseline", 18)
    assert raw.setup_ok and snap.values == {"kept": 1}
    assert snap.ending == "killed_wall" and limits.wall_seconds <= raw.seconds < limits.wall_seconds + 5


def test_the_syscall_filter_refuses_namespaces_mounts_the_keyring_and_host_pools():
    from grader.sandbox.seccomp import filter_program

    snap, _ = run("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        def errno_of(result):
            return ctypes.get_errno() if result != 0 else 0
        userns = errno_of(libc.unshare(0x10000000))
        mounted = errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
        keyring = errno_of(libc.syscall(250, 0, 0))
        context = ctypes.c_ulong(0)   # io_setup: a slot of the host-wide AIO pool (fs.aio-max-nr)
        aio = errno_of(libc.syscall(IO_SETUP, 1, ctypes.byref(context)))
        import threading, subprocess
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        child = subprocess.run(["true"]).returncode
    """.replace("IO_SETUP", str(IO_SETUP)), ["userns", "mounted", "keyring", "aio", "child"])
    assert snap.values["child"] == 0                                               # threads and processes still work
    if filter_program() is None:   # without libseccomp the grader still runs, and says so in every record
        assert "no syscall filter" in snap.isolation
        return
    assert [snap.values[n] for n in ("userns", "mounted", "keyring", "aio")] == [1, 1, 1, 1]   # EPERM
    assert "a syscall filter" in snap.isolation


def test_nothing_written_by_the_run_passes_for_a_set_up_failure():
    """A forged setup_error frame, the old failure message and exit status 70: the run is the student's, graded."""
    snap, raw = run("""
        import json, os, struct, sys
        payload = json.dumps({"type": "setup_error", "message": "forged"}).encode()
        os.write(3, struct.pack(">I", len(payload)) + payload)
        a = 1
        print("sandbox setup failed: forged", flush=True)
        os._exit(70)
    """, ["a"])
    assert raw.setup_ok and snap.setup_error is None and snap.ending == "exited_early"
    assert snap.values["a"] == 1


def test_a_run_is_held_to_its_memory_as_a_whole():
    """Shared memory escapes RLIMIT_DATA; the run's cgroup counts it."""
    from grader.sandbox.process import shared_tree

    limits = Limits(**{**FAST.__dict__, "memory_bytes": 256 * 2**20})
    snap, raw = run("""
        import mmap
        block = mmap.mmap(-1, 600 * 2**20)
        for offset in range(0, 600 * 2**20, 4096):
            block[offset] = 1
        survived = True
    """, ["survived"], limits)
    if shared_tree() is None:   # no cgroup here (not root, read-only cgroupfs): the record says what bounded it
        assert "no cgroup" in snap.isolation
        return
    assert "survived" not in snap.values and raw.memory_limit_hit and "a cgroup of its own" in snap.isolation


def test_without_cgroups_or_a_syscall_filter_the_grader_still_runs_and_says_so(monkeypatch):
    """An unprivileged container: no cgroup can be made and libseccomp is missing."""
    import grader.sandbox.process as sandbox

    monkeypatch.setattr(sandbox, "_TREE", [None])
    monkeypatch.setattr(sandbox, "filter_program", lambda: None)
    monkeypatch.setattr(sandbox, "seccomp_description", lambda: "no syscall filter (libseccomp missing)")
    raw = sandbox.run_job(job("a = 6 * 7\n", ["a"]), FAST)
    snap = build_snapshot(raw, "baseline", 18)
    assert snap.values["a"] == 42 and raw.setup_ok
    assert "no cgroup" in raw.isolation and "no syscall filter" in raw.isolation
