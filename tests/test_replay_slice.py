"""A replay with `rerun = "slice"` runs again only what the captured names' bindings depend on
(grader/sandbox/child/replay.statement_slice), read off each statement's names of the module (its source) and the
names the run recorded it changing in place: the HVP statements and the helpers they call, not the timing loops or
compiles of the rest of the file's end. A `def` reads what its body reads, so a helper defined after the objectives
is made again (a jitted one with a fresh cache) and sees the replaced functions; a function's own locals and a
comprehension's targets are theirs (a helper's `for layer in ...` does not pull in the file's `layer`)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "grader" / "sandbox" / "child"))   # the child's own import path, as in a run

from replay import module_names, statement_slice  # noqa: E402


def statement(source, mutates=()):
    """A top-level statement as the harness keeps it: its node, and the names the run recorded it changing."""
    return (ast.parse(source).body[0], "file.py", {"assigns": [], "reads": [], "mutates": list(mutates)})


def test_the_slice_is_what_the_captured_bindings_depend_on():
    ok = [statement("plain, remat = make(False), make(True)"),                            # 0 the objectives
          statement("times = [time.perf_counter() for _ in (plain(x), remat(x))]"),          # 1 timing: not needed
          statement("@jax.jit\ndef both(p):\n    return jax.jvp(jax.grad(plain), (p,), (t,))[1], remat(p)"),  # 2
          statement("direction = jnp.ones(16)"),                                            # 3 not read by 5
          statement("memory = jax.jit(remat).lower(x).compile()"),                          # 4 a compile: not needed
          statement("hvp_plain, hvp_remat = both(x)"),                                      # 5 captured
          statement("out = hvp_plain * 2")]                                                 # 6 after the last capture
    assert statement_slice(ok, 1, 5, ["hvp_plain", "hvp_remat"]) == [2, 5]


def test_a_name_changed_in_place_brings_its_binding_and_its_changes():
    ok = [statement("plain, remat = f, g"),
          statement("fns = [plain]"),                                                       # 1 made
          statement("fns.append(remat)", mutates=["fns"]),                                  # 2 changed in place
          statement("unrelated = np.zeros(3)"),                                             # 3
          statement("hvp_plain = fns[0](x, direction)"),                                    # 4 captured
          statement("hvp_remat = hvp_plain")]                                               # 5 captured (a copy)
    assert statement_slice(ok, 1, 5, ["hvp_plain", "hvp_remat"]) == [1, 2, 4, 5]


def test_a_functions_own_names_neither_read_nor_bind_the_modules():
    ok = [statement("def layer(v):\n    return jnp.tanh(w @ v)"),                          # 0 the file's `layer`
          statement("for _ in range(5):\n    samples = run(layer)"),                        # 1 binds `_`, `samples`
          statement("def backward(weights, start):\n    hs = [start]\n    for layer in range(4):\n"
                    "        hs.append(np.tanh(weights @ hs[-1]))\n    g = 2 * hs[-1]\n"
                    "    for _ in range(4):\n        g = weights.T @ g\n    return g"),     # 2 locals: hs, layer, g, _
          statement("cotangent = backward(host_w, np.asarray(x))")]                         # 3 captured
    assert statement_slice(ok, 0, 3, ["cotangent"]) == [2, 3]
    reads, binds = module_names(ok[2][0])
    assert binds == {"backward"} and reads == {"np", "range"}


def test_comprehension_targets_and_globals():
    reads, binds = module_names(ast.parse("acts = [np.asarray(a) for a in acts if a is not None]").body[0])
    assert reads == {"np", "acts"} and binds == {"acts"}
    reads, binds = module_names(ast.parse("def f():\n    global cache\n    cache = load(path)").body[0])
    assert binds == {"f", "cache"} and reads == {"load", "path"}
    reads, binds = module_names(ast.parse("g = lambda v, k=scale: v * k + shift").body[0])
    assert binds == {"g"} and reads == {"scale", "shift"}
