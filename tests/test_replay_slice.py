"""A replay with `rerun = "slice"` runs again only what the captured names' bindings depend on
(grader/sandbox/child/replay.statement_slice), read off each statement's recorded bindings and reads: the HVP
statements and the helpers they call, not the timing loops or compiles of the rest of the file's end. A `def`
reads what its body reads, so a helper defined after the objectives is made again (a jitted one with a fresh
cache) and sees the replaced functions."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "grader" / "sandbox" / "child"))   # the child's own import path, as in a run

from replay import statement_slice  # noqa: E402


def statement(assigns=(), reads=(), mutates=()):
    return (None, "file.py", {"assigns": list(assigns), "reads": list(reads), "mutates": list(mutates)})


def test_the_slice_is_what_the_captured_bindings_depend_on():
    ok = [statement(assigns=["plain", "remat"]),                               # 0 the objectives (replaced)
          statement(assigns=["times"], reads=["plain", "remat", "time"]),     # 1 a timing loop: not needed
          statement(assigns=["both"], reads=["jax", "plain", "remat", "t"]),  # 2 a jitted helper (its body reads)
          statement(assigns=["direction"], reads=["jnp"]),                     # 3 a tangent the HVPs use
          statement(assigns=["memory"], reads=["remat", "x"]),                 # 4 a compile: not needed
          statement(assigns=["hvp_plain", "hvp_remat"], reads=["both", "x"]),  # 5 captured
          statement(assigns=["out"], reads=["hvp_plain"])]                     # 6 after the last capture
    assert statement_slice(ok, 1, 5, ["hvp_plain", "hvp_remat"]) == [2, 5]


def test_a_name_changed_in_place_brings_its_binding_and_its_changes():
    ok = [statement(assigns=["plain", "remat"]),
          statement(assigns=["fns"], reads=["plain"]),                          # 1 made
          statement(mutates=["fns"], reads=["fns", "remat"]),                   # 2 changed in place
          statement(assigns=["unrelated"], reads=["np"]),                        # 3
          statement(assigns=["hvp_plain"], reads=["fns", "x", "direction"]),     # 4 captured
          statement(assigns=["hvp_remat"], reads=["hvp_plain"])]                 # 5 captured (a copy)
    assert statement_slice(ok, 1, 5, ["hvp_plain", "hvp_remat"]) == [1, 2, 4, 5]
