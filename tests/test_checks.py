"""performance-05's check functions on hand-made Snapshots (no sandbox, no JAX run).

A "good" snapshot is built from the oracle's own numbers (rounded through float32 where JAX would
produce float32), following the lesson's statement order, so that `value_when` has a real history.
Each test changes one thing and asserts the score and the feedback a student would read.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from grader import assignment as assignment_module
from grader.checks import Partial, RunView, _combine, evaluate, run_checks
from grader.snapshot import UNFINISHED, Opaque, Snapshot, Statement

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


@pytest.fixture(scope="module")
def assignment():
    return assignment_module.load("performance-05")


@pytest.fixture(scope="module")
def settings(assignment):
    return assignment.settings


@pytest.fixture(scope="module")
def oracles(assignment):
    return {"baseline": assignment.oracle.build(LESSON_SEED, FACTS),
            "variant": assignment.oracle.build(VARIANT_SEED, FACTS)}


def f32(array) -> np.ndarray:
    return np.asarray(array, dtype=np.float32).astype(np.float64)


def function(name="function"):
    return Opaque("callable", name, f"<function {name}>")


def good_events(oracle, available: bool) -> list[tuple[int, str, object]]:
    """(statement index, name, decoded value) in the lesson's order, computed from the oracle."""
    ones, line = f32(np.ones(16)), f32(np.linspace(-1.0, 1.0, 16))
    eps = 1e-3
    memory = [dict(MEMORY_PLAIN), dict(MEMORY_REMAT)] if available else [None, None]
    panels = [{"kind": "bar", "title": "Autodiff residual descriptions", "labels": ["ordinary", "layer remat"],
               "ylabel": "saved entries (not bytes)", "series": [{"label": "residual descriptions", "y": [9, 6]}]}]
    if available:
        panels.append({"kind": "bar", "title": "Compiler memory estimate", "labels": ["ordinary", "layer remat"],
                       "ylabel": "estimated temporary bytes",
                       "series": [{"label": "compiler temporaries", "y": [m["temp_size_in_bytes"] for m in memory]}]})
    else:
        panels.append({"kind": "bar", "title": "Compiler memory analysis unavailable", "labels": ["ordinary", "layer remat"],
                       "ylabel": "analysis available (1=yes)",
                       "series": [{"label": "availability, not byte count", "y": [0, 0]}]})
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


def make_snapshot(oracle, scenario: str, events, ending="completed", failed=None) -> Snapshot:
    """Snapshot from events; `failed` maps a statement index to (status, error dict[, names it assigns])."""
    snap = Snapshot(scenario=scenario, seed=oracle.seed, ending=ending, seconds=1.5, isolation="test")
    failed = failed or {}
    last = max([i for i, _, _ in events] + list(failed) + [len(ORDER) - 1])
    for index in range(last + 1):
        status, error, *named = failed.get(index, ("ok", None))
        assigns = sorted({name for i, name, _ in events if i == index} | set(*named))
        snap.statements.append(Statement(index=index, line=10 + index, end_line=10 + index, assigns=assigns,
                                         status=status, error=error))
    for index, name, value in sorted(events, key=lambda e: e[0]):
        snap.history.setdefault(name, []).append((index, value))
        snap.values[name] = value
    gradient = f32(oracle.gradient)
    snap.probes = {"grad_plain": gradient, "grad_remat": gradient.copy(), "grad_whole": gradient.copy()}
    return snap


def replace(events, name, value):
    return [(i, n, value if n == name else v) for i, n, v in events]


def drop(events, name):
    return [(i, n, v) for i, n, v in events if n != name]


@pytest.fixture
def base_events(oracles):
    return good_events(oracles["baseline"], available=True)


@pytest.fixture
def variant_events(oracles):
    return good_events(oracles["variant"], available=False)


def check(assignment, oracles, function_name, events, scenario="baseline", **kwargs):
    """Evaluate one check function on one scenario: (fraction, feedback)."""
    spec = next(s for s in assignment.checks if s.function == function_name)
    snap = make_snapshot(oracles[scenario], scenario, events, **kwargs)
    return evaluate(getattr(assignment.check_module, function_name), spec, RunView(snap), oracles[scenario],
                    assignment.settings)


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
    spec = next(s for s in assignment.checks if s.function == "no_statement_failed")
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    snap.syntax_error = {"line": 77, "message": "SyntaxError: invalid syntax"}
    fraction, feedback = evaluate(assignment.check_module.no_statement_failed, spec, RunView(snap), None, assignment.settings)
    assert fraction == 0 and "line 77" in feedback and "syntax" in feedback.lower()


