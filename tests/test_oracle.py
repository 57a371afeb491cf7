"""The performance-05 oracle: float64 NumPy, independent of JAX autodiff, checked three ways.

1. Against finite differences of itself in float64 (gradient vs objective, HVP vs gradient).
2. Against real JAX (jax.grad, jax.jvp of jax.grad, jax.hessian) on the float32 inputs the lesson builds.
3. Its finite-difference helpers behave as the theory says (forward/backward O(eps), central O(eps^2)).
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.config import assignment as assignment_module

SEEDS = [18, 0, 1, 7, 12345, 2**31 - 2]


@pytest.fixture(scope="module")
def oracle():
    return assignment_module.load("performance-05").oracle


def _directions(seed: int, count: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(1000 + seed)
    return [np.ones(16), np.linspace(-1.0, 1.0, 16)] + [rng.normal(size=16) for _ in range(count)]


# ---- lesson inputs ---------------------------------------------------------------------------------

def test_lesson_inputs_equal_what_the_lesson_code_builds(oracle):
    import jax.numpy as jnp

    # The lesson's own lines, verbatim apart from names.
    rng = np.random.default_rng(18)
    w = jnp.asarray((rng.normal(size=(16, 16)) * .1).astype(np.float32))
    x = jnp.asarray(np.linspace(-.5, .5, 16, dtype=np.float32))

    ow, ox = oracle.lesson_inputs(18)
    assert ow.dtype == np.float64 and ox.dtype == np.float64
    assert ow.shape == (16, 16) and ox.shape == (16,)
    # Exactly the float32 numbers, widened: no re-rounding, no different draw.
    assert np.array_equal(ow, np.asarray(w).astype(np.float64))
    assert np.array_equal(ox, np.asarray(x).astype(np.float64))
    assert np.array_equal(ow.astype(np.float32).astype(np.float64), ow)


def test_lesson_inputs_depend_on_the_seed_but_x_does_not(oracle):
    w18, x18 = oracle.lesson_inputs(18)
    w19, x19 = oracle.lesson_inputs(19)
    assert not np.array_equal(w18, w19)
    assert np.array_equal(x18, x19)
    w18b, _ = oracle.lesson_inputs(18)
    assert np.array_equal(w18, w18b)


def test_build_carries_seed_inputs_and_facts(oracle):
    facts = {"reports": [["a"] * 9, ["b"] * 6], "memory": [{"temp_size_in_bytes": 1}, None]}
    built = oracle.build(5, facts)
    w, x = oracle.lesson_inputs(5)
    assert built.seed == 5
    assert np.array_equal(built.w, w) and np.array_equal(built.x, x)
    assert built.residual_counts == [9, 6]
    assert built.memory == [{"temp_size_in_bytes": 1}, None]
    assert np.array_equal(built.ones, np.ones(16))
    assert built.value == pytest.approx(oracle.objective(w, x), rel=1e-15)


# ---- self-consistency in float64 ---------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_gradient_matches_central_differences_of_objective(oracle, seed):
    w, x = oracle.lesson_inputs(seed)
    g = oracle.gradient(w, x)
    h = 1e-5
    numeric = np.array([(oracle.objective(w, x + h * e) - oracle.objective(w, x - h * e)) / (2 * h) for e in np.eye(16)])
    scale = np.max(np.abs(g))
    assert np.max(np.abs(numeric - g)) <= 1e-7 * scale
    for v in _directions(seed):
        assert oracle.central_difference(w, x, v, h) == pytest.approx(float(g @ v), rel=1e-6, abs=1e-9 * scale)


@pytest.mark.parametrize("seed", SEEDS)
def test_hvp_matches_central_differences_of_gradient(oracle, seed):
    w, x = oracle.lesson_inputs(seed)
    h = 1e-5
    for v in _directions(seed):
        exact = oracle.hessian_vector_product(w, x, v)
        numeric = (oracle.gradient(w, x + h * v) - oracle.gradient(w, x - h * v)) / (2 * h)
        scale = np.max(np.abs(exact))
        assert scale > 0
        assert np.max(np.abs(numeric - exact)) <= 1e-6 * scale, (seed, np.max(np.abs(numeric - exact)) / scale)


@pytest.mark.parametrize("seed", [18, 3])
def test_hvp_is_linear_and_symmetric(oracle, seed):
    w, x = oracle.lesson_inputs(seed)
    rng = np.random.default_rng(seed)
    u, v = rng.normal(size=16), rng.normal(size=16)
    hu, hv = oracle.hessian_vector_product(w, x, u), oracle.hessian_vector_product(w, x, v)
    combined = oracle.hessian_vector_product(w, x, 2.0 * u - 3.0 * v)
    np.testing.assert_allclose(combined, 2.0 * hu - 3.0 * hv, rtol=1e-12, atol=1e-15 * np.max(np.abs(hu)))
    assert float(u @ hv) == pytest.approx(float(v @ hu), rel=1e-10)
    # the zero direction has a zero HVP, and the HVP is not the gradient
    assert np.all(oracle.hessian_vector_product(w, x, np.zeros(16)) == 0)
    assert not np.allclose(oracle.hessian_vector_product(w, x, np.ones(16)), oracle.gradient(w, x))


def test_oracle_object_matches_module_functions(oracle):
    built = oracle.build(18, {})
    v = np.linspace(-1, 1, 16)
    np.testing.assert_array_equal(built.gradient, oracle.gradient(built.w, built.x))
    np.testing.assert_array_equal(built.hvp(v), oracle.hessian_vector_product(built.w, built.x, v))
    # with no variant rules, JAX's autodiff derivative is the exact one, and the value is the objective's
    np.testing.assert_array_equal(built.autodiff_gradient, built.gradient)
    np.testing.assert_array_equal(built.true_hvp(v), built.hvp(v))
    assert built.value_at(built.x) == oracle.objective(built.w, built.x)
    assert built.central_differences(1e-3)[0] == oracle.central_difference(built.w, built.x, np.ones(16), 1e-3)
    sides = built.one_sided_differences(1e-3)
    assert sides["forward"] == oracle.forward_difference(built.w, built.x, np.ones(16), 1e-3)
    assert sides["backward"] == oracle.backward_difference(built.w, built.x, np.ones(16), 1e-3)


# ---- against real JAX (float32) ----------------------------------------------------------------------

def _jax_functions(w64):
    import jax
    import jax.numpy as jnp

    w = jnp.asarray(w64.astype(np.float32))

    def layer(v):
        return jnp.tanh(w @ v)

    def objective(v, rematerialize=False):
        operation = jax.checkpoint(layer) if rematerialize else layer
        for _ in range(4):
            v = operation(v)
        return jnp.sum(v * v)

    return (lambda v: objective(v, False)), (lambda v: objective(v, True))


def _close(actual, expected, rtol, atol_scale):
    actual = np.asarray(actual, dtype=np.float64)
    scale = np.max(np.abs(expected))
    err = np.abs(actual - expected)
    assert np.all(err <= rtol * np.abs(expected) + atol_scale * scale), float(np.max(err) / scale)


@pytest.mark.parametrize("seed", SEEDS)
def test_oracle_agrees_with_jax_autodiff(oracle, seed):
    import jax
    import jax.numpy as jnp

    w64, x64 = oracle.lesson_inputs(seed)
    plain, remat = _jax_functions(w64)
    x = jnp.asarray(x64.astype(np.float32))
    assert x.dtype == jnp.float32

    assert float(plain(x)) == pytest.approx(oracle.objective(w64, x64), rel=1e-5)
    g = oracle.gradient(w64, x64)
    _close(jax.grad(plain)(x), g, 2e-5, 2e-6)
    _close(jax.grad(remat)(x), g, 2e-5, 2e-6)

    for v64 in _directions(seed, count=1):
        v = jnp.asarray(v64.astype(np.float32))
        exact = oracle.hessian_vector_product(w64, x64, v64.astype(np.float32).astype(np.float64))
        _, hvp_plain = jax.jvp(jax.grad(plain), (x,), (v,))
        _, hvp_remat = jax.jvp(jax.grad(remat), (x,), (v,))
        _close(hvp_plain, exact, 5e-5, 5e-6)
        _close(hvp_remat, exact, 5e-5, 5e-6)

    hessian = np.asarray(jax.hessian(plain)(x), dtype=np.float64)
    columns = np.stack([oracle.hessian_vector_product(w64, x64, e) for e in np.eye(16)], axis=1)
    assert np.max(np.abs(columns - columns.T)) <= 1e-12 * np.max(np.abs(columns))
    assert np.max(np.abs(hessian - columns)) <= 5e-5 * np.max(np.abs(columns))


# ---- finite-difference helpers -----------------------------------------------------------------------

@pytest.mark.parametrize("seed", [18, 4242])
def test_difference_orders(oracle, seed):
    w, x = oracle.lesson_inputs(seed)
    for v in _directions(seed, count=1):
        exact = float(oracle.gradient(w, x) @ v)
        curvature = float(v @ oracle.hessian_vector_product(w, x, v))
        assert abs(curvature) > 1e-8
        errors = {}
        for eps in (1e-2, 5e-3, 2.5e-3):
            errors[eps] = {
                "forward": oracle.forward_difference(w, x, v, eps) - exact,
                "backward": oracle.backward_difference(w, x, v, eps) - exact,
                "central": oracle.central_difference(w, x, v, eps) - exact,
            }
            # leading terms: forward +eps/2 v'Hv, backward -eps/2 v'Hv
            assert errors[eps]["forward"] == pytest.approx(0.5 * eps * curvature, rel=0.1)
            assert errors[eps]["backward"] == pytest.approx(-0.5 * eps * curvature, rel=0.1)
            assert abs(errors[eps]["central"]) < 0.05 * abs(errors[eps]["forward"])
            # central is the mean of forward and backward
            mean = 0.5 * (oracle.forward_difference(w, x, v, eps) + oracle.backward_difference(w, x, v, eps))
            assert oracle.central_difference(w, x, v, eps) == pytest.approx(mean, rel=1e-10, abs=1e-14)
        # halving eps halves the one-sided errors and quarters the central one
        for big, small in ((1e-2, 5e-3), (5e-3, 2.5e-3)):
            assert errors[big]["forward"] / errors[small]["forward"] == pytest.approx(2.0, rel=0.05)
            assert errors[big]["backward"] / errors[small]["backward"] == pytest.approx(2.0, rel=0.05)
            assert errors[big]["central"] / errors[small]["central"] == pytest.approx(4.0, rel=0.05)
