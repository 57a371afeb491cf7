"""performance-05's check functions on hand-made Snapshots (no sandbox, no JAX run).

The oracles are built exactly as grading builds them (grader.grading.grade.build_oracle): the baseline from the
lesson's seed, the variant from a fresh seed the oracle finds suitable, both with the parameters the scenarios'
set-up received (the variant's derivative rules nudged, every compiler figure offset). A "good" snapshot holds
what honest float32 JAX code produces in that world, following the lesson's statement order: values from the
oracle rounded through float32, and the method evidence the recorder sends (the two evaluations of the objective
`finite` is computed from, and the small arrays the expressions made). Each test changes one thing and asserts
the score and the feedback a student would read.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from grader.api.values import fmt
from grader.config import assignment as assignment_module
from grader.grading.engine import (
    CheckBug,
    Partial,
    RunView,
    _combine,
    evaluate,
    run_checks,
)
from grader.grading.faults import grader_faults, reported_faults
from grader.grading.grade import build_oracle
from grader.runs.evidence import Evaluation, Sighting
from grader.runs.jobs import setup_parameters
from grader.runs.provenance import Provenance
from grader.runs.snapshot import UNFINISHED, Opaque, Snapshot, Statement

LESSON_SEED = 18
FIRST_VARIANT_SEED = 987654321      # the variant seed is the first suitable one from here (see `variant_seed`)
WIDTH = 16

PLAIN_LINES = ["f32[16,16] from a constant"] + [
    f"f32[16] output of {kind} from <string>:17:20 (layer)" for _ in range(4) for kind in ("tanh", "sub")]
REMAT_LINES = ["f32[16,16] from a constant", "f32[16] from the argument v"] + [
    "f32[16] output of tanh from <string>:17:20 (layer)"] * 4
MEMORY_PLAIN = {"argument_size_in_bytes": 64, "output_size_in_bytes": 64, "temp_size_in_bytes": 256, "alias_size_in_bytes": 0}
MEMORY_REMAT = {"argument_size_in_bytes": 64, "output_size_in_bytes": 64, "temp_size_in_bytes": 192, "alias_size_in_bytes": 0}
FACTS = {"reports": [PLAIN_LINES, REMAT_LINES], "memory": [MEMORY_PLAIN, MEMORY_REMAT]}

# The lesson's top-level statements in order. Each takes an even statement index (odd ones are free for a test to
# insert a statement between two of the lesson's), and statement i sits on line 10 + 2 i.
ORDER = ["w", "x", "plain", "remat", "reports", "cotangent", "memory", "times", "panels", "visual_data", "whole",
         "direction", "eps", "finite", "automatic", "direction2", "hvp_plain", "hvp_remat"]
INDEX = {name: 2 * i for i, name in enumerate(ORDER)}
AFTER = 2 * len(ORDER)              # the first statement index after the lesson's own
PROBE_INPUTS = {"grad_plain": ["plain", "x", "w"], "grad_remat": ["remat", "x", "w"], "grad_whole": ["whole", "x", "w"],
                "whole_residuals": ["whole", "x"], "residual_reports": ["plain", "remat", "x", "reports"]}
WHOLE_SAVES = ["from a constant", "from the argument v"]   # what differentiating jax.checkpoint(plain) saves
EPS = 1e-3                          # the lesson's step
ONES = np.ones(WIDTH)
LINE = np.linspace(-1.0, 1.0, WIDTH, dtype=np.float32).astype(np.float64)   # jnp.linspace(-1., 1., len(x))


def line_of(index: int) -> int:
    return 10 + 2 * index


def region(first: str, last: str) -> tuple[None, int, int]:
    """An exercise region whose markers enclose the lesson's statements `first` .. `last` (a .py file)."""
    return (None, line_of(INDEX[first]) - 1, line_of(INDEX[last]) + 1)


# The starter's exercise regions around the lesson's statements (grader.intake.regions.region_lines's shape).
REGIONS = {"directional": [region("direction", "automatic")], "hvp": [region("direction2", "hvp_remat")]}


@pytest.fixture(scope="module")
def assignment():
    return assignment_module.load("performance-05")


@pytest.fixture(scope="module")
def settings(assignment):
    return assignment.settings


@pytest.fixture(scope="module")
def variant_seed(assignment):
    """A fresh seed as grading draws one: never the lesson's, and one whose world separates every method."""
    seed = FIRST_VARIANT_SEED
    while seed == LESSON_SEED or not assignment.oracle.suitable_seed(seed, assignment.settings):
        seed += 1
    return seed


@pytest.fixture(scope="module")
def oracles(assignment, variant_seed):
    """build(seed, facts, scenario, parameters=setup_parameters(...), batch_seed=...) for each scenario, as
    grader.grading.grade.build_oracle calls it (the grading run's seed is the batch seed of both)."""
    built = {}
    for name, seed in (("baseline", LESSON_SEED), ("variant", variant_seed)):
        scenario = assignment.scenarios[name]
        parameters = setup_parameters(assignment, scenario, seed, variant_seed)
        built[name] = assignment.oracle.build(seed, FACTS, scenario, parameters=parameters, batch_seed=variant_seed)
    return built


def f32(array) -> np.ndarray:
    """What a float32 computation hands back, widened as the snapshot decodes it."""
    return np.asarray(array, dtype=np.float32).astype(np.float64)


def single(value) -> float:
    return float(np.float32(value))


def function(name="function"):
    return Opaque("callable", name, f"<function {name}>")


# ---- evaluations of the objective, as the recorder reports them ----------------------------------------------

def point(oracle, step, direction=ONES) -> np.ndarray:
    """x + step * direction as float32 code computes it."""
    return f32(np.float32(oracle.x) + np.float32(step) * np.float32(direction))


def value_at(oracle, at) -> float:
    """The objective at a point as float32 code returns it."""
    return single(oracle.value_at(at))


def evaluation(stmt, at, value, name="plain:21", traced=False) -> Evaluation:
    """One recorded call of the student's objective: its point and the number it returned (0-d, as decoded)."""
    return Evaluation(stmt, "student", name, (np.asarray(at, dtype=np.float64),), (np.array(float(value)),), traced)


def evaluations_at(oracle, stmt, steps, direction=ONES) -> list[Evaluation]:
    """Honest evaluations of the objective at x + s * direction for each step s."""
    return [evaluation(stmt, p, value_at(oracle, p)) for p in (point(oracle, s, direction) for s in steps)]


def quotient(oracle, step, divide_by=None, direction=ONES) -> float:
    """(f(x + h v) - f(x - h v)) / (2 divide_by) from the two float32 evaluations, in float64 (the lesson's
    `float(plain(...))` arithmetic)."""
    plus, minus = value_at(oracle, point(oracle, step, direction)), value_at(oracle, point(oracle, -step, direction))
    return (plus - minus) / (2.0 * (step if divide_by is None else divide_by))


def one_sided(oracle, step) -> float:
    """(f(x + h v) - f(x)) / h from float32 evaluations (h < 0: the backward difference)."""
    return (value_at(oracle, point(oracle, step)) - value_at(oracle, point(oracle, 0.0))) / step


def real_number(value) -> float | None:
    """A step the lesson's code could evaluate at (a finite real number or one-element array), else None."""
    if isinstance(value, (bool, str)) or value is None:
        return None
    try:
        number = float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
    except (TypeError, ValueError, IndexError):
        return None
    return number if math.isfinite(number) else None


def bound_at(events, name, stmt):
    """`name` as it was after statement `stmt` (None when unbound then)."""
    earlier = [v for i, n, v in sorted(events, key=lambda e: e[0]) if n == name and i <= stmt]
    return earlier[-1] if earlier else None


def lesson_evaluations(oracle, events) -> list[Evaluation]:
    """The lesson's `finite = (float(plain(x+eps*direction)) - float(plain(x-eps*direction))) / (2*eps)`: two
    evaluations in the statement that first binds `finite`, at the step `eps` held then."""
    stmt = next((i for i, n, _ in sorted(events, key=lambda e: e[0]) if n == "finite"), None)
    eps = real_number(bound_at(events, "eps", stmt)) if stmt is not None else None
    return [] if eps is None else evaluations_at(oracle, stmt, (eps, -eps))


def lesson_sightings(oracle, events) -> list[Sighting]:
    """The small arrays the lesson's expressions make: each direction, the step vector and the two points of the
    central difference, the gradient `automatic` is dotted from, the HVP outputs."""
    found = []
    for index, name, value in sorted(events, key=lambda e: e[0]):
        if (name in ("direction", "hvp_plain", "hvp_remat") and isinstance(value, np.ndarray) and value.shape == (WIDTH,)
                and value.dtype.kind in "fiu"):
            found.append(Sighting(index, f32(value)))
        if name == "finite":
            eps = real_number(bound_at(events, "eps", index))
            if eps is not None:
                found += [Sighting(index, f32(np.float32(eps) * np.ones(WIDTH, np.float32))),
                          Sighting(index, point(oracle, eps)), Sighting(index, point(oracle, -eps))]
        if name == "automatic":
            found.append(Sighting(index, f32(oracle.autodiff_gradient)))
    return found


# ---- the lesson's run, as statements and bindings ---------------------------------------------------------------

def good_events(oracle) -> list[tuple[int, str, object]]:
    """(statement index, name, decoded value) in the lesson's order: what honest float32 JAX code produces in the
    oracle's world."""
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
        "whole": function("Checkpointed"), "direction": f32(ONES), "eps": EPS, "finite": quotient(oracle, EPS),
        "automatic": single(oracle.autodiff_gradient.sum()), "direction2": LINE,
        "hvp_plain": f32(oracle.hvp(LINE)), "hvp_remat": f32(oracle.hvp(LINE, True)),
    }
    return [(INDEX[key], "direction" if key == "direction2" else key, values[key]) for key in ORDER]


REPLAY_SECRET = "0123456789abcdef"   # a run's secret tag: the replays' changes are drawn from it


@functools.cache
def lesson_checks():
    return assignment_module.load("performance-05").check_module


def cotangent_replay(oracle, follows="activations"):
    """The replay cotangent_shifted's frame as the run sends it: `cotangent` made again with tanh shifted by the
    secret's c0 + c1·z, as a recurrence over the activations gives it (or "pre-activations", "slope": autodiff)."""
    checks = lesson_checks()
    c0, c1 = checks._probes()._activation_shift(REPLAY_SECRET)
    return {"values": {"cotangent": f32(checks.shifted_recurrences(oracle.w, oracle.x, c0, c1)[follows])}}


