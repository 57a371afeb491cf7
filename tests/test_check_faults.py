"""A check that raises anything but an assertion: when it raises alike on the reference solution's run of the same
scenario (a bug in the check) it could not judge, and the record becomes the grader's fault (no points, graded again
on the next run: never an excuse that keeps them); otherwise it is charged to the submission (its values led the
check there). The instructor is told either way (grader/grading/engine.py, grader/grading/grade.py).

The snapshots here are hand-made; a check function is swapped in for the lesson's own. The real reference runs
(grader/grading/reference_runs.py) are exercised by the threat batch (tests/assignments/tiny/threats/)."""

from __future__ import annotations

import dataclasses
import math
import types
from pathlib import Path

import pytest

from grader.api.values import as_number, as_vector
from grader.config.assignment import CheckSpec, load
from grader.grading.engine import Partial, run_checks
from grader.runs.snapshot import Snapshot

ROOT = Path(__file__).resolve().parent.parent
LESSON = "performance-05"


def with_check(function, scenarios=("baseline", "variant"), needs=()):
    spec = CheckSpec(id="runs.probe", group="runs", points=5.0, visibility="visible", scenarios=tuple(scenarios),
                     function="probe_check", needs=tuple(needs))
    return dataclasses.replace(load(LESSON, ROOT), checks=[spec], check_module=types.SimpleNamespace(probe_check=function))


def snapshot(scenario: str, seed: int, **values) -> Snapshot:
    snap = Snapshot(scenario, seed, ending="completed")
    for name, value in values.items():
        snap.values[name] = value
        snap.history[name] = [(0, value)]
    return snap


def student(**values) -> dict[str, Snapshot]:
    return {"baseline": snapshot("baseline", 18, **values), "variant": snapshot("variant", 7, **values)}


def reference(asked: list[str] | None = None, **values):
    """The reference solution's runs (with `values`), recording which scenarios were asked for."""
    runs = student(**values)

    def runs_for(scenario: str) -> Snapshot | None:
        if asked is not None:
            asked.append(scenario)
        return runs.get(scenario)
    return runs_for


ORACLES = {"baseline": None, "variant": None}


def test_a_check_that_raises_on_the_reference_too_cannot_judge_and_keeps_no_points():
    assignment = with_check(lambda run, oracle, settings: None + 1)
    (result,) = run_checks(assignment, student(), ORACLES, reference=reference())
    assert result.score == 0 and result.max_score == 5 and result.unjudged
    assert "bug in the grader's own check" in result.feedback and "not in your work" in result.feedback
    assert "TypeError" not in result.feedback                    # the traceback is the instructor's, not the student's
    assert "TypeError: unsupported operand" in result.grader_error and "Traceback" in result.grader_error
    assert "[baseline run, not judged" in result.grader_error and "[variant run, not judged" in result.grader_error


def test_a_check_that_only_the_students_values_make_raise_fails_and_the_instructor_is_told():
    def check(run, oracle, settings):
        return "ok" if math.isclose(run["x"], 1.0) else None      # math.isclose of a string raises TypeError
    assignment = with_check(check, needs=["x"])
    (result,) = run_checks(assignment, student(x="1.0"), ORACLES, reference=reference(x=1.0))
    assert result.score == 0 and not result.unjudged
    assert result.feedback.startswith("The check could not use your values: reading them raised TypeError "
                                      "(the reference solution's values do not). Look at the type, shape and size of `x`")
    assert "not held against you" not in result.feedback.lower()
    assert "[baseline run, charged to the submission" in result.grader_error and "Traceback" in result.grader_error


def test_the_same_exception_elsewhere_in_the_check_is_not_the_same_bug():
    def check(run, oracle, settings):
        if run["x"] == "forged":
            return {}["first place"]
        return {}["second place"]
    assignment = with_check(check, needs=["x"])
    (result,) = run_checks(assignment, student(x="forged"), ORACLES, reference=reference(x=1.0))
    assert result.score == 0 and not result.unjudged and "charged to the submission" in result.grader_error


