"""Which function a `[[checks]] function` names: `builtin:<name>` (the framework's generic checks) or a function
of the lesson's checks.py.

The builtin checks live in grader.api.builtin_checks, above this stage; they are imported by name, as a lesson's
checks.py is, so config does not depend on the stage that check authors use."""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from typing import Any

BUILTIN_PREFIX = "builtin:"
BUILTIN_MODULE = "grader.api.builtin_checks"     # its BUILTIN_CHECKS: name -> check function


def builtin_names() -> list[str]:
    return sorted(importlib.import_module(BUILTIN_MODULE).BUILTIN_CHECKS)


def check_function(check_module: types.ModuleType, name: str) -> Callable[..., Any] | None:
    """The function `name` refers to, or None when there is none."""
    if name.startswith(BUILTIN_PREFIX):
        found = importlib.import_module(BUILTIN_MODULE).BUILTIN_CHECKS.get(name[len(BUILTIN_PREFIX):])
    else:
        found = getattr(check_module, name, None)
    return found if callable(found) else None