def make_snapshot(oracle, scenario: str, events, ending="completed", failed=None, evaluations=None,
                  sightings=None, cotangent_follows="activations") -> Snapshot:
    """Snapshot from events; `failed` maps a statement index to (status, error dict[, names it assigns]);
    `evaluations` / `sightings` are the method evidence (default: what the lesson's code records);
    `cotangent_follows`: what the cotangent replay's value followed (None: no replay ran)."""
    snap = Snapshot(scenario=scenario, seed=oracle.seed, ending=ending, seconds=1.5, isolation="test")
    snap.secret = REPLAY_SECRET
    if cotangent_follows is not None:
        snap.replays["cotangent_shifted"] = cotangent_replay(oracle, cotangent_follows)
    snap.evidence.installed = True
    failed = failed or {}
    last = max([i for i, _, _ in events] + list(failed) + [AFTER - 1])
    for index in range(last + 1):
        status, error, *named = failed.get(index, ("ok", None))
        assigns = sorted({name for i, name, _ in events if i == index} | set(*named))
        snap.statements.append(Statement(index=index, line=line_of(index), end_line=line_of(index), assigns=assigns,
                                         status=status, error=error))
    for index, name, value in sorted(events, key=lambda e: e[0]):
        snap.history.setdefault(name, []).append((index, value))
        snap.values[name] = value
    gradient = f32(oracle.autodiff_gradient)
    snap.probes = {"grad_plain": gradient, "grad_remat": gradient.copy(), "grad_whole": gradient.copy(),
                   "whole_residuals": list(WHOLE_SAVES), "residual_reports": [list(PLAIN_LINES), list(REMAT_LINES)]}
    for probe, inputs in PROBE_INPUTS.items():
        bound = {name: max((i for i, n, _ in events if n == name), default=-1) for name in inputs}
        if all(i >= 0 for i in bound.values()):
            snap.probe_history[probe] = [(max(bound.values()), bound, snap.probes[probe], None)]
    snap.evaluations = lesson_evaluations(oracle, events) if evaluations is None else list(evaluations)
    snap.sightings = lesson_sightings(oracle, events) if sightings is None else list(sightings)
    snap.evidence.evaluations, snap.evidence.sightings = len(snap.evaluations), len(snap.sightings)
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


def spec_of(assignment, function_name):
    return next(s for s in assignment.checks if s.function in (function_name, "builtin:" + function_name))


def view(assignment, snap, regions=None) -> RunView:
    """The run as grading shows it to checks (grade.py passes the submission's exercise regions)."""
    return RunView(snap, assignment.bindings, assignment.exercise_bindings, regions)


def check_snapshot(assignment, oracles, function_name, snap, regions=None):
    """Evaluate one check function on one scenario's snapshot: (fraction, feedback)."""
    spec = spec_of(assignment, function_name)
    return evaluate(assignment.check_function(spec.function), spec, view(assignment, snap, regions),
                    oracles[snap.scenario], assignment.settings)


def check(assignment, oracles, function_name, events, scenario="baseline", regions=None, **kwargs):
    """Evaluate one check function on a snapshot made from events (make_snapshot's keyword arguments pass on)."""
    snap = make_snapshot(oracles[scenario], scenario, events, **kwargs)
    return check_snapshot(assignment, oracles, function_name, snap, regions)


def results_by_id(assignment, oracles, base, variant, regions=None, **kwargs):
    snapshots = {"baseline": make_snapshot(oracles["baseline"], "baseline", base, **kwargs),
                 "variant": make_snapshot(oracles["variant"], "variant", variant)}
    return {r.id: r for r in run_checks(assignment, snapshots, oracles, regions)}


# ---- the oracles and the reference-like submission -----------------------------------------------------------

def test_oracles_are_built_as_grading_builds_them(assignment, oracles, variant_seed):
    baseline, variant = oracles["baseline"], oracles["variant"]
    assert variant_seed != LESSON_SEED and assignment.oracle.suitable_seed(variant_seed, assignment.settings)
    assert baseline.seed == LESSON_SEED and variant.seed == variant_seed
    assert baseline.batch_seed == variant.batch_seed == variant_seed
    # grade.build_oracle gives the same worlds
    for name, seed in (("baseline", LESSON_SEED), ("variant", variant_seed)):
        graded = build_oracle(assignment, name, seed, FACTS, variant_seed)
        assert graded.rules.terms == oracles[name].rules.terms
        assert graded.rules.curvature == oracles[name].rules.curvature
        assert graded.rules.checkpoint_curvature == oracles[name].rules.checkpoint_curvature
        assert (graded.rules.change is None) == (oracles[name].rules.change is None)
        assert graded.value == oracles[name].value
        assert graded.memory == oracles[name].memory
    # JAX's own rules and evaluations in the baseline, changed in the variant
    # (the baseline installs the same terms with zero amounts, so its programs hold the same equations)
    assert len(baseline.rules.terms) == len(variant.rules.terms) and all(c == 0 for c, _, _ in baseline.rules.terms)
    assert not baseline.derivatives_changed and variant.derivatives_changed
    assert baseline.rules.curvature == baseline.rules.checkpoint_curvature == 0
    assert not baseline.values_changed and variant.values_changed
    assert variant.rules.terms and variant.rules.curvature != 0 and variant.rules.checkpoint_curvature != 0
    assert np.array_equal(baseline.autodiff_gradient, baseline.gradient)
    assert not np.array_equal(variant.autodiff_gradient, variant.gradient)
    assert not np.allclose(variant.hvp(LINE), variant.hvp(LINE, True), rtol=0, atol=0)
    assert np.array_equal(baseline.hvp(LINE), baseline.hvp(LINE, True))
    # honest code keeps passing the lesson's own assertions in the nudged world
    np.testing.assert_allclose(f32(variant.autodiff_gradient), variant.gradient, rtol=3e-5, atol=1e-7)
    np.testing.assert_allclose(quotient(variant, EPS), single(variant.autodiff_gradient.sum()), rtol=3e-3, atol=1e-6)
    np.testing.assert_allclose(f32(variant.hvp(LINE)), f32(variant.hvp(LINE, True)), rtol=3e-5, atol=1e-7)


def test_hessians_are_the_products_stacked_shared_per_world_and_read_only(assignment, oracles, variant_seed):
    """The oracle keeps one Hessian per world across a batch's records: each must equal its HVPs column by column,
    differ between worlds and rules, and be one that no record can change for the next."""
    for oracle in oracles.values():
        for checkpointed in (False, True):
            stacked = np.stack([oracle.hvp(e, checkpointed) for e in np.eye(WIDTH)], axis=1)
            assert np.array_equal(oracle.hessian(checkpointed), stacked)
            assert not oracle.hessian(checkpointed).flags.writeable
            with pytest.raises(ValueError):
                oracle.hessian(checkpointed)[0, 0] = 1.0
        exact = np.stack([oracle.true_hvp(e) for e in np.eye(WIDTH)], axis=1)
        assert np.array_equal(oracle.true_hessian, exact)
    variant = oracles["variant"]
    assert not np.array_equal(variant.hessian(False), variant.hessian(True))          # the rules differ per program
    assert not np.array_equal(variant.hessian(False), variant.true_hessian)
    assert not np.array_equal(variant.hessian(False), oracles["baseline"].hessian(False))   # the worlds differ
    # another record's oracle of the same world gets the same matrix, not a recomputation
    again = build_oracle(assignment, "variant", variant_seed, FACTS, variant_seed)
    assert again.hessian(True) is variant.hessian(True)

def test_reference_like_snapshots_get_full_marks(assignment, oracles, base_events, variant_events):
    for regions in (None, REGIONS):     # a file without the starter's markers, and one with them
        results = results_by_id(assignment, oracles, base_events, variant_events, regions)
        assert {spec.id for spec in assignment.checks} == set(results)
        failing = {rid: r.feedback for rid, r in results.items() if not r.passed}
        assert not failing, regions
        assert sum(r.score for r in results.values()) == assignment.max_score == 100
        for r in results.values():
            assert not r.feedback.startswith("[")   # no scenario label on a pass


def test_every_check_fails_on_a_submission_that_defines_nothing(assignment, oracles, variant_seed):
    empty = {"baseline": Snapshot("baseline", LESSON_SEED, ending="completed"),
             "variant": Snapshot("variant", variant_seed, ending="completed")}
    results = run_checks(assignment, empty, oracles)
    assert [r.id for r in results if r.score > 0] == []
    for r in results:
        assert "is not defined" in r.feedback, (r.id, r.feedback)


# ---- runs -------------------------------------------------------------------------------------------

def test_failed_statement_is_reported_with_its_line(assignment, oracles, base_events):
    error = {"type": "ZeroDivisionError", "message": "division by zero", "line": 13, "traceback": "..."}
    fraction, feedback = check(assignment, oracles, "no_statement_failed", base_events, failed={3: ("error", error)})
    assert fraction == 0
    assert f"line {line_of(3)}" in feedback and "ZeroDivisionError" in feedback
    fraction, feedback = check(assignment, oracles, "no_statement_failed", base_events,
                               failed={3: ("timeout", {"type": "SoftTimeLimit", "message": "", "line": 13, "traceback": ""}),
                                       5: ("error", error)})
    assert fraction == 0 and "ran out of time" in feedback and "1 more" in feedback


def test_syntax_error_fails_no_statement_failed(assignment, oracles, base_events):
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    snap.syntax_error = {"line": 77, "message": "SyntaxError: invalid syntax"}
    fraction, feedback = check_snapshot(assignment, oracles, "no_statement_failed", snap)
    assert fraction == 0 and "line 77" in feedback and "syntax" in feedback.lower()


@pytest.mark.parametrize("ending, fragment", [("sys_exit", "sys.exit at line 42"), ("exited_early", "os._exit"),
                                              ("killed_wall", "wall-clock limit"), ("lost", "without reporting")])
def test_ran_to_the_end_explains_how_the_run_ended(assignment, oracles, base_events, ending, fragment):
    snap = make_snapshot(oracles["baseline"], "baseline", base_events, ending=ending)
    snap.exit_line = 42
    fraction, feedback = check_snapshot(assignment, oracles, "ran_to_the_end", snap)
    assert fraction == 0 and fragment in feedback


