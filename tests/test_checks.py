"""performance-05's check functions on hand-made Snapshots (no sandbox, no JAX run).

A "good" snapshot is built from the oracle's own numbers (rounded through float32 where JAX would
produce float32), following the lesson's statement order, so that `value_when` has a real history.
Each test changes one thing and asserts the score and the feedback a student would read.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from grader.config import assignment as assignment_module
from grader.grading.engine import (
    CheckBug,
    Partial,
    RunView,
    _combine,
    evaluate,
    grader_faults,
    reported_faults,
    run_checks,
)
from grader.runs.evidence import CallEvent, Evaluation, StudentFunction
from grader.runs.snapshot import UNFINISHED, Opaque, Snapshot, Statement

LESSON_SEED = 18
VARIANT_SEED = 987654321

PLAIN_LINES = ["f32[16,16] from a constant"] + [
    f"f32[16] output of {kind} from <string>:17:20 (layer)" for _ in range(4) for kind in ("tanh", "sub")]
REMAT_LINES = ["f32[16,16] from a constant", "f32[16] from the argument v"] + [
    "f32[16] output of tanh from <string>:17:20 (layer)"] * 4
MEMORY_PLAIN = {"argument_size_in_bytes": 64, "output_size_in_bytes": 64, "temp_size_in_bytes": 256, "alias_size_in_bytes": 0}
MEMORY_REMAT = {"argument_size_in_bytes": 64, "output_size_in_bytes": 64, "temp_size_in_bytes": 192, "alias_size_in_bytes": 0}
FACTS = {"reports": [PLAIN_LINES, REMAT_LINES], "memory": [MEMORY_PLAIN, MEMORY_REMAT]}

ORDER = ["w", "x", "plain", "remat", "reports", "cotangent", "memory", "times", "panels", "visual_data", "whole",
         "direction", "eps", "finite", "automatic", "direction2", "hvp_plain", "hvp_remat"]
INDEX = {name: i for i, name in enumerate(ORDER)}
READS = {"finite": ["plain", "x", "eps", "direction"], "automatic": ["jax", "plain", "x", "direction"],
         "hvp_plain": ["jax", "plain", "x", "direction"], "hvp_remat": ["jax", "remat", "x", "direction"]}
PROBE_INPUTS = {"grad_plain": ["plain", "x", "w"], "grad_remat": ["remat", "x", "w"], "grad_whole": ["whole", "x", "w"]}


@pytest.fixture(scope="module")
def assignment():
    return assignment_module.load("performance-05")


@pytest.fixture(scope="module")
def settings(assignment):
    return assignment.settings


@pytest.fixture(scope="module")
def oracles(assignment):
    return {"baseline": assignment.oracle.build(LESSON_SEED, FACTS, assignment.scenarios["baseline"]),
            "variant": assignment.oracle.build(VARIANT_SEED, FACTS, assignment.scenarios["variant"])}


def f32(array) -> np.ndarray:
    return np.asarray(array, dtype=np.float32).astype(np.float64)


def function(name="function"):
    return Opaque("callable", name, f"<function {name}>")


def good_events(oracle) -> list[tuple[int, str, object]]:
    """(statement index, name, decoded value) in the lesson's order, computed from the oracle."""
    ones, line = f32(np.ones(16)), f32(np.linspace(-1.0, 1.0, 16))
    eps = 1e-3
    memory = [None if m is None else dict(m) for m in oracle.memory]
    panels = [{"kind": "bar", "title": "Autodiff residual descriptions", "labels": ["ordinary", "layer remat"],
               "ylabel": "saved entries (not bytes)", "series": [{"label": "residual descriptions", "y": [9, 6]}]}]
    if all(m is not None for m in memory):
        panels.append({"kind": "bar", "title": "Compiler memory estimate", "labels": ["ordinary", "layer remat"],
                       "ylabel": "estimated temporary bytes",
                       "series": [{"label": "compiler temporaries", "y": [m["temp_size_in_bytes"] for m in memory]}]})
    else:
        panels.append({"kind": "bar", "title": "Compiler memory analysis unavailable", "labels": ["ordinary", "layer remat"],
                       "ylabel": "analysis available (1=yes)",
                       "series": [{"label": "availability, not byte count", "y": [int(m is not None) for m in memory]}]})
    values = {
        "w": oracle.w.copy(), "x": oracle.x.copy(), "plain": function("function"), "remat": function("function"),
        "reports": [list(PLAIN_LINES), list(REMAT_LINES)], "cotangent": f32(oracle.gradient), "memory": memory,
        "times": [[1e-4] * 5, [1e-4] * 5], "panels": panels, "visual_data": {"kind": "panels", "panels": panels},
        "whole": function("Checkpointed"), "direction": ones, "eps": eps,
        "finite": float(np.float32(oracle.differences(ones, eps)["central"])),
        "automatic": float(np.float32(oracle.directional_derivative(ones))),
        "direction2": line, "hvp_plain": f32(oracle.hvp(line)), "hvp_remat": f32(oracle.hvp(line)),
    }
    return [(INDEX[key], "direction" if key == "direction2" else key, values[key]) for key in ORDER]


# ---- method evidence, as the recorder would send it ----------------------------------------------------

def evaluations_call(stmt, oracle, points, name="<lambda>"):
    """A root call that evaluated the objective (a student function) at each point."""
    evaluations = tuple(Evaluation("student", name, (f32(p),), (np.array(oracle_objective(oracle, p)),)) for p in points)
    return CallEvent(stmt=stmt, kind="student", name=name, concrete=True, ok=True, evaluations=evaluations,
                     student=(StudentFunction(name, "student.py", 19, 0, False),))


def oracle_objective(oracle, point):
    from importlib import import_module

    module = import_module(type(oracle).__module__)
    return module.objective(oracle.w, np.asarray(point, dtype=np.float64))


def autodiff_call(stmt, order, rematerialized=False, tangent=None, output=None, point=None, kind="jvp"):
    """A root call of JAX differentiation that traced student code `order` levels deep."""
    student = (StudentFunction("<lambda>", "student.py", 19, order, False),)
    if rematerialized:
        student += (StudentFunction("layer", "student.py", 17, order, True),)
    autodiff = tuple((k, d) for k, d in [(kind, 0), ("grad", 1)][:order])
    return CallEvent(stmt=stmt, kind=kind, name=None, concrete=True, ok=True,
                     args=() if point is None else (f32(point),), outputs=() if output is None else (f32(output),),
                     autodiff=autodiff, student=student, checkpoint=(order,) if rematerialized else (),
                     tangents=() if tangent is None else (f32(tangent),))


def good_calls(oracle, events) -> list[CallEvent]:
    """Evidence of the lesson's methods: a central difference, autodiff for `automatic`, jvp-of-grad HVPs."""
    at = {name: index for index, name, _ in events}
    values = {name: value for _, name, value in events}
    calls = []
    if "finite" in at and isinstance(values.get("eps"), float):
        eps = values["eps"]
        calls.append(evaluations_call(at["finite"], oracle, [oracle.x + eps, oracle.x - eps]))
    if "automatic" in at:
        calls.append(autodiff_call(at["automatic"], 1, kind="grad", point=oracle.x, output=oracle.gradient))
    for name, remat in (("hvp_plain", False), ("hvp_remat", True)):
        if name in at and isinstance(values.get(name), (np.ndarray, list)):
            tangent = next((v for i, n, v in reversed(events) if n == "direction" and i <= at[name]), None)
            tangent = tangent if isinstance(tangent, np.ndarray) else None
            output = np.asarray(values[name], dtype=np.float64) if np.asarray(values[name]).dtype.kind in "iuf" else None
            calls.append(autodiff_call(at[name], 2, rematerialized=remat, tangent=tangent, output=output))
    return calls


