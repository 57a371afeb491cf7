"""How a student process is isolated: the strongest mechanism this machine offers, chosen once, named in every result.

Each strategy turns the harness command line into the sandboxed one. Resource limits are applied by
util-linux `prlimit` before anything runs (so they hold for every process the child forks, with no race);
where `prlimit` is missing, the sandbox sets them on the child's pid right after spawning it.

- `PidNamespace`: `unshare --pid --fork --kill-child`: the harness is pid 1 of a fresh pid namespace, so
  when it ends (or is killed) the kernel kills every process it left, even a `setsid` daemon.
- `ProcessGroup`: fallback where namespaces are refused (containers without the capability): the child
  gets its own session and the parent kills that process group; a `setsid` daemon can escape it.

Stronger isolation (mount/network namespaces, another uid) slots in as another strategy here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache

from .sandbox_limits import Limits


def limit_arguments(limits: Limits) -> list[str]:
    """`prlimit` options for the limits (RLIMIT_DATA, not RLIMIT_AS, which breaks JAX)."""
    return [f"--data={limits.memory_bytes}", f"--cpu={int(limits.cpu_seconds)}", f"--fsize={limits.file_size_bytes}",
            f"--nproc={limits.max_processes}", "--core=0"]


class Isolation:
    name = "process group"
    prlimit = shutil.which("prlimit")

    def prefix(self) -> list[str]:
        return []

    def command(self, argv: list[str], limits: Limits) -> list[str]:
        wrapped = self.prefix() + argv
        return [self.prlimit, *limit_arguments(limits), "--", *wrapped] if self.prlimit else wrapped

    @property
    def limits_need_pid(self) -> bool:
        """True when limits must be set on the spawned pid (no prlimit binary)."""
        return self.prlimit is None

    def describe(self) -> str:
        parts = [self.name, "rlimits", "private temp dir", "scrubbed environment"]
        if os.geteuid() == 0:
            parts.append("running as root, so the process-count limit is not enforced and files are not hidden")
        return ", ".join(parts)


class ProcessGroup(Isolation):
    name = "process group (no namespaces available)"


class PidNamespace(Isolation):
    name = "pid namespace"
    unshare = shutil.which("unshare")

    def prefix(self) -> list[str]:
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        return [self.unshare, *user, "--pid", "--fork", "--kill-child", "--"]

    def works(self) -> bool:
        if not self.unshare:
            return False
        try:
            done = subprocess.run([*self.prefix(), "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0


@lru_cache(maxsize=1)
def strongest_available() -> Isolation:
    namespace = PidNamespace()
    return namespace if namespace.works() else ProcessGroup()