def test_ran_to_the_end_fails_when_the_soft_limit_was_hit(assignment, oracles, base_events):
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    snap.soft_limit_hit = True
    fraction, feedback = check_snapshot(assignment, oracles, "ran_to_the_end", snap)
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
    assert ok(f32(gradient))[0] == 1
    wrong = ok(2 * gradient)
    assert wrong[0] == 0 and "reverse recurrence" in wrong[1]
    nan = gradient.copy()
    nan[3] = math.nan
    assert ok(nan)[0] == 0
    shape = ok(gradient[:8])
    assert shape[0] == 0 and "(16,)" in shape[1]
    scalar = ok(1.0)
    assert scalar[0] == 0 and "real vector" in scalar[1]


def test_cotangent_is_the_recurrence_told_from_autodiff(assignment, oracles, variant_events):
    """The recurrence written out gives the true gradient in the variant; JAX's autodiff follows the changed rules,
    which this world puts at least `separation` cotangent tolerances away, so a `cotangent` from jax.grad fails and
    is told so (the lesson asks for the recurrence)."""
    oracle, settings = oracles["variant"], assignment.settings
    run = lambda value: check(assignment, oracles, "cotangent_matches_recurrence",
                              replace(variant_events, "cotangent", value), "variant")
    assert oracle.cotangent_separation(settings) >= settings.separation
    assert run(f32(oracle.gradient))[0] == 1
    fraction, feedback = run(f32(oracle.autodiff_gradient))
    assert fraction == 0 and "follows JAX's autodiff" in feedback
    # a value that is neither: the recurrence's message, no method named
    fraction, feedback = run(f32(oracle.gradient * 1.01))
    assert fraction == 0 and "autodiff" not in feedback and "reverse recurrence" in feedback


def test_cotangent_from_autodiff_is_held_where_the_rules_are_jaxs_own(assignment, oracles, base_events):
    """In the baseline autodiff and the recurrence agree to float32 noise, so the value does not tell them apart: the
    replay does (autodiff follows the shifted tanh's slope), and a `cotangent` that did not follow the recurrence
    there, or whose replay did not run, is held for the instructor, never credited (issue 67)."""
    oracle = oracles["baseline"]
    events = replace(base_events, "cotangent", f32(oracle.autodiff_gradient))
    for follows, said in (("slope", "followed the changed function's slope"), (None, "could not compute it again")):
        fraction, feedback = check(assignment, oracles, "cotangent_matches_recurrence", events, cotangent_follows=follows)
        assert fraction == 0 and said in feedback and "instructor decides" in feedback
    for follows in ("activations", "pre-activations"):   # the recurrence over activations or over pre-activations
        assert check(assignment, oracles, "cotangent_matches_recurrence", events, cotangent_follows=follows)[0] == 1


def test_cotangent_as_a_list_of_numpy_scalars_is_a_vector(assignment, oracles, base_events):
    """`list(np.asarray(cotangent))` streams as a list of 0-d arrays (numpy scalars): still a list of numbers."""
    gradient = f32(oracles["baseline"].gradient)
    as_scalars = [np.array(v, dtype=np.float64) for v in gradient]   # what decode() makes of np.float32 items
    fraction, feedback = check(assignment, oracles, "cotangent_matches_recurrence", replace(base_events, "cotangent", as_scalars))
    assert fraction == 1, feedback


def test_jax_gradients_follow_the_runs_derivative_rules(assignment, oracles, variant_events):
    """The probes call jax.grad in the run: in the variant they return the nudged gradient, which passes."""
    snap = make_snapshot(oracles["variant"], "variant", variant_events)
    assert check_snapshot(assignment, oracles, "jax_gradients_match_recurrence", snap)[0] == 1
    assert check_snapshot(assignment, oracles, "whole_objective_gradient", snap)[0] == 1


def test_probe_error_and_missing_probe(assignment, oracles, base_events):
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    run = lambda: check_snapshot(assignment, oracles, "jax_gradients_match_recurrence", snap)
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
    events = base_events + [(AFTER, "x", 4)]
    snap = make_snapshot(oracles["baseline"], "baseline", events)
    error = {"type": "TypeError", "message": "bad x", "line": 40, "cell": None, "traceback": ""}
    for entries in snap.probe_history.values():
        stmt, inputs, value, _ = entries[0]
        entries[:] = [(stmt, {**inputs, "x": INDEX["x"]}, value, None), (AFTER, {**inputs, "x": AFTER}, None, error)]
    run_view = view(assignment, snap)
    fraction, feedback = evaluate(assignment.check_module.jax_gradients_match_recurrence,
                                  spec_of(assignment, "jax_gradients_match_recurrence"), run_view,
                                  oracles["baseline"], assignment.settings)
    assert fraction == 1, feedback
    assert run_view.binding("x").stmt == INDEX["x"] and not run_view.binding("x").is_last


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
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    fraction, feedback = evaluate(assignment.check_module.report_lengths_match_live_counts,
                                  spec_of(assignment, "report_lengths_match_live_counts"), view(assignment, snap),
                                  assignment.oracle.build(LESSON_SEED, other), assignment.settings)
    assert fraction == 0 and "7 (plain)" in feedback


def test_residual_reports_must_be_what_this_run_prints_for_the_files_functions(assignment, oracles, base_events):
    """The lists must name the source positions JAX names for the file's own plain and remat in this run (the
    residual_reports probe): the lesson page's `<string>:17:20`, cut or made-up lines fail; any answer of the probe
    in the run counts; a JAX that cannot be asked (None) leaves the reports unjudged."""
    own = lambda lines: [line.replace("<string>:17:20", "performance-05.py:21:20") for line in lines]
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    history = snap.probe_history["residual_reports"]
    stmt, inputs, _, _ = history[0]
    history[:] = [(stmt, inputs, [own(PLAIN_LINES), own(REMAT_LINES)], None)]
    for name in ("reports_are_two_residual_lists", "report_lengths_match_live_counts", "remat_saves_fewer"):
        fraction, feedback = check_snapshot(assignment, oracles, name, snap)
        assert fraction == 0 and "`<string>:17:20 (layer)`" in feedback and "performance-05.py:21:20" in feedback
    snap.history["reports"] = [(INDEX["reports"], [own(PLAIN_LINES), own(REMAT_LINES)])]
    snap.values["reports"] = snap.history["reports"][0][1]
    assert check_snapshot(assignment, oracles, "report_lengths_match_live_counts", snap)[0] == 1
    cut = [[line.split(" from ")[0] for line in own(PLAIN_LINES)], own(REMAT_LINES)]
    snap.history["reports"] = [(INDEX["reports"], cut)]
    snap.values["reports"] = cut
    fraction, feedback = check_snapshot(assignment, oracles, "report_lengths_match_live_counts", snap)
    assert fraction == 0 and "no source position" in feedback
    history.insert(0, (stmt, inputs, [cut[0], own(REMAT_LINES)], None))    # an earlier answer of the probe matches
    assert check_snapshot(assignment, oracles, "report_lengths_match_live_counts", snap)[0] == 1
    history[:] = [(stmt, inputs, None, None)]                               # JAX could not be asked
    assert check_snapshot(assignment, oracles, "report_lengths_match_live_counts", snap)[0] == 1
    error = {"type": "TypeError", "message": "bad", "line": 21, "cell": None, "traceback": ""}
    history[:] = [(stmt, inputs, None, error)]
    fraction, feedback = check_snapshot(assignment, oracles, "report_lengths_match_live_counts", snap)
    assert fraction == 0 and "TypeError" in feedback
    del snap.probe_history["residual_reports"]
    fraction, feedback = check_snapshot(assignment, oracles, "report_lengths_match_live_counts", snap)
    assert fraction == 0 and "never all defined" in feedback


def test_whole_must_save_only_its_inputs(assignment, oracles, base_events):
    """`whole = plain` has the right gradient but saves the layers' outputs: not a checkpoint of the whole objective."""
    snap = make_snapshot(oracles["baseline"], "baseline", base_events)
    assert check_snapshot(assignment, oracles, "whole_objective_gradient", snap)[0] == 1
    stmt, inputs, _, _ = snap.probe_history["whole_residuals"][0]
    saved = ["from a constant"] + [line.split(" ", 1)[1] for line in PLAIN_LINES[1:]]
    snap.probe_history["whole_residuals"] = [(stmt, inputs, saved, None)]
    fraction, feedback = check_snapshot(assignment, oracles, "whole_objective_gradient", snap)
    assert fraction == 0 and "saves 8 intermediate value(s)" in feedback and "jax.checkpoint(plain)" in feedback
    snap.probe_history["whole_residuals"] = [(stmt, inputs, None, None)]   # JAX could not be asked: gradient only
    assert check_snapshot(assignment, oracles, "whole_objective_gradient", snap)[0] == 1


# ---- memory -----------------------------------------------------------------------------------------

def test_every_scenario_offsets_the_compilers_figures(oracles):
    """Figures typed in from the lesson's page (or from a local run) are not what the grader's runs report."""
    baseline, variant = oracles["baseline"].memory, oracles["variant"].memory
    assert all(m is not None for m in baseline)
    for real, reported in zip(FACTS["memory"], baseline):
        assert all(reported[name] != real[name] for name in real)
        assert len(set(reported.values())) == len(reported), "every field differs from every other"
    # equal figures stay equal: both policies report the same argument bytes, offset alike
    assert baseline[0]["argument_size_in_bytes"] == baseline[1]["argument_size_in_bytes"]
    assert baseline[0]["temp_size_in_bytes"] - baseline[1]["temp_size_in_bytes"] == 256 - 192
    assert sum(m is None for m in variant) == 1
    varied = next(m for m in variant if m is not None)
    real = MEMORY_PLAIN if variant[0] is not None else MEMORY_REMAT
    assert all(varied[name] != real[name] for name in real)