def make_snapshot(oracle, scenario: str, events, ending="completed", failed=None, calls=None) -> Snapshot:
    """Snapshot from events; `failed` maps a statement index to (status, error dict[, names it assigns]);
    `calls` is the method evidence (default: the lesson's methods, see good_calls)."""
    snap = Snapshot(scenario=scenario, seed=oracle.seed, ending=ending, seconds=1.5, isolation="test")
    snap.evidence.installed = True
    failed = failed or {}
    last = max([i for i, _, _ in events] + list(failed) + [len(ORDER) - 1])
    for index in range(last + 1):
        status, error, *named = failed.get(index, ("ok", None))
        assigned = {name for i, name, _ in events if i == index}
        assigns = sorted(assigned | set(*named))
        reads = sorted({read for name in assigned for read in READS.get(name, [])})
        snap.statements.append(Statement(index=index, line=10 + index, end_line=10 + index, assigns=assigns,
                                         status=status, error=error, reads=reads))
    for index, name, value in sorted(events, key=lambda e: e[0]):
        snap.history.setdefault(name, []).append((index, value))
        snap.values[name] = value
    gradient = f32(oracle.gradient)
    snap.probes = {"grad_plain": gradient, "grad_remat": gradient.copy(), "grad_whole": gradient.copy()}
    for probe, inputs in PROBE_INPUTS.items():
        bound = {name: max((i for i, n, _ in events if n == name), default=-1) for name in inputs}
        if all(i >= 0 for i in bound.values()):
            snap.probe_history[probe] = [(max(bound.values()), bound, snap.probes[probe], None)]
    snap.calls = good_calls(oracle, events) if calls is None else list(calls)
    return snap


def replace(events, name, value):
    return [(i, n, value if n == name else v) for i, n, v in events]


def drop(events, name):
    return [(i, n, v) for i, n, v in events if n != name]


@pytest.fixture
def base_events(oracles):
    return good_events(oracles["baseline"])


@pytest.fixture
def variant_events(oracles):
    return good_events(oracles["variant"])


def check(assignment, oracles, function_name, events, scenario="baseline", **kwargs):
    """Evaluate one check function on one scenario: (fraction, feedback)."""
    spec = next(s for s in assignment.checks if s.function in (function_name, "builtin:" + function_name))
    snap = make_snapshot(oracles[scenario], scenario, events, **kwargs)
    return evaluate(assignment.check_function(spec.function), spec, RunView(snap, assignment.bindings),
                    oracles[scenario], assignment.settings)


def results_by_id(assignment, oracles, base, variant, **kwargs):
    snapshots = {"baseline": make_snapshot(oracles["baseline"], "baseline", base, **kwargs),
                 "variant": make_snapshot(oracles["variant"], "variant", variant)}
    return {r.id: r for r in run_checks(assignment, snapshots, oracles)}


# ---- the reference-like submission ------------------------------------------------------------------

def test_reference_like_snapshots_get_full_marks(assignment, oracles, base_events, variant_events):
    results = results_by_id(assignment, oracles, base_events, variant_events)
    assert {spec.id for spec in assignment.checks} == set(results)
    failing = {rid: r.feedback for rid, r in results.items() if not r.passed}
    assert not failing
    assert sum(r.score for r in results.values()) == assignment.max_score == 100
    for r in results.values():
        assert "[" not in r.feedback.split(" ")[0]  # no scenario label on a pass


def test_every_check_fails_on_a_submission_that_defines_nothing(assignment, oracles):
    empty = {"baseline": Snapshot("baseline", LESSON_SEED, ending="completed"),
             "variant": Snapshot("variant", VARIANT_SEED, ending="completed")}
    results = run_checks(assignment, empty, oracles)
    assert [r.id for r in results if r.score > 0] == []
    for r in results:
        assert "is not defined" in r.feedback, (r.id, r.feedback)


# ---- runs -------------------------------------------------------------------------------------------

def test_failed_statement_is_reported_with_its_line(assignment, oracles, base_events):
    error = {"type": "ZeroDivisionError", "message": "division by zero", "line": 13, "traceback": "..."}
    fraction, feedback = check(assignment, oracles, "no_statement_failed", base_events, failed={3: ("error", error)})
    assert fraction == 0
    assert "line 13" in feedback and "ZeroDivisionError" in feedback
    fraction, feedback = check(assignment, oracles, "no_statement_failed", base_events,
                               failed={3: ("timeout", {"type": "SoftTimeLimit", "message": "", "line": 13, "traceback": ""}),
                                       5: ("error", error)})
    assert fraction == 0 and "ran out of time" in feedback and "1 more" in feedback


def test_syntax_error_fails_no_statement_failed(assignment, oracles, base_events):
    spec = next(s for s in assignment.checks if s.function == "builtin:no_statement_failed")
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    snap.syntax_error = {"line": 77, "message": "SyntaxError: invalid syntax"}
    fraction, feedback = evaluate(assignment.check_function(spec.function), spec, RunView(snap), None, assignment.settings)
    assert fraction == 0 and "line 77" in feedback and "syntax" in feedback.lower()


@pytest.mark.parametrize("ending, fragment", [("sys_exit", "sys.exit at line 42"), ("exited_early", "os._exit"),
                                              ("killed_wall", "wall-clock limit"), ("lost", "without reporting")])
def test_ran_to_the_end_explains_how_the_run_ended(assignment, oracles, base_events, ending, fragment):
    spec = next(s for s in assignment.checks if s.function == "builtin:ran_to_the_end")
    snap = make_snapshot(oracles["baseline"], "baseline", base_events, ending=ending)
    snap.exit_line = 42
    fraction, feedback = evaluate(assignment.check_function(spec.function), spec, RunView(snap), None, assignment.settings)
    assert fraction == 0 and fragment in feedback


def test_ran_to_the_end_fails_when_the_soft_limit_was_hit(assignment, oracles, base_events):
    spec = next(s for s in assignment.checks if s.function == "builtin:ran_to_the_end")
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    snap.soft_limit_hit = True
    fraction, feedback = evaluate(assignment.check_function(spec.function), spec, RunView(snap), None, assignment.settings)
    assert fraction == 0 and "time limit" in feedback


# ---- gradients ----------------------------------------------------------------------------------------

def test_inputs_from_another_seed_fail(assignment, oracles, base_events, variant_events):
    assert check(assignment, oracles, "inputs_are_the_lessons", variant_events, "variant")[0] == 1
    # the lesson's w hard-coded into the variant run
    fraction, feedback = check(assignment, oracles, "inputs_are_the_lessons",
                               replace(variant_events, "w", oracles["baseline"].w), "variant")
    assert fraction == 0 and "`w` differs" in feedback
    fraction, feedback = check(assignment, oracles, "inputs_are_the_lessons", replace(base_events, "x", oracles["baseline"].x * 2))
    assert fraction == 0 and "`x` differs" in feedback
    fraction, feedback = check(assignment, oracles, "inputs_are_the_lessons", replace(base_events, "w", oracles["baseline"].w[:4]))
    assert fraction == 0 and "(16, 16)" in feedback


