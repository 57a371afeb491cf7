"""Every JAX name the grader's code inside a run reaches for, found in one place, INSIDE the sandbox.

Why: JAX moves its internals between releases (0.12 took `ClosedJaxpr` out of `jax._src.core`; it lives on in
`jax.extend.core`), and a name the grader's scenario code cannot find must fail the set-up as the grader's fault,
never surface inside a student's statement. Each name is looked up in the public or `jax.extend` location first and
in the internal ones after; `KNOWN_VERSIONS` says which releases these locations were proven on (the CI matrix grades
the reference on the oldest and the newest). Scenario set-ups of any lesson and the framework's own child code
(lowering_context, recorder) import from here, by plain module name, as every child module does.
"""

import importlib

KNOWN_VERSIONS = ("0.9", "0.10", "0.11", "0.12")   # minor releases these locations were proven on

# name -> the places it has lived, public first: "module:attribute"
LOCATIONS = {
    "ClosedJaxpr": ("jax.extend.core:ClosedJaxpr", "jax._src.core:ClosedJaxpr"),
    "Jaxpr": ("jax.extend.core:Jaxpr", "jax._src.core:Jaxpr"),
    "Literal": ("jax.extend.core:Literal", "jax._src.core:Literal"),
    "Primitive": ("jax.extend.core:Primitive", "jax._src.core:Primitive"),
    "ShapedArray": ("jax.core:ShapedArray", "jax._src.core:ShapedArray"),
    "pp_eqn_rules": ("jax._src.core:pp_eqn_rules",),
    "remat_p": ("jax.extend.core.primitives:remat_p", "jax._src.ad_checkpoint:remat_p"),
    "tanh_p": ("jax.extend.core.primitives:tanh_p", "jax.lax:tanh_p"),
    "saved_residuals": ("jax._src.ad_checkpoint:saved_residuals",),
    "primitive_jvps": ("jax.interpreters.ad:primitive_jvps", "jax._src.interpreters.ad:primitive_jvps"),
    "Zero": ("jax.interpreters.ad:Zero", "jax._src.interpreters.ad:Zero"),
    "p2tz": ("jax._src.interpreters.ad:p2tz",),
    "instantiate_zeros": ("jax.interpreters.ad:instantiate_zeros", "jax._src.interpreters.ad:instantiate_zeros"),
    "primitive_batchers": ("jax.interpreters.batching:primitive_batchers",
                           "jax._src.interpreters.batching:primitive_batchers"),
    "register_lowering": ("jax.interpreters.mlir:register_lowering", "jax._src.interpreters.mlir:register_lowering"),
    "lower_fun": ("jax.interpreters.mlir:lower_fun", "jax._src.interpreters.mlir:lower_fun"),
    "lowerings": ("jax._src.interpreters.mlir:_lowerings",),
    "hlo": ("jax._src.lib.mlir.dialects:hlo",),
    "jet_rules": ("jax.experimental.jet:jet_rules",),
    "standard_unop": ("jax._src.lax.lax:standard_unop",),
    "float_dtypes": ("jax._src.lax.lax:_float",),
    "complex_dtypes": ("jax._src.lax.lax:_complex",),
    "AccuracyMode": ("jax.lax:AccuracyMode", "jax._src.lax.lax:AccuracyMode"),
    "const": ("jax._src.lax.lax:_const",),
    "one": ("jax._src.lax.lax:_one",),
    "exclude_from_source_info": ("jax.extend.source_info_util:register_exclusion",
                                 "jax._src.source_info_util:register_exclusion"),
    "exclude_from_tracebacks": ("jax._src.traceback_util:register_exclusion",),
    "mlir_module": ("jax._src.interpreters:mlir",),
}


class JaxInternalMissing(RuntimeError):
    """A name the grader needs is in none of the places it has lived: this JAX is outside what the grader knows."""


def jax_version():
    import jax

    return str(getattr(jax, "__version__", "unknown"))


def version_known(version=None):
    """Whether `version` (default: the JAX that runs) is a minor release listed in KNOWN_VERSIONS."""
    parts = (version or jax_version()).split(".")
    return ".".join(parts[:2]) in KNOWN_VERSIONS


def find(name):
    """The object `name` stands for in the JAX that runs, from the first of its LOCATIONS that has it."""
    tried = []
    for place in LOCATIONS[name]:
        module_name, attribute = place.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            tried.append(place)
            continue
        found = getattr(module, attribute, None)
        if found is not None:
            return found
        tried.append(place)
    raise JaxInternalMissing("JAX %s has no %s (looked in %s; the grader knows JAX %s)"
                             % (jax_version(), name, ", ".join(tried), ", ".join(KNOWN_VERSIONS)))


def names(*wanted):
    """Several names at once, in the order asked: `ClosedJaxpr, Jaxpr = names("ClosedJaxpr", "Jaxpr")`."""
    return tuple(find(name) for name in wanted)


# ---- the grader's own rules: their failures are the grader's, even where JAX hides their frames ----------------

MAX_NOTED = 64
_RAISED: dict = {}    # id(error) -> (error, filenames of the frames below the grader's rule when it left the rule)


def guarded(rule):
    """`rule` (a derivative rule, lowering or evaluation the grader installs in JAX) that notes every exception
    leaving it. JAX cuts the grader's frames (registered exclusions) from a traceback that crosses its API, so a
    fault of the grader's rule inside a student's `jax.grad` would otherwise look like the student's error."""
    import functools

    @functools.wraps(rule)
    def guarded_rule(*args, **kwargs):
        try:
            return rule(*args, **kwargs)
        except (MemoryError, RecursionError):   # the student's computation's size, wherever it ran out
            raise
        except Exception as error:
            _note(error)
            raise

    return guarded_rule


def _note(error):
    import sys
    import traceback

    try:
        below = [frame.filename for frame in traceback.extract_tb(sys.exc_info()[2])[1:]]
        if id(error) not in _RAISED:
            if len(_RAISED) >= MAX_NOTED:
                _RAISED.pop(next(iter(_RAISED)))
            _RAISED[id(error)] = (error, below)
    except Exception:
        pass


def raised_in_grader_rule(error, student_files):
    """Whether `error` (or one it was raised from) left a guarded rule with no student frame below the rule: the
    grader's own code failed, not a student function the rule called (a student's custom_jvp inside a checkpoint)."""
    seen = set()
    while error is not None and id(error) not in seen and len(seen) < 32:
        seen.add(id(error))
        entry = _RAISED.get(id(error))
        if entry is not None and entry[0] is error and not any(name in student_files for name in entry[1]):
            return True
        error = error.__cause__ or error.__context__
    return False
