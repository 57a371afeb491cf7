"""The job sent into the sandbox: what the harness (grader/sandbox/child/harness.py) reads from its stdin as JSON.

One constructor, `new_job`, used by the grader (`runs.jobs.make_job`) and the sandbox tests alike."""

import base64
from collections.abc import Iterable, Sequence
from typing import Any, NotRequired, TypedDict

from grader.model.limits import Limits


class JobCell(TypedDict):
    number: int
    source: str


class Job(TypedDict):
    source: str
    filename: str
    contract: list[str]                    # the names the harness records
    setup_source: str                      # the scenario set-up module's source (trusted)
    setup_calls: list[list[Any]]           # [function name, parameters] pairs, called in order
    probes_source: str
    soft_seconds: float
    statement_grace_seconds: float
    cpu_wait_allowance_seconds: NotRequired[float]   # the soft limit is stretched by run-queue waits up to this
    value_max_bytes: int
    cells: NotRequired[list[JobCell] | None]   # a notebook's code cells, run one by one
    file_b64: NotRequired[str]             # the submitted file's bytes (for code that reads its own file)
    evidence: NotRequired[dict[str, int]]  # bounds of the method evidence ({} records none)
    notebook: NotRequired[bool]
    replays: NotRequired[list[dict[str, Any]]]   # {name, replace, probe, capture}: run at the end (harness.run_replay)
    code_tag: NotRequired[str]             # secret per run: the file's code is compiled under a name holding it
    # Added on the way in, by the sandbox (process.py, fork_server.py) or the compile-cache warm-up:
    compilation_cache_dir: NotRequired[str]
    seccomp: NotRequired[str | None]       # the syscall filter program, base64 (None: no filter available)
    own_rlimits: NotRequired[dict[str, int] | None]   # the portable strategy: rlimits the run sets on itself
    channel_fd: NotRequired[int]
    control_fd: NotRequired[int]


def new_job(source: str, filename: str, contract: Sequence[str], limits: Limits, *, setup_source: str = "",
            setup_calls: Iterable[tuple[str, dict[str, Any]]] = (), probes_source: str = "",
            cells: list[JobCell] | None = None, data: bytes = b"", evidence: dict[str, int] | None = None) -> Job:
    return {
        "source": source,
        "cells": cells,
        "file_b64": base64.b64encode(data).decode("ascii"),
        "evidence": evidence or {},
        "filename": filename,
        "contract": list(contract),
        "setup_source": setup_source,
        "setup_calls": [[name, params] for name, params in setup_calls],
        "probes_source": probes_source,
        "soft_seconds": limits.soft_seconds,
        "statement_grace_seconds": limits.statement_grace_seconds,
        "cpu_wait_allowance_seconds": limits.cpu_wait_allowance_seconds,
        "value_max_bytes": limits.value_max_bytes,
        "notebook": filename.lower().endswith(".ipynb"),
    }
