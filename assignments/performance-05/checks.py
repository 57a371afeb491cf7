"""Checks for performance-05. Each reads like a pytest test: `assert condition, "what to look at"`.

Signature: check(run, oracle, settings). `run` is one scenario's view of the student's values (see
grader.checks.RunView), `oracle` the float64 oracle for that scenario's seed (oracle.py), `settings` the
[parameters] and [tolerances] of assignment.toml. Return a short note to pass; assert to fail.
"""

import math

import numpy as np

from grader.values import as_number, as_vector, close_vectors, describe, fmt, plain_data

RUN_OUTCOMES = {
    "sys_exit": "your file called sys.exit at line {line}; code after it never ran",
    "exited_early": "the process ended without finishing (os._exit, a crash or a memory limit)",
    "killed_wall": "the run hit the wall-clock limit and was stopped",
    "setup_failed": "the grader could not prepare the run",
    "lost": "the run ended without reporting",
}


# ---- runs -----------------------------------------------------------------------------------------

def no_statement_failed(run, oracle, settings):
    failures = run.failed_statements
    snap = run.snapshot
    syntax = snap.syntax_error
    if snap.ending in ("killed_wall", "exited_early"):
        after = f" after line {snap.statements[-1].end_line}" if snap.statements else ""
        cause = "was killed at the time limit" if snap.ending == "killed_wall" else "ended the process (a crash, os._exit or a limit)"
        raise AssertionError(f"The statement{after} never finished: it {cause}.")
    assert not syntax, f"Your file has a syntax error at line {syntax['line']} ({syntax['message']}); only the lines before it ran."
    if failures:
        first = failures[0]
        kind = "ran out of time" if first.status == "timeout" else f"raised {first.error['type']}: {first.error['message'][:300]}"
        more = f" ({len(failures) - 1} more statement(s) failed after it)" if len(failures) > 1 else ""
        raise AssertionError(f"The statement at line {first.line} {kind}{more}. Read the traceback in your output and fix the first error first.")
    return "Every top-level statement ran without an error."


def ran_to_the_end(run, oracle, settings):
    snap = run.snapshot
    assert not snap.syntax_error, f"Your file stops at a syntax error on line {snap.syntax_error['line']}; the rest never ran."
    assert run.completed, RUN_OUTCOMES.get(snap.ending, snap.ending).format(line=snap.exit_line).capitalize() + "."
    assert not snap.soft_limit_hit, "Part of your file ran past the time limit and was interrupted; look for a loop that never ends."
    return f"The file ran to its end in {snap.seconds:.1f} s."


# ---- gradients ------------------------------------------------------------------------------------

def inputs_are_the_lessons(run, oracle, settings):
    w = run["w"]
    x = as_vector(run["x"], "`x`", settings.width)
    assert isinstance(w, np.ndarray) and w.shape == oracle.w.shape, f"`w` should be a {oracle.w.shape} array; found {describe(w)}."
    assert np.array_equal(w, oracle.w), (
        "`w` differs from the lesson's weights. Build it exactly as the lesson does, from "
        "`rng=np.random.default_rng(...)` and `rng.normal(size=(16,16))*.1` as float32; first compare inputs, weights and random keys.")
    assert np.array_equal(x, oracle.x), "`x` differs from the lesson's input `np.linspace(-.5,.5,16,dtype=np.float32)`."
    return "`w` and `x` are the lesson's inputs."


def cotangent_matches_recurrence(run, oracle, settings):
    cotangent = as_vector(run["cotangent"], "`cotangent`", settings.width)
    ok, worst = close_vectors(cotangent, oracle.gradient, settings.gradient_rtol, settings.gradient_atol_scale)
    assert ok, (f"`cotangent` does not match the reverse recurrence x̄ = Wᵀ(h̄ ⊙ (1 − h²)) started from 2·h₄ "
                f"(worst error {worst:.2g} of the largest entry). Check the loop runs from layer 4 down to 1 and uses each layer's output.")
    return "`cotangent` matches the float64 reverse recurrence."


def _gradient_probe(run, oracle, settings, probe, label):
    gradient = as_vector(run.probe(probe), f"`jax.grad({label})(x)`", settings.width)
    ok, worst = close_vectors(gradient, oracle.gradient, settings.gradient_rtol, settings.gradient_atol_scale)
    assert ok, (f"`jax.grad({label})(x)` differs from the independent reverse recurrence (worst error {worst:.2g} "
                f"of the largest entry). If gradients differ, first compare inputs, weights, random keys and any hidden effects.")


