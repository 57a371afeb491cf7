"""The job sent into the sandbox: what the harness (grader/sandbox/child/harness.py) reads from its stdin as JSON.

One constructor, `new_job`, used by the grader (`runs.jobs.make_job`) and the sandbox tests alike."""

import base64
import re
from collections.abc import Iterable, Sequence
from typing import Any, NotRequired, TypedDict

from grader.model.limits import Limits

# The folder JAX's residual printing puts before the file's name in a tagged run (sandbox/child/run_world.py
# tag_residual_sources). It shows that a report's positions were made in this run, not typed in; a file that reaches
# into the grader's closures can still read it (flagged for review), so it never proves a method alone. It is kept
# out of everything a student reads (`without_run_tags`), where it would only be noise.
RUN_TAG_FOLDER = re.compile(r"/run-[0-9a-f]{16}/")


# JAX settings a file may put in os.environ before it imports JAX, which `python file.py` then runs with: a run,
# whose JAX the grader imported first, applies each such variable (jax.config.update) as the file's first import of
# JAX runs (harness.apply_import_settings). The rest (XLA_FLAGS, platforms, caches: the grader's to set) are only
# explained (intake/preimport.py).
IMPORT_SETTINGS = ("JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION", "JAX_NUMPY_RANK_PROMOTION",
                   "JAX_NUMPY_DTYPE_PROMOTION", "JAX_DISABLE_JIT", "JAX_DEBUG_NANS", "JAX_DEBUG_INFS",
                   "JAX_DEFAULT_PRNG_IMPL", "JAX_TRACEBACK_FILTERING")


def without_run_tags(text: str) -> str:
    """`text` with every run's tag folder taken out of the file names it shows (`/run-<tag>/x.py` -> `x.py`)."""
    return RUN_TAG_FOLDER.sub("", text) if "/run-" in text else text


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
    replays: NotRequired[list[dict[str, Any]]]   # {name, replace (names), probe, capture, rerun, seconds?}: run at the end (run_replay)
    after_file_seconds: NotRequired[float]   # the replays' time, granted once the file's own code ended (sandbox/file_end.py)
    code_tag: NotRequired[str]             # secret per run: the file's code is compiled under a name holding it
    import_settings: NotRequired[list[str]]   # JAX_* variables applied as the file first imports JAX (IMPORT_SETTINGS)
    # Added on the way in, by the sandbox (process.py, fork_server.py) or the compile-cache warm-up:
    compilation_cache_dir: NotRequired[str]
    seccomp: NotRequired[str | None]       # the syscall filter program, base64 (None: no filter available)
    own_rlimits: NotRequired[dict[str, int] | None]   # the portable strategy: rlimits the run sets on itself
    stdio_channel: NotRequired[bool]       # the portable strategy: frames on stdout, the file's output on stderr
    soft_timer: NotRequired[str]           # "thread": the soft limit's alarm is a watcher thread (child/timer.py)
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
        "import_settings": list(IMPORT_SETTINGS),
    }
