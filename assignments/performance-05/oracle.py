"""Independent oracle for performance-05, computed in the trusted grader process.

Everything numeric is NumPy float64 and never touches JAX: the gradient is the lesson's reverse recurrence,
the Hessian-vector product is that recurrence differentiated once more (forward over reverse), the objective is
evaluated directly. Every scenario nudges JAX's derivative rules for tanh by amounts chosen here
(`scenario_parameters`, applied in the run by scenario_setup.nudge_derivative_rules), so the oracle also gives
what autodiff returns in that world:

    first derivative   D = (1 - h^2) (1 + delta_i)             (delta along the unit index; 0 elsewhere)
    second derivative  S = (1 + delta_i)^2 (1 - h^2) (-2 h + c (1 - h^2)),  c = curvature, or curvature +
                       checkpoint_curvature for a tanh inside a jax.checkpoint-ed function

so `automatic` must follow D (a NumPy recurrence or a finite difference does not), each HVP must follow S (a
finite difference of gradients or a NumPy HVP does not), and hvp_remat must follow the checkpointed S (the
ordinary objective's HVP does not). Forward values are never nudged: a central difference is judged against the
run's own recorded evaluations. Residual counts and compiler memory figures depend on the installed JAX, so they
come from the grader's own run of the reference solution (`facts`), never from constants here.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

LAYERS = 4
WIDTH = 16


def lesson_inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The lesson's `w` and `x` for an RNG seed, exactly as the script makes them (float32, then widened)."""
    rng = np.random.default_rng(seed)
    w = (rng.normal(size=(WIDTH, WIDTH)) * 0.1).astype(np.float32)
    x = np.linspace(-0.5, 0.5, WIDTH, dtype=np.float32)
    return w.astype(np.float64), x.astype(np.float64)


def activations(w: np.ndarray, x: np.ndarray) -> list[np.ndarray]:
    """h0 = x, h_i = tanh(W h_{i-1}) for the four layers."""
    values = [np.asarray(x, dtype=np.float64)]
    for _ in range(LAYERS):
        values.append(np.tanh(w @ values[-1]))
    return values


def objective(w: np.ndarray, x: np.ndarray) -> float:
    """f(x) = sum(h4 ** 2)."""
    return float(np.sum(activations(w, x)[-1] ** 2))


# ---- derivative rules ---------------------------------------------------------------------------------------

def cosine_basis(width: int = WIDTH) -> np.ndarray:
    """Row i: cos(pi k (i + 1/2) / width) for k = 0..width-1 (how the run builds delta from its coefficients)."""
    index = np.arange(width)[:, None] + 0.5
    return np.cos(math.pi * np.arange(width)[None, :] * index / width)


@dataclass(frozen=True)
class Rules:
    """The derivative rules of tanh in one scenario's runs (all zero: JAX's own)."""

    delta: np.ndarray = field(default_factory=lambda: np.zeros(WIDTH))
    curvature: float = 0.0
    checkpoint_curvature: float = 0.0

    @classmethod
    def from_parameters(cls, parameters: dict[str, Any] | None) -> Rules:
        if not parameters or "tanh_slope_cosines" not in parameters:
            return cls()
        cosines = np.asarray(parameters["tanh_slope_cosines"], dtype=np.float64)
        return cls(cosine_basis(len(cosines)) @ cosines, float(parameters["tanh_curvature"]),
                   float(parameters["checkpoint_curvature"]))

    def first(self, h: np.ndarray) -> np.ndarray:
        return (1.0 - h ** 2) * (1.0 + self.delta)

    def second(self, h: np.ndarray, checkpointed: bool) -> np.ndarray:
        c = self.curvature + (self.checkpoint_curvature if checkpointed else 0.0)
        return (1.0 + self.delta) ** 2 * (1.0 - h ** 2) * (-2.0 * h + c * (1.0 - h ** 2))


TRUE = Rules()


def gradient(w: np.ndarray, x: np.ndarray, rules: Rules = TRUE) -> np.ndarray:
    """Reverse recurrence: g4 = 2 h4, g_{i-1} = W^T (g_i * D_i); with JAX's own rules, the true gradient."""
    h = activations(w, x)
    g = 2.0 * h[-1]
    for i in range(LAYERS, 0, -1):
        g = w.T @ (g * rules.first(h[i]))
    return g


def hessian_vector_product(w: np.ndarray, x: np.ndarray, v: np.ndarray, rules: Rules = TRUE,
                           checkpointed: bool = False) -> np.ndarray:
    """H v: the tangent of the reverse recurrence along v (forward over reverse).

    Forward tangents: dz_i = W dh_{i-1}, dh_i = D_i dz_i (dh_0 = v). Reverse tangents: dg_4 = 2 dh_4,
    dg_{i-1} = W^T (dg_i * D_i + g_i * S_i * dz_i)."""
    h = activations(w, x)
    dh, dz = [np.asarray(v, dtype=np.float64)], [np.zeros(0)]
    for i in range(1, LAYERS + 1):
        dz.append(w @ dh[-1])
        dh.append(rules.first(h[i]) * dz[-1])
    g, dg = 2.0 * h[-1], 2.0 * dh[-1]
    for i in range(LAYERS, 0, -1):
        first, second = rules.first(h[i]), rules.second(h[i], checkpointed)
        g, dg = w.T @ (g * first), w.T @ (dg * first + g * second * dz[i])
    return dg


