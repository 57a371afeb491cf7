"""The soft time limit of a run, INSIDE the sandbox: the student's code is interrupted with SoftTimeLimit.

One overall budget, from the first statement of the student's code, then a short grace per statement once it is
spent, so the values computed so far are still streamed and later statements still get a chance to report; the
parent's hard kill is the backstop. The overall budget does not count time the run was kept waiting for a CPU by
other work (cpu_wait.py): when the alarm rings early by that measure, it is set again for the rest instead of
interrupting.

Catching the interrupt does not buy time: once raised, it is raised again every REFIRE_SECONDS for as long as the
student's code is still running in the interrupted statement (`except BaseException: pass`, a `finally` that loops,
a `__del__` that swallows it). Only once the statement has been left, and the harness's own code runs, does the
alarm stay quiet. A run that takes the alarm away altogether (its own SIGALRM or SIGINT handler) meets the hard limit.

The alarm: SIGALRM by `signal.setitimer` in the sandbox (Linux); in the portable strategy's runs, on every system,
a watcher thread that interrupts the main thread as a signal would (`_thread.interrupt_main` with SIGINT, whose
handler is the same), which Windows offers too. Either way the handler runs in the main thread, between two of its
bytecodes: the thread's alarm does not cut a blocking call short (a long `time.sleep`), where the parent's hard
limit ends the run.
"""

import _thread
import signal
import threading
import time

from cpu_wait import StretchedDeadline, own_usage
from encoding import SoftTimeLimit

REFIRE_SECONDS = 0.05


class SignalAlarm:
    """SIGALRM after `set(seconds)` (0: none), by the process's real-time interval timer (POSIX)."""

    def __init__(self, handler):
        signal.signal(signal.SIGALRM, handler)

    def set(self, seconds):
        signal.setitimer(signal.ITIMER_REAL, seconds)


class ThreadAlarm:
    """The same alarm on any system: a watcher thread interrupts the main thread with SIGINT's handler."""

    SIGNAL = signal.SIGINT

    def __init__(self, handler):
        signal.signal(self.SIGNAL, handler)
        self.due = None
        self.changed = threading.Condition()
        threading.Thread(target=self._watch, name="soft-time-limit", daemon=True).start()

    def set(self, seconds):
        with self.changed:
            self.due = time.monotonic() + seconds if seconds > 0 else None
            self.changed.notify()

    def _watch(self):
        with self.changed:
            while True:
                if self.due is None:
                    self.changed.wait()
                    continue
                left = self.due - time.monotonic()
                if left > 0:
                    self.changed.wait(left)
                    continue
                self.due = None
                _thread.interrupt_main(self.SIGNAL)


class Timer:
    """Soft time limit: an overall budget, then a short grace per statement once it is spent.

    `is_student_code(code)`: whether a code object is the student's (its frames are interrupted again while on the
    stack)."""

    def __init__(self, soft_seconds, grace_seconds, wait_allowance_seconds=0, is_student_code=lambda code: False,
                 thread_alarm=False):
        self.soft_seconds = soft_seconds
        self.wait_allowance_seconds = wait_allowance_seconds
        self.is_student_code = is_student_code
        self.budget = None       # started by the first arm() for the budget: the harness's own set-up is not counted
        self.grace = grace_seconds
        self.expired = False
        self.active = False
        self.raised = False      # interrupted once since the last arm(): raised again only inside student code
        self.on_budget = False   # armed for the overall budget (which may stretch), not for a fixed span
        self.alarm = (ThreadAlarm if thread_alarm else SignalAlarm)(self._fire)

    def _fire(self, signum, frame):
        if not self.active:  # a signal landing after disarm() began must not escape into harness code
            return
        if self.raised:
            if self._student_frames(frame):
                self.alarm.set(REFIRE_SECONDS)
                raise SoftTimeLimit()
            return           # the statement has been left: the harness is on its way to disarm()
        if self.on_budget and not self.expired:
            left = self.budget.remaining()
            if left > 0:       # the run was kept waiting for a CPU: the budget stretched by that much
                self.alarm.set(max(left, 0.01))
                return
        self.expired = True
        self.raised = True
        self.alarm.set(REFIRE_SECONDS)
        raise SoftTimeLimit()

    def _student_frames(self, frame):
        while frame is not None:
            if self.is_student_code(frame.f_code):
                return True
            frame = frame.f_back
        return False

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
        self.raised = False
        self.active = True
        self.alarm.set(max(budget, 0.01))

    def disarm(self):
        self.active = False
        self.raised = False
        self.alarm.set(0)