def test_cotangent_checks(assignment, oracles, base_events):
    gradient = oracles["baseline"].gradient
    ok = lambda value: check(assignment, oracles, "cotangent_matches_recurrence", replace(base_events, "cotangent", value))
    assert ok(gradient.tolist())[0] == 1                       # a list of floats is a vector
    assert ok(gradient.astype(np.float32).astype(np.float64))[0] == 1
    wrong = ok(2 * gradient)
    assert wrong[0] == 0 and "reverse recurrence" in wrong[1]
    nan = gradient.copy()
    nan[3] = math.nan
    assert ok(nan)[0] == 0
    shape = ok(gradient[:8])
    assert shape[0] == 0 and "(16,)" in shape[1]
    scalar = ok(1.0)
    assert scalar[0] == 0 and "real vector" in scalar[1]


def test_cotangent_as_a_list_of_numpy_scalars_is_a_vector(assignment, oracles, base_events):
    """`list(np.asarray(cotangent))` streams as a list of 0-d arrays (numpy scalars): still a list of numbers."""
    gradient = f32(oracles["baseline"].gradient)
    as_scalars = [np.array(v, dtype=np.float64) for v in gradient]   # what decode() makes of np.float32 items
    fraction, feedback = check(assignment, oracles, "cotangent_matches_recurrence", replace(base_events, "cotangent", as_scalars))
    assert fraction == 1, feedback


def test_probe_error_and_missing_probe(assignment, oracles, base_events):
    spec = next(s for s in assignment.checks if s.function == "jax_gradients_match_recurrence")
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    run = lambda: evaluate(assignment.check_module.jax_gradients_match_recurrence, spec, RunView(snap, assignment.bindings),
                           oracles["baseline"], assignment.settings)
    stmt, inputs, _, _ = snap.probe_history["grad_remat"][-1]
    error = {"type": "TypeError", "message": "unsupported operand", "line": 21, "cell": None, "traceback": ""}
    snap.probe_history["grad_remat"] = [(stmt, inputs, None, error)]
    fraction, feedback = run()
    assert fraction == 0 and "grad_remat" in feedback and "TypeError" in feedback and "line 21" in feedback
    del snap.probe_history["grad_remat"]
    fraction, feedback = run()
    assert fraction == 0 and "could not be computed" in feedback
    snap.probe_history["grad_remat"] = [(stmt, inputs, oracles["baseline"].gradient * 1.01, None)]
    fraction, feedback = run()
    assert fraction == 0 and "jax.grad(remat)" in feedback


def test_probe_is_read_with_the_graded_inputs_not_a_later_rebinding(assignment, oracles, base_events):
    """`for x in times:` at the end rebinds x and the probe then fails; the probe run with the lesson's x counts."""
    events = base_events + [(30, "x", 4)]
    snap = make_snapshot(oracles["baseline"], "baseline", events)
    error = {"type": "TypeError", "message": "bad x", "line": 40, "cell": None, "traceback": ""}
    for entries in snap.probe_history.values():
        stmt, inputs, value, _ = entries[0]
        entries[:] = [(stmt, {**inputs, "x": INDEX["x"]}, value, None), (30, {**inputs, "x": 30}, None, error)]
    spec = next(s for s in assignment.checks if s.function == "jax_gradients_match_recurrence")
    view = RunView(snap, assignment.bindings)
    fraction, feedback = evaluate(assignment.check_module.jax_gradients_match_recurrence, spec, view,
                                  oracles["baseline"], assignment.settings)
    assert fraction == 1, feedback
    assert view.binding("x").stmt == INDEX["x"] and not view.binding("x").is_last


# ---- residuals --------------------------------------------------------------------------------------

def test_residual_checks(assignment, oracles, base_events):
    run = lambda fn, reports, scenario="baseline": check(assignment, oracles, fn, replace(base_events, "reports", reports), scenario)
    swapped = [list(REMAT_LINES), list(PLAIN_LINES)]
    fraction, feedback = run("report_lengths_match_live_counts", swapped)
    assert fraction == 0 and "6 and 9" in feedback and "9 (plain)" in feedback
    assert run("remat_saves_fewer", swapped)[0] == 0
    fraction, feedback = run("reports_are_two_residual_lists", [PLAIN_LINES + [""], REMAT_LINES])
    assert fraction == 0 and "blank" in feedback
    fraction, feedback = run("reports_are_two_residual_lists", [["nothing to see"] * 9, REMAT_LINES])
    assert fraction == 0 and "print_saved_residuals" in feedback
    fraction, feedback = run("reports_are_two_residual_lists", [9, 6])
    assert fraction == 0 and "list of the printed residual lines" in feedback
    fraction, feedback = run("report_lengths_match_live_counts", PLAIN_LINES)
    assert fraction == 0 and "two residual lists" in feedback
    # counts come from the facts, not from constants: other facts, other expectation
    other = {"reports": [PLAIN_LINES[:7], REMAT_LINES[:5]], "memory": FACTS["memory"]}
    spec = next(s for s in assignment.checks if s.function == "report_lengths_match_live_counts")
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    fraction, feedback = evaluate(assignment.check_module.report_lengths_match_live_counts, spec, RunView(snap),
                                  assignment.oracle.build(LESSON_SEED, other), assignment.settings)
    assert fraction == 0 and "7 (plain)" in feedback


# ---- memory -----------------------------------------------------------------------------------------

def test_memory_checks_in_baseline(assignment, oracles, base_events):
    run = lambda fn, memory: check(assignment, oracles, fn, replace(base_events, "memory", memory))
    fraction, feedback = run("memory_is_two_dicts", [None, None])
    assert fraction == 0 and "dict" in feedback
    fraction, feedback = run("memory_is_two_dicts", [dict(MEMORY_PLAIN, temp_size_in_bytes=256.5), MEMORY_REMAT])
    assert fraction == 0 and "temp_size_in_bytes" in feedback and "whole number" in feedback
    fraction, feedback = run("memory_is_two_dicts", [dict(MEMORY_PLAIN, temp_size_in_bytes="256"), MEMORY_REMAT])
    assert fraction == 0 and "whole number" in feedback
    # np.int64 figures arrive as 0-d float64 arrays: still whole numbers of bytes
    as_numpy = {k: np.array(float(v)) for k, v in MEMORY_PLAIN.items()}
    assert run("memory_is_two_dicts", [as_numpy, MEMORY_REMAT])[0] == 1
    fraction, feedback = run("memory_is_two_dicts", [{k: v for k, v in MEMORY_PLAIN.items() if k != "alias_size_in_bytes"},
                                                     MEMORY_REMAT])
    assert fraction == 0 and "lacks alias_size_in_bytes" in feedback
    fraction, feedback = run("memory_is_two_dicts", [MEMORY_PLAIN])
    assert fraction == 0 and "one entry per executable" in feedback
    fraction, feedback = run("memory_figures_match_compiler", [MEMORY_REMAT, MEMORY_PLAIN])
    assert fraction == 0 and "temp_size_in_bytes" in feedback and "192" in feedback
    assert run("memory_figures_match_compiler", [MEMORY_PLAIN, dict(MEMORY_REMAT)])[0] == 1


