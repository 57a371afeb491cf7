"""Grading: the check engine, one submission's record, the reference facts."""
