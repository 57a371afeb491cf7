"""How the grader starts a Python process of its own code (outside any sandbox): clean of the folder it was started
in and of the instructor's credentials.

The instructor may start `grader grade .` from inside the submissions folder. A Python started there with `-m`
puts that folder first on `sys.path`, so a student's `argparse.py`, `json.py` or `grader/` would be imported as
the grader, outside the sandbox, as the instructor (root, on many course machines). And the instructor's shell
holds what a grade must never meet: `CANVAS_TOKEN` and the like. So a trusted process:

- starts with `-P` (Python prepends neither the working folder nor a script's folder) and in a working folder the
  grader owns, with `$PYTHONPATH` cut to the absolute folders it named (never the working folder, never an empty
  or relative entry, which Python reads as the working folder), and the folder this grader was imported from
  first, so the child imports the same grader as its parent;
- gets an environment of names it needs (`trusted_environment`): the locale, the paths Python and the sandbox
  tools are found by, the grader's and JAX's own settings; never a name that looks like a credential.

Every such start in `grader/` (and what each is given) is listed in docs/how-grading-works.md.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import grader

# Names a trusted process is given: what Python, the loader, the sandbox's tools and JAX are found and set up by.
KEPT_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP", "XDG_CACHE_HOME",
    "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONHOME", "PYTHONUSERBASE", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH",
    "SYSTEMROOT", "COMSPEC", "PATHEXT", "WINDIR",
})
KEPT_PREFIXES = ("LC_", "GRADER_", "JAX_", "XLA_", "TF_CPP_", "OMP_", "OPENBLAS_", "MKL_")
# ...but never one that names a secret, whatever its prefix (GRADER_CANVAS_TOKEN, JAX_API_KEY).
CREDENTIAL = re.compile(r"TOKEN|SECRET|PASS(WORD|WD|PHRASE)?($|_)|CREDENTIAL|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|AUTH|"
                        r"COOKIE|SESSION", re.IGNORECASE)


def looks_like_credential(name: str) -> bool:
    return bool(CREDENTIAL.search(name))


def trusted_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a trusted process: the kept names of this one, `$PYTHONPATH` as `import_path` makes it,
    and `extra`."""
    environment = {name: value for name, value in os.environ.items()
                   if (name in KEPT_NAMES or name.startswith(KEPT_PREFIXES)) and not looks_like_credential(name)}
    environment["PYTHONPATH"] = os.pathsep.join(import_path())
    environment.update(extra or {})
    return environment


def import_path() -> list[str]:
    """`$PYTHONPATH` for a trusted child: the folder this grader was imported from, then this process's absolute
    `$PYTHONPATH` folders; never an empty or relative entry, nor the working folder unless the grader lives there."""
    package_parent = str(Path(grader.__file__).resolve().parent.parent)
    here = os.path.realpath(os.getcwd())
    named = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if entry and os.path.isabs(entry) and os.path.realpath(entry) != here]
    return list(dict.fromkeys([package_parent, *named]))


def python_module(module: str, *arguments: str) -> list[str]:
    """`python -P -m module arguments`: this interpreter, with no working folder or script folder on sys.path."""
    return [sys.executable, "-P", "-m", module, *arguments]