def test_memory_checks_in_baseline(assignment, oracles, base_events):
    reported = [dict(m) for m in oracles["baseline"].memory]
    run = lambda fn, memory: check(assignment, oracles, fn, replace(base_events, "memory", memory))
    assert run("memory_figures_match_compiler", [dict(m) for m in reported])[0] == 1
    fraction, feedback = run("memory_is_two_dicts", [None, None])
    assert fraction == 0 and "dict" in feedback
    fraction, feedback = run("memory_is_two_dicts", [dict(reported[0], temp_size_in_bytes=256.5), reported[1]])
    assert fraction == 0 and "temp_size_in_bytes" in feedback and "whole number" in feedback
    fraction, feedback = run("memory_is_two_dicts", [dict(reported[0], temp_size_in_bytes="256"), reported[1]])
    assert fraction == 0 and "whole number" in feedback
    # np.int64 figures arrive as 0-d float64 arrays: still whole numbers of bytes
    as_numpy = {k: np.array(float(v)) for k, v in reported[0].items()}
    assert run("memory_is_two_dicts", [as_numpy, reported[1]])[0] == 1
    assert run("memory_figures_match_compiler", [as_numpy, reported[1]])[0] == 1
    fraction, feedback = run("memory_is_two_dicts", [{k: v for k, v in reported[0].items() if k != "alias_size_in_bytes"},
                                                     reported[1]])
    assert fraction == 0 and "lacks alias_size_in_bytes" in feedback
    fraction, feedback = run("memory_is_two_dicts", [reported[0]])
    assert fraction == 0 and "one entry per executable" in feedback
    # the two executables' dicts swapped (compiled in the other order): said as such, with no figure quoted (never
    # the grader's offset one)
    fraction, feedback = run("memory_figures_match_compiler", [reported[1], reported[0]])
    assert fraction == 0 and "holds exactly the figures the compiler reported for the remat executable" in feedback
    assert "order [plain, remat]" in feedback and str(reported[0]["temp_size_in_bytes"]) not in feedback
    # one figure of another executable, the rest its own: not a swap; the first differing figure is named with what
    # the student's own run of the file shows (the figure they can reproduce), never the grader's offset one
    mixed = dict(reported[0], temp_size_in_bytes=reported[1]["temp_size_in_bytes"] + 8)
    fraction, feedback = run("memory_figures_match_compiler", [mixed, reported[1]])
    assert fraction == 0 and "temp_size_in_bytes for plain" in feedback and "order" not in feedback
    assert str(MEMORY_PLAIN["temp_size_in_bytes"]) in feedback and "when you run your file" in feedback
    assert str(reported[0]["temp_size_in_bytes"]) not in feedback
    # the real figures typed in (from the lesson's page or a local run): not what this run's compiler reported
    fraction, feedback = run("memory_figures_match_compiler", [dict(MEMORY_PLAIN), dict(MEMORY_REMAT)])
    assert fraction == 0 and "the figure your own run shows" in feedback and "typed into the file" in feedback
    assert f"argument_size_in_bytes for plain is {MEMORY_PLAIN['argument_size_in_bytes']}" in feedback


def test_zeros_for_unavailable_memory_are_named(assignment, oracles, variant_events):
    zeros = {name: 0 for name in MEMORY_PLAIN}
    run = lambda memory: check(assignment, oracles, "unavailable_memory_is_none",
                               replace(variant_events, "memory", memory), "variant")
    fraction, feedback = run([zeros, dict(zeros)])
    assert fraction == 0 and "None" in feedback and "0" in feedback and "zero" in feedback.lower()
    fraction, feedback = run([dict(MEMORY_PLAIN), dict(MEMORY_REMAT)])
    assert fraction == 0 and "should be None" in feedback
    assert run([None])[0] == 0
    assert check(assignment, oracles, "unavailable_memory_is_none", variant_events, "variant")[0] == 1
    assert run((None, None))[0] == 1


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
    assert fraction == 0 and "bytes in this run" in feedback
    swapped = list(good)
    figures = dict(good[index])
    figures["argument_size_in_bytes"], figures["output_size_in_bytes"] = figures["output_size_in_bytes"], figures["argument_size_in_bytes"]
    swapped[index] = figures
    fraction, feedback = run("memory_figures_match_compiler", swapped)
    assert fraction == 0 and "holds the figure the compiler reported for" in feedback
    fraction, feedback = run("memory_is_two_dicts", [None, None])
    assert fraction == 0 and "Record None only when memory_analysis() returns None" in feedback
    for bad, fragment in (({}, "empty dict"), ({k: 0 for k in MEMORY_PLAIN}, "zeros"), ("unavailable", "should be None")):
        entries = list(good)
        entries[missing] = bad
        fraction, feedback = run("unavailable_memory_is_none", entries)
        assert fraction == 0 and fragment in feedback, feedback


def test_a_list_cut_short_at_the_missing_analysis_is_judged_on_its_entries(assignment, oracles, variant_events):
    """Outside the baseline, a run that stopped at the missing analysis is judged on the entries it has (the
    missing analysis itself is memory_unavailable's to judge)."""
    oracle = oracles["variant"]
    index = next(i for i, m in enumerate(oracle.memory) if m is not None)
    cut = [dict(oracle.memory[index])] if index == 0 else [None]
    for name in ("memory_is_two_dicts", "memory_figures_match_compiler"):
        fraction, feedback = check(assignment, oracles, name, replace(variant_events, "memory", cut), "variant")
        assert fraction == 1, (name, feedback)
    fraction, feedback = check(assignment, oracles, "unavailable_memory_is_none", replace(variant_events, "memory", cut),
                               "variant")
    assert fraction == 0 and "one entry per executable" in feedback


# ---- the memory panel -------------------------------------------------------------------------------

def _with_second_panel(events, panel):
    panels = [dict(events[ORDER.index("panels")][2][0]), panel]
    return replace(replace(events, "panels", panels), "visual_data", {"kind": "panels", "panels": panels})


def _availability(events, y, title="Compiler memory analysis unavailable", ylabel="analysis available (1=yes)",
                  label="availability, not byte count"):
    return _with_second_panel(events, {"kind": "bar", "title": title, "ylabel": ylabel, "series": [{"label": label, "y": y}]})


def test_availability_panel(assignment, oracles, variant_events):
    run = lambda events: check(assignment, oracles, "second_panel_is_availability", events, "variant")
    bytes_panel = {"kind": "bar", "title": "Compiler memory estimate", "ylabel": "estimated temporary bytes",
                   "series": [{"label": "compiler temporaries", "y": [256, 192]}]}
    fraction, feedback = run(_with_second_panel(variant_events, bytes_panel))
    assert fraction == 0 and "availability" in feedback and "[256, 192]" in feedback
    zero_bytes = dict(bytes_panel, series=[{"label": "compiler temporaries", "y": [0, 0]}])
    fraction, feedback = run(_with_second_panel(variant_events, zero_bytes))
    assert fraction == 0 and "labelled in bytes" in feedback and "whether each executable has an analysis" in feedback
    y = [int(m is not None) for m in oracles["variant"].memory]
    as_array = dict(variant_events[ORDER.index("panels")][2][1], series=[{"label": "a", "y": np.array(y, dtype=float)}])
    assert run(_with_second_panel(variant_events, as_array))[0] == 1
    # visual_data must be built from the same panels
    fraction, feedback = run(replace(variant_events, "visual_data", {"kind": "panels", "panels": []}))
    assert fraction == 0 and "visual_data" in feedback
    fraction, feedback = run(replace(variant_events, "panels", [variant_events[ORDER.index("panels")][2][0]]))
    assert fraction == 0 and "two panels" in feedback


def test_a_nan_bar_in_both_lists_is_the_same_data(assignment, oracles, variant_events):
    """A missing figure drawn as NaN in `panels` and in `visual_data` is the same list (NaN != NaN in Python)."""
    oracle = oracles["variant"]
    heights = [math.nan if m is None else 1.0 for m in oracle.memory]
    fraction, feedback = check(assignment, oracles, "second_panel_is_availability", _availability(variant_events, heights),
                               "variant")
    assert "visual_data" not in feedback and "same `panels` list" not in feedback, feedback
    assert fraction == 0 and "availability (1 = reported, 0 = missing)" in feedback


@pytest.mark.parametrize("title, ylabel, label", [
    ("No compiler memory analysis", "reported (1) / missing (0)", "analysis"),
    ("Memory analysis not available", "", ""),
    ("Compiler memory estimate", "analysis supported (1 = yes)", "availability"),
    ("Analysis present?", "1 = present, 0 = absent", ""),
    ("Which executables have a compiler memory analysis", "has analysis (1 = yes, 0 = no)", "")])
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
    assert fraction == 0 and "missing here" in feedback
    # [0, 0] marks a reported analysis as missing: the bars are judged against what was reported (issue 55)
    fraction, feedback = run(_availability(variant_events, [0, 0]))
    assert fraction == 0 and "reported an analysis" in feedback and "int(m is not None)" in feedback
    # a title naming bytes before "unavailable" is an availability title when the bars and y-label say so
    assert run(_availability(variant_events, y, "Temporary bytes unavailable", "analysis available (1=yes)", "a"))[0] == 1
    # booleans are availability too
    assert run(_availability(variant_events, [bool(v) for v in y]))[0] == 1


def test_byte_panel_when_available(assignment, oracles, base_events):
    reported = [m["temp_size_in_bytes"] for m in oracles["baseline"].memory]
    run = lambda events: check(assignment, oracles, "second_panel_is_bytes", events)
    assert run(base_events)[0] == 1
    availability = {"kind": "bar", "title": "Compiler memory analysis unavailable", "ylabel": "analysis available (1=yes)",
                    "series": [{"label": "availability", "y": [1, 1]}]}
    fraction, feedback = run(_with_second_panel(base_events, availability))
    assert fraction == 0 and str(reported) in feedback and "[1, 1]" in feedback
    swapped = dict(availability, series=[{"label": "t", "y": reported[::-1]}])
    assert run(_with_second_panel(base_events, swapped))[0] == 0
    real = dict(availability, series=[{"label": "t", "y": [256, 192]}])   # the figures of a local run, typed in
    assert run(_with_second_panel(base_events, real))[0] == 0


# ---- eps ----------------------------------------------------------------------------------------------

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


# ---- finite: a central difference of two recorded evaluations of the objective ------------------------------

def finite_check(assignment, oracles, events, scenario="baseline", **kwargs):
    return check(assignment, oracles, "finite_is_central_difference", events, scenario, **kwargs)


def with_step(events, eps, finite):
    return replace(replace(events, "eps", eps), "finite", finite)



