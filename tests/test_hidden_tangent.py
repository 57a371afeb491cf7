"""An HVP tangent made where no array is kept (inside the jitted function that computes both HVPs, or random inside a
jitted helper) is judged by value in every world (issue 67): the replay `hvp_scaled` runs the file's HVP statements
again with `plain` and `remat` given Hessians scaled by secret factors, and second-order autodiff of each follows its
own factor whatever tangent it took. Real grading of performance-05 in two fixed worlds: in the first the world's own
changes also separate the methods along the jit-made tangent (6.0 allowances), in the second they do not (0.37),
which before the replay held that honest file for review.

In both: a copy of `hvp_plain` given as `hvp_remat` along (1,...,1) or linspace(0, 1) (tangents the world's
changes separate in only 2.5 % of worlds) follows `plain`'s factor, as autodiff of jax.checkpoint(plain) would: never
credited, refused where the world separates along it, else held; a pair whose value
shows its mistake (the gradient; a difference of gradients) is refused, saying what it shows; a typed-in pair
follows no factor, and where the world does not separate along the tangent it reveals (both worlds here, measured)
no value decides it: held for the instructor's review, never credited."""

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


HONEST = {
    "hidden": HIDDEN,
    "helper": ("def make(f):\n    return jax.jit(lambda p,t: jax.jvp(jax.grad(f),(p,),(t,))[1])\n"
               "hp,hr=make(plain),make(remat)\nkey=jax.random.PRNGKey(3)\n"
               "hvp_plain=hp(x,jax.random.normal(key,(16,)))\nhvp_remat=hr(x,jax.random.normal(key,(16,)))\n"),
}
COPIES = {
    "copy_ones": "direction=jnp.ones(16)\n_,hvp_plain=jax.jvp(jax.grad(plain),(x,),(direction,))\nhvp_remat=hvp_plain\n",
    # read-outs of each Hessian that are no HVP: each follows its own factor in the replay, and the pair agrees along
    # the huge tangent it reveals within that tangent's rounding (a first version credited both)
    "diagonal": "direction=jnp.linspace(-1.,1.,len(x))\nhvp_plain=jnp.diag(jax.hessian(plain)(x))\nhvp_remat=jnp.diag(jax.hessian(remat)(x))\n",
    "row_sums": ("direction=jnp.linspace(-1.,1.,len(x))\nhvp_plain=jax.hessian(plain)(x).sum(axis=1)*direction\n"
                 "hvp_remat=jax.hessian(remat)(x).sum(axis=1)*direction\n"),
    "plain_twice": ("direction=jnp.linspace(0.,1.,len(x))\n_,hvp_plain=jax.jvp(jax.grad(plain),(x,),(direction,))\n"
                    "_,hvp_remat=jax.jvp(jax.grad(plain),(x,),(direction,))\n"),
}
TYPED = ROOT / "tests" / "assignments" / "performance-05" / "corpus" / "hardcoded_hvp.py"   # one vector, twice


@pytest.mark.parametrize("requested", [7, 4242])
def test_a_tangent_made_inside_jit(tmp_path, requested):
    assert SOLUTION.count(GIVEN) == 1
    folder = tmp_path / "submissions"
    folder.mkdir()
    for name, lines in HONEST.items():
        (folder / f"{name}.py").write_text(SOLUTION.replace(GIVEN, lines))
    for name, lines in COPIES.items():
        (folder / f"{name}.py").write_text(SOLUTION.replace(GIVEN, lines))
    (folder / "typed.py").write_text(TYPED.read_text())
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
    for name in HONEST:
        record = json.loads((tmp_path / "out" / f"{name}.json").read_text())
        plain = next(c for c in record["checks"] if c["id"] == "hvp.plain_matches_oracle")
        assert record["groups"]["hvp"]["score"] == 20 and "review_hold" not in record, (name, plain["feedback"])
    for name in COPIES:   # never credited: refused where the world separates along the tangent, else held
        record = json.loads((tmp_path / "out" / f"{name}.json").read_text())
        remat = next(c for c in record["checks"] if c["id"] == "hvp.remat_matches_plain")
        assert remat["score"] == 0, (name, remat)
        if name in ("copy_ones", "plain_twice"):
            assert ("is the Hessian-vector product of the ordinary objective" in remat["feedback"]
                    or "did not change as its own objective's did" in remat["feedback"]), (name, remat)
    record = json.loads((tmp_path / "out" / "typed.json").read_text())
    checks = [c for c in record["checks"] if c["id"] in ("hvp.plain_matches_oracle", "hvp.remat_matches_plain")]
    assert all(c["score"] == 0 for c in checks), checks   # never credited
    if "review_hold" not in record:   # a world that separates along the tangent the typed pair reveals
        assert all("does not match second-order autodiff" in c["feedback"] for c in checks), checks
        return
    for check in checks:
        assert check["feedback"].startswith("Held for your instructor's review"), check
        assert ("too small to tell second-order autodiff from a copy" in check["feedback"]   # the world's changes
                or "did not change with it" in check["feedback"]), check["feedback"]            # the replay
        assert "any direction your code made" not in check["feedback"]   # no failure named: none was shown
    hold = record["review_hold"]
    assert set(hold["checks"]) == {"hvp.plain_matches_oracle", "hvp.remat_matches_plain"}, hold
    assert "no run's values could decide" in hold["why"], hold
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as stream:
        row = next(r for r in csv.DictReader(stream) if r["submission"] == "typed")
    assert set(row["held"].split()) == set(hold["checks"]), row   # the hold has its column
