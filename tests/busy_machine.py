"""A machine made busy on purpose: for the tests that a run is not timed out by load that is not its own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

SPINNER_TOKEN = "busy-machine-spinner"   # in each spinner's command line


@contextlib.contextmanager
def busy_machine(per_cpu: int = 3):
    """`per_cpu` busy processes per CPU beside the run (each gives up after 2 minutes, should the test die first)."""
    spin = f"import time\nt = time.monotonic()\nwhile time.monotonic() - t < 120: pass  # {SPINNER_TOKEN}"
    # Each in a session of its own: the kernel's autogroup would otherwise weigh them together as one.
    spinners = [subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
                for _ in range(per_cpu * (os.cpu_count() or 1))]
    try:
        time.sleep(0.5)
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
