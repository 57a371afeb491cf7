"""Checks for performance-05. Each reads like a pytest test: `assert condition, "what to look at"`.

Signature: check(run, oracle, settings). `run` is one scenario's view of the student's values (see
grader.grading.engine.RunView): each name as the exercise used it, and the method evidence behind it
(`run.calls_for(name)`, read with grader.api.methods). `oracle` is the float64 oracle for that scenario (oracle.py),
`settings` the [parameters] and [tolerances] of assignment.toml. Return a short note to pass; assert to fail.

A value is right only if it was computed the way the exercise asks: a central difference evaluates the
objective at x + eps v and x - eps v; `automatic` comes from autodiff of the objective; each HVP from
second-order autodiff of its own objective. Where the evidence behind a value could not be recorded, the
value alone decides and the feedback says so. Feedback describes what this student's run did, in words.
Whether the file ran, and ran to its end, is checked by the framework's own checks (`builtin:` in assignment.toml).
"""

import math
import re

import numpy as np

from grader.api.methods import (
    deepest,
    differentiated_points,
    evaluation_points,
    matching_output,
    steps_from,
    tangents,
)
from grader.api.values import (
    as_number,
    as_vector,
    close_vectors,
    describe,
    fmt,
    plain_data,
)

LABELS = ("plain", "remat")
UNSEEN = "(The grader could not see how `{name}` was computed, so its value alone was checked.)"


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
    assert ok, (f"`cotangent` does not match the reverse recurrence x̄ = Wᵀ(h̄ ⊙ (1 − h²)) started from 2·h₄: its largest "
                f"difference is {worst:.2g} of the gradient's largest entry. Check the loop runs from layer 4 down to 1 and uses each layer's output.")
    return "`cotangent` matches the float64 reverse recurrence."


def _gradient_probe(run, oracle, settings, probe, label):
    gradient = as_vector(run.probe(probe), f"`jax.grad({label})(x)`", settings.width)
    ok, worst = close_vectors(gradient, oracle.gradient, settings.gradient_rtol, settings.gradient_atol_scale)
    assert ok, (f"`jax.grad({label})(x)` differs from the independent reverse recurrence (its largest difference is "
                f"{worst:.2g} of the gradient's largest entry). If gradients differ, first compare inputs, weights, random keys and any hidden effects.")


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
    for label, lines in zip(LABELS, reports):
        assert isinstance(lines, (list, tuple)) and all(isinstance(line, str) for line in lines), (
            f"The {label} entry of `reports` should be a list of the printed residual lines (strings); found {describe(lines)}.")
    return [list(lines) for lines in reports]


def reports_are_two_residual_lists(run, oracle, settings):
    reports = _reports(run)
    for label, lines in zip(LABELS, reports):
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

def _memory_entries(run, oracle, strict=True):
    """The student's `memory` beside what the compiler reported for each executable in this run.

    `strict=False` (the memory group outside baseline): a list cut short, as when the run stopped on a missing
    analysis, is judged on the entries it has; the missing analysis itself is memory_unavailable's to judge."""
    memory = run["memory"]
    expected = oracle.memory
    complete = isinstance(memory, (list, tuple)) and len(memory) == len(expected)
    if not complete and not strict and isinstance(memory, (list, tuple)):
        return [(label, memory[i], expected[i]) for i, label in enumerate(LABELS) if i < len(memory)]
    assert complete, (
        f"`memory` should hold one entry per executable [plain, remat]; found {describe(memory)}. "
        "Append once per executable, also when its analysis is missing (None).")
    return list(zip(LABELS, memory, expected))


def _byte_count(value):
    """A non-negative whole number (a Python int, or a NumPy integer that arrives as a 0-d array), else None."""
    if isinstance(value, bool) or (isinstance(value, np.ndarray) and value.dtype.kind == "b"):
        return None
    try:
        number = as_number(value, "a byte count")
    except AssertionError:
        return None
    return int(number) if math.isfinite(number) and number >= 0 and number == int(number) else None


def _reported(run):
    return "In this run the compiler reported an analysis" if run.scenario != "baseline" else "The compiler reported an analysis"