@pytest.mark.parametrize("ending, fragment", [("sys_exit", "sys.exit at line 42"), ("exited_early", "os._exit"),
                                              ("killed_wall", "wall-clock limit"), ("lost", "without reporting")])
def test_ran_to_the_end_explains_how_the_run_ended(assignment, oracles, base_events, ending, fragment):
    spec = next(s for s in assignment.checks if s.function == "ran_to_the_end")
    snap = make_snapshot(oracles["baseline"], "baseline", base_events, ending=ending)
    snap.exit_line = 42
    fraction, feedback = evaluate(assignment.check_module.ran_to_the_end, spec, RunView(snap), None, assignment.settings)
    assert fraction == 0 and fragment in feedback


def test_ran_to_the_end_fails_when_the_soft_limit_was_hit(assignment, oracles, base_events):
    spec = next(s for s in assignment.checks if s.function == "ran_to_the_end")
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    snap.soft_limit_hit = True
    fraction, feedback = evaluate(assignment.check_module.ran_to_the_end, spec, RunView(snap), None, assignment.settings)
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
    del snap.probes["grad_remat"]
    snap.probe_errors["grad_remat"] = {"type": "TypeError", "message": "unsupported operand", "line": 21, "traceback": ""}
    fraction, feedback = evaluate(assignment.check_module.jax_gradients_match_recurrence, spec, RunView(snap),
                                  oracles["baseline"], assignment.settings)
    assert fraction == 0 and "grad_remat" in feedback and "TypeError" in feedback and "line 21" in feedback
    del snap.probe_errors["grad_remat"]
    fraction, feedback = evaluate(assignment.check_module.jax_gradients_match_recurrence, spec, RunView(snap),
                                  oracles["baseline"], assignment.settings)
    assert fraction == 0 and "could not be computed" in feedback
    snap.probes["grad_remat"] = oracles["baseline"].gradient * 1.01
    fraction, feedback = evaluate(assignment.check_module.jax_gradients_match_recurrence, spec, RunView(snap),
                                  oracles["baseline"], assignment.settings)
    assert fraction == 0 and "jax.grad(remat)" in feedback


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
                                           (math.nan, "positive"), (math.inf, "positive"), ("0.001", "single real number"),
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
        assert fraction == 0 and f"matches a {kind} difference" in feedback, feedback
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


def test_direction_missing_or_todo_when_hvp_was_computed(assignment, oracles, base_events):
    hvp = base_events[INDEX["hvp_plain"]][2]
    events = drop(base_events, "direction") + [(19, "direction", f32(np.linspace(-1, 1, 16)))]
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", events)
    assert fraction == 0 and "`direction` was not defined when `hvp_plain` was computed" in feedback
    events = drop(base_events, "direction") + [(15, "direction", UNFINISHED), (19, "direction", f32(np.ones(16)))]
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", replace(events, "hvp_plain", hvp))
    assert fraction == 0 and "still a TODO" in feedback


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
    assert f"seed {VARIANT_SEED}" in result.feedback and "instead of copying a number" in result.feedback
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
    assert "instead of copying" not in result.feedback


def test_combined_score_is_the_minimum_over_scenarios(assignment, oracles, base_events, variant_events):
    spec = next(s for s in assignment.checks if s.id == "hvp.plain_matches_oracle")
    snapshots = {"baseline": make_snapshot(oracles["baseline"], "baseline", base_events),
                 "variant": make_snapshot(oracles["variant"], "variant", variant_events)}
    result = _combine(assignment, spec, [("baseline", 1.0, "ok"), ("variant", 0.25, "partly")], snapshots)
    assert result.score == pytest.approx(spec.points * 0.25) and result.feedback.startswith("[variant run")
    result = _combine(assignment, spec, [("baseline", 0.5, "half"), ("variant", 0.75, "most")], snapshots)
    assert result.score == pytest.approx(spec.points * 0.5) and "half" in result.feedback
    result = _combine(assignment, spec, [("baseline", 1.0, "ok"), ("variant", 1.0, "fine")], snapshots)
    assert result.score == spec.points and result.passed and result.feedback == "ok"


def test_partial_results_are_clamped(assignment, oracles, base_events):
    spec = next(s for s in assignment.checks if s.id == "directional.automatic")
    view = RunView(make_snapshot(oracles["baseline"], "baseline", base_events))
    for fraction, expected in ((0.4, 0.4), (1.7, 1.0), (-2.0, 0.0)):
        got, note = evaluate(lambda run, oracle, settings: Partial(fraction, "some"), spec, view, None, assignment.settings)
        assert got == expected and note == "some"
    got, note = evaluate(lambda run, oracle, settings: 1 / 0, spec, view, None, assignment.settings)
    assert got == 0 and "ZeroDivisionError" in note
