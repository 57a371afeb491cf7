"""Probes for performance-05. Run INSIDE the sandbox on the student's own functions.

A probe is a function whose parameters are contract names. The harness calls it again whenever one of
those names changes, and streams its return value out as plain data, so a later crash or `os._exit`
does not lose it. The grader compares what comes back with its own float64 oracle.

`trusted` is the real JAX API, captured by the harness before the student's file ran: a student who
replaces `jax.grad` in their file changes what their own code computes, never what a probe computes.
`run_secret` is the run's secret tag (the grader keeps its own copy): a replay's probe draws from it changes no
file can predict.
"""


def grad_plain(plain, x, w):
    return trusted.grad(plain)(x)  # noqa: F821 -- injected by the harness


def grad_remat(remat, x, w):
    return trusted.grad(remat)(x)  # noqa: F821


def grad_whole(whole, x, w):
    return trusted.grad(whole)(x)  # noqa: F821


def whole_residuals(whole, x):
    """What differentiating the student's `whole` at `x` saves, as print_saved_residuals describes each value:
    a checkpoint of the whole objective saves only its inputs (constants, arguments) and recomputes the rest."""
    saved_residuals = getattr(trusted, "saved_residuals", None)  # noqa: F821
    if saved_residuals is None:   # this JAX does not have it where the harness looks: nothing to judge with
        return None
    return [source for _, source in saved_residuals(whole, x)]


def residual_reports(plain, remat, x, reports):
    """What print_saved_residuals prints for the student's own `plain` and `remat` at `x`, line by line, in this
    run: the residual checks compare `reports` with it. `reports` is a parameter only so that the probe runs again
    once the reports exist, with whatever `layer` the file's functions use by then."""
    saved_residuals = getattr(trusted, "saved_residuals", None)  # noqa: F821
    if saved_residuals is None:   # this JAX does not have it where the harness looks: nothing to compare with
        return None
    return [[f"{_short(aval)} {source}" for aval, source in saved_residuals(fn, x)] for fn in (plain, remat)]


def _hvp_scaled(plain, remat):
    """The replay `hvp_scaled`'s `plain` and `remat`: each the file's own function with the same value and a Hessian
    (1 + k) times its own, k secret per run (_replay_scales). The file's HVP statements run again with them
    (assignment.toml [replays.hvp_scaled]): second-order autodiff of a function, along any tangent, made anywhere
    (inside jit, a helper, a loop), is then (1 + k) times what the run gave; a copy of the other HVP follows the other
    factor, a first derivative or a difference of gradients sqrt(1 + k), a value computed without the function
    (typed in, NumPy) none. checks._replay_follows reads which."""
    k_plain, k_remat = _replay_scales(run_secret)  # noqa: F821 -- injected by the harness
    return _scaled(plain, k_plain), _scaled(remat, k_remat)


def _scaled(function, k):
    """y -> function(c + s (y - c)), c = y held constant, s = sqrt(1 + k): the same value (y - c is exactly 0), the
    gradient times s, the Hessian times 1 + k, in every way JAX differentiates it."""
    stop, factor = trusted.stop_gradient, (1.0 + k) ** 0.5  # noqa: F821

    def scaled(y, *rest, **named):
        held = stop(y)
        return function(held + factor * (y - held), *rest, **named)

    return scaled


def _replay_scales(secret):
    """(k_plain, k_remat) of the run whose secret tag is `secret` (in the run: `run_secret`; in the grader:
    the snapshot's copy), k_plain in [0.10, 0.20), k_remat in [0.25, 0.35): at least 0.05 apart."""
    import hashlib

    digest = hashlib.sha256(("hvp_scaled:" + str(secret)).encode()).digest()
    draw = [int.from_bytes(digest[i:i + 8], "big") / 2.0 ** 64 for i in (0, 8)]
    return 0.10 + 0.10 * draw[0], 0.25 + 0.10 * draw[1]


def _tanh_shifted(*originals):
    """The replay `cotangent_shifted`'s tanh functions (assignment.toml: numpy's, jax.numpy's, jax.nn's, jax.lax's and
    math's; None where the file never imported the module): each z -> tanh(z) + c0 + c1·z, c0 and c1 secret per run
    (_activation_shift). The statements `cotangent` depends on run again with them, so every activation the forward
    pass computes through tanh moves. A recurrence over those activations, x̄ = Wᵀ(h̄ ⊙ (1 − h²)) from 2·h₄, or over
    the pre-activations (sech² z), then gives what the grader predicts; autodiff of the objective and differences of
    its values follow the shifted function's slope, sech² z + c1, or never see the shift (tanh spelled otherwise)."""
    c0, c1 = _activation_shift(run_secret)  # noqa: F821 -- injected by the harness
    return tuple(None if original is None else _shifted(original, c0, c1) for original in originals)


def _shifted(function, c0, c1):
    def shifted(z, *args, **named):
        out = function(z, *args, **named)
        return out + c0 + c1 * (out * 0 + z)   # `out * 0 + z`: z as out's kind of value (a list, for NumPy's)

    return shifted


def _activation_shift(secret):
    """(c0, c1) of the run whose secret tag is `secret` (in the run: `run_secret`; in the grader: the snapshot's
    copy), each in [0.002, 0.004): a thousand times a float32 recurrence's rounding, far below what changes the
    network's regime."""
    import hashlib

    digest = hashlib.sha256(("cotangent_shifted:" + str(secret)).encode()).digest()
    draw = [int.from_bytes(digest[i:i + 8], "big") / 2.0 ** 64 for i in (0, 8)]
    return 0.002 + 0.002 * draw[0], 0.002 + 0.002 * draw[1]


def _short(aval):
    """The value's type as print_saved_residuals writes it (`f32[16]`); only the source positions are compared."""
    try:
        return aval.str_short(short_dtypes=True)
    except Exception:
        return str(aval)


MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes", "alias_size_in_bytes")


def _memory_all_available(memory):
    """`memory` as if every executable's analysis had been present: each None entry (a missing analysis) becomes a
    dict of the fields the file's other entries hold (the lesson's four where none does), with figures no world
    reports. Only the replay `all_available` calls it (harness.run_replay): the file's panel code then runs again on
    it, so the branch that draws the byte panel is judged in the run where one analysis was missing."""
    return _memory_with_missing(memory, ())


def _memory_plain_missing(memory):
    """`memory` as a compiler missing the ordinary executable's analysis would leave it (replay `plain_missing`)."""
    return _memory_with_missing(memory, (0,))


def _memory_remat_missing(memory):
    """`memory` as a compiler missing the rematerialized executable's analysis would leave it (`remat_missing`)."""
    return _memory_with_missing(memory, (1,))


def _memory_with_missing(memory, missing):
    """`memory` with the entries at the positions in `missing` None, and every other None entry a dict of the fields
    the file's other entries hold (the lesson's four where none does), with figures no world reports; the file's own
    entries stay as they are."""
    if not isinstance(memory, (list, tuple)):
        return memory
    fields = next((list(entry) for entry in memory if isinstance(entry, dict) and entry), list(MEMORY_FIELDS))
    return [None if position in missing else
            {name: 7340032 + 1048576 * position + 4096 * number for number, name in enumerate(fields)}
            if entry is None else entry for position, entry in enumerate(memory)]
