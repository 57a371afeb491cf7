"""The soft time limit of a run, INSIDE the sandbox: the student's code is interrupted with SoftTimeLimit.

One overall budget, from the first statement of the student's code, then a short grace per statement once it is
spent, so the values computed so far are still streamed and later statements still get a chance to report; the
parent's hard kill is the backstop. The overall budget does not count time the run spent waiting for a CPU that
other work held (cpu_wait.py): when the alarm rings early by that measure, it is set again for the rest instead of
interrupting.
"""

import signal

from cpu_wait import StretchedDeadline, own_usage
from encoding import SoftTimeLimit


class Timer:
    """Soft time limit: an overall budget, then a short grace per statement once it is spent."""

    def __init__(self, soft_seconds, grace_seconds, wait_allowance_seconds=0):
        self.soft_seconds = soft_seconds
        self.wait_allowance_seconds = wait_allowance_seconds
        self.budget = None       # started by the first arm() for the budget: the harness's own set-up is not counted
        self.grace = grace_seconds
        self.expired = False
        self.active = False
        self.on_budget = False   # armed for the overall budget (which may stretch), not for a fixed span
        signal.signal(signal.SIGALRM, self._fire)

    def _fire(self, signum, frame):
        if not self.active:  # a signal landing after disarm() began must not escape into harness code
            return
        if self.on_budget and not self.expired:
            left = self.budget.remaining()
            if left > 0:       # the run was kept waiting for a CPU: the budget stretched by that much
                signal.setitimer(signal.ITIMER_REAL, max(left, 0.01))
                return
        self.active = False
        self.expired = True
        raise SoftTimeLimit()

    def arm(self, seconds=None):
        """Arm for the rest of the soft budget (or `seconds`); once it is spent, each call gets the grace."""
        self.on_budget = seconds is None and not self.expired
        if self.on_budget and self.budget is None:
            self.budget = StretchedDeadline(self.soft_seconds, self.wait_allowance_seconds, own_usage)
        budget = self.budget.remaining() if self.on_budget else seconds if seconds is not None else self.grace
        if budget <= 0:
            self.expired = True
            self.on_budget = False
            budget = self.grace
        self.active = True
        signal.setitimer(signal.ITIMER_REAL, max(budget, 0.01))

    def disarm(self):
        self.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