def test_zeros_for_unavailable_memory_are_named(assignment, oracles, variant_events):
    zeros = {name: 0 for name in MEMORY_PLAIN}
    fraction, feedback = check(assignment, oracles, "unavailable_memory_is_none",
                               replace(variant_events, "memory", [zeros, dict(zeros)]), "variant")
    assert fraction == 0 and "None" in feedback and "0" in feedback and "zero" in feedback.lower()
    fraction, feedback = check(assignment, oracles, "unavailable_memory_is_none",
                               replace(variant_events, "memory", [MEMORY_PLAIN, MEMORY_REMAT]), "variant")
    assert fraction == 0 and "should be None" in feedback
    fraction, feedback = check(assignment, oracles, "unavailable_memory_is_none",
                               replace(variant_events, "memory", [None]), "variant")
    assert fraction == 0
    assert check(assignment, oracles, "unavailable_memory_is_none", variant_events, "variant")[0] == 1
    assert check(assignment, oracles, "unavailable_memory_is_none",
                 replace(variant_events, "memory", (None, None)), "variant")[0] == 1


def _with_second_panel(events, panel):
    panels = [dict(events[INDEX["panels"]][2][0]), panel]
    return replace(replace(events, "panels", panels), "visual_data", {"kind": "panels", "panels": panels})


def test_availability_panel(assignment, oracles, variant_events):
    run = lambda events: check(assignment, oracles, "second_panel_is_availability", events, "variant")
    bytes_panel = {"kind": "bar", "title": "Compiler memory estimate", "ylabel": "estimated temporary bytes",
                   "series": [{"label": "compiler temporaries", "y": [256, 192]}]}
    fraction, feedback = run(_with_second_panel(variant_events, bytes_panel))
    assert fraction == 0 and "availability" in feedback and "[256, 192]" in feedback
    zero_bytes = dict(bytes_panel, series=[{"label": "compiler temporaries", "y": [0, 0]}])
    fraction, feedback = run(_with_second_panel(variant_events, zero_bytes))
    assert fraction == 0 and "availab" in feedback
    as_array = dict(variant_events[INDEX["panels"]][2][1], series=[{"label": "a", "y": np.zeros(2)}])
    assert run(_with_second_panel(variant_events, as_array))[0] == 1
    # visual_data must be built from the same panels
    fraction, feedback = run(replace(variant_events, "visual_data", {"kind": "panels", "panels": []}))
    assert fraction == 0 and "visual_data" in feedback
    fraction, feedback = run(replace(variant_events, "panels", [variant_events[INDEX["panels"]][2][0]]))
    assert fraction == 0 and "two panels" in feedback


def test_byte_panel_when_available(assignment, oracles, base_events):
    run = lambda events: check(assignment, oracles, "second_panel_is_bytes", events)
    assert run(base_events)[0] == 1
    availability = {"kind": "bar", "title": "Compiler memory analysis unavailable", "ylabel": "analysis available (1=yes)",
                    "series": [{"label": "availability", "y": [1, 1]}]}
    fraction, feedback = run(_with_second_panel(base_events, availability))
    assert fraction == 0 and "[256, 192]" in feedback and "[1, 1]" in feedback
    swapped = dict(availability, series=[{"label": "t", "y": [192, 256]}])
    assert run(_with_second_panel(base_events, swapped))[0] == 0


# ---- directional derivative ------------------------------------------------------------------------

@pytest.mark.parametrize("eps, fragment", [(1e-6, "outside"), (0.1, "outside"), (-1e-3, "positive"), (0.0, "positive"),
                                           (math.nan, "finite number"), (math.inf, "finite number"), ("0.001", "single real number"),
                                           (True, "single real number"), (None, "single real number")])
def test_eps_out_of_range(assignment, oracles, base_events, eps, fragment):
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", replace(base_events, "eps", eps))
    assert fraction == 0 and fragment in feedback


@pytest.mark.parametrize("eps", [1e-3, np.array(1e-3), np.array([1e-3]), 1e-4, 3e-2, 0.01])
def test_eps_accepted(assignment, oracles, base_events, eps):
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", replace(base_events, "eps", eps))
    assert fraction == 1, feedback


def _finite_events(events, oracle, eps, finite):
    return replace(replace(events, "eps", eps), "finite", finite)


# At eps=1e-3 the variant seed's forward difference lies within the float32 rounding allowance of the central one
# (the check cannot tell them apart there), so the variant is exercised at the larger steps only.
@pytest.mark.parametrize("scenario, eps", [("baseline", 1e-3), ("baseline", 1e-2), ("baseline", 3e-2),
                                           ("variant", 1e-2), ("variant", 3e-2)])
def test_central_difference_passes_and_others_are_named(assignment, oracles, base_events, variant_events, eps, scenario):
    events = base_events if scenario == "baseline" else variant_events
    oracle = oracles[scenario]
    d = oracle.differences(oracle.ones, eps)
    run = lambda finite: check(assignment, oracles, "finite_is_central_difference", _finite_events(events, oracle, eps, finite), scenario)
    # the central difference, with float32-sized noise, and as a 0-d array
    assert run(d["central"])[0] == 1
    assert run(float(np.float32(d["central"])) * (1 + 3e-7))[0] == 1
    assert run(np.array(d["central"]))[0] == 1
    for kind in ("forward", "backward"):
        fraction, feedback = run(d[kind])
        assert fraction == 0 and f"about what a {kind} difference differs by" in feedback, feedback
    fraction, feedback = run(2 * d["central"])
    assert fraction == 0 and "divided by ε instead of 2ε" in feedback
    fraction, feedback = run(0.5 * d["central"])
    assert fraction == 0 and "divided by 4ε" in feedback
    fraction, feedback = run(-d["central"])
    assert fraction == 0 and "central difference of `plain`" in feedback


def test_lesson_numbers_hard_coded_fail_in_variant(assignment, oracles, base_events, variant_events):
    lesson = base_events[INDEX["finite"]][2]
    fraction, _ = check(assignment, oracles, "finite_is_central_difference", replace(variant_events, "finite", lesson), "variant")
    assert fraction == 0
    lesson_auto = base_events[INDEX["automatic"]][2]
    fraction, feedback = check(assignment, oracles, "automatic_is_gradient_dot_ones",
                               replace(variant_events, "automatic", lesson_auto), "variant")
    assert fraction == 0 and "∇f(x)·(1,…,1)" in feedback


def test_nan_finite_is_not_called_a_forward_difference(assignment, oracles, base_events):
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", replace(base_events, "finite", math.nan))
    assert fraction == 0
    assert "forward" not in feedback and "backward" not in feedback, feedback


def test_automatic(assignment, oracles, base_events):
    run = lambda value: check(assignment, oracles, "automatic_is_gradient_dot_ones", replace(base_events, "automatic", value))
    exact = oracles["baseline"].directional_derivative(np.ones(16))
    assert run(np.array(np.float32(exact)))[0] == 1            # a float passed as a 0-d array
    assert run(float(np.float32(exact)))[0] == 1
    assert run(math.nan)[0] == 0
    fraction, feedback = run(exact * 1.01)
    assert fraction == 0 and "`automatic` =" in feedback
    fraction, feedback = run(list(np.full(16, exact)))
    assert fraction == 0 and "single real number" in feedback
    fraction, feedback = run(f32(oracles["baseline"].gradient))  # the gradient itself, not dotted
    assert fraction == 0 and "single real number" in feedback