def test_central_difference_with_eps_as_a_float32_array(assignment, oracles, base_events):
    """`eps = jnp.float32(1e-3)`: the graded eps is the float32 number, the points were made with it."""
    oracle = oracles["baseline"]
    eps = np.array(single(EPS))
    fraction, feedback = finite_check(assignment, oracles, with_step(base_events, eps, quotient(oracle, float(eps))))
    assert fraction == 1, feedback


def test_finite_computed_over_several_statements(assignment, oracles, base_events):
    """`finite = f(x+εv); finite -= f(x−εv); finite = finite / (2ε)`: three bindings, the evaluations in the first
    two statements, and the quotient graded (not a backward difference)."""
    oracle = oracles["baseline"]
    plus, minus = value_at(oracle, point(oracle, EPS)), value_at(oracle, point(oracle, -EPS))
    at = INDEX["finite"]
    events = drop(base_events, "finite") + [(at - 1, "finite", plus), (at, "finite", plus - minus),
                                             (at + 1, "finite", (plus - minus) / (2 * EPS))]
    evaluations = evaluations_at(oracle, at - 1, (EPS,)) + evaluations_at(oracle, at, (-EPS,))
    for regions in (None, REGIONS):
        fraction, feedback = finite_check(assignment, oracles, events, evaluations=evaluations, regions=regions)
        assert fraction == 1, (regions, feedback)










@pytest.mark.parametrize("k", [2, 3, 5])
def test_a_batch_evaluation_with_one_result_per_row_counts(assignment, oracles, base_events, k):
    """jax.vmap(plain)(jnp.stack([...])) or a jitted batch: one (k, 16) argument, k numbers returned."""
    oracle = oracles["baseline"]
    steps = [EPS, -EPS, 0.0, 2 * EPS, -2 * EPS][:k]
    rows = np.stack([point(oracle, s) for s in steps])
    values = np.array([value_at(oracle, row) for row in rows])
    batch = Evaluation(INDEX["finite"], "jit", "vmap(plain):21", (rows,), (values,), traced=True)
    fraction, feedback = finite_check(assignment, oracles, base_events, evaluations=[batch])
    assert fraction == 1, feedback



def test_an_objective_that_also_takes_the_weights_is_still_evaluated_at_the_point(assignment, oracles, base_events):
    """plain(w, x ± εv): the (16, 16) weights are not a batch of 16 points (one number came back)."""
    oracle = oracles["baseline"]
    evaluations = [Evaluation(e.stmt, "student", "plain:21", (oracle.w, *e.args), e.results)
                   for e in evaluations_at(oracle, INDEX["finite"], (EPS, -EPS))]
    fraction, feedback = finite_check(assignment, oracles, base_events, evaluations=evaluations)
    assert fraction == 1, feedback




def test_a_tiny_step_is_still_a_central_difference_by_its_evaluations(assignment, oracles, base_events):
    """eps = 1e-7: float32 rounding moves each point by its own amount, yet the two evaluations are the central
    difference's; the step itself is eps_sensible's to judge."""
    oracle = oracles["baseline"]
    eps = 1e-7
    events = with_step(base_events, eps, quotient(oracle, eps))
    fraction, feedback = finite_check(assignment, oracles, events)
    assert fraction == 1, feedback
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", events)
    assert fraction == 0 and "outside" in feedback


def test_nan_finite_is_not_called_a_forward_difference(assignment, oracles, base_events):
    fraction, feedback = finite_check(assignment, oracles, replace(base_events, "finite", math.nan))
    assert fraction == 0
    assert "forward" not in feedback and "backward" not in feedback, feedback


def test_lesson_numbers_hard_coded_fail_in_variant(assignment, oracles, base_events, variant_events):
    lesson = base_events[ORDER.index("finite")][2]
    fraction, feedback = finite_check(assignment, oracles, replace(variant_events, "finite", lesson), "variant")
    assert fraction == 0 and f"`finite` = {fmt(lesson)}, but the central difference of the objective" in feedback
    lesson_auto = base_events[ORDER.index("automatic")][2]
    fraction, feedback = check(assignment, oracles, "automatic_is_gradient_dot_ones",
                               replace(variant_events, "automatic", lesson_auto), "variant")
    assert fraction == 0 and f"`automatic` = {fmt(lesson_auto)}" in feedback


# ---- evidence gaps ---------------------------------------------------------------------------------------------




# ---- automatic: JAX's autodiff of the objective, dotted with (1,…,1) ---------------------------------------

def automatic_check(assignment, oracles, events, scenario="baseline", **kwargs):
    return check(assignment, oracles, "automatic_is_gradient_dot_ones", events, scenario, **kwargs)


def test_automatic_accepts_jax_autodiff_in_either_form(assignment, oracles, base_events, variant_events):
    for scenario, events in (("baseline", base_events), ("variant", variant_events)):
        oracle = oracles[scenario]
        gradient = np.float32(oracle.autodiff_gradient)
        forms = {"float32 sum": single(oracle.autodiff_gradient.sum()), "a 0-d array": np.array(single(gradient.sum())),
                 "float32 vdot": float(np.vdot(gradient, np.ones(WIDTH, np.float32))),
                 "float64 dot of the float32 gradient": float(gradient.astype(np.float64) @ ONES)}
        for label, value in forms.items():
            fraction, feedback = automatic_check(assignment, oracles, replace(events, "automatic", value), scenario)
            assert fraction == 1, (scenario, label, feedback)


def test_automatic_value_problems(assignment, oracles, base_events):
    run = lambda value: automatic_check(assignment, oracles, replace(base_events, "automatic", value))
    slope = single(oracles["baseline"].autodiff_gradient.sum())
    fraction, feedback = run(math.nan)
    assert fraction == 0 and "finite number" in feedback
    fraction, feedback = run(slope * 1.01)
    assert fraction == 0 and f"`automatic` = {fmt(slope * 1.01)}, but the gradient of the objective" in feedback
    assert "difference quotient" not in feedback          # nothing the run recorded gives this number
    # a check that does not need `eps` never fails on it
    fraction, feedback = automatic_check(assignment, oracles, replace(drop(base_events, "eps"), "automatic", slope * 1.01))
    assert fraction == 0 and "`eps`" not in feedback and "`automatic` = " in feedback
    fraction, feedback = run(list(np.full(WIDTH, slope)))
    assert fraction == 0 and "single real number" in feedback
    fraction, feedback = run(f32(oracles["baseline"].gradient))  # the gradient itself, not dotted
    assert fraction == 0 and "single real number" in feedback


def test_exact_slope_fails_automatic_in_the_variant(assignment, oracles, base_events, variant_events):
    """A NumPy recurrence, a formula or a typed number does not follow the run's derivative rules."""
    oracle = oracles["variant"]
    exact = single(oracle.gradient.sum())
    fraction, feedback = automatic_check(assignment, oracles, replace(variant_events, "automatic", exact), "variant")
    assert fraction == 0
    assert "is the directional derivative of the unchanged objective, but not what JAX's automatic differentiation" in feedback
    assert "did not follow them" in feedback and "NumPy" not in feedback   # says what the value missed, accuses nothing
    # in the baseline JAX's rules are its own: the same number is autodiff's, and passes
    baseline_exact = single(oracles["baseline"].gradient.sum())
    assert automatic_check(assignment, oracles, replace(base_events, "automatic", baseline_exact))[0] == 1


@pytest.mark.parametrize("scenario", ["variant"])
def test_a_central_difference_fails_automatic(assignment, oracles, base_events, variant_events, scenario):
    """`automatic = finite` (or `finite if allclose(finite, slope) else nan`): a difference quotient. The variant
    tells it from autodiff (the baseline, where JAX's rules are its own and its jet rule is looser in float32,
    judges the value only)."""
    events = base_events if scenario == "baseline" else variant_events
    oracle = oracles[scenario]
    for eps in (1e-3, 1e-2):
        central = quotient(oracle, eps)
        fraction, feedback = automatic_check(assignment, oracles, replace(with_step(events, eps, central), "automatic", central),
                                             scenario)
        assert fraction == 0, feedback
        assert "equals the central difference of the objective at your eps: it is a difference quotient" in feedback


def test_another_directions_dot_fails_automatic(assignment, oracles, base_events, variant_events):
    """The gradient dotted with a vector the run made (linspace) instead of (1,…,1)."""
    for scenario, events in (("baseline", base_events), ("variant", variant_events)):
        oracle = oracles[scenario]
        dotted = single(oracle.autodiff_gradient @ LINE)
        events = replace(events, "automatic", dotted)
        sightings = lesson_sightings(oracle, events) + [Sighting(INDEX["automatic"], LINE)]
        fraction, feedback = automatic_check(assignment, oracles, events, scenario, sightings=sightings)
        assert fraction == 0 and "is the gradient dotted with a direction other than (1,…,1)" in feedback, feedback
        # the same value, with that vector never made before `automatic`: the plain mismatch message
        fraction, feedback = automatic_check(assignment, oracles, events, scenario)
        assert fraction == 0 and "dotted with a direction other than" not in feedback
        assert "by JAX autodiff, dotted with (1,…,1), is" in feedback


# ---- Hessian-vector products ---------------------------------------------------------------------------------

def hvp_events(oracle, events, direction_before, direction_after=None, remat_direction=None):
    """direction = direction_before; hvp_plain; [direction = remat_direction]; hvp_remat; [direction = after]."""
    plain_at, remat_at = INDEX["hvp_plain"], INDEX["hvp_remat"]
    events = drop(drop(drop(events, "direction"), "hvp_plain"), "hvp_remat")
    events += [(INDEX["direction"], "direction", f32(ONES)), (INDEX["direction2"], "direction", direction_before),
               (plain_at, "hvp_plain", f32(oracle.hvp(direction_before)))]
    if remat_direction is not None:
        events += [(remat_at - 1, "direction", remat_direction), (remat_at, "hvp_remat", f32(oracle.hvp(remat_direction, True)))]
    else:
        events += [(remat_at, "hvp_remat", f32(oracle.hvp(direction_before, True)))]
    if direction_after is not None:
        events.append((AFTER, "direction", direction_after))
    return events


HVP_CHECKS = ("hvp_direction_is_nonuniform", "hvp_plain_matches_oracle", "hvp_remat_matches")


def test_hvps_pass_in_both_worlds(assignment, oracles, base_events, variant_events):
    for scenario, events in (("baseline", base_events), ("variant", variant_events)):
        for name in HVP_CHECKS + ("hvps_have_shape_and_are_finite",):
            fraction, feedback = check(assignment, oracles, name, events, scenario)
            assert fraction == 1, (scenario, name, feedback)


