"""The method-evidence recorder (grader/sandbox/child/recorder.py) in the real harness and sandbox, with real JAX.

Each test runs a few lines of student code through the fork server and reads what the run recorded: the
evaluations (calls of student code or of jitted functions with concrete arrays, also from inside compiled
programs) and the sightings (small arrays student expressions made). Checks credit methods from these (see
grader/api/methods.py), so each class of honest style must be seen, and nothing may be invented or dropped
silently.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from grader.api.methods import point_values, vectors
from grader.model.job import new_job
from grader.runs.snapshot import build_snapshot
from grader.sandbox.fork_server import ForkServer
from grader.sandbox.process import Limits

LIMITS = Limits(wall_seconds=60, soft_seconds=40, statement_grace_seconds=2, cpu_seconds=60)
EVIDENCE = {"max_evaluations": 4000, "max_evaluations_per_statement": 40, "max_sightings": 4000,
            "max_sightings_per_statement": 40, "max_elements": 1024}
PRELUDE = """
import numpy as np
import jax, jax.numpy as jnp
w = jnp.asarray(np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32) * 0.3)
x = jnp.linspace(-0.5, 0.5, 4)
v = jnp.ones(4)
def f(p):
    return jnp.sum(jnp.tanh(w @ jnp.tanh(w @ p)) ** 2)