def memory_is_two_dicts(run, oracle, settings):
    for label, entry, expected in _memory_entries(run, oracle, strict=run.scenario == "baseline"):
        if expected is None:
            continue   # a missing analysis: memory_unavailable.recorded_as_none judges that entry
        assert isinstance(entry, dict), (
            f"{_reported(run)} for the {label} executable, so its entry in `memory` should be a dict of the byte figures; "
            f"found {describe(entry)}. Record None only when memory_analysis() returns None.")
        missing = [name for name in settings.memory_fields if name not in entry]
        assert not missing, f"The {label} memory dict lacks {', '.join(missing)}."
        for name in settings.memory_fields:
            assert _byte_count(entry[name]) is not None, (
                f"{name} in the {label} memory dict should be a whole number of bytes; found {describe(entry[name])}.")
    return "Each available analysis is recorded as a dict of byte figures."


def memory_figures_match_compiler(run, oracle, settings):
    for label, entry, expected in _memory_entries(run, oracle, strict=run.scenario == "baseline"):
        if expected is None:
            continue
        assert isinstance(entry, dict), f"{_reported(run)} for the {label} executable; its entry in `memory` is {describe(entry)}, not a dict."
        recorded = {name: _byte_count(entry.get(name)) for name in settings.memory_fields}
        wrong = [name for name in settings.memory_fields if recorded[name] != expected[name]]
        if not wrong:
            continue
        swapped = [(name, other) for name in wrong for other in settings.memory_fields
                   if other != name and recorded[name] == expected[other]]
        assert not swapped, (
            f"In the {label} dict, {swapped[0][0]} holds the figure the compiler reported for {swapped[0][1]} "
            f"({expected[swapped[0][1]]}). Read each field by its own name: getattr(analysis, name).")
        name = wrong[0]
        raise AssertionError(
            f"{name} for {label} is {describe(entry.get(name))}, but in this run the compiler reported {expected[name]} "
            "bytes. Read every field from executable.memory_analysis() (getattr(analysis, name)), so the figures "
            "are whatever this compiler reports.")
    return "The recorded figures are the ones the compiler reported."


def unavailable_memory_is_none(run, oracle, settings):
    entries = _memory_entries(run, oracle)
    for label, entry, expected in entries:
        if expected is not None or entry is None:
            continue
        if isinstance(entry, dict):
            values = [_byte_count(v) for v in entry.values()]
            assert values, (f"The {label} executable's analysis was missing in this run and you recorded an empty dict; "
                            "record a missing analysis as None (unavailable).")
            assert not all(v == 0 for v in values), (
                f"The {label} executable's analysis was missing in this run and you recorded zeros. Record a missing "
                "analysis as None (unavailable), never as 0 bytes.")
        raise AssertionError(
            f"The {label} executable's analysis was missing in this run (memory_analysis() returned None), so its entry "
            f"in `memory` should be None; found {describe(entry)}. Backend support varies: record missing analysis as unavailable.")
    missing = [label for label, _, expected in entries if expected is None]
    return f"The missing analysis ({', '.join(missing) or 'none'}) is recorded as None."


# ---- the memory panel -----------------------------------------------------------------------------

AVAILABILITY = re.compile(r"availab|missing|absent|supported|reported|\bno\s+(compiler\s+)?(memory\s+)?analys|"
                          r"\bnone\b|\bn/?a\b|exists|present", re.IGNORECASE)
BYTES = re.compile(r"\b(bytes?|[kmg]i?b)\b", re.IGNORECASE)
NEGATION = re.compile(r"\b(not|no|never|instead of)\s+(an?\s+)?(\w+\s+)?$", re.IGNORECASE)


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
    return panel, series[0], plain_data(series[0].get("y"))


def _speaks_of_bytes(text):
    """The text names bytes as the unit, not merely to deny it ('availability, not byte count')."""
    return any(not NEGATION.search(text[:match.start()]) for match in BYTES.finditer(text))


