"""The importable folders of the student's own Python, adopted by a run of a student's check.

A run starts Python with `-I`, which leaves out the user site, `PYTHONPATH` and `.pth` additions: right for the
instructor's batch (a run sees only the installation the grader chose), wrong for a student's check, whose JAX may
come from `pip install --user`, `PYTHONPATH` (a hosted runtime, a cluster's modules), conda or a notebook kernel.
There the parent writes its own `sys.path` as `import_paths.json` beside this file (grader/sandbox/shared_python.py),
and the run takes it, in the same order, before anything is imported. Without the file nothing changes.
"""

import json
import os
import sys

FILE = "import_paths.json"


def adopt(folder):
    """Make sys.path the parent's (with `folder`, the run's own modules, first) when the parent shared it."""
    try:
        with open(os.path.join(folder, FILE), encoding="utf-8") as stream:
            paths = json.load(stream)
    except (OSError, ValueError):
        return
    if isinstance(paths, list):
        sys.path[:] = [folder] + [path for path in paths if isinstance(path, str) and path != folder]
