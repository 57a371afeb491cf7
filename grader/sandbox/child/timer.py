"""The soft time limit of a run, INSIDE the sandbox: the student's code is interrupted with SoftTimeLimit.

One overall budget, then a short grace per statement once it is spent, so the values computed so far are still
streamed and later statements still get a chance to report; the parent's hard kill is the backstop.
"""

import signal
import time

from encoding import SoftTimeLimit


class Timer:
    """Soft time limit: an overall budget, then a short grace per statement once it is spent."""

    def __init__(self, soft_seconds, grace_seconds):
        self.deadline = time.monotonic() + soft_seconds
        self.grace = grace_seconds
        self.expired = False
        self.active = False
        signal.signal(signal.SIGALRM, self._fire)

    def _fire(self, signum, frame):
        if self.active:  # a signal landing after disarm() began must not escape into harness code
            self.active = False
            self.expired = True
            raise SoftTimeLimit()

    def arm(self, seconds=None):
        """Arm for the rest of the soft budget (or `seconds`); once it is spent, each call gets the grace."""
        budget = self.deadline - time.monotonic() if seconds is None else seconds
        if budget <= 0:
            self.expired = True
            budget = self.grace
        self.active = True
        signal.setitimer(signal.ITIMER_REAL, max(budget, 0.01))

    def disarm(self):
        self.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