# ---- Hessian-vector products ---------------------------------------------------------------------------

def _hvp_events(events, oracle, direction_before, direction_after=None, remat_direction=None):
    """direction = direction_before; hvp_plain; [direction = remat_direction]; hvp_remat; [direction = after]."""
    events = drop(drop(drop(events, "direction"), "hvp_plain"), "hvp_remat")
    events += [(11, "direction", f32(np.ones(16))), (15, "direction", direction_before),
               (16, "hvp_plain", f32(oracle.hvp(direction_before)))]
    if remat_direction is not None:
        events += [(17, "direction", remat_direction), (18, "hvp_remat", f32(oracle.hvp(remat_direction)))]
    else:
        events += [(17, "hvp_remat", f32(oracle.hvp(direction_before)))]
    if direction_after is not None:
        events.append((19, "direction", direction_after))
    return events


def test_uniform_hvp_direction_fails_only_the_nonuniform_check(assignment, oracles, base_events):
    events = _hvp_events(base_events, oracles["baseline"], f32(np.full(16, 0.5)))
    fraction, feedback = check(assignment, oracles, "hvp_direction_is_nonuniform", events)
    assert fraction == 0 and "uniform" in feedback
    assert check(assignment, oracles, "hvp_plain_matches_oracle", events)[0] == 1
    assert check(assignment, oracles, "hvp_remat_matches", events)[0] == 1


def test_direction_is_read_when_hvp_was_computed_not_at_the_end(assignment, oracles, base_events):
    line, ones = f32(np.linspace(-1, 1, 16)), f32(np.ones(16))
    # nonuniform when the HVP was computed, overwritten by ones afterwards: all HVP checks pass
    events = _hvp_events(base_events, oracles["baseline"], line, direction_after=ones)
    snap = make_snapshot(oracles["baseline"], "baseline", events)
    assert np.array_equal(snap.values["direction"], ones)
    assert np.array_equal(RunView(snap).value_when("direction", "hvp_plain"), line)
    for name in ("hvp_direction_is_nonuniform", "hvp_plain_matches_oracle", "hvp_remat_matches"):
        fraction, feedback = check(assignment, oracles, name, events)
        assert fraction == 1, (name, feedback)
    # uniform when computed, nonuniform only at the end: the nonuniform check fails
    events = _hvp_events(base_events, oracles["baseline"], ones, direction_after=line)
    fraction, feedback = check(assignment, oracles, "hvp_direction_is_nonuniform", events)
    assert fraction == 0 and "uniform" in feedback
    assert check(assignment, oracles, "hvp_plain_matches_oracle", events)[0] == 1


def test_hvp_against_the_final_direction_fails(assignment, oracles, base_events):
    """hvp_plain computed along ones (the first direction) while the student later sets linspace: judged along ones."""
    line = f32(np.linspace(-1, 1, 16))
    events = replace(base_events, "hvp_plain", f32(oracles["baseline"].hvp(np.ones(16))))
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", events)
    assert fraction == 0 and "Hessian-vector product" in feedback
    assert np.array_equal(make_snapshot(oracles["baseline"], "baseline", events).values["direction"], line)


def test_hvps_along_different_directions_disagree(assignment, oracles, base_events):
    line = f32(np.linspace(-1, 1, 16))
    events = _hvp_events(base_events, oracles["baseline"], line, remat_direction=f32(np.linspace(1, -1, 16)))
    assert check(assignment, oracles, "hvp_plain_matches_oracle", events)[0] == 1
    fraction, feedback = check(assignment, oracles, "hvp_remat_matches", events)
    assert fraction == 0 and "disagree" in feedback


def test_direction_set_after_the_hvp_call_is_the_one_used(assignment, oracles, base_events):
    """The tangent was passed inline and `direction` set one statement later: graded along that direction."""
    line = f32(np.linspace(-1, 1, 16))
    events = drop(base_events, "direction") + [(19, "direction", line)]
    for name in ("hvp_direction_is_nonuniform", "hvp_plain_matches_oracle", "hvp_remat_matches"):
        fraction, feedback = check(assignment, oracles, name, events)
        assert fraction == 1, (name, feedback)
    # no tangent recorded, no direction before and one after that does not explain the HVP: judged along it, and fails
    events = drop(base_events, "direction") + [(19, "direction", f32(np.ones(16)))]
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", events,
                               calls=[c for c in good_calls(oracles["baseline"], events) if c.stmt != INDEX["hvp_plain"]])
    assert fraction == 0 and "exact Hessian-vector product" in feedback
    # no direction at all anywhere
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", drop(base_events, "direction"),
                               calls=[])
    assert fraction == 0 and "`direction` is not defined" in feedback


def test_recorded_tangent_wins_over_the_direction_name(assignment, oracles, base_events):
    """jvp was handed linspace while `direction` still held ones: the tangent actually passed is used."""
    line = f32(np.linspace(-1, 1, 16))
    events = replace(drop(base_events, "direction"), "hvp_plain", f32(oracles["baseline"].hvp(line)))
    events = replace(events, "hvp_remat", f32(oracles["baseline"].hvp(line))) + [(11, "direction", f32(np.ones(16)))]
    calls = [c for c in good_calls(oracles["baseline"], events) if c.stmt not in (INDEX["hvp_plain"], INDEX["hvp_remat"])]
    calls += [autodiff_call(INDEX["hvp_plain"], 2, tangent=line), autodiff_call(INDEX["hvp_remat"], 2, True, tangent=line)]
    for name in ("hvp_direction_is_nonuniform", "hvp_plain_matches_oracle", "hvp_remat_matches"):
        fraction, feedback = check(assignment, oracles, name, events, calls=calls)
        assert fraction == 1, (name, feedback)


def test_hvp_value_problems(assignment, oracles, base_events):
    good = base_events[INDEX["hvp_plain"]][2]
    run = lambda fn, value: check(assignment, oracles, fn, replace(base_events, "hvp_plain", value))
    nan = good.copy()
    nan[0] = math.nan
    fraction, feedback = run("hvps_have_shape_and_are_finite", nan)
    assert fraction == 0 and "NaN or Inf" in feedback
    inf = good.copy()
    inf[5] = math.inf
    assert run("hvp_plain_matches_oracle", inf)[0] == 0
    assert run("hvps_have_shape_and_are_finite", good.tolist())[0] == 1      # lists instead of arrays
    assert run("hvp_plain_matches_oracle", good.tolist())[0] == 1
    fraction, feedback = run("hvps_have_shape_and_are_finite", good.reshape(4, 4))
    assert fraction == 0 and "(16,)" in feedback
    fraction, feedback = run("hvps_have_shape_and_are_finite", good.astype(np.complex128))
    assert fraction == 0 and "real vector" in feedback
    fraction, feedback = run("hvp_plain_matches_oracle", f32(oracles["baseline"].gradient))
    assert fraction == 0 and "equals the gradient" in feedback


# ---- missing names, TODOs, scenario combination -----------------------------------------------------------