def jax_gradients_match_recurrence(run, oracle, settings):
    _gradient_probe(run, oracle, settings, "grad_plain", "plain")
    _gradient_probe(run, oracle, settings, "grad_remat", "remat")
    return "`jax.grad(plain)` and `jax.grad(remat)` both match the reverse recurrence."


def whole_objective_gradient(run, oracle, settings):
    _gradient_probe(run, oracle, settings, "grad_whole", "whole")
    return "Checkpointing the whole objective preserves the gradient."


# ---- residuals ------------------------------------------------------------------------------------

def _reports(run):
    reports = run["reports"]
    assert isinstance(reports, (list, tuple)) and len(reports) == 2, (
        f"`reports` should be a list of two residual lists [plain, remat]; found {describe(reports)}.")
    for label, lines in zip(("plain", "remat"), reports):
        assert isinstance(lines, (list, tuple)) and all(isinstance(line, str) for line in lines), (
            f"The {label} entry of `reports` should be a list of the printed residual lines (strings); found {describe(lines)}.")
    return [list(lines) for lines in reports]


def reports_are_two_residual_lists(run, oracle, settings):
    reports = _reports(run)
    for label, lines in zip(("plain", "remat"), reports):
        assert lines and all(line.strip() for line in lines), (
            f"The {label} residual list is empty or has blank lines; keep the non-empty lines print_saved_residuals prints.")
        assert any("[" in line and "]" in line for line in lines), (
            f"The {label} residual list does not look like print_saved_residuals output (e.g. 'f32[16] output of tanh ...').")
    return "`reports` holds the two residual lists."


def report_lengths_match_live_counts(run, oracle, settings):
    counts = [len(lines) for lines in _reports(run)]
    expected = oracle.residual_counts
    assert counts == expected, (
        f"Your residual lists have {counts[0]} and {counts[1]} entries; the installed JAX saves {expected[0]} (plain) "
        f"and {expected[1]} (remat). Count every non-empty line print_saved_residuals prints for each policy.")
    return f"Residual counts {counts[0]} and {counts[1]} match this JAX version."


def remat_saves_fewer(run, oracle, settings):
    plain_lines, remat_lines = _reports(run)
    assert len(remat_lines) < len(plain_lines), (
        f"Layer rematerialization should save fewer residuals than the ordinary policy; found {len(plain_lines)} and "
        f"{len(remat_lines)}. Is `remat` really using jax.checkpoint(layer)?")
    return "Rematerialization saves fewer residual descriptions."


# ---- memory ---------------------------------------------------------------------------------------

def _memory_pair(run):
    memory = run["memory"]
    assert isinstance(memory, (list, tuple)) and len(memory) == 2, (
        f"`memory` should hold one entry per executable [plain, remat]; found {describe(memory)}. "
        "Append once per executable, after `memory=[]`.")
    return list(memory)


def memory_is_two_dicts(run, oracle, settings):
    for label, entry in zip(("plain", "remat"), _memory_pair(run)):
        assert isinstance(entry, dict), (
            f"The {label} memory entry should be a dict of the compiled byte figures when analysis is available; found {describe(entry)}.")
        missing = [name for name in settings.memory_fields if name not in entry]
        assert not missing, f"The {label} memory dict lacks {', '.join(missing)}."
        for name in settings.memory_fields:
            assert _byte_count(entry[name]) is not None, (
                f"{name} in the {label} memory dict should be a whole number of bytes; found {describe(entry[name])}.")
    return "`memory` holds two dicts of byte figures."


def _byte_count(value):
    """A non-negative whole number (a Python int, or a NumPy integer that arrives as a 0-d array), else None."""
    try:
        number = as_number(value, "a byte count")
    except AssertionError:
        return None
    return int(number) if math.isfinite(number) and number >= 0 and number == int(number) else None


def memory_figures_match_compiler(run, oracle, settings):
    for label, entry, expected in zip(("plain", "remat"), _memory_pair(run), oracle.memory):
        assert isinstance(entry, dict), f"The {label} memory entry should be a dict; found {describe(entry)}."
        assert expected is not None, "The grader's own compiler run reported no memory analysis; this check cannot apply."
        for name in settings.memory_fields:
            assert _byte_count(entry.get(name)) == expected[name], (
                f"{name} for {label} is {describe(entry.get(name))}; the compiled gradient reports {expected[name]}. "
                "Read each field from executable.memory_analysis() with getattr; do not type numbers in.")
    return "The recorded figures equal the compiler's memory analysis."


