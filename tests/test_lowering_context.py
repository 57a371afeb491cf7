"""The MLIR context the fork server makes before it forks, which each run's lowerings reuse
(grader/sandbox/child/lowering_context.py), tested through real runs of the real fork server with real JAX.

A change this deep must keep four things: the server forks from one thread; two student threads lowering at
once each get correct programs (only the thread that made the context reuses it); a run that lowers many programs
with large constants does not keep them all (the context is set aside at its budget); and every program a trusted
fresh interpreter put in the compilation cache is still found there (the lowered text, so the cache key, is the
same).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from grader.model.job import new_job
from grader.runs import compile_cache
from grader.runs.snapshot import build_snapshot
from grader.sandbox.child import lowering_context
from grader.sandbox.fork_server import ForkServer
from grader.sandbox.process import Limits

LIMITS = Limits(wall_seconds=120, soft_seconds=90, statement_grace_seconds=5, cpu_seconds=120)
# The installed sharer, as a run can read it (the fork server's modules are importable in a run).
SHARER = "import lowering_context\nsharer = lowering_context.INSTALLED\n"


def run(server, source: str, contract, prefix: str = SHARER):
    job = new_job(prefix + textwrap.dedent(source).lstrip("\n"), "student.py", list(contract), LIMITS)
    raw = server.run_job(job, LIMITS)
    snapshot = build_snapshot(raw, "baseline", 0)
    assert snapshot.ending == "completed", (snapshot.ending, snapshot.output_tail[-2000:])
    assert not snapshot.failed_statements, snapshot.failed_statements[0].error
    return snapshot, raw


@pytest.fixture(scope="module")
def server():
    with ForkServer() as running:
        yield running


def test_the_server_forks_from_its_only_thread_and_holds_the_context(server):
    before = server.stats()
    assert before["shared_lowering_context"] is True
    assert len(before["threads"]) == 1, before["threads"]
    run(server, "import jax, jax.numpy as jnp\ny = float(jax.jit(jnp.sin)(1.0))\n", ["y"], prefix="")
    assert len(server.stats()["threads"]) == 1


def test_a_run_lowers_every_program_of_its_main_thread_in_the_shared_context(server):
    snapshot, _ = run(server, """
        import jax, jax.numpy as jnp
        values = [float(jax.jit(lambda x, k=k: jnp.tanh(x) * k)(0.5)) for k in range(5)]
        derivative = float(jax.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2))(0.5))
        lowerings, retired = sharer.lowerings, sharer.retired
    """, ["values", "derivative", "lowerings", "retired"])
    assert np.allclose(snapshot.values["values"], [np.tanh(0.5) * k for k in range(5)], rtol=1e-6)
    assert abs(snapshot.values["derivative"] - 2 * np.tanh(0.5) * (1 - np.tanh(0.5) ** 2)) < 1e-6
    assert snapshot.values["lowerings"] >= 5 and snapshot.values["retired"] is False


def test_two_student_threads_lowering_at_once_each_get_their_own_programs(server):
    snapshot, _ = run(server, """
        import threading
        import numpy as np
        import jax, jax.numpy as jnp
        start = threading.Barrier(3)
        results, errors = {}, []
        def work(k):
            try:
                start.wait()
                results[k] = [float(jax.jit(lambda x, i=i: jnp.sin(x) * (i + 1) + k)(0.25)) for i in range(30)]
            except BaseException as error:
                errors.append(repr(error))
        threads = [threading.Thread(target=work, args=(k,)) for k in (100, 200)]
        for thread in threads:
            thread.start()
        work(0)
        for thread in threads:
            thread.join()
        wrong = [(k, i) for k, values in results.items() for i, value in enumerate(values)
                 if abs(value - (np.sin(0.25) * (i + 1) + k)) > 1e-4]
        done = sorted(results)
        shared = sharer.lowerings
    """, ["wrong", "done", "errors", "shared"])
    assert snapshot.values["errors"] == [] and snapshot.values["done"] == [0, 100, 200]
    assert snapshot.values["wrong"] == []
    # Only the main thread's 30 programs were lowered in the shared context; the other threads made their own.
    assert 30 <= snapshot.values["shared"] < 60


def test_a_run_that_lowers_many_large_constants_gets_jax_own_contexts_past_the_budget(server):
    """Each program carries 1 MiB of constants a context keeps for its life: 300 of them in one context would hold
    300 MiB. The context is set aside at its budget, so the run's memory grows by about that budget, not more."""
    lower = """
        import numpy as np
        import jax, jax.numpy as jnp
        for i in range(COUNT):
            jax.jit(lambda x, i=i: x + np.arange(262144, dtype=np.float32) * (i + 1)).lower(jnp.zeros(262144))
        retired, held = sharer.retired, sharer.constant_bytes
    """
    one, one_raw = run(server, lower.replace("COUNT", "1"), ["retired", "held"])
    many, many_raw = run(server, lower.replace("COUNT", "300"), ["retired", "held"])
    assert one.values["retired"] is False and many.values["retired"] is True
    assert many.values["held"] <= lowering_context.SHARED_CONSTANT_BYTES
    assert one_raw.max_rss_bytes and many_raw.max_rss_bytes
    grown = (many_raw.max_rss_bytes - one_raw.max_rss_bytes) / 2**20
    assert grown < lowering_context.SHARED_CONSTANT_BYTES / 2**20 + 64, f"{grown:.0f} MiB more"