def test_missing_name_and_todo_feedback(assignment, oracles, base_events):
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", drop(base_events, "eps"))
    assert fraction == 0 and "`eps` is not defined" in feedback and "needed by this check" in feedback
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", replace(base_events, "eps", UNFINISHED))
    assert fraction == 0 and "`eps` is still a TODO" in feedback
    # `needs` are checked before the function runs: an unfinished finite with a good eps
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", replace(base_events, "finite", UNFINISHED))
    assert fraction == 0 and "`finite` is still a TODO" in feedback
    # a failing statement that would have assigned it is named with its line and error
    error = {"type": "NameError", "message": "name 'plian' is not defined", "line": 22, "traceback": ""}
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", drop(base_events, "eps"),
                               failed={INDEX["eps"]: ("error", error, ["eps"])})
    assert fraction == 0 and "line 22" in feedback and "NameError" in feedback
    # the file stopped early
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", drop(base_events, "eps"), ending="sys_exit")
    assert fraction == 0 and "stopped before assigning it" in feedback
    # too large to read
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step",
                               replace(base_events, "eps", Opaque("too_large", "ndarray")))
    assert fraction == 0 and "too large" in feedback


def test_run_checks_reports_missing_names(assignment, oracles, base_events, variant_events):
    results = results_by_id(assignment, oracles, drop(base_events, "hvp_remat"), variant_events)
    assert results["hvp.remat_matches_plain"].score == 0
    assert "`hvp_remat` is not defined" in results["hvp.remat_matches_plain"].feedback
    assert results["hvp.plain_matches_oracle"].passed
    results = results_by_id(assignment, oracles, replace(base_events, "cotangent", UNFINISHED), variant_events)
    assert results["gradients.cotangent"].score == 0 and "still a TODO" in results["gradients.cotangent"].feedback


def test_failure_only_in_variant_gets_label_and_hint(assignment, oracles, base_events, variant_events):
    hard_coded = replace(variant_events, "cotangent", base_events[INDEX["cotangent"]][2])
    results = results_by_id(assignment, oracles, base_events, hard_coded)
    result = results["gradients.cotangent"]
    assert result.score == 0
    description = assignment.scenarios["variant"].description
    assert result.feedback.startswith(f"[variant run: {description}] ")
    assert "follows a different seed" in result.feedback
    assert str(VARIANT_SEED) not in result.feedback      # the graded run's seed never reaches a student
    # the others stay unlabelled
    assert results["gradients.inputs"].passed and not results["gradients.inputs"].feedback.startswith("[")


def test_failure_in_both_scenarios_is_unlabelled(assignment, oracles, base_events, variant_events):
    results = results_by_id(assignment, oracles, replace(base_events, "automatic", 0.0), replace(variant_events, "automatic", 0.0))
    result = results["directional.automatic"]
    assert result.score == 0 and not result.feedback.startswith("[") and "`automatic` = 0" in result.feedback


def test_failure_only_in_baseline_is_labelled_without_the_variant_hint(assignment, oracles, base_events, variant_events):
    results = results_by_id(assignment, oracles, replace(base_events, "automatic", 0.0), variant_events)
    result = results["directional.automatic"]
    assert result.score == 0 and result.feedback.startswith("[baseline run: your file as written] ")
    assert "follows a different seed" not in result.feedback


def test_combined_score_is_the_minimum_over_scenarios(assignment, oracles, base_events, variant_events):
    spec = next(s for s in assignment.checks if s.id == "hvp.plain_matches_oracle")
    snapshots = {"baseline": make_snapshot(oracles["baseline"], "baseline", base_events),
                 "variant": make_snapshot(oracles["variant"], "variant", variant_events)}
    result = _combine(assignment, spec, [("baseline", 1.0, "ok"), ("variant", 0.25, "partly")], snapshots, {})
    assert result.score == pytest.approx(spec.points * 0.25) and result.feedback.startswith("[variant run")
    result = _combine(assignment, spec, [("baseline", 0.5, "half"), ("variant", 0.75, "most")], snapshots, {})
    assert result.score == pytest.approx(spec.points * 0.5) and "half" in result.feedback
    result = _combine(assignment, spec, [("baseline", 1.0, "ok"), ("variant", 1.0, "fine")], snapshots, {})
    assert result.score == spec.points and result.passed and result.feedback == "ok"


def test_partial_results_are_clamped(assignment, oracles, base_events):
    spec = next(s for s in assignment.checks if s.id == "directional.automatic")
    view = RunView(make_snapshot(oracles["baseline"], "baseline", base_events))
    for fraction, expected in ((0.4, 0.4), (1.7, 1.0), (-2.0, 0.0)):
        got, note = evaluate(lambda run, oracle, settings, fraction=fraction: Partial(fraction, "some"), spec, view, None, assignment.settings)
        assert got == expected and note == "some"
    with pytest.raises(CheckBug, match="ZeroDivisionError") as bug:   # a bug in the check, not a student failure
        evaluate(lambda run, oracle, settings: 1 / 0, spec, view, None, assignment.settings)
    assert "Traceback" in bug.value.trace


# ---- method evidence -------------------------------------------------------------------------------------

def _finite_calls(oracles, events, points):
    oracle = oracles["baseline"]
    others = [c for c in good_calls(oracle, events) if c.stmt != INDEX["finite"]]
    return others + [evaluations_call(INDEX["finite"], oracle, points)]


@pytest.mark.parametrize("eps", [1e-4, 3e-4, 1e-3])
def test_forward_difference_is_named_from_the_evaluations_even_when_its_value_passes(assignment, oracles, base_events, eps):
    """A forward difference at a tiny step hides under float32 rounding; the evaluation points do not."""
    oracle = oracles["baseline"]
    central = oracle.differences(oracle.ones, eps)["central"]
    events = replace(replace(base_events, "eps", eps), "finite", central)       # the value even looks central
    calls = _finite_calls(oracles, events, [oracle.x + eps, oracle.x])
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", events, calls=calls)
    assert fraction == 0 and "forward difference" in feedback and "x and x + ε·v" in feedback
    calls = _finite_calls(oracles, events, [oracle.x, oracle.x - eps])
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", events, calls=calls)
    assert fraction == 0 and "backward difference" in feedback


def test_exact_derivative_passed_off_as_a_difference_fails(assignment, oracles, base_events):
    oracle = oracles["baseline"]
    exact = float(np.float32(oracle.directional_derivative(oracle.ones)))
    events = replace(base_events, "finite", exact)
    calls = [c for c in good_calls(oracle, events) if c.stmt != INDEX["finite"]]
    calls.append(autodiff_call(INDEX["finite"], 1, kind="jvp", point=oracle.x))
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", events, calls=calls)
    assert fraction == 0 and "exact derivative" in feedback


def test_step_along_another_vector_fails(assignment, oracles, base_events):
    oracle = oracles["baseline"]
    line = np.linspace(-1, 1, 16)
    calls = _finite_calls(oracles, base_events, [oracle.x + 1e-3 * line, oracle.x - 1e-3 * line])
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", base_events, calls=calls)
    assert fraction == 0 and "other than v = (1,…,1)" in feedback


def test_batched_evaluations_count_as_points(assignment, oracles, base_events):
    """jax.vmap(plain)(jnp.stack([x+eps, x-eps])): one call with a (2, 16) argument."""
    oracle = oracles["baseline"]
    stacked = np.stack([oracle.x + 1e-3, oracle.x - 1e-3])
    batch = CallEvent(stmt=INDEX["finite"], kind="vmap", name=None, concrete=True, ok=True,
                      evaluations=(Evaluation("vmap", None, (stacked,), ()),))
    calls = [c for c in good_calls(oracle, base_events) if c.stmt != INDEX["finite"]] + [batch]
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", base_events, calls=calls)
    assert fraction == 1, feedback