def second_panel_is_availability(run, oracle, settings):
    panel, series, y = _second_panel(run)
    available = [entry is not None for entry in oracle.memory]
    if all(available):
        return "Every analysis was available in this run; no availability panel was needed."
    labels = [str(panel.get(key, "")) for key in ("title", "ylabel")] + [str(series.get("label", ""))]
    assert isinstance(y, list) and len(y) == len(available), (
        f"The substitute panel should have one bar per executable; found y = {y!r}.")
    heights = [float(v) if isinstance(v, (bool, int, float)) else None for v in y]
    assert all(h in (0.0, 1.0) for h in heights), (
        f"With an analysis missing the second panel should show availability (1 = reported, 0 = missing) for each "
        f"executable; its bars are {y!r}, which read as byte counts or other quantities.")
    bytes_label = next((text for text in labels[1:2] + labels[:1] if _speaks_of_bytes(text)), None)
    assert bytes_label is None, (
        f"The substitute panel is labelled in bytes ({bytes_label!r}); with an analysis missing, a bar of 0 bytes reads "
        "as 'no memory'. Label it as availability, e.g. ylabel 'analysis available (1=yes)'.")
    assert any(AVAILABILITY.search(text) for text in labels), (
        "Label the substitute panel as availability (its title, y-label or series label should say the analysis is "
        "available/unavailable), so nobody reads it as zero bytes.")
    for label, ok, height in zip(LABELS, available, heights):
        assert ok or height == 0.0, (
            f"The {label} executable's analysis was missing in this run, but its availability bar is {y[LABELS.index(label)]!r}.")
    shown_missing = [label for label, ok, height in zip(LABELS, available, heights) if ok and height == 0.0]
    note = (f" (In this run the {shown_missing[0]} executable's analysis was reported; `int(m is not None)` marks each "
            "executable by what it reported.)") if shown_missing else ""
    return "The missing analysis is drawn as a labelled availability panel." + note


def second_panel_is_bytes(run, oracle, settings):
    panel, _, y = _second_panel(run)
    if any(entry is None for entry in oracle.memory):
        return "The grader's compiler reported no analysis here, so the byte panel could not be compared."
    expected = [entry["temp_size_in_bytes"] for entry in oracle.memory]
    assert y == expected, (
        f"When every analysis is available the second panel should show the compiled temporary bytes {expected}; "
        f"found y = {y!r}.")
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
    if not run.evidence_complete("automatic"):
        return "`automatic` equals the gradient dotted with the all-ones direction. " + UNSEEN.format(name="automatic")
    calls = run.calls_for("automatic")
    if deepest(calls) >= 1:
        return "`automatic` comes from autodiff of the objective and equals ∇f(x)·(1,…,1)."
    steps = steps_from(evaluation_points(calls, settings.width), oracle.x, oracle.ones, settings.eps_max * 4)
    assert not (steps.along or steps.elsewhere), (
        "`automatic` has the right value, but the statements that produced it evaluated the objective at perturbed "
        "points and applied no JAX differentiation: that is a difference quotient, not autodiff. Compute it with "
        "jax.grad (or jax.jvp) of `plain`.")
    raise AssertionError(
        "`automatic` has the right value, but the statements that produced it applied no JAX differentiation "
        "(no jax.grad, jvp, vjp, ...). The exercise asks for the gradient by autodiff, dotted with the direction.")


def finite_is_central_difference(run, oracle, settings):
    finite = as_number(run["finite"], "`finite`")
    eps = as_number(run["eps"], "`eps`")
    assert math.isfinite(eps) and eps > 0, f"`eps` should be a positive step; found {eps!r}."
    assert math.isfinite(finite), f"`finite` is {finite!r}; a central difference of a finite objective is a finite number."
    method = _difference_method(run, oracle, settings, eps)
    estimates = oracle.differences(oracle.ones, eps)
    f_scale = abs(oracle.value) + float(np.sum(np.abs(oracle.gradient))) * (float(np.max(np.abs(oracle.x))) + eps)
    tolerance = settings.finite_rounding_factor * 2.0**-23 * f_scale / eps
    gap = abs(finite - estimates["central"])
    if gap <= tolerance:
        return f"`finite` is the central difference at eps = {eps:g}." + (" " + method if method else "")
    for kind in ("forward", "backward"):
        assert abs(finite - estimates[kind]) > tolerance, (
            f"`finite` = {fmt(finite)} differs from the central difference at your eps = {eps:g} ({fmt(estimates['central'])}) "
            f"by {gap:.2g}, about what a {kind} difference differs by. Use (f(x+εv) − f(x−εv)) / 2ε.")
    for label, factor in (("divided by ε instead of 2ε", 2.0), ("divided by 4ε", 0.5)):
        assert abs(finite - factor * estimates["central"]) > tolerance * factor, (
            f"`finite` = {fmt(finite)} is {factor:g} times the central difference at your eps: it looks {label}. "
            "The central difference is (f(x+εv) − f(x−εv)) / 2ε.")
    raise AssertionError(
        f"`finite` = {fmt(finite)}, but the central difference of `plain` along v = (1,…,1) at your eps = {eps:g} is "
        f"{fmt(estimates['central'])} (they differ by {gap:.2g}). Perturb the existing input `x` by ±eps·v and "
        "evaluate the original objective.")