def central_difference(w: np.ndarray, x: np.ndarray, v: np.ndarray, eps: float) -> float:
    return (objective(w, x + eps * v) - objective(w, x - eps * v)) / (2.0 * eps)


def forward_difference(w: np.ndarray, x: np.ndarray, v: np.ndarray, eps: float) -> float:
    return (objective(w, x + eps * v) - objective(w, x)) / eps


def backward_difference(w: np.ndarray, x: np.ndarray, v: np.ndarray, eps: float) -> float:
    return (objective(w, x) - objective(w, x - eps * v)) / eps


# ---- the oracle of one scenario -----------------------------------------------------------------------------

@dataclass
class Oracle:
    """What the checks compare against for one scenario: inputs from its seed, its derivative rules, and facts
    from the reference run."""

    seed: int
    w: np.ndarray
    x: np.ndarray
    facts: dict = field(default_factory=dict)
    setup: tuple[str, ...] = ()      # the scenario's set-up functions (what its compiler reports depends on them)
    rules: Rules = TRUE
    batch_seed: int | None = None    # the grading run's random seed (the baseline's memory offsets come from it)

    @property
    def ones(self) -> np.ndarray:
        return np.ones_like(self.x)

    def value_at(self, point: np.ndarray) -> float:
        """The objective at a point, as a float64 evaluation (values are never nudged)."""
        return objective(self.w, np.asarray(point, dtype=np.float64))

    @property
    def value(self) -> float:
        return self.value_at(self.x)

    @property
    def gradient(self) -> np.ndarray:
        """The true gradient: what the lesson's NumPy recurrence computes."""
        return gradient(self.w, self.x)

    @property
    def autodiff_gradient(self) -> np.ndarray:
        """What JAX's autodiff of the objective returns in this scenario's runs."""
        return gradient(self.w, self.x, self.rules)

    def gradient_at(self, point: np.ndarray) -> np.ndarray:
        return gradient(self.w, np.asarray(point, dtype=np.float64))

    def hvp(self, v: np.ndarray, checkpointed: bool = False) -> np.ndarray:
        """What second-order autodiff of the objective returns in this scenario's runs along v (of the ordinary
        objective, or of one whose layers ran inside jax.checkpoint)."""
        return hessian_vector_product(self.w, self.x, v, self.rules, checkpointed)

    def true_hvp(self, v: np.ndarray) -> np.ndarray:
        """The exact Hessian-vector product of the function itself (what a NumPy HVP computes)."""
        return hessian_vector_product(self.w, self.x, v)

    def differences(self, v: np.ndarray, eps: float) -> dict[str, float]:
        """Central, forward and backward differences at the student's own step, for diagnosis."""
        return {
            "central": central_difference(self.w, self.x, v, eps),
            "forward": forward_difference(self.w, self.x, v, eps),
            "backward": backward_difference(self.w, self.x, v, eps),
        }

    @property
    def residual_counts(self) -> list[int]:
        """Saved-residual counts of the reference functions on the installed JAX (plain, remat)."""
        return [len(lines) for lines in self.facts["reports"]]

    @property
    def real_memory(self) -> list[dict | None]:
        """Compiled memory figures of the reference gradients on the installed JAX (plain, remat)."""
        return self.facts["memory"]

    @property
    def memory(self) -> list[dict | None]:
        """What `memory_analysis()` reports for each executable in this scenario (scenario_setup.reported_memory,
        one definition): None where the scenario hides the analysis, offset figures elsewhere."""
        if "hide_memory_analysis" in self.setup:
            return [None for _ in self.real_memory]
        report = _scenario_setup().reported_memory
        if "vary_memory_analysis" in self.setup:
            return [None if real is None else report(real, self.seed, index, True)
                    for index, real in enumerate(self.real_memory)]
        if "offset_memory_analysis" in self.setup and self.batch_seed is not None:
            return [None if real is None else report(real, self.batch_seed, index, False)
                    for index, real in enumerate(self.real_memory)]
        return self.real_memory


