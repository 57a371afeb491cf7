"""Scenario set-up for performance-05. Runs INSIDE the sandbox, before the student's file.

The framework ships this file's source into the child and calls the functions a scenario lists in
assignment.toml with the scenario's parameters. Nothing here is trusted by the grader afterwards:
it only changes the world the student's code sees.
"""


def replace_lesson_seed(lesson_seed, seed, **_):
    """Make every usual way of seeding NumPy with the lesson's seed draw from a fresh one instead.

    Covers `np.random.default_rng(18)` (positional or `seed=`), `default_rng(SeedSequence(18))` and
    `Generator(PCG64(18))`, so honest variants of the given line follow the variant and copied numbers do not.
    """
    import numpy as np

    def is_lesson_seed(requested):
        if isinstance(requested, np.random.SeedSequence):
            requested = requested.entropy
        return isinstance(requested, (int, np.integer)) and not isinstance(requested, bool) and int(requested) == lesson_seed

    original_default_rng = np.random.default_rng

    def default_rng(*args, **kwargs):
        requested = args[0] if args else kwargs.get("seed")
        if is_lesson_seed(requested):
            return original_default_rng(seed)
        return original_default_rng(*args, **kwargs)

    default_rng.__doc__ = original_default_rng.__doc__
    np.random.default_rng = default_rng

    class PCG64(np.random.PCG64):
        def __init__(self, seed_seq=None):
            super().__init__(seed if is_lesson_seed(seed_seq) else seed_seq)

    PCG64.__name__ = PCG64.__qualname__ = "PCG64"
    np.random.PCG64 = PCG64


def hide_memory_analysis(**_):
    """Behave like a backend without memory analysis: `Compiled.memory_analysis()` returns None."""
    import jax.stages

    jax.stages.Compiled.memory_analysis = lambda self: None