def _difference_method(run, oracle, settings, eps):
    """Fail unless the statements behind `finite` evaluated the objective at x ± h·v; '' or a note when they did."""
    if not run.evidence_complete("finite"):
        return UNSEEN.format(name="finite")
    calls = run.calls_for("finite")
    steps = steps_from(evaluation_points(calls, settings.width), oracle.x, oracle.ones,
                       radius=max(4 * eps, settings.eps_max))
    central = steps.symmetric()
    if central:
        step = min(central, key=lambda h: abs(h - eps))
        assert abs(step - eps) <= 1e-2 * eps, (
            f"`finite` evaluates the objective at x ± {step:.3g}·v, but `eps` is {eps:g}: divide by 2·(the step you took), "
            "and report the step you used as `eps`.")
        return ""
    assert not steps.one_sided, (
        f"`finite` is a {steps.one_sided} difference: the statements that produced it evaluated the objective at "
        f"{'x and ' if steps.at_base else ''}x {'+' if steps.one_sided == 'forward' else '−'} ε·v only. "
        "A central difference evaluates at both x + ε·v and x − ε·v and divides by 2ε.")
    assert not steps.elsewhere, (
        "`finite` perturbs `x` along a vector other than v = (1,…,1) (its evaluation points are not x ± ε·(1,…,1)). "
        "The exercise's direction is all ones: use jnp.ones_like(x).")
    assert not deepest(calls), (
        "`finite` was computed by autodiff (the statements that produced it applied JAX differentiation and evaluated "
        "the objective at no perturbed point): that is the exact derivative, not a difference quotient. "
        "Evaluate `plain` at x + ε·v and x − ε·v and divide their difference by 2ε.")
    return UNSEEN.format(name="finite")


# ---- Hessian-vector products ----------------------------------------------------------------------

def _hvp(run, settings, name):
    value = run[name]
    assert not (isinstance(value, tuple) and len(value) == 2), (
        f"`{name}` is a pair: jax.jvp returns (primal_out, tangent_out); unpack it as `_, {name} = jax.jvp(...)`.")
    vector = as_vector(value, f"`{name}`", settings.width)
    assert np.all(np.isfinite(vector)), f"`{name}` contains NaN or Inf."
    return vector


def _directions(run, settings, name):
    """Candidate tangents for `name`: those its computation was handed, then `direction` as it was then and after."""
    found = tangents([call for call in run.calls_for(name) if call.order >= 2] or run.calls_for(name), settings.width)
    binding = run.binding(name)
    for value in [run.provenance.value_at("direction", binding.stmt)] + [v for _, v in run.provenance.bindings_after("direction", binding.stmt)[:1]]:
        try:
            vector = as_vector(value, "`direction`", settings.width)
        except AssertionError:
            continue
        if not any(np.array_equal(vector, known) for known in found):
            found.append(vector)
    assert found, f"No direction for `{name}`: neither a tangent passed to its computation nor a `direction` of length {settings.width}."
    return found


def _direction_used(run, oracle, settings, name):
    """The candidate direction along which `name` is the exact HVP (else the first candidate)."""
    candidates = _directions(run, settings, name)
    try:
        hvp = _hvp(run, settings, name)
    except AssertionError:
        return candidates[0]
    for direction in candidates:
        if close_vectors(hvp, oracle.hvp(direction), settings.hvp_rtol, settings.hvp_atol_scale)[0]:
            return direction
    return candidates[0]