def test_every_program_a_fresh_interpreter_cached_is_found_by_a_forked_run(tmp_path):
    """A trusted fresh interpreter (its own context per lowering) fills the cache, as the warm-up does; a forked run
    of the same code, lowering in the shared context, misses none of it."""
    code = """
        import numpy as np
        import jax, jax.numpy as jnp
        w = jnp.asarray(np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32))
        def f(x):
            return jnp.sum(jnp.tanh(w @ jnp.tanh(w @ x)) ** 2)
        x = jnp.linspace(-1.0, 1.0, 8)
        value = float(jax.jit(f)(x))
        slope = np.asarray(jax.grad(f)(x)).tolist()
        curvature = np.asarray(jax.hessian(f)(x)).tolist()
    """
    counting = """
        import jax.monitoring
        events = {"hits": 0, "misses": 0}
        def count(event, **_):
            if event.endswith("/cache_hits"):
                events["hits"] += 1
            elif event.endswith("/cache_misses"):
                events["misses"] += 1
        jax.monitoring.register_event_listener(count)
    """
    folder = tmp_path / "cache"
    folder.mkdir()
    warm = new_job(textwrap.dedent(code).lstrip("\n"), "public.py", ["value"], LIMITS)
    warmed = compile_cache.filling_runner(folder)(warm, LIMITS)
    assert build_snapshot(warmed, "baseline", 0).ending == "completed"
    assert any(folder.iterdir())
    with ForkServer(compile_cache=folder) as cached:
        snapshot, _ = run(cached, textwrap.dedent(counting) + textwrap.dedent(code) +
                          "hits, misses, lowerings = events['hits'], events['misses'], sharer.lowerings\n",
                          ["hits", "misses", "lowerings"])
    assert snapshot.values["misses"] == 0
    assert snapshot.values["hits"] >= 3 and snapshot.values["lowerings"] >= snapshot.values["hits"]


def test_a_program_it_cannot_measure_is_lowered_in_a_fresh_context(monkeypatch):
    """In this process (JAX's functions restored after the test): a measurement that fails is never the student's
    error; that lowering gets JAX's own context and the next one measured is shared again."""
    import types

    import jax

    from grader.sandbox.child.jax_internals import find

    # JAX's names as the fork server finds them (jax_internals: 0.12 moved ClosedJaxpr out of jax._src.core)
    core = types.SimpleNamespace(**{name: find(name) for name in ("ClosedJaxpr", "Jaxpr", "Literal")})
    mlir = find("mlir_module")
    monkeypatch.setattr(mlir, "make_ir_context", mlir.make_ir_context)
    monkeypatch.setattr(mlir, "lower_jaxpr_to_module", mlir.lower_jaxpr_to_module)
    sharer = lowering_context.SharedLoweringContext(mlir, core).install()
    measure = lowering_context.constant_bytes

    def cannot_measure(*_):
        raise RuntimeError("no measure")

    monkeypatch.setattr(lowering_context, "constant_bytes", cannot_measure)
    assert float(jax.jit(lambda x: x * 3.0)(2.0)) == 6.0
    assert sharer.lowerings == 0
    monkeypatch.setattr(lowering_context, "constant_bytes", measure)
    assert float(jax.jit(lambda x: x * 5.0)(2.0)) == 10.0
    assert sharer.lowerings == 1 and not sharer.retired
