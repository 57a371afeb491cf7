"""A sandboxed autograder for JAX course exercises: runs student files in isolated children and scores
them against an independent oracle, per check, with otter/Gradescope-compatible outputs."""

__version__ = "0.1.0"

from pathlib import Path as _Path

PACKAGE_DIR = _Path(__file__).resolve().parent      # the grader package (its files change grades: hashed, shipped)
