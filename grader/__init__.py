"""A sandboxed autograder for JAX course exercises: runs student files in isolated children and scores
them against an independent oracle, per check, with otter/Gradescope-compatible outputs."""

__version__ = "0.1.0"