def test_without_a_reference_run_the_raise_is_charged():
    """The student bundle ships no solution: a raise is charged, and the feedback claims no comparison."""
    assignment = with_check(lambda run, oracle, settings: None + 1)
    for found in (None, lambda scenario: None):
        (result,) = run_checks(assignment, student(), ORACLES, reference=found)
        assert result.score == 0 and not result.unjudged
        assert "reading them raised TypeError. Look at" in result.feedback and "reference" not in result.feedback


def test_the_reference_is_asked_for_only_when_a_check_raises():
    asked: list[str] = []
    assignment = with_check(lambda run, oracle, settings: as_vector(run["x"], "`x`", 3), needs=["x"])
    (result,) = run_checks(assignment, student(x=[1.0, math.nan, 2.0]), ORACLES, reference=reference(asked, x=[1.0, 2.0, 3.0]))
    assert result.score == 0 and not result.grader_error and asked == []
    assert result.feedback == "`x` contains NaN or Inf (entry 1 is nan)."


def test_a_bug_in_one_run_leaves_the_check_unjudged_even_where_the_other_run_passes():
    def check(run, oracle, settings):
        if run.scenario == "variant":
            return {}["missing"]
        return "fine"
    (result,) = run_checks(with_check(check), student(), ORACLES, reference=reference())
    assert result.score == 0 and result.unjudged and result.feedback.startswith("Not judged")
    assert "KeyError" in result.grader_error


@pytest.mark.parametrize("value", [10**400, "ten", [[1.0]], None, math.inf])
def test_a_value_a_coercion_refuses_stays_a_plain_failure(value):
    assignment = with_check(lambda run, oracle, settings: as_number(run["x"], "`x`"), needs=["x"])
    (result,) = run_checks(assignment, student(x=value), ORACLES, reference=reference(x=1.0))
    assert result.score == 0 and not result.grader_error and result.feedback.startswith("`x` should be a ")


@pytest.mark.parametrize("fraction", [math.nan, math.inf, "1", None])
def test_a_partial_fraction_that_is_not_a_number_gives_nothing(fraction):
    assignment = with_check(lambda run, oracle, settings: Partial(fraction, "some"))
    (result,) = run_checks(assignment, student(), ORACLES, reference=reference())
    assert result.score == 0


# ---- with real runs: the tiny lesson, its reference solution run by grader/grading/reference_runs.py ----------

TINY_ROOT = Path(__file__).resolve().parent / "fixtures" / "tiny_project"


def careless(run, oracle, settings):
    """A check written without the coercions: math.isclose raises TypeError on a string."""
    assert math.isclose(run["area"], oracle.area(run["radius"])), "`area` should be pi * radius ** 2."


def broken(run, oracle, settings):
    return run["area"] / 0


@pytest.mark.parametrize("function, source, unjudged", [
    (careless, "radius = 2.0\narea = '12.566'\nside = 3.5\n", False),
    (careless, "import math\nradius = 2.0\narea = math.pi * 4\nside = 3.5\n", None),   # passes: nothing raised
    (broken, "import math\nradius = 2.0\narea = math.pi * 4\nside = 3.5\n", True),
])
def test_the_reference_solution_is_run_for_real_when_a_check_raises(tmp_path, function, source, unjudged):
    from grader.grading.grade import grade
    from grader.intake.discovery import load_single

    tiny = load("tiny", TINY_ROOT)
    assignment = dataclasses.replace(tiny, check_module=types.SimpleNamespace(area_is_pi_r_squared=function))
    path = tmp_path / "tiny.py"
    path.write_text(source)
    record = grade(assignment, load_single(path, "tiny.py", 65536), {}, 99)
    (check,) = [c for c in record["checks"] if c["id"] == "area.value"]
    if unjudged is None:
        assert check["score"] == 1 and "check_errors" not in record
    elif unjudged:   # the grader's fault: an error record with no points, graded again next time
        assert record["status"] == "error" and record["score"] == 0 and record["grader_error"]
        assert "not judged: it raises alike" in record["check_errors"]["area.value"]
        assert "the grader's fault, not yours" in record["messages"][0] and "failed on its own" in record["messages"][0]
    else:
        assert check["score"] == 0 and "charged to the submission" in record["check_errors"]["area.value"]
        assert "(the reference solution's values do not)" in check["feedback"]
        assert not any("failed on its own" in m for m in record["messages"])