def test_no_evidence_at_all_falls_back_to_the_value_and_says_so(assignment, oracles, base_events):
    calls = [c for c in good_calls(oracles["baseline"], base_events) if c.stmt != INDEX["finite"]]
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", base_events, calls=calls)
    assert fraction == 1 and "could not see how `finite` was computed" in feedback
    # the recorder could not be installed: every method check falls back, and says so
    snap = make_snapshot(oracles["baseline"], "baseline", base_events, calls=[])
    snap.evidence.installed = False
    view = RunView(snap, assignment.bindings)
    for function_name in ("automatic_is_gradient_dot_ones", "hvp_plain_matches_oracle", "hvp_remat_matches"):
        spec = next(s for s in assignment.checks if s.function == function_name)
        fraction, feedback = evaluate(getattr(assignment.check_module, function_name), spec, view,
                                      oracles["baseline"], assignment.settings)
        assert fraction == 1 and "could not see how" in feedback, (function_name, feedback)


def test_omitted_calls_make_the_evidence_incomplete(assignment, oracles, base_events):
    snap = make_snapshot(oracles["baseline"], "baseline", base_events, calls=[])
    snap.statements[INDEX["automatic"]].calls_omitted = 3
    spec = next(s for s in assignment.checks if s.function == "automatic_is_gradient_dot_ones")
    fraction, feedback = evaluate(assignment.check_module.automatic_is_gradient_dot_ones, spec,
                                  RunView(snap, assignment.bindings), oracles["baseline"], assignment.settings)
    assert fraction == 1 and "could not see how `automatic`" in feedback


def test_automatic_must_come_from_autodiff(assignment, oracles, base_events):
    oracle = oracles["baseline"]
    others = [c for c in good_calls(oracle, base_events) if c.stmt != INDEX["automatic"]]
    # copied from a difference quotient: evaluations at x +- eps and no differentiation
    copied = others + [evaluations_call(INDEX["automatic"], oracle, [oracle.x + 1e-3, oracle.x - 1e-3])]
    fraction, feedback = check(assignment, oracles, "automatic_is_gradient_dot_ones", base_events, calls=copied)
    assert fraction == 0 and "difference quotient, not autodiff" in feedback
    # nothing differentiated at all (the NumPy recurrence's gradient, a typed number)
    fraction, feedback = check(assignment, oracles, "automatic_is_gradient_dot_ones", base_events, calls=others)
    assert fraction == 0 and "applied no JAX differentiation" in feedback
    # jax.jvp of the objective
    jvp = others + [autodiff_call(INDEX["automatic"], 1, kind="jvp", point=oracle.x, tangent=np.ones(16))]
    assert check(assignment, oracles, "automatic_is_gradient_dot_ones", base_events, calls=jvp)[0] == 1


def test_automatic_copied_from_finite_is_traced_through_the_name_it_read(assignment, oracles, base_events):
    """`automatic = finite`: the statement reads `finite`, whose statement evaluated the objective at x +- eps."""
    oracle = oracles["baseline"]
    exact = float(np.float32(oracle.directional_derivative(oracle.ones)))
    events = replace(replace(base_events, "finite", exact), "automatic", exact)
    calls = [c for c in good_calls(oracle, events) if c.stmt != INDEX["automatic"]]
    snap = make_snapshot(oracle, "baseline", events, calls=calls)
    snap.statements[INDEX["automatic"]].reads = ["finite"]
    spec = next(s for s in assignment.checks if s.function == "automatic_is_gradient_dot_ones")
    fraction, feedback = evaluate(assignment.check_module.automatic_is_gradient_dot_ones, spec,
                                  RunView(snap, assignment.bindings), oracle, assignment.settings)
    assert fraction == 0 and "difference quotient" in feedback


def _hvp_calls(oracles, events, plain_call, remat_call):
    others = [c for c in good_calls(oracles["baseline"], events) if c.stmt not in (INDEX["hvp_plain"], INDEX["hvp_remat"])]
    return others + [c for c in (plain_call, remat_call) if c is not None]


def test_hvp_remat_from_plain_fails_only_the_remat_check(assignment, oracles, base_events):
    line = f32(np.linspace(-1, 1, 16))
    calls = _hvp_calls(oracles, base_events, autodiff_call(INDEX["hvp_plain"], 2, tangent=line),
                       autodiff_call(INDEX["hvp_remat"], 2, rematerialized=False, tangent=line))
    assert check(assignment, oracles, "hvp_plain_matches_oracle", base_events, calls=calls)[0] == 1
    fraction, feedback = check(assignment, oracles, "hvp_remat_matches", base_events, calls=calls)
    assert fraction == 0 and "no jax.checkpoint-ed function ran under it" in feedback


def test_hvp_plain_from_remat_fails(assignment, oracles, base_events):
    line = f32(np.linspace(-1, 1, 16))
    calls = _hvp_calls(oracles, base_events, autodiff_call(INDEX["hvp_plain"], 2, rematerialized=True, tangent=line),
                       autodiff_call(INDEX["hvp_remat"], 2, rematerialized=True, tangent=line))
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", base_events, calls=calls)
    assert fraction == 0 and "rematerialized" in feedback
    assert check(assignment, oracles, "hvp_remat_matches", base_events, calls=calls)[0] == 1


def test_hvp_without_second_order_autodiff_fails(assignment, oracles, base_events):
    oracle = oracles["baseline"]
    line = np.linspace(-1, 1, 16)
    # a finite difference of jax.grad: first-order roots at x +- h d
    fd = [autodiff_call(INDEX["hvp_plain"], 1, kind="grad", point=oracle.x + 1e-4 * line),
          autodiff_call(INDEX["hvp_plain"], 1, kind="grad", point=oracle.x - 1e-4 * line)]
    calls = _hvp_calls(oracles, base_events, None, None) + fd
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", base_events, calls=calls)
    assert fraction == 0 and "finite difference of jax.grad" in feedback
    # a NumPy HVP: no differentiation at all
    calls = _hvp_calls(oracles, base_events, None, None)
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", base_events, calls=calls)
    assert fraction == 0 and "applied no JAX differentiation" in feedback
    fraction, feedback = check(assignment, oracles, "hvp_remat_matches", base_events, calls=calls)
    assert fraction == 0 and "applied no JAX differentiation" in feedback


def test_both_hvps_in_one_statement_are_told_apart(assignment, oracles, base_events):
    """`hvp_plain, hvp_remat = [hvp(f) for f in (plain, remat)]`: one statement, two second-order calls."""
    line = f32(np.linspace(-1, 1, 16))
    events = [(i if n != "hvp_remat" else INDEX["hvp_plain"], n, v) for i, n, v in base_events]
    calls = [c for c in good_calls(oracles["baseline"], base_events) if c.stmt not in (INDEX["hvp_plain"], INDEX["hvp_remat"])]
    calls += [autodiff_call(INDEX["hvp_plain"], 2, tangent=line), autodiff_call(INDEX["hvp_plain"], 2, True, tangent=line)]
    for name in ("hvp_plain_matches_oracle", "hvp_remat_matches"):
        assert check(assignment, oracles, name, events, calls=calls)[0] == 1


# ---- values graded as the exercise used them ---------------------------------------------------------------