def test_the_tangent_is_found_among_the_sightings(assignment, oracles, base_events, variant_events):
    """`direction` still holds (1,…,1): the tangent was made under another name in an earlier statement
    (`tangent = jnp.linspace(...)`), or only inside the HVP's own statement (a local in a helper, an inline
    argument). The vector the code made explains the value."""
    for scenario, events in (("baseline", base_events), ("variant", variant_events)):
        oracle = oracles[scenario]
        kept = drop(events, "direction") + [(INDEX["direction"], "direction", f32(ONES))]
        for made_at in (INDEX["direction2"], INDEX["hvp_plain"]):
            sightings = lesson_sightings(oracle, kept) + [Sighting(made_at, LINE)]
            for name in HVP_CHECKS:
                fraction, feedback = check(assignment, oracles, name, kept, scenario, sightings=sightings)
                assert fraction == 1, (scenario, made_at, name, feedback)
            assert np.array_equal(view(assignment, make_snapshot(oracle, scenario, kept))["direction"], ONES)


def test_the_lessons_own_tangent_counts_wherever_the_file_made_it(assignment, oracles, base_events):
    """A tangent made inside jit or after the HVP leaves no array before it; the lesson's own tangent is a candidate
    anyway (naming it earns nothing: only second-order autodiff in the run gives H v along it)."""
    oracle = oracles["baseline"]
    kept = drop(base_events, "direction") + [(INDEX["direction"], "direction", f32(ONES))]
    sightings = lesson_sightings(oracle, kept) + [Sighting(AFTER, LINE)]
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", kept, sightings=sightings)
    assert fraction == 1, feedback
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", drop(base_events, "direction"))
    assert fraction == 1, feedback


def test_direction_is_read_when_hvp_was_computed_not_at_the_end(assignment, oracles, base_events):
    oracle = oracles["baseline"]
    line, ones = LINE, f32(ONES)
    # nonuniform when the HVP was computed, overwritten by ones afterwards: all HVP checks pass
    events = hvp_events(oracle, base_events, line, direction_after=ones)
    snap = make_snapshot(oracle, "baseline", events)
    assert np.array_equal(snap.values["direction"], ones)
    assert np.array_equal(view(assignment, snap).value_when("direction", "hvp_plain"), line)
    for name in HVP_CHECKS:
        fraction, feedback = check(assignment, oracles, name, events)
        assert fraction == 1, (name, feedback)
    # uniform when computed, nonuniform only at the end: the nonuniform check fails
    events = hvp_events(oracle, base_events, ones, direction_after=line)
    fraction, feedback = check(assignment, oracles, "hvp_direction_is_nonuniform", events)
    assert fraction == 0 and "uniform" in feedback
    assert check(assignment, oracles, "hvp_plain_matches_oracle", events)[0] == 1


def test_uniform_hvp_direction_fails_only_the_nonuniform_check(assignment, oracles, base_events, variant_events):
    for scenario, events in (("baseline", base_events), ("variant", variant_events)):
        events = hvp_events(oracles[scenario], events, f32(np.full(WIDTH, 0.5)))
        fraction, feedback = check(assignment, oracles, "hvp_direction_is_nonuniform", events, scenario)
        assert fraction == 0 and "The HVP direction is uniform" in feedback
        assert check(assignment, oracles, "hvp_plain_matches_oracle", events, scenario)[0] == 1
        assert check(assignment, oracles, "hvp_remat_matches", events, scenario)[0] == 1


def test_hvp_along_the_earlier_all_ones_direction(assignment, oracles, base_events):
    """hvp_plain along (1,…,1) (the directional exercise's vector) while `direction` later holds linspace: it is
    second-order autodiff along a vector the code made, so it passes; the uniform tangent fails the nonuniform
    check."""
    oracle = oracles["baseline"]
    events = replace(base_events, "hvp_plain", f32(oracle.hvp(ONES)))
    assert np.array_equal(make_snapshot(oracle, "baseline", events).values["direction"], LINE)
    assert check(assignment, oracles, "hvp_plain_matches_oracle", events)[0] == 1
    fraction, feedback = check(assignment, oracles, "hvp_direction_is_nonuniform", events)
    assert fraction == 0 and "uniform" in feedback
    fraction, feedback = check(assignment, oracles, "hvp_remat_matches", events)
    assert fraction == 0 and "computed along different tangents" in feedback


def test_the_true_hvp_fails_in_the_variant(assignment, oracles, base_events, variant_events):
    """A NumPy HVP (or typed numbers) does not follow the nudged second derivative."""
    oracle = oracles["variant"]
    true = f32(oracle.true_hvp(LINE))
    for name, slot in (("hvp_plain_matches_oracle", "hvp_plain"), ("hvp_remat_matches", "hvp_remat")):
        fraction, feedback = check(assignment, oracles, name, replace(variant_events, slot, true), "variant")
        assert fraction == 0, (name, feedback)
        assert f"`{slot}` is the exact Hessian-vector product of the unchanged objective, but not what JAX's second-order autodiff returned" in feedback
    assert check(assignment, oracles, "hvp_plain_matches_oracle",
                 replace(base_events, "hvp_plain", f32(oracles["baseline"].true_hvp(LINE))))[0] == 1


def test_one_objectives_hvp_in_the_other_slot_fails_in_the_variant(assignment, oracles, variant_events):
    oracle = oracles["variant"]
    plain, remat = f32(oracle.hvp(LINE)), f32(oracle.hvp(LINE, True))
    # one Hessian's product used for both (or `plain` differentiated and called remat)
    fraction, feedback = check(assignment, oracles, "hvp_remat_matches", replace(variant_events, "hvp_remat", plain), "variant")
    assert fraction == 0
    assert "`hvp_remat` is the Hessian-vector product of the ordinary objective, not of a rematerialized one" in feedback
    assert check(assignment, oracles, "hvp_plain_matches_oracle", replace(variant_events, "hvp_remat", plain), "variant")[0] == 1
    # remat's HVP reported as plain's
    fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", replace(variant_events, "hvp_plain", remat),
                               "variant")
    assert fraction == 0
    assert "`hvp_plain` is the Hessian-vector product of a rematerialized objective, not of the ordinary objective" in feedback


def test_an_approximate_hvp_fails_with_its_message(assignment, oracles, base_events, variant_events):
    """A central difference of float32 gradients along the tangent: close to the HVP, not exact."""
    module = __import__(type(oracles["baseline"]).__module__, fromlist=["gradient"])
    for scenario, events in (("baseline", base_events), ("variant", variant_events)):
        oracle = oracles[scenario]
        h = 1e-3
        grads = [f32(module.gradient(oracle.w, point(oracle, s, LINE), oracle.rules)) for s in (h, -h)]
        approximate = f32((np.float32(grads[0]) - np.float32(grads[1])) / np.float32(2 * h))
        fraction, feedback = check(assignment, oracles, "hvp_plain_matches_oracle", replace(events, "hvp_plain", approximate),
                                   scenario)
        assert fraction == 0, (scenario, feedback)
        assert "is close to the Hessian-vector product of the ordinary objective `plain` but not equal to what second-order autodiff returns" in feedback
        assert "as an approximation (a finite difference of gradients, for example) would be" in feedback


def test_a_gradient_in_an_hvp_slot_fails(assignment, oracles, base_events):
    gradient = f32(oracles["baseline"].autodiff_gradient)
    for name, slot in (("hvp_plain_matches_oracle", "hvp_plain"), ("hvp_remat_matches", "hvp_remat")):
        fraction, feedback = check(assignment, oracles, name, replace(base_events, slot, gradient))
        assert fraction == 0 and f"`{slot}` equals the gradient, not a Hessian-vector product" in feedback


def test_different_tangents_fail_the_remat_check(assignment, oracles, base_events, variant_events):
    other = f32(np.linspace(0.5, 2.0, WIDTH))
    for scenario, events in (("baseline", base_events), ("variant", variant_events)):
        events = hvp_events(oracles[scenario], events, LINE, remat_direction=other)
        assert check(assignment, oracles, "hvp_plain_matches_oracle", events, scenario)[0] == 1
        fraction, feedback = check(assignment, oracles, "hvp_remat_matches", events, scenario)
        assert fraction == 0 and "were computed along different tangents" in feedback


def test_both_hvps_from_one_statement_are_each_judged_by_value(assignment, oracles, variant_events):
    """`hvp_plain, hvp_remat = both(direction)`: one helper returning both; each follows its own rules."""
    at = INDEX["hvp_plain"]
    events = [(at if n == "hvp_remat" else i, n, v) for i, n, v in variant_events]
    for name in HVP_CHECKS:
        fraction, feedback = check(assignment, oracles, name, events, "variant")
        assert fraction == 1, (name, feedback)
    swapped = replace(replace(events, "hvp_plain", variant_events[ORDER.index("hvp_remat")][2]),
                      "hvp_remat", variant_events[ORDER.index("hvp_plain")][2])
    assert check(assignment, oracles, "hvp_plain_matches_oracle", swapped, "variant")[0] == 0
    assert check(assignment, oracles, "hvp_remat_matches", swapped, "variant")[0] == 0


def test_hvp_value_problems(assignment, oracles, base_events):
    good = base_events[ORDER.index("hvp_plain")][2]
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
    fraction, feedback = run("hvps_have_shape_and_are_finite", (f32(oracles["baseline"].gradient), good))
    assert fraction == 0 and "jax.jvp returns (primal_out, tangent_out)" in feedback


# ---- which binding is graded ----------------------------------------------------------------------------------

def test_eps_bound_before_the_region_and_set_after_finite(assignment, oracles, base_events):
    """`eps = np.finfo(np.float32).eps` before the exercise; inside it `finite` uses a literal 1e-3 step and
    `eps = 1e-3` follows. With the starter's markers the exercise's eps is graded; without them [bindings]
    (`eps` as `finite` used it) grades the stale value, which is not the step."""
    oracle = oracles["baseline"]
    machine = float(np.finfo(np.float32).eps)
    before, after = INDEX["direction"] - 1, INDEX["finite"] + 1
    events = drop(base_events, "eps") + [(before, "eps", machine), (after, "eps", EPS)]
    evaluations = evaluations_at(oracle, INDEX["finite"], (EPS, -EPS))
    for name in ("eps_is_a_sensible_step", "finite_is_central_difference"):
        fraction, feedback = check(assignment, oracles, name, events, regions=REGIONS, evaluations=evaluations)
        assert fraction == 1, (name, feedback)
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", events, evaluations=evaluations)
    assert fraction == 0 and f"`eps` = {machine:g} is outside" in feedback
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", replace_eps_events(events, oracles), "variant")
    assert fraction == 0 and "cannot confirm your `finite` as a central difference" in feedback


