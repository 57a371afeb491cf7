"""An HVP tangent made where no array is kept (inside the jitted function that computes both HVPs) is found from
the computation itself (issue 55): the ordinary objective's Hessian in the run solved for it, the rematerialized
one times it matching `hvp_remat`. Credited only where the run's changes tell the methods apart along it (any pair
with `hvp_remat` close to `hvp_plain`, typed-in values included, agrees otherwise); where they do not, no value of
the run decides it (issue 67): the two HVP checks are held for the instructor's review, with the sentence that
says so, instead of failed (an honest tangent would lose points for the world's shortcoming) or passed (a copy
reads the same). Real grading of performance-05 in two fixed worlds, one of each kind (measured: the
rematerialized change lies 6.0 allowances from the ordinary HVP along this tangent in the first, 0.37 in the
second). A pair whose value itself shows its mistake (the gradient; a difference of gradients along the file's
direction) is refused in both worlds, saying what it shows: in the second world it, too, agrees along the tangent it
reveals, and before that was decided by the value it was held (a CI run's world held three corpus mistakes so)."""

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


# Mistakes whose pair also agrees along the tangent `hvp_plain` reveals (any two close vectors do, where the world
# does not separate the methods along it), but whose value itself shows what it is: refused in every world, with
# what the value shows, never held
SHOWN = {
    "gradient": ("_,hvp_plain=jax.value_and_grad(plain)(x)\n_,hvp_remat=jax.value_and_grad(remat)(x)\n",
                 "equals the gradient, not a Hessian-vector product"),
    "differenced": ("hvp_plain=(jax.grad(plain)(x+1e-4*direction)-jax.grad(plain)(x-1e-4*direction))/2e-4\n"
                    "hvp_remat=(jax.grad(remat)(x+1e-4*direction)-jax.grad(remat)(x-1e-4*direction))/2e-4\n",
                    "as an approximation (a finite difference of gradients, for example) would be"),
}


@pytest.mark.parametrize("requested, credited", [(7, True), (4242, False)])
def test_a_tangent_made_inside_jit(tmp_path, requested, credited):
    assert SOLUTION.count(GIVEN) == 1
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "hidden.py").write_text(SOLUTION.replace(GIVEN, HIDDEN))
    for name, (lines, _) in SHOWN.items():
        (folder / f"{name}.py").write_text(SOLUTION.replace(GIVEN, "direction=jnp.linspace(-1.,1.,len(x))\n" + lines))
    assert main(["grade", str(folder), "--out", str(tmp_path / "out"), "--workers", "2",
                 "--variant-seed", str(requested)]) == 0
    for name, (_, shown) in SHOWN.items():
        record = json.loads((tmp_path / "out" / f"{name}.json").read_text())
        assert "review_hold" not in record, (name, record.get("review_hold"))
        for check in (c for c in record["checks"] if c["id"] in ("hvp.plain_matches_oracle", "hvp.remat_matches_plain")):
            assert check["score"] == 0 and shown in check["feedback"], (name, check)
            assert not check["feedback"].startswith("In the variant run"), (name, check)   # the file as written shows it too
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
            row = next(r for r in csv.DictReader(stream) if r["submission"] == "hidden")
        assert set(row["held"].split()) == set(hold["checks"]), row   # the hold has its column