def unavailable_memory_is_none(run, oracle, settings):
    memory = _memory_pair(run)
    if all(isinstance(entry, dict) for entry in memory):
        values = [v for entry in memory for v in entry.values()]
        assert not all(v == 0 for v in values), (
            "With memory analysis unavailable you recorded zeros. Record a missing analysis as None (unavailable), never as 0 bytes.")
    assert memory == [None, None], (
        f"When executable.memory_analysis() returns None, each entry of `memory` should be None; found "
        f"[{describe(memory[0])}, {describe(memory[1])}]. Backend support varies: record missing analysis as unavailable.")
    return "Missing analysis is recorded as None."


AVAILABILITY_WORDS = ("availab", "not supported", "unsupported", "missing", "no analysis", "n/a")


def _second_panel(run):
    panels = run["panels"]
    assert isinstance(panels, (list, tuple)) and len(panels) >= 2, f"`panels` should hold two panels; found {describe(panels)}."
    visual = run["visual_data"]
    assert isinstance(visual, dict) and plain_data(visual.get("panels")) == plain_data(list(panels)), (
        "`visual_data` should be {'kind': 'panels', 'panels': panels} built from the same `panels` list.")
    panel = panels[1]
    assert isinstance(panel, dict), f"The second panel should be a dict; found {describe(panel)}."
    series = panel.get("series")
    assert isinstance(series, list) and series and isinstance(series[0], dict), "The second panel needs a 'series' list with one series."
    return panel, series[0].get("y")


def second_panel_is_availability(run, oracle, settings):
    panel, y = _second_panel(run)
    y = plain_data(y)
    assert y == [0, 0], (
        f"With analysis unavailable the second panel should show availability bars y = [0, 0] (0 = unavailable), "
        f"not bytes; found y = {y!r}.")
    label = " ".join(str(panel.get(key, "")) for key in ("title", "ylabel")).lower()
    assert any(word in label for word in AVAILABILITY_WORDS), (
        "Label the substitute panel as availability (its title or y-label should say 'unavailable'/'available'), "
        "so nobody reads it as zero bytes.")
    return "The unavailable case draws a labelled availability panel."


def second_panel_is_bytes(run, oracle, settings):
    panel, y = _second_panel(run)
    y = plain_data(y)
    expected = [entry["temp_size_in_bytes"] for entry in oracle.memory]
    assert y == expected, (
        f"When analysis is available the second panel should show the compiled temporary bytes {expected}; found y = {y!r}.")
    return "The available case draws the temporary-byte panel."


# ---- directional derivative -----------------------------------------------------------------------

def eps_is_a_sensible_step(run, oracle, settings):
    eps = as_number(run["eps"], "`eps`")
    assert math.isfinite(eps) and eps > 0, f"`eps` should be a positive step; found {eps!r}."
    assert settings.eps_min <= eps <= settings.eps_max, (
        f"`eps` = {eps:g} is outside [{settings.eps_min:g}, {settings.eps_max:g}]: in float32 a smaller step drowns in "
        "rounding error and a larger one in truncation error. The lesson uses 1e-3.")
    return f"`eps` = {eps:g} is a sensible float32 step."


def automatic_is_gradient_dot_ones(run, oracle, settings):
    automatic = as_number(run["automatic"], "`automatic`")
    expected = oracle.directional_derivative(oracle.ones)
    scale = float(np.sum(np.abs(oracle.gradient)))
    assert abs(automatic - expected) <= settings.directional_rtol * scale, (
        f"`automatic` = {fmt(automatic)}, but ∇f(x)·(1,…,1) = {fmt(expected)}. Use the gradient of the original "
        "objective `plain` at `x`, dotted with the all-ones direction (jnp.vdot or jax.jvp).")
    return "`automatic` equals the gradient dotted with the all-ones direction."


def finite_is_central_difference(run, oracle, settings):
    finite = as_number(run["finite"], "`finite`")
    eps = as_number(run["eps"], "`eps`")
    assert math.isfinite(eps) and eps > 0, f"`eps` should be a positive step; found {eps!r}."
    assert math.isfinite(finite), f"`finite` is {finite!r}; a central difference of a finite objective is a finite number."
    ones = oracle.ones
    estimates = oracle.differences(ones, eps)
    f_scale = abs(oracle.value) + float(np.sum(np.abs(oracle.gradient))) * (float(np.max(np.abs(oracle.x))) + eps)
    tolerance = settings.finite_rounding_factor * 2.0**-23 * f_scale / eps
    if abs(finite - estimates["central"]) <= tolerance:
        return f"`finite` is the central difference at eps = {eps:g} (to float32 rounding)."
    for kind in ("forward", "backward"):
        assert abs(finite - estimates[kind]) > tolerance, (
            f"Your estimate matches a {kind} difference; use (f(x+εv) − f(x−εv)) / 2ε. "
            f"(central at your eps: {fmt(estimates['central'])}, yours: {fmt(finite)})")
    wrong_scale = [k for k, factor in (("divided by ε instead of 2ε", 2.0), ("divided by 4ε", 0.5))
                   if abs(finite - factor * estimates["central"]) <= tolerance * factor]
    assert not wrong_scale, f"Your difference is {wrong_scale[0]}: the central difference is (f(x+εv) − f(x−εv)) / 2ε."
    raise AssertionError(
        f"`finite` = {fmt(finite)}, but the central difference of `plain` along v = (1,…,1) at your eps = {eps:g} is "
        f"{fmt(estimates['central'])}. Perturb the existing input `x` by ±eps·v and evaluate the original objective.")


