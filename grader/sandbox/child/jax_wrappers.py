"""JAX's public transformations wrapped for the recorder, INSIDE the sandbox (see recorder.py).

`wrap_jax` replaces `jax.grad`, `value_and_grad`, `jvp`, `vjp`, `linearize`, `jacfwd`, `jacrev`, `hessian`,
`checkpoint`/`remat`, `jit` and `vmap` (and their aliases in `jax.ad_checkpoint`) by thin wrappers that call the
real function through `recorder.call`, and returns the real ones, captured first, for the grader's probes.
"""

import functools
import types

FUNCTION_TRANSFORMS = ("grad", "value_and_grad", "jacfwd", "jacrev", "jacobian", "hessian", "vmap", "checkpoint",
                       "remat")
CALL_TRANSFORMS = ("jvp", "vjp", "linearize")


def wrap_jax(recorder):
    """Wrap JAX's public transformations; return the real ones (for the probes). Needs `import jax` to work."""
    import jax
    import jax.ad_checkpoint
    import jax.core

    recorder.tracer_type = jax.core.Tracer
    modules = [jax, jax.ad_checkpoint]
    real = {}
    for name in FUNCTION_TRANSFORMS + CALL_TRANSFORMS + ("jit",):
        original = getattr(jax, name, None) or getattr(jax.ad_checkpoint, name, None)
        if original is None:
            continue
        real[name] = original
    wrappers = {}
    for name, original in real.items():
        if name == "jit":
            wrappers[name] = jit_transform(recorder, original)
        elif name in CALL_TRANSFORMS:
            wrappers[name] = call_transform(recorder, name, original)
        else:
            kind = "checkpoint" if name == "remat" else name
            wrappers[name] = function_transform(recorder, kind, original)
    for module in modules:
        for attribute in list(vars(module)):
            value = vars(module)[attribute]
            for name, original in real.items():
                if value is original:
                    setattr(module, attribute, wrappers[name])
    return real


def function_transform(recorder, kind, original):
    """`grad`, `vmap`, `checkpoint`, ...: the transformed function is observed when called."""

    @functools.wraps(original)
    def transform(fun, *args, **kwargs):
        inner = original(fun, *args, **kwargs)
        if not callable(inner):
            return inner

        @functools.wraps(inner)
        def transformed(*call_args, **call_kwargs):
            return recorder.call(kind, inner, call_args, call_kwargs)

        return transformed

    return named_like(transform, original)


def call_transform(recorder, kind, original):
    """`jvp`, `vjp`, `linearize`: the call itself is observed, and a pullback or linearized function it returns."""

    @functools.wraps(original)
    def transform(fun, *args, **kwargs):
        tangents = ()
        if kind == "jvp":
            tangents = args[1] if len(args) > 1 else kwargs.get("tangents", ())
        features_box = []
        result = recorder.call(kind, lambda: original(fun, *args, **kwargs), (), {}, tangents=tangents,
                               scan=args, features_box=features_box)
        if kind == "vjp" and isinstance(result, tuple) and len(result) >= 2:
            return (result[0], linear_function(recorder, "vjp_pullback", result[1], features_box)) + tuple(result[2:])
        if kind == "linearize" and isinstance(result, tuple) and len(result) == 2:
            return (result[0], linear_function(recorder, "linearized", result[1], features_box))
        return result

    return named_like(transform, original)


def linear_function(recorder, kind, function, features_box):
    """A pullback or linearized function: calling it replays the differentiation done when it was made."""
    if not callable(function):
        return function

    def linear(*args, **kwargs):
        return recorder.call(kind, function, args, kwargs, tangents=args, replay=features_box)

    try:
        functools.update_wrapper(linear, function)
    except BaseException:
        pass
    return linear


def jit_transform(recorder, original):
    """`jit`: a JitProxy, observed when called (and as a decorator factory)."""

    @functools.wraps(original)
    def jit(fun=None, *args, **kwargs):
        if fun is None:   # jax.jit(static_argnums=...) used as a decorator factory
            return lambda f: jit(f, *args, **kwargs)
        return JitProxy(recorder, original(fun, *args, **kwargs))

    return named_like(jit, original)


def named_like(wrapper, original):
    """The wrapper's code named like the real function, so an error about its arguments names the real one."""
    try:
        name = original.__name__
        wrapper.__code__ = wrapper.__code__.replace(co_name=name, co_qualname=name)
    except (AttributeError, TypeError, ValueError):
        pass
    return wrapper


class JitProxy:
    """What the recorder's `jax.jit` returns: the real jitted function, observed when called.

    Attribute access (`.lower`, `.trace`, `.eval_shape`, `__wrapped__`, ...) goes to the real one; it binds as a
    method like the real one does."""

    def __init__(self, recorder, inner):
        self._grader_recorder = recorder
        self._grader_inner = inner
        self._grader_features = None
        try:
            functools.update_wrapper(self, inner, updated=())
        except BaseException:
            pass

    def __call__(self, *args, **kwargs):
        return self._grader_recorder.call("jit", self._grader_inner, args, kwargs, owner=self)

    def __getattr__(self, name):
        return getattr(self.__dict__["_grader_inner"], name)

    def __get__(self, instance, owner=None):
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self):
        return repr(self._grader_inner)