"""


@pytest.fixture(scope="module")
def server():
    with ForkServer() as running:
        yield running


def record(server, source, contract=("out",), evidence=None):
    job = new_job(PRELUDE + textwrap.dedent(source), "student.py", list(contract), LIMITS,
                  evidence=EVIDENCE if evidence is None else evidence)
    snapshot = build_snapshot(server.run_job(job, LIMITS), "baseline", 0)
    assert snapshot.ending == "completed", (snapshot.ending, snapshot.output_tail[-2000:])
    assert not snapshot.failed_statements, snapshot.failed_statements[0].error
    return snapshot


def points_of(snapshot, width=4):
    return {tuple(np.round(p.point, 6)): p for p in point_values(snapshot.evaluations, width)}


def test_concrete_calls_are_evaluations_with_their_values(server):
    snap = record(server, """
        e = 1e-3
        up, down = f(x + e * v), f(x - e * v)
        out = (up - down) / (2 * e)
    """)
    points = points_of(snap)
    plus, minus = np.asarray(x_plus := np.linspace(-0.5, 0.5, 4) + 1e-3), np.linspace(-0.5, 0.5, 4) - 1e-3
    assert tuple(np.round(plus, 6)) in points and tuple(np.round(minus, 6)) in points, sorted(points)
    pair = points[tuple(np.round(x_plus, 6))]
    assert not pair.traced and np.isfinite(pair.value)
    layers = [e for e in snap.evaluations if any(r.shape == (4,) for r in e.results)]
    assert not layers, "the layers inside an evaluation are not evaluations of their own"


def test_keyword_only_arguments_and_helpers_are_seen(server):
    snap = record(server, """
        def central(fn, *, point, direction, step):
            return (fn(point + step * direction) - fn(point - step * direction)) / (2 * step)
        out = float(central(f, point=x, direction=v, step=2e-3))
    """)
    points = points_of(snap)
    assert len([p for p in points if abs(p[0] - (-0.498)) < 1e-6 or abs(p[0] - (-0.502)) < 1e-6]) == 2, sorted(points)


def test_a_central_difference_inside_jit_is_recorded_on_every_call(server):
    snap = record(server, """
        cd = jax.jit(lambda e: (f(x + e * v) - f(x - e * v)) / (2 * e))
        first = cd(1e-3)
        out = cd(2e-3)          # a cache hit: no trace, the compiled program reports the points again
    """)
    traced = [p for p in point_values(snap.evaluations, 4) if p.traced]
    steps = sorted({round(float(p.point[0] + 0.5), 6) for p in traced})
    assert steps == [-0.002, -0.001, 0.001, 0.002], steps
    second = max(s.index for s in snap.statements if "out" in s.assigns)
    assert {round(float(p.point[0] + 0.5), 6) for p in traced if p.stmt == second} == {-0.002, 0.002}


def test_jitted_functions_and_vmapped_batches_are_evaluations(server):
    snap = record(server, """
        fast = jax.jit(f)
        a = fast(x + 0.01 * v)
        out = jax.vmap(f)(jnp.stack([x + 0.02 * v, x - 0.02 * v]))
    """)
    offsets = {round(float(p.point[0] + 0.5), 6) for p in point_values(snap.evaluations, 4)}
    assert {0.01, 0.02, -0.02} <= offsets, offsets
    assert any(e.kind == "jit" for e in snap.evaluations)


def test_calls_under_differentiation_are_not_evaluations(server):
    snap = record(server, """
        g = jax.grad(f)(x + 0.03 * v)
        out = jax.jvp(f, (x - 0.03 * v,), (v,))[1]
    """)
    offsets = {round(float(p.point[0] + 0.5), 6) for p in point_values(snap.evaluations, 4)}
    assert not offsets & {0.03, -0.03}, offsets


def test_sightings_find_directions_made_anywhere(server):
    snap = record(server, """
        def main():
            d = jnp.arange(4.0) / 3 - 0.25          # a local, made by arithmetic
            return jax.jvp(jax.grad(f), (x,), (d,))[1]
        out = main()
        inline = jax.hessian(f)(x) @ jnp.linspace(0.0, 1.0, 4)   # a direction written inline
    """)
    found = vectors(snap.sightings, 4)
    assert any(np.allclose(u, np.arange(4.0) / 3 - 0.25) for u in found)
    assert any(np.allclose(u, np.linspace(0.0, 1.0, 4)) for u in found)


def test_a_flood_keeps_the_first_and_the_last_calls_and_says_so(server):
    snap = record(server, """
        def noop(p):
            return jnp.sum(p) * 0.0
        def flood():
            for i in range(300):
                noop(x + i * 1e-3 * v)
            return f(x + 0.5 * v)
        out = flood()
    """)
    statement = next(s for s in snap.statements if "out" in s.assigns)
    assert statement.evaluations_omitted > 0
    offsets = {round(float(p.point[0] + 0.5), 6) for p in point_values(snap.evaluations, 4)}
    assert 0.0 in offsets and 0.5 in offsets      # the first noop call and the last, real evaluation survive


def test_the_recorder_changes_nothing_a_student_computes(server):
    snap = record(server, """
        def same(a):
            return a
        arr = np.arange(4.0)
        fast = jax.jit(f)
        checks = [same(arr) is arr, float(fast(x)) == float(f(x)), fast.__name__ == "f",
                  hasattr(fast, "lower"), jax.jit.__name__ == "jit"]
        out = all(checks)
    """)
    assert snap.values["out"] is True


def test_no_callback_inside_a_checkpointed_function(server):
    """Effects inside jax.checkpoint would change what it saves: a checkpointed student function evaluated
    concretely and then differentiated keeps working, and saves what it saves in a run that records nothing."""
    source = """
        import io, contextlib
        from jax.ad_checkpoint import print_saved_residuals
        layer = lambda p: jnp.tanh(w @ p)
        remat = lambda p: jnp.sum(jax.checkpoint(layer)(jax.checkpoint(layer)(p)) ** 2)
        first = remat(x)
        stream = io.StringIO()
        with contextlib.redirect_stdout(stream):
            print_saved_residuals(remat, x)
        out = (stream.getvalue().count("\\n"), float(jax.grad(remat)(x)[0]))
    """
    recorded, bare = record(server, source), record(server, source, evidence={})
    assert recorded.values["out"] == bare.values["out"]
    assert recorded.values["out"][0] >= 3


def test_complex_points_are_recorded_as_complex(server):
    snap = record(server, """
        out = float(jnp.imag(f(x + 1e-20j * v)) / 1e-20)
    """)
    assert any(a.dtype.kind == "c" for e in snap.evaluations for a in e.args)
    assert not point_values(snap.evaluations, 4) or all(p.point.dtype.kind == "f" for p in point_values(snap.evaluations, 4))


def test_no_evidence_is_recorded_when_the_assignment_asks_for_none(server):
    snap = record(server, "out = f(x + 0.01 * v)\n", evidence={})
    assert not snap.evaluations and not snap.sightings and not snap.evidence.installed
