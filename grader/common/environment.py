"""Versions that can change a grade, read from package metadata (the grader process never imports JAX)."""

from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata

from grader import __version__


@lru_cache(maxsize=1)
def environment() -> dict[str, str]:
    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    return {"grader": __version__, "jax": version("jax"), "jaxlib": version("jaxlib"),
            "numpy": version("numpy"), "python": platform.python_version()}
