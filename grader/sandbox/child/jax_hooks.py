"""JAX's `jit` and `checkpoint` as the recorder sees them, INSIDE the sandbox (see recorder.py).

`jax.jit` returns a JitProxy, whose concrete calls are evaluations; `jax.checkpoint` marks the tracing of its
function, inside which no callback is added (effects there would change what the checkpoint saves). Both pass
everything else through to the real functions.
"""

import functools
import types


class JitProxy:
    """What `jax.jit` returns while evidence is recorded: the real jitted function, whose concrete calls are
    evaluations. Attribute access (`.lower`, `.trace`, `.eval_shape`, ...) goes to the real one; it binds as a
    method like the real one does."""

    def __init__(self, recorder, inner, name):
        self._grader_recorder = recorder
        self._grader_inner = inner
        self._grader_name = name
        try:
            functools.update_wrapper(self, inner, updated=())
        except BaseException:
            pass

    def __call__(self, *args, **kwargs):
        return self._grader_recorder.call("jit", self._grader_name, self._grader_inner, args, kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["_grader_inner"], name)

    def __get__(self, instance, owner=None):
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self):
        return repr(self._grader_inner)


def named_like(wrapper, original):
    """The wrapper's code named like the real function, so an error about its arguments names the real one."""
    try:
        name = original.__name__
        wrapper.__code__ = wrapper.__code__.replace(co_name=name, co_qualname=name)
        wrapper.__doc__ = original.__doc__
    except (AttributeError, TypeError, ValueError):
        pass
    return wrapper


def jit_transform(recorder, original):
    def jit(fun=None, *args, **kwargs):
        if fun is None:   # jax.jit(static_argnums=...) used as a decorator factory
            return lambda f: jit(f, *args, **kwargs)
        name = "jit(%s)" % str(getattr(fun, "__qualname__", None) or getattr(fun, "__name__", "function"))[:120]
        return JitProxy(recorder, original(fun, *args, **kwargs), name)

    return named_like(jit, original)


def checkpoint_transform(recorder, original):
    """`jax.checkpoint`: while its function is traced no callback is added (effects inside a checkpointed function
    would change what it saves)."""

    def checkpoint(fun=None, *args, **kwargs):
        if fun is None:
            return lambda f: checkpoint(f, *args, **kwargs)

        def inside(*call_args, **call_kwargs):
            depth = recorder.checkpoint_depth
            depth.value = getattr(depth, "value", 0) + 1
            try:
                return fun(*call_args, **call_kwargs)
            finally:
                depth.value -= 1

        try:
            functools.update_wrapper(inside, fun)
        except BaseException:
            pass
        return original(inside, *args, **kwargs)

    return named_like(checkpoint, original)
