"""The JAX releases the grader supports, stated once (pyproject.toml's bounds must equal these: a test holds
them together) and checked before anything runs: a JAX outside them is refused with one sentence, never graded.

Both ends are proven by scripts/jax-range in CI (the oldest on the oldest Python, the newest on the newest).
"""

from __future__ import annotations

from grader.common.environment import installed_version

OLDEST = (0, 9, 2)      # the lesson's recorded JAX
BELOW = (0, 13)         # the first minor release not yet proven
PIP_RANGE = ">=%s,<%s" % (".".join(map(str, OLDEST)), ".".join(map(str, BELOW)))


def release(text: str) -> tuple[int, ...]:
    """'0.12.0.1' -> (0, 12, 0, 1); stops at the first part that is not a number ('0.13.0rc1' -> (0, 13))."""
    parts = []
    for part in text.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def unsupported(student: bool = False) -> str | None:
    """None when the installed jax and jaxlib are in range; else one sentence saying what is wrong (for a student,
    with the command that fixes it)."""
    for package in ("jax", "jaxlib"):
        version = installed_version(package)
        if version is not None and OLDEST <= release(version) < BELOW:
            continue
        found = "is not installed" if version is None else f"is {version}"
        fix = f' Install a supported one: python -m pip install "jax{PIP_RANGE}" "jaxlib{PIP_RANGE}"' if student else ""
        return (f"{package} {found} in this Python; the grader supports JAX {PIP_RANGE} and grades nothing with "
                f"another.{fix}")
    return None