# ---- Hessian-vector products ----------------------------------------------------------------------

def _hvp(run, settings, name):
    value = run[name]
    assert not (isinstance(value, tuple) and len(value) == 2), (
        f"`{name}` is a pair: jax.jvp returns (primal_out, tangent_out); unpack it as `_, {name} = jax.jvp(...)`.")
    vector = as_vector(value, f"`{name}`", settings.width)
    assert np.all(np.isfinite(vector)), f"`{name}` contains NaN or Inf."
    return vector


def _direction_for(run, settings, name):
    direction = as_vector(run.value_when("direction", name), f"`direction` (when `{name}` was computed)", settings.width)
    assert np.all(np.isfinite(direction)), "`direction` contains NaN or Inf."
    return direction


def hvps_have_shape_and_are_finite(run, oracle, settings):
    _hvp(run, settings, "hvp_plain")
    _hvp(run, settings, "hvp_remat")
    return f"Both HVPs are finite vectors of length {settings.width}."


def hvp_direction_is_nonuniform(run, oracle, settings):
    direction = _direction_for(run, settings, "hvp_plain")
    spread = float(np.max(direction) - np.min(direction))
    assert spread > settings.nonuniform_fraction * float(np.max(np.abs(direction))) and spread > 0, (
        "The HVP direction is uniform (all entries equal). Use a nonuniform direction such as jnp.linspace(-1., 1., len(x)): "
        "a uniform one probes only one combination of the Hessian's columns.")
    return "The HVP direction is nonuniform."


def hvp_plain_matches_oracle(run, oracle, settings):
    hvp = _hvp(run, settings, "hvp_plain")
    expected = oracle.hvp(_direction_for(run, settings, "hvp_plain"))
    ok, worst = close_vectors(hvp, expected, settings.hvp_rtol, settings.hvp_atol_scale)
    if not ok:
        gradient_like = close_vectors(hvp, oracle.gradient, settings.hvp_rtol, settings.hvp_atol_scale)[0]
        assert not gradient_like, "`hvp_plain` equals the gradient, not a Hessian-vector product: apply jax.jvp to jax.grad(plain)."
        assert worst > settings.hvp_approximate_fraction, (
            f"`hvp_plain` is close to the exact Hessian-vector product but not exact (worst error {worst:.2g} of the largest "
            "entry): a finite-difference approximation? Differentiate exactly: jax.jvp(jax.grad(plain), (x,), (direction,)).")
        raise AssertionError(
            f"`hvp_plain` differs from the exact Hessian-vector product along your `direction` (worst error {worst:.2g} of "
            "the largest entry). Apply jax.jvp to jax.grad(plain) with primal (x,) and tangent (direction,).")
    return "`hvp_plain` matches the exact Hessian-vector product."


def hvp_remat_matches(run, oracle, settings):
    hvp_plain, hvp_remat = _hvp(run, settings, "hvp_plain"), _hvp(run, settings, "hvp_remat")
    expected = oracle.hvp(_direction_for(run, settings, "hvp_remat"))
    ok, worst = close_vectors(hvp_remat, expected, settings.hvp_rtol, settings.hvp_atol_scale)
    assert ok, (f"`hvp_remat` differs from the exact Hessian-vector product along `direction` (worst error {worst:.2g}). "
                "Differentiate `remat` (not `plain`) the same way, with the same primal point and tangent.")
    pair_ok, pair_worst = close_vectors(hvp_remat, hvp_plain, settings.hvp_pair_rtol, settings.hvp_pair_atol_scale)
    assert pair_ok, f"`hvp_plain` and `hvp_remat` disagree (worst difference {pair_worst:.2g}); use the same point and tangent for both."
    return "`hvp_remat` matches `hvp_plain` and the exact HVP: recomputation preserved second-order behaviour."
