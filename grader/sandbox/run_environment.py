"""The environment every sandboxed run starts with (a student's run, the fork server, the sandbox's own probe).

Only what Python and JAX need: nothing of the grader's own environment (the instructor's credentials, their
PYTHONPATH, their JAX settings) reaches a run.
"""

from __future__ import annotations

import os
from pathlib import Path

from grader.common import system
from grader.sandbox.shared_python import loader_environment


def child_environment(workdir: Path) -> dict[str, str]:
    """Only what Python and JAX need: nothing of the grader's own environment leaks in (in a student's check, the
    dynamic loader's path too, which a module-loaded or conda Python may need to start: shared_python.py)."""
    environment = _common(workdir)
    if not system.POSIX:   # Windows: the system folder its Python needs to start, its names for home and temp
        environment.update({name: os.environ[name] for name in WINDOWS_SYSTEM if os.environ.get(name)})
        environment.update({"TEMP": str(workdir), "TMP": str(workdir), "USERPROFILE": str(workdir)})
    return {**environment, **loader_environment()}


WINDOWS_SYSTEM = ("SYSTEMROOT", "SYSTEMDRIVE", "WINDIR")


def _common(workdir: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "JAX_PLATFORMS": "cpu",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "MPLBACKEND": "Agg",
        "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
        # One thread for NumPy's BLAS too: runs share the machine's cores already, and the fork server must hold no
        # thread when it forks (OpenBLAS starts its pool when NumPy is imported).
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }
