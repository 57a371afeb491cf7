"""Whether a run's own uid can start this Python, for the tests that run student code under a uid of its own without
bubblewrap (the weak strategies, `unshare` and a bare process group, as root).

Such a run sees the machine's files with their own modes: a Python under a folder other users cannot enter (pyenv
under `/root`, mode 0700) cannot be started by it, and the grader refuses those strategies up front, in one sentence
(grader/sandbox/python_access.py). The tests that need them to run are skipped then, with that sentence; nowhere
else (not as another user than root, whose runs keep its uid, nor where the Python is readable by everyone).
"""

from __future__ import annotations

import os

import pytest

from grader.sandbox.python_access import cannot_start


def why_others_cannot_start_python() -> str | None:
    """The grader's sentence when runs switch to a uid of their own (root) and that uid cannot start this Python."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    return cannot_start()


WHY = why_others_cannot_start_python()
needs_python_others_can_start = pytest.mark.skipif(
    WHY is not None, reason=f"needs a Python a run's own uid can start, without bubblewrap; here {WHY}")
