"""The replay `cotangent_shifted` on its own (issue 67): with tanh shifted by a secret c0 + c1·z (the lesson's
probe, probes._tanh_shifted, patched where the replay patches it: numpy, jax.numpy, jax.nn, jax.lax and math), the
lesson's reverse recurrence over the forward pass's activations follows the grader's float64 prediction, and autodiff
of the objective written three ways (jnp.tanh, sinh/cosh, exp) and a NumPy central-difference gradient do not, though
every one of them has the recurrence's value in the run. What each followed is read by the check's own classifier
(checks._cotangent_follows) from a stand-in run that carries the replayed value and the secret.

Real JAX, in this process (the sandboxed replay itself, its slice and its patching, is graded end to end by the
corpus's `cot67_*` cases): each spelling is computed once as written and once with the module attributes patched,
then the attributes are put back. The predictions are also checked over drawn worlds, oracle only: the credited
recurrences lie `separation` tolerances or more from everything held."""

from __future__ import annotations

import importlib
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grader.authoring.calibration import distinct_seeds, draw_seed, lesson, world

ASSIGNMENT = lesson("performance-05")
CHECKS = ASSIGNMENT.check_module
SETTINGS = ASSIGNMENT.settings
SECRET = "5f3c0ffee0ddba11"
PATCHED = ASSIGNMENT.replays["cotangent_shifted"].patch
ORIGINALS = [np.tanh, jnp.tanh, jax.nn.tanh, jax.lax.tanh, math.tanh]


def recurrence(w, x):
    values = [np.asarray(x)]
    for _ in range(4):
        values.append(np.tanh(w @ values[-1]))
    g = 2 * values[-1]
    for i in range(4, 0, -1):
        g = w.T @ (g * (1 - values[i] ** 2))
    return g


def recurrence_jnp(w, x):
    values = [jnp.asarray(x)]
    for _ in range(4):
        values.append(jnp.tanh(jnp.asarray(w) @ values[-1]))
    g = 2 * values[-1]
    for i in range(4, 0, -1):
        g = jnp.asarray(w).T @ (g * (1 - values[i] ** 2))
    return np.asarray(g)


def autodiff(layer):
    def cotangent(w, x):
        def objective(v):
            h = v
            for _ in range(4):
                h = layer(jnp.asarray(w) @ h)
            return jnp.sum(h ** 2)
        return np.asarray(jax.grad(objective)(jnp.asarray(x)))
    return cotangent


def central_differences(w, x):
    def forward(v):
        h = np.asarray(v, dtype=np.float64)
        for _ in range(4):
            h = np.tanh(np.asarray(w, dtype=np.float64) @ h)
        return float(np.sum(h ** 2))
    base, step = np.asarray(x, dtype=np.float64), 1e-5
    return np.array([(forward(base + step * e) - forward(base - step * e)) / (2 * step) for e in np.eye(base.size)],
                    dtype=np.float32)


SPELLINGS = {
    "recurrence": (recurrence, {"activations"}),
    "recurrence with jnp.tanh": (recurrence_jnp, {"activations"}),
    "jax.grad, jnp.tanh": (autodiff(lambda z: jnp.tanh(z)), {"slope"}),
    "jax.grad, sinh/cosh": (autodiff(lambda z: jnp.sinh(z) / jnp.cosh(z)), {"unchanged"}),
    "jax.grad, exp": (autodiff(lambda z: (1 - jnp.exp(-2 * z)) / (1 + jnp.exp(-2 * z))), {"unchanged"}),
    "NumPy central differences": (central_differences, {"slope"}),
}


def replayed(spelling, w, x):
    """The spelling computed with each patched attribute replaced by the probe's, as the replay does, then put back."""
    probes = CHECKS._probes()
    probes.run_secret = SECRET                      # what the harness injects into the probes' module
    places = [(importlib.import_module(dotted.rpartition(".")[0]), dotted.rpartition(".")[2]) for dotted in PATCHED]
    originals = [getattr(module, name) for module, name in places]
    made = probes._tanh_shifted(*originals)
    try:
        for (module, name), value in zip(places, made):
            setattr(module, name, value)
        return spelling(w, x)
    finally:
        for (module, name), value in zip(places, originals):
            setattr(module, name, value)