# ---- the checks' budget in the grader's process (grader/grading/check_budget.py) ------------------------------

def budgeted(function, cpu_seconds=1.0, memory_bytes=64 * 2**20):
    assignment = with_check(function, scenarios=("baseline",), needs=["n"])
    limits = dataclasses.replace(assignment.limits, check_cpu_seconds=cpu_seconds, check_memory_bytes=memory_bytes)
    return dataclasses.replace(assignment, limits=limits)


def test_a_check_that_loops_on_one_records_values_fails_that_record_and_the_honest_one_grades():
    import time

    def check(run, oracle, settings):   # a loop as long as the value it is given: the submission's 10**12
        total = 0
        for i in range(int(run["n"])):
            total += i
        return "ok"

    assignment = budgeted(check)
    started = time.monotonic()
    (looping,) = run_checks(assignment, student(n=10**12), ORACLES, reference=reference(n=10))
    assert time.monotonic() - started < 20, "the loop was not stopped at its budget"
    assert looping.score == 0 and not looping.unjudged
    assert looping.feedback.startswith("This check was stopped on your values: it used more than 1 CPU-seconds")
    assert "`n`" in looping.feedback and "overran its budget" in looping.grader_error
    (honest,) = run_checks(assignment, student(n=10), ORACLES, reference=reference(n=10))
    assert honest.score == honest.max_score == 5 and honest.feedback == "ok"


def test_a_check_that_allocates_on_one_records_values_fails_that_record_and_the_honest_one_grades():
    def check(run, oracle, settings):   # keeps 1 MiB blocks for as many as the value says: 200 GiB for the liar
        blocks = [bytearray(2**20) for _ in range(int(run["n"]))]
        return f"ok ({len(blocks)})"

    assignment = budgeted(check, cpu_seconds=30)
    (greedy,) = run_checks(assignment, student(n=200 * 1024), ORACLES, reference=reference(n=4))
    assert greedy.score == 0 and not greedy.unjudged
    assert "This check was stopped on your values: it needed more than 64 MiB of memory" in greedy.feedback
    (honest,) = run_checks(assignment, student(n=4), ORACLES, reference=reference(n=4))
    assert honest.score == 5 and honest.feedback == "ok (4)"


def test_a_memory_error_is_charged_even_where_the_reference_raises_alike():
    def check(run, oracle, settings):
        raise MemoryError("a check that cannot get its memory")

    (result,) = run_checks(budgeted(check), student(n=1), ORACLES, reference=reference(n=1))
    assert result.score == 0 and not result.unjudged and "ran out of memory" in result.feedback


@pytest.mark.parametrize("own_mib, charged", [(32, False), (400, True)])
def test_memory_another_records_run_adds_meanwhile_is_charged_to_no_check(own_mib, charged):
    """Another record's run in flight (its frames and snapshot, declared with run_in_flight) grows the process by
    96 MiB while this record's check runs: a check within its own 64 MiB budget is not charged for it, and one that
    grows past its budget plus the bound in flight still is."""
    import threading
    import time

    from grader.grading.check_budget import run_in_flight

    check_started, allocated, release = threading.Event(), threading.Event(), threading.Event()

    def other_run():
        with run_in_flight(128 * 2**20):
            check_started.wait(30)
            held = [b"o" * 2**20 for _ in range(96)]
            allocated.set()
            release.wait(30)
            del held

    def check(run, oracle, settings):
        check_started.set()
        allocated.wait(30)
        blocks = [b"c" * 2**20 for _ in range(int(run["n"]))]
        time.sleep(0.3)                       # the watchdog samples the process meanwhile
        return f"ok ({len(blocks)})"

    other = threading.Thread(target=other_run)
    other.start()
    try:
        (result,) = run_checks(budgeted(check, cpu_seconds=30), student(n=own_mib), ORACLES,
                               reference=reference(n=4))
    finally:
        release.set()
        other.join()
    if charged:
        assert result.score == 0 and "needed more than 64 MiB of memory" in result.feedback
    else:
        assert result.score == 5 and result.feedback == f"ok ({own_mib})"
