"""Independent oracle for performance-05, computed in the trusted grader process.

Everything numeric is NumPy float64 and never touches JAX autodiff: the gradient is the lesson's
reverse recurrence, the Hessian-vector product is that recurrence differentiated once more
(forward over reverse), and the finite differences are evaluated at whatever step the student chose,
so the checks can tell a central difference from a forward one. Residual counts and compiler memory
figures depend on the installed JAX, so they come from the grader's own run of the reference solution
(`facts`), never from constants here.
"""

from __future__ import annotations

import importlib.util
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


def gradient(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Reverse recurrence: g4 = 2 h4, g_{i-1} = W^T (g_i * (1 - h_i^2))."""
    h = activations(w, x)
    g = 2.0 * h[-1]
    for i in range(LAYERS, 0, -1):
        g = w.T @ (g * (1.0 - h[i] ** 2))
    return g


def hessian_vector_product(w: np.ndarray, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Exact H v: the tangent of the reverse recurrence along v (forward over reverse).

    Forward tangents: dh0 = v, dh_i = (1 - h_i^2) * (W dh_{i-1}).
    Reverse tangents: dg4 = 2 dh4, dg_{i-1} = W^T (dg_i * (1 - h_i^2) - 2 g_i * h_i * dh_i).
    """
    h = activations(w, x)
    dh = [np.asarray(v, dtype=np.float64)]
    for i in range(1, LAYERS + 1):
        dh.append((1.0 - h[i] ** 2) * (w @ dh[-1]))
    g, dg = 2.0 * h[-1], 2.0 * dh[-1]
    for i in range(LAYERS, 0, -1):
        local = 1.0 - h[i] ** 2
        g, dg = w.T @ (g * local), w.T @ (dg * local - 2.0 * g * h[i] * dh[i])
    return dg


def central_difference(w: np.ndarray, x: np.ndarray, v: np.ndarray, eps: float) -> float:
    return (objective(w, x + eps * v) - objective(w, x - eps * v)) / (2.0 * eps)


def forward_difference(w: np.ndarray, x: np.ndarray, v: np.ndarray, eps: float) -> float:
    return (objective(w, x + eps * v) - objective(w, x)) / eps


def backward_difference(w: np.ndarray, x: np.ndarray, v: np.ndarray, eps: float) -> float:
    return (objective(w, x) - objective(w, x - eps * v)) / eps


@dataclass
class Oracle:
    """What the checks compare against for one scenario: inputs from its seed, facts from the reference run."""

    seed: int
    w: np.ndarray
    x: np.ndarray
    facts: dict = field(default_factory=dict)
    setup: tuple[str, ...] = ()      # the scenario's set-up functions (what its compiler reports depends on them)

    @property
    def ones(self) -> np.ndarray:
        return np.ones_like(self.x)

    @property
    def value(self) -> float:
        return objective(self.w, self.x)

    @property
    def gradient(self) -> np.ndarray:
        return gradient(self.w, self.x)

    def directional_derivative(self, v: np.ndarray) -> float:
        return float(self.gradient @ np.asarray(v, dtype=np.float64))

    def hvp(self, v: np.ndarray) -> np.ndarray:
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
        """What `memory_analysis()` reports for each executable in this scenario: the real figures, None where the
        scenario hides the analysis, or the variant's figures (scenario_setup.variant_memory, one definition)."""
        if "hide_memory_analysis" in self.setup:
            return [None for _ in self.real_memory]
        if "vary_memory_analysis" in self.setup:
            vary = _scenario_setup().variant_memory
            return [None if real is None else vary(real, self.seed, index) for index, real in enumerate(self.real_memory)]
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


def build(seed: int, facts: dict, scenario: Any = None) -> Oracle:
    """Entry point the framework calls: one oracle per scenario (its seed and set-up) and reference run (its facts)."""
    w, x = lesson_inputs(seed)
    return Oracle(seed=seed, w=w, x=x, facts=facts, setup=tuple(getattr(scenario, "setup", ())))