@pytest.fixture(scope="module")
def oracle():
    return world(ASSIGNMENT, draw_seed(ASSIGNMENT), scenario="baseline", facts={}).oracle


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_the_shift_separates_the_recurrence_from_autodiff_and_differences(oracle, name):
    spelling, expected = SPELLINGS[name]
    w, x = oracle.w.astype(np.float32), oracle.x.astype(np.float32)
    value = spelling(w, x)
    # each has the recurrence's value where nothing is shifted, to within float32 rounding: the value alone cannot
    # tell them apart (autodiff through exp rounds more: in some worlds past the recurrence's tolerance, where its
    # value refuses it, as corpus case cot67_autodiff_exp_form says; here only its replay is judged)
    share = oracle.cotangent_share(SETTINGS) * (10 if name == "jax.grad, exp" else 1)
    assert np.max(np.abs(value - oracle.gradient)) <= share * np.max(np.abs(oracle.gradient))
    run = types.SimpleNamespace(snapshot=types.SimpleNamespace(
        secret=SECRET, replays={"cotangent_shifted": {"values": {"cotangent": replayed(spelling, w, x).tolist()}}}))
    assert CHECKS._cotangent_follows(run, oracle, SETTINGS, value) in expected, name
    assert [np.tanh, jnp.tanh, jax.nn.tanh, jax.lax.tanh, math.tanh] == ORIGINALS   # put back


def test_no_replay_and_a_value_that_followed_nothing_credit_nothing(oracle):
    value = recurrence(oracle.w.astype(np.float32), oracle.x.astype(np.float32))
    missing = types.SimpleNamespace(snapshot=types.SimpleNamespace(secret=SECRET, replays={}))
    assert CHECKS._cotangent_follows(missing, oracle, SETTINGS, value) is None
    noise = types.SimpleNamespace(snapshot=types.SimpleNamespace(secret=SECRET, replays={
        "cotangent_shifted": {"values": {"cotangent": (value * 1.01).tolist()}}}))
    assert CHECKS._cotangent_follows(noise, oracle, SETTINGS, value) == "other"
    for follows in (None, "unchanged", "slope", "other"):
        assert "instructor" in CHECKS.UNDECIDABLE_COTANGENT[follows]


def test_in_drawn_worlds_the_credited_recurrences_lie_far_from_everything_held():
    probes = CHECKS._probes()
    worst = math.inf
    seeds = distinct_seeds(ASSIGNMENT, 12)
    for index, seed in enumerate(seeds):
        oracle = world(ASSIGNMENT, seed, facts={}).oracle
        c0, c1 = probes._activation_shift(f"secret-{index}")
        assert 0.002 <= c0 < 0.004 and 0.002 <= c1 < 0.004
        predicted = CHECKS.shifted_recurrences(oracle.w, oracle.x, c0, c1, oracle.rules.change)
        held = {"slope": predicted["slope"], "unchanged": oracle.gradient}
        for label, credited in predicted.items():
            if label == "slope":
                continue
            for other in held.values():
                allowance = max(CHECKS.replay_allowance(oracle, SETTINGS, credited),
                                CHECKS.replay_allowance(oracle, SETTINGS, other))
                worst = min(worst, float(np.max(np.abs(credited - other))) / allowance)
    assert worst >= SETTINGS.separation, f"a credited recurrence lies {worst:.1f} allowances from a held value ({seeds})"


NUDGED_WORLD = 1951101355   # the CI world where corpus case cotangent_recurrence_jitted_jnp was held (stop 71)


def test_a_recurrence_through_the_variant_runs_changed_tanh_is_credited():
    """The variant run's JAX evaluates tanh with a change near the last layer's pre-activations
    (nudge_objective_values) that the shift can move into: a jnp recurrence's replay then carries it, NumPy's does
    not. Both are the lesson's recurrence over the activations the run computed, so both are credited. In world
    NUDGED_WORLD the change reaches the shifted last layer for 3 of these 8 secrets; before the grader predicted it, a jnp recurrence
    there was held."""
    probes = CHECKS._probes()
    oracle = world(ASSIGNMENT, NUDGED_WORLD, facts={}).oracle
    value = recurrence(oracle.w.astype(np.float32), oracle.x.astype(np.float32))
    moved = 0
    for index in range(8):
        secret = f"nudged-{index}"
        predicted = CHECKS.shifted_recurrences(oracle.w, oracle.x, *probes._activation_shift(secret),
                                               oracle.rules.change)
        through_jax = predicted["activations, tanh as JAX evaluates it in this run"]
        allowance = CHECKS.replay_allowance(oracle, SETTINGS, predicted["activations"])
        moved += float(np.max(np.abs(through_jax - predicted["activations"]))) > allowance
        for replayed_value in (through_jax, predicted["activations"]):
            run = types.SimpleNamespace(snapshot=types.SimpleNamespace(secret=secret, replays={
                "cotangent_shifted": {"values": {"cotangent": replayed_value.astype(np.float32).tolist()}}}))
            assert CHECKS._cotangent_follows(run, oracle, SETTINGS, value) == "activations", secret
    assert moved >= 2, f"the change reached {moved} of 8 secrets' shifted last layer: the case hardly arose"
