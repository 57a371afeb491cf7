"""A machine made busy on purpose: for the tests that a run is not timed out by load that is not its own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

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


@contextlib.contextmanager
def neighbour_on(cpu: int):
    """One busy process (an honest neighbour's runaway loop) held to CPU `cpu`; it gives up after 2 minutes."""
    spin = (f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nt = time.monotonic()\n"
            f"while time.monotonic() - t < 120: pass  # {SPINNER_TOKEN}")
    spinner = subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
    try:
        time.sleep(0.3)
        yield
    finally:
        spinner.kill()
        spinner.wait()


def machine_busy_now() -> tuple[float, int]:
    """The machine's busy CPU-seconds since boot (all CPUs, from /proc/stat, steal included) and its CPU count."""
    lines = Path("/proc/stat").read_text().splitlines()
    fields = lines[0].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return sum(int(fields[index]) for index in (1, 2, 3, 6, 7, 8)) / ticks, cpus
