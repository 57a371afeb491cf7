"""Per-run resource limits, read from an assignment's [limits] table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 30
    soft_seconds: float = 20
    statement_grace_seconds: float = 2
    cpu_wait_allowance_seconds: float = 60   # time waiting for a CPU others held, added to the limits up to this
    cpu_seconds: int = 60
    memory_bytes: int = 2 * 1024**3
    file_size_bytes: int = 64 * 1024**2
    max_processes: int = 256
    output_keep_bytes: int = 1024**2
    output_read_bytes: int = 512 * 1024**2   # past this the grader reads no more of a run's output (its next print
                                             # waits until its limits): a flood costs the grader at most this
    channel_max_bytes: int = 32 * 1024**2
    channel_max_objects: int = 250_000     # JSON objects, arrays, items and members, counted before parsing
    value_max_bytes: int = 1024**2
    scratch_bytes: int = 256 * 1024**2
    check_cpu_seconds: float = 10          # each call of a check in the grader's process (grading/check_budget.py)
    check_memory_bytes: int = 1024**3      # ...and the memory it may add

    def rlimits(self) -> dict[str, int]:
        """The kernel rlimits of every student process, by `prlimit` option name (RLIMIT_<NAME>); the one list that
        `prlimit`, the spawned pid and the fork server all apply. RLIMIT_DATA, not RLIMIT_AS, which breaks JAX."""
        return {"data": self.memory_bytes, "cpu": int(self.cpu_seconds), "fsize": self.file_size_bytes,
                "nproc": self.max_processes, "core": 0}

    @classmethod
    def from_config(cls, table: dict) -> Limits:
        known = {name: table[name] for name in cls.__dataclass_fields__ if name in table}
        return cls(**known)
