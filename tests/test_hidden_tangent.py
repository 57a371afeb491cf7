"""An HVP tangent made where no array is kept (inside the jitted function that computes both HVPs) is found from
the computation itself (issue 55): the ordinary objective's Hessian in the run solved for it, the rematerialized
one times it matching `hvp_remat`. Credited only where the run's changes tell the methods apart along it (any pair
with `hvp_remat` close to `hvp_plain`, typed-in values included, agrees otherwise); where they do not, no value of
the run decides it (issue 67): the two HVP checks are held for the instructor's review, with the sentence that
says so, instead of failed (an honest tangent would lose points for the world's shortcoming) or passed (a copy
reads the same). Real grading of performance-05 in two fixed worlds, one of each kind (measured: the
rematerialized change lies 6.0 allowances from the ordinary HVP along this tangent in the first, 0.37 in the
second)."""

from __future__ import annotations

import csv
import json

import pytest

from grader.cli.main import main
from tests.case_expectations import ROOT

pytestmark = pytest.mark.slow

SOLUTION = (ROOT / "solutions" / "performance-05.py").read_text()
GIVEN = ("direction=jnp.linspace(-1.,1.,len(x))\n# Differentiate the objective to obtain `(_, hvp_plain)` via automatic "
         "differentiation.\n_,hvp_plain=jax.jvp(jax.grad(plain),(x,),(direction,))\n# Differentiate the objective to "
         "obtain `(_, hvp_remat)` via automatic differentiation.\n_,hvp_remat=jax.jvp(jax.grad(remat),(x,),(direction,))\n")
HIDDEN = ("@jax.jit\ndef both(point):\n    t=jnp.sin(3.0*jnp.arange(16.0))+0.3*jnp.cos(jnp.arange(16.0))\n"
          "    return jax.jvp(jax.grad(plain),(point,),(t,))[1],jax.jvp(jax.grad(remat),(point,),(t,))[1]\n"
          "hvp_plain,hvp_remat=both(x)\n")


@pytest.mark.parametrize("requested, credited", [(7, True), (4242, False)])
def test_a_tangent_made_inside_jit(tmp_path, requested, credited):
    assert SOLUTION.count(GIVEN) == 1
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "hidden.py").write_text(SOLUTION.replace(GIVEN, HIDDEN))
    assert main(["grade", str(folder), "--out", str(tmp_path / "out"), "--workers", "2",
                 "--variant-seed", str(requested)]) == 0
    record = json.loads((tmp_path / "out" / "hidden.json").read_text())
    plain = next(c for c in record["checks"] if c["id"] == "hvp.plain_matches_oracle")
    if credited:
        assert record["groups"]["hvp"]["score"] == 20, plain["feedback"]
    else:
        remat = next(c for c in record["checks"] if c["id"] == "hvp.remat_matches_plain")
        for check in (plain, remat):
            assert check["score"] == 0 and check["feedback"].startswith("Held for your instructor's review"), check
            assert "too small to tell second-order autodiff from a copy" in check["feedback"], check["feedback"]
            assert "any direction your code made" not in check["feedback"]   # no failure named: none was shown
        hold = record["review_hold"]
        assert set(hold["checks"]) == {"hvp.plain_matches_oracle", "hvp.remat_matches_plain"}, hold
        assert "no run's values could decide" in hold["why"], hold
        with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as stream:
            row = next(csv.DictReader(stream))
        assert set(row["held"].split()) == set(hold["checks"]), row   # the hold has its column