def test_finite_rebound_after_the_region(assignment, oracles, base_events):
    """`finite` reused later as an integer count, or as a float (a fraction of finite entries)."""
    count = base_events + [(AFTER, "finite", 16)]
    fraction_of_entries = base_events + [(AFTER, "finite", 1.0)]
    for events in (count, fraction_of_entries):
        fraction, feedback = check(assignment, oracles, "finite_is_central_difference", events, regions=REGIONS)
        assert fraction == 1, feedback
    # without markers, [bindings] "last number" prefers the float over a later integer count ...
    assert check(assignment, oracles, "finite_is_central_difference", count)[0] == 1
    # ... but a later float is what it grades: only the region tells the exercise's binding apart
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", fraction_of_entries)
    assert fraction == 0 and "`finite` = 1" in feedback
    snap = make_snapshot(oracles["baseline"], "baseline", fraction_of_entries)
    note = Provenance(snap, assignment.bindings, assignment.exercise_bindings, REGIONS).rebinding_note("finite")
    assert note == (f"`finite` is bound again at line {line_of(AFTER)}; the value graded is the one from "
                    f"line {line_of(INDEX['finite'])}, the one the exercise used.")


def test_a_name_bound_outside_its_region_falls_back_to_bindings(assignment, oracles, base_events):
    """Markers kept, but `finite` computed after the END marker: nothing inside binds it, so [bindings] decides."""
    oracle = oracles["baseline"]
    moved = drop(base_events, "finite") + [(AFTER, "finite", quotient(oracle, EPS))]
    evaluations = evaluations_at(oracle, AFTER, (EPS, -EPS))
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", moved, regions=REGIONS,
                               evaluations=evaluations)
    assert fraction == 1, feedback
    snap = make_snapshot(oracle, "baseline", moved, evaluations=evaluations)
    assert view(assignment, snap, REGIONS).binding("finite").stmt == AFTER


def test_direction_rebound_after_the_hvp_region(assignment, oracles, base_events):
    events = base_events + [(AFTER, "direction", f32(ONES))]
    for regions in (None, REGIONS):
        snap = make_snapshot(oracles["baseline"], "baseline", events)
        assert np.array_equal(view(assignment, snap, regions)["direction"], LINE)
        for name in HVP_CHECKS:
            fraction, feedback = check(assignment, oracles, name, events, regions=regions)
            assert fraction == 1, (regions, name, feedback)


def test_later_rebinding_does_not_replace_the_exercise_value(assignment, oracles, base_events):
    events = base_events + [(AFTER, "finite", np.array(True)), (AFTER + 1, "eps", float(np.finfo(np.float32).eps)),
                            (AFTER + 2, "x", 3.0)]
    for regions in (None, REGIONS):
        for name in ("finite_is_central_difference", "eps_is_a_sensible_step", "inputs_are_the_lessons"):
            fraction, feedback = check(assignment, oracles, name, events, regions=regions)
            assert fraction == 1, (regions, name, feedback)
    snap = make_snapshot(oracles["baseline"], "baseline", events)
    note = Provenance(snap, assignment.bindings).rebinding_note("finite")
    assert note and f"line {line_of(AFTER)}" in note and f"line {line_of(INDEX['finite'])}" in note


# ---- missing names, TODOs, scenario combination -----------------------------------------------------------

def test_missing_name_and_todo_feedback(assignment, oracles, base_events):
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", drop(base_events, "eps"))
    assert fraction == 0 and "`eps` is not defined" in feedback and "needed by this check" in feedback
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", replace(base_events, "eps", UNFINISHED))
    assert fraction == 0 and "`eps` is still a TODO" in feedback
    # `needs` are checked before the function runs: an unfinished finite with a good eps
    fraction, feedback = finite_check(assignment, oracles, replace(base_events, "finite", UNFINISHED))
    assert fraction == 0 and "`finite` is still a TODO" in feedback
    # a failing statement that would have assigned it is named with its line and error
    error = {"type": "NameError", "message": "name 'plian' is not defined", "line": 22, "traceback": ""}
    fraction, feedback = check(assignment, oracles, "eps_is_a_sensible_step", drop(base_events, "eps"),
                               failed={INDEX["eps"]: ("error", error, ["eps"])})
    assert fraction == 0 and f"line {line_of(INDEX['eps'])}" in feedback and "NameError" in feedback
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
    hard_coded = replace(variant_events, "w", base_events[ORDER.index("w")][2])
    results = results_by_id(assignment, oracles, base_events, hard_coded)
    result = results["gradients.inputs"]
    assert result.score == 0
    description = assignment.scenarios["variant"].description
    assert result.feedback.startswith("In the variant run: ") and description not in result.feedback
    assert result.feedback.endswith("\n" + assignment.scenarios["variant"].hints["seed"])
    assert "whose seed differs" in result.feedback
    # the others stay unlabelled
    assert results["gradients.cotangent"].passed and not results["gradients.cotangent"].feedback.startswith("In the")


def test_a_method_check_gets_no_seed_hint(assignment, oracles, base_events, variant_events):
    """`cotangent` judges a method: a variant-only failure is not blamed on a seed (issue 40.5)."""
    autodiff = replace(variant_events, "cotangent", f32(oracles["variant"].autodiff_gradient))
    result = results_by_id(assignment, oracles, base_events, autodiff)["gradients.cotangent"]
    assert result.score == 0 and result.feedback.startswith("In the variant run: ")
    assert "hint" not in result.feedback and "seed" not in result.feedback


def test_a_hint_names_the_difference_that_explains_the_failure_or_nothing(assignment, oracles, base_events,
                                                                          variant_events):
    """Issue 55: a memory check failing only in the variant is told about the compiler's analysis, never the seed; a
    check that names no difference (here: the HVP's shape, which several differences could break) is told nothing."""
    from grader.grading.engine import world_hint

    variant = assignment.scenarios["variant"]
    specs = {spec.id: spec for spec in assignment.checks}
    memory_hint = world_hint(variant, specs["memory.figures_match_compiler"])
    assert "memory analysis" in memory_hint and "seed" not in memory_hint
    assert world_hint(variant, specs["hvp.shape_and_finite"]) == ""
    assert world_hint(variant, specs["gradients.inputs"]) == variant.hints["seed"]
    swapped = replace(variant_events, "memory", list(reversed(variant_events[ORDER.index("memory")][2])))
    result = results_by_id(assignment, oracles, base_events, swapped)["memory.figures_match_compiler"]
    assert result.score == 0 and "whose seed differs" not in result.feedback, result.feedback
    assert variant.hints["memory"] in result.feedback, result.feedback


def test_a_method_that_fails_only_where_it_matters_is_labelled_with_the_variant(assignment, oracles, base_events,
                                                                                variant_events):
    """The exact slope for `automatic` is autodiff's number in the baseline; the variant's rules tell them apart."""
    exact = single(oracles["variant"].gradient.sum())
    baseline_exact = single(oracles["baseline"].gradient.sum())
    results = results_by_id(assignment, oracles, replace(base_events, "automatic", baseline_exact),
                            replace(variant_events, "automatic", exact))
    result = results["directional.automatic"]
    assert result.score == 0 and result.feedback.startswith("In the variant run: ")
    assert "is the directional derivative of the unchanged objective" in result.feedback


def test_failure_in_both_scenarios_is_unlabelled(assignment, oracles, base_events, variant_events):
    results = results_by_id(assignment, oracles, replace(base_events, "automatic", 0.0), replace(variant_events, "automatic", 0.0))
    result = results["directional.automatic"]
    assert result.score == 0 and not result.feedback.startswith("In the") and "`automatic` = 0" in result.feedback


def test_failure_only_in_baseline_is_labelled_without_the_variant_hint(assignment, oracles, base_events, variant_events):
    results = results_by_id(assignment, oracles, replace(base_events, "automatic", 0.0), variant_events)
    result = results["directional.automatic"]
    assert result.score == 0 and result.feedback.startswith("In the baseline run: ")
    assert "follows a different seed" not in result.feedback


def test_combined_score_is_the_minimum_over_scenarios(assignment, oracles, base_events, variant_events):
    spec = next(s for s in assignment.checks if s.id == "hvp.plain_matches_oracle")
    snapshots = {"baseline": make_snapshot(oracles["baseline"], "baseline", base_events),
                 "variant": make_snapshot(oracles["variant"], "variant", variant_events)}
    result = _combine(assignment, spec, [("baseline", 1.0, "ok"), ("variant", 0.25, "partly")], snapshots, {})
    assert result.score == pytest.approx(spec.points * 0.25) and result.feedback.startswith("In the variant run: ")
    result = _combine(assignment, spec, [("baseline", 0.5, "half"), ("variant", 0.75, "most")], snapshots, {})
    assert result.score == pytest.approx(spec.points * 0.5) and "half" in result.feedback
    result = _combine(assignment, spec, [("baseline", 1.0, "ok"), ("variant", 1.0, "fine")], snapshots, {})
    assert result.score == spec.points and result.passed and result.feedback == "ok"


def test_partial_results_are_clamped(assignment, oracles, base_events):
    spec = next(s for s in assignment.checks if s.id == "directional.automatic")
    run_view = view(assignment, make_snapshot(oracles["baseline"], "baseline", base_events))
    for fraction, expected in ((0.4, 0.4), (1.7, 1.0), (-2.0, 0.0)):
        got, note = evaluate(lambda run, oracle, settings, fraction=fraction: Partial(fraction, "some"), spec, run_view,
                             None, assignment.settings)
        assert got == expected and note == "some"
    with pytest.raises(CheckBug, match="ZeroDivisionError") as bug:   # a bug in the check, not a student failure
        evaluate(lambda run, oracle, settings: 1 / 0, spec, run_view, None, assignment.settings)
    assert "Traceback" in bug.value.trace