def _second_order(run, oracle, settings, name, hvp, rematerialized):
    """Fail unless `name` came from second-order autodiff of an objective that is (or is not) rematerialized."""
    if not run.evidence_complete(name):
        return " " + UNSEEN.format(name=name)
    calls = run.calls_for(name)
    second = [call for call in calls if call.order >= 2]
    producing = matching_output(second, hvp) or second
    which = "a rematerialized (jax.checkpoint) objective such as `remat`" if rematerialized else "the ordinary objective `plain`"
    if not second:
        direction = _direction_used(run, oracle, settings, name)
        gradients_at = steps_from(differentiated_points(calls, settings.width), oracle.x, direction,
                                  radius=settings.eps_max * max(1.0, float(np.max(np.abs(direction)))))
        perturbed = len(gradients_at.along) + len(gradients_at.elsewhere)
        assert not perturbed, (
            f"`{name}` was computed from gradients at {perturbed} point(s) next to `x` (a finite difference of jax.grad), "
            f"not by second-order autodiff. Differentiate the gradient function exactly: jax.jvp(jax.grad(f), (x,), (direction,)).")
        assert not deepest(calls), (
            f"`{name}` comes from first-order autodiff only. A Hessian-vector product differentiates the gradient once more: "
            f"jax.jvp(jax.grad(f), (x,), (direction,)).")
        raise AssertionError(
            f"The statements that produced `{name}` applied no JAX differentiation. "
            f"The exercise asks for second-order autodiff of {which}.")
    if rematerialized:
        assert any(call.rematerialized_at(2) for call in producing), (
            f"`{name}` comes from second-order autodiff, but no jax.checkpoint-ed function ran under it: it differentiates "
            "the ordinary objective. Differentiate `remat` (layer rematerialization) to test that recomputation preserves "
            "second-order behaviour.")
    else:
        assert any(not call.rematerialized_at(2) for call in producing), (
            f"`{name}` differentiates a rematerialized (jax.checkpoint) objective; it should be the HVP of the ordinary "
            "objective `plain`.")
    return ""


def hvps_have_shape_and_are_finite(run, oracle, settings):
    _hvp(run, settings, "hvp_plain")
    _hvp(run, settings, "hvp_remat")
    return f"Both HVPs are finite vectors of length {settings.width}."


def hvp_direction_is_nonuniform(run, oracle, settings):
    direction = _direction_used(run, oracle, settings, "hvp_plain")
    spread = float(np.max(direction) - np.min(direction))
    assert spread > settings.nonuniform_fraction * float(np.max(np.abs(direction))) and spread > 0, (
        "The HVP direction is uniform (all entries equal). Use a nonuniform direction such as jnp.linspace(-1., 1., len(x)): "
        "a uniform one probes only one combination of the Hessian's columns.")
    return "The HVP direction is nonuniform."


def hvp_plain_matches_oracle(run, oracle, settings):
    hvp = _hvp(run, settings, "hvp_plain")
    direction = _direction_used(run, oracle, settings, "hvp_plain")
    ok, worst = close_vectors(hvp, oracle.hvp(direction), settings.hvp_rtol, settings.hvp_atol_scale)
    if not ok:
        gradient_like = close_vectors(hvp, oracle.gradient, settings.hvp_rtol, settings.hvp_atol_scale)[0]
        assert not gradient_like, "`hvp_plain` equals the gradient, not a Hessian-vector product: apply jax.jvp to jax.grad(plain)."
        assert worst > settings.hvp_approximate_fraction, (
            f"`hvp_plain` is close to the exact Hessian-vector product but not exact (its largest difference is {worst:.2g} "
            "of the largest entry), as an approximation would be. Differentiate exactly: jax.jvp(jax.grad(plain), (x,), (direction,)).")
        raise AssertionError(
            f"`hvp_plain` differs from the exact Hessian-vector product along the direction it was computed with (largest "
            f"difference {worst:.2g} of the largest entry). Apply jax.jvp to jax.grad(plain) with primal (x,) and tangent (direction,).")
    return "`hvp_plain` is the exact Hessian-vector product of `plain`." + _second_order(run, oracle, settings, "hvp_plain", hvp, False)


def hvp_remat_matches(run, oracle, settings):
    hvp_plain, hvp_remat = _hvp(run, settings, "hvp_plain"), _hvp(run, settings, "hvp_remat")
    direction = _direction_used(run, oracle, settings, "hvp_remat")
    ok, worst = close_vectors(hvp_remat, oracle.hvp(direction), settings.hvp_rtol, settings.hvp_atol_scale)
    assert ok, (f"`hvp_remat` differs from the exact Hessian-vector product along the direction it was computed with "
                f"(largest difference {worst:.2g} of the largest entry). Differentiate `remat` the same way as `plain`, "
                "with the same primal point and tangent.")
    pair_ok, pair_worst = close_vectors(hvp_remat, hvp_plain, settings.hvp_pair_rtol, settings.hvp_pair_atol_scale)
    assert pair_ok, (f"`hvp_plain` and `hvp_remat` disagree (largest difference {pair_worst:.2g} of the largest entry); "
                     "use the same point and tangent for both.")
    return ("`hvp_remat` matches `hvp_plain` and the exact HVP: recomputation preserved second-order behaviour."
            + _second_order(run, oracle, settings, "hvp_remat", hvp_remat, True))