def test_later_rebinding_does_not_replace_the_exercise_value(assignment, oracles, base_events):
    events = base_events + [(30, "finite", np.array(True)), (31, "eps", float(np.finfo(np.float32).eps)),
                            (32, "x", 3.0)]
    for name in ("finite_is_central_difference", "eps_is_a_sensible_step", "inputs_are_the_lessons"):
        fraction, feedback = check(assignment, oracles, name, events)
        assert fraction == 1, (name, feedback)
    snap = make_snapshot(oracles["baseline"], "baseline", events)
    from grader.runs.provenance import Provenance

    note = Provenance(snap, assignment.bindings).rebinding_note("finite")
    assert note and "line 40" in note and f"line {10 + INDEX['finite']}" in note


# ---- the variant's compiler: one analysis missing, the other unforeseeable --------------------------------

def test_variant_memory_is_missing_for_one_and_varied_for_the_other(oracles):
    memory = oracles["variant"].memory
    assert sum(m is None for m in memory) == 1
    varied = next(m for m in memory if m is not None)
    assert len(set(varied.values())) == len(varied), "every field differs from every other"
    real = MEMORY_PLAIN if memory[0] is not None else MEMORY_REMAT
    assert all(varied[name] != real[name] for name in real)
    assert oracles["baseline"].memory == [MEMORY_PLAIN, MEMORY_REMAT]


def test_variant_memory_checks(assignment, oracles, variant_events):
    oracle = oracles["variant"]
    index = next(i for i, m in enumerate(oracle.memory) if m is not None)
    missing = 1 - index
    run = lambda fn, memory: check(assignment, oracles, fn, replace(variant_events, "memory", memory), "variant")
    good = [None if m is None else dict(m) for m in oracle.memory]
    for name in ("memory_is_two_dicts", "memory_figures_match_compiler", "unavailable_memory_is_none"):
        assert run(name, good)[0] == 1, name
    typed = list(good)
    typed[index] = dict(MEMORY_PLAIN)
    fraction, feedback = run("memory_figures_match_compiler", typed)
    assert fraction == 0 and "in this run the compiler reported" in feedback
    swapped = list(good)
    figures = dict(good[index])
    figures["argument_size_in_bytes"], figures["output_size_in_bytes"] = figures["output_size_in_bytes"], figures["argument_size_in_bytes"]
    swapped[index] = figures
    fraction, feedback = run("memory_figures_match_compiler", swapped)
    assert fraction == 0 and "holds the figure the compiler reported for" in feedback
    all_none = [None, None]
    fraction, feedback = run("memory_is_two_dicts", all_none)
    assert fraction == 0 and "Record None only when memory_analysis() returns None" in feedback
    for bad, fragment in (({}, "empty dict"), ({k: 0 for k in MEMORY_PLAIN}, "zeros"), ("unavailable", "should be None")):
        entries = list(good)
        entries[missing] = bad
        fraction, feedback = run("unavailable_memory_is_none", entries)
        assert fraction == 0 and fragment in feedback, feedback


def _availability(events, y, title="Compiler memory analysis unavailable", ylabel="analysis available (1=yes)",
                  label="availability, not byte count"):
    return _with_second_panel(events, {"kind": "bar", "title": title, "ylabel": ylabel, "series": [{"label": label, "y": y}]})


@pytest.mark.parametrize("title, ylabel, label", [
    ("No compiler memory analysis", "reported (1) / missing (0)", "analysis"),
    ("Memory analysis not available", "", ""),
    ("Compiler memory estimate", "analysis supported (1 = yes)", "availability"),
    ("Analysis present?", "1 = present, 0 = absent", "")])
def test_availability_panel_accepts_ordinary_wordings(assignment, oracles, variant_events, title, ylabel, label):
    y = [int(m is not None) for m in oracles["variant"].memory]
    fraction, feedback = check(assignment, oracles, "second_panel_is_availability",
                               _availability(variant_events, y, title, ylabel, label), "variant")
    assert fraction == 1, feedback


def test_availability_panel_is_judged_by_meaning(assignment, oracles, variant_events):
    oracle = oracles["variant"]
    y = [int(m is not None) for m in oracle.memory]
    run = lambda events: check(assignment, oracles, "second_panel_is_availability", events, "variant")
    # zero-byte bars whose label says "missing": bytes, not availability
    fraction, feedback = run(_availability(variant_events, [0, 0], "Temporary bytes (missing)", "estimated temporary bytes", "missing"))
    assert fraction == 0 and "labelled in bytes" in feedback
    # byte heights under an availability title
    heights = [0 if m is None else m["temp_size_in_bytes"] for m in oracle.memory]
    fraction, feedback = run(_availability(variant_events, heights))
    assert fraction == 0 and "read as byte counts" in feedback
    # unlabelled
    fraction, feedback = run(_availability(variant_events, y, "Compiler memory", "", ""))
    assert fraction == 0 and "Label the substitute panel" in feedback
    # the missing one drawn as available
    fraction, feedback = run(_availability(variant_events, [1, 1]))
    assert fraction == 0 and "missing in this run" in feedback
    # [0, 0] says less than it could, but nothing untrue about the missing one: passes with a note
    fraction, feedback = run(_availability(variant_events, [0, 0]))
    assert fraction == 1 and "int(m is not None)" in feedback
    # booleans are availability too
    assert run(_availability(variant_events, [bool(v) for v in y]))[0] == 1


# ---- the grader's own faults are never the student's ---------------------------------------------------------

def test_a_failed_setup_is_not_held_against_the_student(assignment, oracles, base_events, variant_events):
    """The harness reported (on its control pipe) that it could not set the variant up: nothing of it counts."""
    broken = drop(drop(drop(variant_events, "w"), "x"), "memory")
    snapshots = {"baseline": make_snapshot(oracles["baseline"], "baseline", base_events),
                 "variant": make_snapshot(oracles["variant"], "variant", broken, ending="setup_failed")}
    snapshots["variant"].setup_error = "TypeError: replace_lesson_seed() got an unexpected keyword argument"
    faults = grader_faults(snapshots)
    assert list(faults) == ["variant"] and "could not prepare the run" in faults["variant"][0]
    results = {r.id: r for r in run_checks(assignment, snapshots, oracles)}
    inputs = results["gradients.inputs"]
    assert inputs.passed and "copying" not in inputs.feedback and "grader's own code failed" in inputs.feedback
    # a variant-only check (no other run to fall back on) is given, not taken
    none_check = results["memory_unavailable.recorded_as_none"]
    assert none_check.passed and "Not held against you" in none_check.feedback


def test_an_error_the_run_attributes_to_the_grader_is_reported_not_excused(assignment, oracles, base_events,
                                                                             variant_events):
    """A statement frame saying 'the grader raised this' comes from the student's process: it could be forged."""
    error = {"type": "TypeError", "message": "__init__() got an unexpected keyword argument 'seed'", "line": 12,
             "cell": None, "traceback": "", "grader_fault": True, "through_setup": True}
    broken = drop(drop(variant_events, "w"), "x")
    snapshots = {"baseline": make_snapshot(oracles["baseline"], "baseline", base_events),
                 "variant": make_snapshot(oracles["variant"], "variant", broken, failed={0: ("error", error, ["w"])})}
    assert grader_faults(snapshots) == {}
    assert "inside the grader's own code" in reported_faults(snapshots)["variant"][0]
    results = {r.id: r for r in run_checks(assignment, snapshots, oracles)}
    assert not results["gradients.inputs"].passed
