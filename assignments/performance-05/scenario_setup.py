"""Scenario set-up for performance-05. Runs INSIDE the sandbox, before the student's file.

The framework ships this file's source into the child and calls the functions a scenario lists in
assignment.toml with the scenario's parameters. Nothing here is trusted by the grader afterwards: it only
changes the world the student's code sees. Every replacement accepts exactly the call forms the real API
accepts (it changes one argument's value and calls the real function), and if its own change ever failed it
would answer as the real API does: the grader's code can make the variant less different, never make a
student's call fail. (A failure reported from inside the run could be forged by the student, so the grader
never excuses anything on such a report; it cannot happen instead.)

`variant_memory` is pure and imported by the oracle in the grader too: the figures a run's compiler reports
and the figures the checks expect come from this one definition.
"""

import random

# Every field of jaxlib's CompiledMemoryStats that holds a byte count, in a fixed order (each gets its own band
# of values, so no two fields of a varied analysis can be equal).
BYTE_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes",
               "generated_code_size_in_bytes", "peak_memory_in_bytes", "host_argument_size_in_bytes",
               "host_output_size_in_bytes", "host_temp_size_in_bytes", "host_alias_size_in_bytes",
               "host_generated_code_size_in_bytes")
BAND = 1 << 16


def variant_memory(real, seed, index):
    """What the variant's compiler reports for the `index`-th executable analysed: None (no analysis) for one of
    each pair, chosen by the seed, else the real figures moved by amounts nobody can know before the run.

    Only the position within a pair counts (index % 2), so the lesson's script, which builds and analyses the
    [plain, remat] pair twice, gets the same answers both times."""
    position = index % 2
    if position == random.Random("availability:%d" % seed).randrange(2):
        return None
    base = 16 * random.Random("base:%d:%d" % (seed, position)).randrange(1 << 12, 1 << 20)
    varied = {}
    for name, value in real.items():
        rank = BYTE_FIELDS.index(name) if name in BYTE_FIELDS else len(BYTE_FIELDS) + sorted(real).index(name)
        jitter = 16 * random.Random("jitter:%d:%d:%s" % (seed, position, name)).randrange(BAND // 64)
        varied[name] = int(value) + base + rank * BAND + jitter
    return varied


def replace_lesson_seed(lesson_seed, seed, **_):
    """Make every usual way of seeding NumPy with the lesson's seed draw from a fresh one instead.

    Covers `np.random.default_rng(18)` (positional or `seed=`, an int, a NumPy integer, `[18]` or a
    `SeedSequence(18)`) and `np.random.PCG64(...)` with any of those (so `Generator(PCG64(seed=18))` too):
    honest variants of the given line follow the variant, and copied numbers do not."""
    import functools

    import numpy as np

    def is_lesson_seed(requested):
        if isinstance(requested, np.random.SeedSequence):
            requested = requested.entropy
        if isinstance(requested, (list, tuple)) and len(requested) == 1:
            requested = requested[0]
        if isinstance(requested, np.ndarray) and requested.size == 1 and requested.dtype.kind in "iu":
            requested = requested.reshape(()).item()
        return isinstance(requested, (int, np.integer)) and not isinstance(requested, bool) and int(requested) == lesson_seed

    def swapped(args, kwargs):
        """The same call with the lesson's seed (first positional, or `seed=`) replaced by the fresh one, or None."""
        try:
            if args and is_lesson_seed(args[0]):
                return (seed,) + tuple(args[1:]), kwargs
            if not args and is_lesson_seed(kwargs.get("seed")):
                return args, {**kwargs, "seed": seed}
        except Exception:
            pass
        return None

    original_default_rng = np.random.default_rng

    @functools.wraps(original_default_rng)
    def default_rng(*args, **kwargs):
        changed = swapped(args, kwargs)
        if changed is not None:
            try:
                return original_default_rng(*changed[0], **changed[1])
            except Exception:
                pass
        return original_default_rng(*args, **kwargs)

    np.random.default_rng = default_rng

    original_pcg64 = np.random.PCG64

    class PCG64(original_pcg64):
        def __init__(self, *args, **kwargs):
            changed = swapped(args, kwargs)
            if changed is not None:
                try:
                    super().__init__(*changed[0], **changed[1])
                    return
                except Exception:
                    pass
            super().__init__(*args, **kwargs)

    PCG64.__name__ = PCG64.__qualname__ = "PCG64"
    PCG64.__module__ = original_pcg64.__module__
    PCG64.__doc__ = original_pcg64.__doc__
    np.random.PCG64 = PCG64


def vary_memory_analysis(seed, **_):
    """Behave like a backend whose memory analysis is partial and unfamiliar: `Compiled.memory_analysis()`
    returns None for one executable of each pair and, for the other, figures unlike the real ones (every field
    different, none equal to another), from `variant_memory`. Executables are numbered in the order their
    analysis is first asked for; asking again gives the same answer."""
    import jax.stages

    original = jax.stages.Compiled.memory_analysis
    analysed = []      # executables in order of first request, kept alive so identity stays meaningful
    answers = []

    def memory_analysis(self, *args, **kwargs):
        real = original(self, *args, **kwargs)
        try:
            return varied(self, real)
        except Exception:
            return real

    def varied(self, real):
        for index, known in enumerate(analysed):
            if known is self:
                return answers[index]
        index = len(analysed)
        analysed.append(self)
        figures = None
        if real is not None:
            counts = {name: getattr(real, name) for name in BYTE_FIELDS if isinstance(getattr(real, name, None), int)}
            figures = variant_memory(counts, seed, index)
        answer = None if figures is None else ReportedMemory(figures, getattr(real, "serialized_buffer_assignment_proto", b""))
        answers.append(answer)
        return answer

    memory_analysis.__name__ = "memory_analysis"
    memory_analysis.__qualname__ = "Compiled.memory_analysis"
    memory_analysis.__doc__ = original.__doc__
    jax.stages.Compiled.memory_analysis = memory_analysis


class ReportedMemory:
    """A memory analysis as the compiler returns one: the byte counts as attributes."""

    def __init__(self, figures, proto=b""):
        for name, value in figures.items():
            setattr(self, name, value)
        self.serialized_buffer_assignment_proto = proto

    def __repr__(self):
        fields = ", ".join("%s=%d" % (name, getattr(self, name)) for name in BYTE_FIELDS if hasattr(self, name))
        return "CompiledMemoryStats(%s)" % fields


ReportedMemory.__name__ = ReportedMemory.__qualname__ = "CompiledMemoryStats"


def hide_memory_analysis(**_):
    """Behave like a backend without memory analysis: `Compiled.memory_analysis()` returns None."""
    import jax.stages

    jax.stages.Compiled.memory_analysis = lambda self: None
