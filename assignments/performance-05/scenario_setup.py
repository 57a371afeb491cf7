"""Scenario set-up for performance-05. Runs INSIDE the sandbox, before the student's file.

The framework ships this file's source into the child and calls the functions a scenario lists in
assignment.toml with the scenario's parameters. Nothing here is trusted by the grader afterwards:
it only changes the world the student's code sees.
"""


def replace_lesson_seed(lesson_seed, seed, **_):
    """Make `np.random.default_rng(<lesson seed>)` draw from a fresh seed, so copied numbers stop matching."""
    import numpy as np

    original = np.random.default_rng

    def default_rng(*args, **kwargs):
        requested = args[0] if args else kwargs.get("seed")
        if isinstance(requested, (int, np.integer)) and not isinstance(requested, bool) and int(requested) == lesson_seed:
            return original(seed)
        return original(*args, **kwargs)

    default_rng.__doc__ = original.__doc__
    np.random.default_rng = default_rng


def hide_memory_analysis(**_):
    """Behave like a backend without memory analysis: `Compiled.memory_analysis()` returns None."""
    import jax.stages

    jax.stages.Compiled.memory_analysis = lambda self: None