# ---- the grader's own faults are never the student's ---------------------------------------------------------

def test_a_failed_setup_earns_nothing_and_is_the_graders_fault(assignment, oracles, base_events, variant_events):
    """The harness reported (on its control pipe) that it could not set the variant up: that is the grader's fault
    (grade() makes the record an error record, graded again next run), and no check of that run gives points."""
    broken = drop(drop(drop(variant_events, "w"), "x"), "memory")
    snapshots = {"baseline": make_snapshot(oracles["baseline"], "baseline", base_events),
                 "variant": make_snapshot(oracles["variant"], "variant", broken, ending="setup_failed")}
    snapshots["variant"].setup_error = "TypeError: replace_lesson_seed() got an unexpected keyword argument"
    faults = grader_faults(snapshots)
    assert list(faults) == ["variant"] and "could not prepare the run" in faults["variant"][0]
    results = {r.id: r for r in run_checks(assignment, snapshots, oracles)}
    assert not results["gradients.inputs"].passed
    assert not results["memory_unavailable.recorded_as_none"].passed   # never given


def test_an_error_the_run_attributes_to_the_grader_is_reported_never_believed(assignment, oracles, base_events,
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


def replace_eps_events(events, oracles):
    """The same events in the variant world: `finite` the variant's central difference at the lesson's step."""
    return replace(events, "finite", quotient(oracles["variant"], EPS))


# ---- the central difference, judged by the value the run's evaluations give -------------------------------------

@pytest.mark.parametrize("scenario", ["baseline", "variant"])
@pytest.mark.parametrize("eps", [1e-4, 1e-3, 1e-2, 3e-2])
def test_a_central_difference_of_the_objective_as_evaluated_passes(assignment, oracles, base_events, variant_events,
                                                                    scenario, eps):
    events = base_events if scenario == "baseline" else variant_events
    oracle = oracles[scenario]
    events = replace(replace(events, "eps", eps), "finite", quotient(oracle, eps))
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", events, scenario, evaluations=[])
    assert fraction == 1, feedback


@pytest.mark.parametrize("slope", ["the exact directional derivative", "JAX's autodiff of the objective in this run"])
def test_a_slope_written_down_fails_in_the_variant_and_is_named(assignment, oracles, base_events, variant_events, slope):
    """No evaluation, no credit: a slope that was never a difference of two evaluations misses the variant's change
    to what evaluating the objective returns (whatever decoy evaluations the file made)."""
    oracle = oracles["variant"]
    value = oracle.slopes()[slope]
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", replace(variant_events, "finite", value), "variant")
    assert fraction == 0 and f"equals {slope}" in feedback and "only a difference quotient of real evaluations" in feedback
    base = oracles["baseline"].slopes()[slope]
    assert check(assignment, oracles, "finite_is_central_difference", replace(base_events, "finite", base))[0] == 1


def test_a_central_difference_of_a_reimplemented_objective_fails_in_the_variant(assignment, oracles, variant_events):
    oracle = oracles["variant"]
    value = oracle.central_differences(EPS, oracle.unchanged)[0]
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", replace(variant_events, "finite", value), "variant")
    assert fraction == 0 and ("unchanged objective" in feedback or "exact directional derivative" in feedback), feedback


@pytest.mark.parametrize("scenario", ["baseline", "variant"])
@pytest.mark.parametrize("eps", [1e-3, 1e-2])
def test_one_sided_differences_fail_and_are_named(assignment, oracles, base_events, variant_events, scenario, eps):
    oracle = oracles[scenario]
    events = base_events if scenario == "baseline" else variant_events
    for side, value in oracle.one_sided_differences(eps).items():
        fraction, feedback = check(assignment, oracles, "finite_is_central_difference",
                                   replace(replace(events, "eps", eps), "finite", value), scenario)
        assert fraction == 0 and f"is the {side} difference" in feedback, feedback


@pytest.mark.parametrize("factor, wording", [(2.0, "divided by ε instead of 2ε"), (0.5, "divided by 4ε instead of 2ε")])
def test_a_quotient_other_than_the_central_one_is_named(assignment, oracles, variant_events, factor, wording):
    oracle = oracles["variant"]
    value = factor * oracle.central_differences(EPS)[0]
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", replace(variant_events, "finite", value), "variant")
    assert fraction == 0 and wording in feedback


def test_a_float64_central_difference_at_a_tiny_step_passes_and_a_float32_one_cannot_be_confirmed(assignment, oracles, variant_events):
    """Tolerances in the precision the run used: float64 evaluations are told from every slope at any step; at a
    step where float32 rounding swamps the change, no float32 value can be credited (the message says so)."""
    oracle = oracles["variant"]
    tiny = 1e-6
    exact64 = oracle.central_differences(tiny)[0]
    events = replace(replace(variant_events, "eps", tiny), "finite", exact64)
    assert check(assignment, oracles, "finite_is_central_difference", events, "variant")[0] == 1
    rounded = exact64 + 50 * oracle.finite_noise(tiny, assignment.settings.finite_noise_float64, float(np.finfo(np.float64).eps))
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", replace(events, "finite", rounded), "variant")
    assert fraction == 0 and "cannot confirm your `finite` as a central difference" in feedback


def test_every_check_is_told_apart_in_the_variant_world(assignment, oracles):
    """The variant seed the grader drew separates a float32 central difference from every written-down slope at
    every sensible step (oracle.suitable_seed): the guarantee the finite check rests on."""
    oracle, settings = oracles["variant"], assignment.settings
    for eps in (settings.eps_min, 1e-3, settings.eps_max):
        assert oracle.finite_separation(eps, settings) >= settings.separation


def test_column_vectors_are_read_as_the_same_vectors(assignment, oracles, variant_events):
    """A column-vector convention ((16, 1) tangents and HVPs) is the same math."""
    oracle = oracles["variant"]
    column = [(i, n, v.reshape(-1, 1) if n in ("hvp_plain", "hvp_remat") and isinstance(v, np.ndarray) else v)
              for i, n, v in variant_events]
    sightings = [Sighting(INDEX["direction2"], f32(LINE).reshape(-1, 1))]
    for name in ("hvp_plain_matches_oracle", "hvp_remat_matches", "hvps_have_shape_and_are_finite"):
        fraction, feedback = check(assignment, oracles, name, drop(column, "direction"), "variant", sightings=sightings)
        assert fraction == 1, (name, feedback)
    assert oracle.values_changed


def stencil_events(oracle, variant_events, eps, sign=1):
    """A file's one-sided second-order stencil at step eps ((-3 f0 + 4 f1 - f2) / 2 eps, or its backward mirror):
    `finite` from its float32 evaluations at x, x + sign eps v and x + 2 sign eps v, and those points as the run
    made and evaluated them."""
    f = {k: value_at(oracle, point(oracle, k * sign * eps)) for k in (0, 1, 2)}
    finite = sign * (-3 * f[0] + 4 * f[1] - f[2]) / (2 * eps)
    events = replace(replace(variant_events, "eps", eps), "finite", finite)
    stmt = INDEX["finite"]
    evaluations = evaluations_at(oracle, stmt, (0.0, sign * eps, 2 * sign * eps))
    sightings = [Sighting(stmt, point(oracle, k * sign * eps)) for k in (1, 2)]
    return events, evaluations, sightings


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 3e-2])
@pytest.mark.parametrize("sign", [1, -1])
def test_a_one_sided_second_order_stencil_is_judged_by_where_its_value_lies(assignment, oracles, variant_events, sign,
                                                                            eps):
    """A one-sided second-order stencil's value, whatever points the run's evidence holds (none here): inside the
    honest band (between the central differences at eps and at eps/|v|) it cannot be told from an honest one and is
    credited; `separation` tolerances outside it, it is refused and named; nothing in between is said."""
    oracle = oracles["variant"]
    events, _, _ = stencil_events(oracle, variant_events, eps, sign)
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", events, "variant")
    value = next(v for _, name, v in events if name == "finite")
    away = oracle.from_honest(value, eps, assignment.settings)
    if away <= 1:
        assert fraction == 1, feedback
    elif away > assignment.settings.separation:
        assert fraction == 0 and "one-sided second-order difference" in feedback, feedback


@pytest.mark.parametrize("sign", [1, -1])
def test_points_alone_never_refuse_a_value_rounding_cannot_tell_apart(assignment, oracles, variant_events, sign):
    """At a small step a one-sided second-order stencil is the central difference to float32 rounding, and its value
    is a difference quotient of this run's evaluations: what points the run made (x + eps v and x + 2 eps v, never
    x - eps v) is the run's own record, which credit never rests on either way (the trust model), so the value is
    credited as what it is indistinguishable from."""
    oracle = oracles["variant"]
    events, evaluations, sightings = stencil_events(oracle, variant_events, 1e-4, sign)
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", events, "variant",
                               evaluations=evaluations, sightings=sightings)
    assert fraction == 1, feedback


def test_a_central_difference_beside_a_point_two_steps_out_keeps_its_credit(assignment, oracles, variant_events):
    """Exploring f at x + 2 eps v proves nothing against a run that also made x - eps v: the central difference
    it reports keeps full credit."""
    oracle = oracles["variant"]
    eps = 1e-4
    events = replace(replace(variant_events, "eps", eps), "finite", quotient(oracle, eps))
    stmt = INDEX["finite"]
    evaluations = evaluations_at(oracle, stmt, (0.0, eps, 2 * eps, -eps))
    sightings = [Sighting(stmt, point(oracle, k * eps)) for k in (1, 2, -1)]
    fraction, feedback = check(assignment, oracles, "finite_is_central_difference", events, "variant",
                               evaluations=evaluations, sightings=sightings)
    assert fraction == 1, feedback


def test_a_stencil_is_not_named_when_the_evidence_is_incomplete(assignment, oracles, variant_events):
    """A statement that made more calls than the recorder keeps may have made x - eps v unseen: then the points
    prove nothing, and nothing is said about them."""
    oracle = oracles["variant"]
    events, evaluations, sightings = stencil_events(oracle, variant_events, 1e-4)
    snap = make_snapshot(oracle, "variant", events, evaluations=evaluations, sightings=sightings)
    snap.statements[INDEX["finite"]].sightings_omitted = 12
    fraction, feedback = check_snapshot(assignment, oracles, "finite_is_central_difference", snap)
    assert "one-sided second-order" not in feedback