@lru_cache(maxsize=1)
def _scenario_setup() -> Any:
    """scenario_setup.py (beside this file) as a module: trusted code, only its pure function is called here."""
    path = Path(__file__).with_name("scenario_setup.py")
    spec = importlib.util.spec_from_file_location("performance_05_scenario_setup", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(seed: int, facts: dict, scenario: Any = None, parameters: dict | None = None,
          batch_seed: int | None = None) -> Oracle:
    """Entry point the framework calls: one oracle per scenario (its seed, set-up and parameters) and reference
    run (its facts)."""
    w, x = lesson_inputs(seed)
    setup = tuple(getattr(scenario, "setup", ()))
    rules = Rules.from_parameters(parameters) if "nudge_derivative_rules" in setup else TRUE
    return Oracle(seed=seed, w=w, x=x, facts=facts, setup=setup, rules=rules, batch_seed=batch_seed)


# ---- sizing the nudges ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Nudges:
    """The derivative-rule changes of one scenario and how far each moves the graded values."""

    rules: Rules
    slope_shift: float        # |change of grad . ones| / sum|g_i|
    remat_shift: float        # max|change of the checkpointed HVP| / max|H v|, along the lesson's direction
    curvature_shift: float    # max|change of the HVP by the curvature| / max|H v|


def size_nudges(seed: int, batch_seed: int, scenario: str, settings: Any) -> Nudges:
    """Random derivative-rule changes for a scenario's inputs, each as large as the lesson's own assertions allow
    (a share `nudge_share` of their tolerances), with random signs and sizes from the grading run's seed."""
    rng = np.random.default_rng([batch_seed, sum(map(ord, scenario))])
    w, x = lesson_inputs(seed)
    g = gradient(w, x)
    share = settings.nudge_share
    # delta: push grad . ones as far as the gradient's elementwise tolerance and the finite-vs-automatic one allow.
    step = 1e-6
    sensitivity = np.stack([(gradient(w, x, Rules(delta=step * e)) - g) / step for e in np.eye(WIDTH)], axis=1)
    along = sensitivity.sum(axis=0)
    direction = np.sign(along) * rng.uniform(0.5, 1.0, WIDTH) * rng.choice([-1.0, 1.0])
    change = sensitivity @ direction
    allowed = share * (settings.lesson_gradient_rtol * np.abs(g) + settings.lesson_gradient_atol)
    slope = float(g.sum())
    budget = share * (settings.lesson_directional_rtol * abs(slope) + settings.lesson_directional_atol)
    scale = min(float(np.min(allowed / np.maximum(np.abs(change), 1e-300))),
                budget / max(abs(float(change.sum())), 1e-300), 1e-3 / float(np.max(np.abs(direction))))
    delta = scale * direction
    rules = Rules(delta=delta)
    slope_shift = abs(float((gradient(w, x, rules) - g).sum())) / float(np.sum(np.abs(g)))
    # curvature: a random share of a fixed band of the HVP's size along the lesson's direction.
    v = np.linspace(-1.0, 1.0, WIDTH)
    base = hessian_vector_product(w, x, v, rules)
    unit = hessian_vector_product(w, x, v, Rules(delta, 1.0)) - base
    size = float(np.max(np.abs(base)))
    target = rng.uniform(settings.curvature_effect_min, settings.curvature_effect_max) * size
    curvature = target / float(np.max(np.abs(unit))) * rng.choice([-1.0, 1.0])
    rules = Rules(delta, curvature)
    plain = hessian_vector_product(w, x, v, rules)
    # checkpoint curvature: inside the lesson's tolerance between hvp_plain and hvp_remat, elementwise.
    unit = hessian_vector_product(w, x, v, Rules(delta, curvature, 1.0), checkpointed=True) - plain
    allowed = share * (settings.lesson_hvp_rtol * np.abs(plain) + settings.lesson_hvp_atol)
    extra = float(np.min(allowed / np.maximum(np.abs(unit), 1e-300))) * rng.uniform(0.8, 1.0) * rng.choice([-1.0, 1.0])
    rules = Rules(delta, curvature, extra)
    remat_shift = float(np.max(np.abs(extra * unit))) / float(np.max(np.abs(plain)))
    curvature_shift = float(np.max(np.abs(plain - base))) / size
    return Nudges(rules, slope_shift, remat_shift, curvature_shift)


def _cosines(delta: np.ndarray) -> list[float]:
    return [float(c) for c in np.linalg.solve(cosine_basis(len(delta)), delta)]


def scenario_parameters(scenario: str, seed: int, batch_seed: int, settings: Any) -> dict[str, Any]:
    """What the scenario's set-up functions receive beyond [parameters]: the sized derivative-rule changes."""
    nudges = size_nudges(seed, batch_seed, scenario, settings)
    return {"tanh_slope_cosines": _cosines(nudges.rules.delta), "tanh_curvature": nudges.rules.curvature,
            "checkpoint_curvature": nudges.rules.checkpoint_curvature}


def separates(nudges: Nudges, settings: Any) -> bool:
    """Every nudge moves its value by at least `separation` tolerances, so no other method lands within one."""
    wanted = settings.separation
    return (nudges.slope_shift >= wanted * settings.automatic_tolerance
            and nudges.remat_shift >= wanted * settings.hvp_tolerance
            and nudges.curvature_shift >= wanted * settings.hvp_tolerance)


def suitable_seed(seed: int, settings: Any) -> bool:
    """A fresh variant seed is used only when its world separates every method (the framework draws again)."""
    return separates(size_nudges(seed, seed, "variant", settings), settings)
