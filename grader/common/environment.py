"""Versions that can change a grade, read from package metadata (the grader process never imports JAX)."""

from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata

from grader import __version__


def installed_version(package: str) -> str | None:
    """The installed distribution's version, or None when it is not installed."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def environment() -> dict[str, str]:
    def version(package: str) -> str:
        return installed_version(package) or "not installed"

    return {"grader": __version__, "jax": version("jax"), "jaxlib": version("jaxlib"),
            "numpy": version("numpy"), "python": platform.python_version()}
