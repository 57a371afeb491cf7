"""Probes for performance-05. Run INSIDE the sandbox on the student's own functions.

A probe is a function whose parameters are contract names. The harness calls it again whenever one of
those names changes, and streams its return value out as plain data, so a later crash or `os._exit`
does not lose it. The grader compares what comes back with its own float64 oracle.
"""


def grad_plain(plain, x, w):
    import jax

    return jax.grad(plain)(x)


def grad_remat(remat, x, w):
    import jax

    return jax.grad(remat)(x)


def grad_whole(whole, x, w):
    import jax

    return jax.grad(whole)(x)
