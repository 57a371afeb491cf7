"""Typed data that crosses stage boundaries: verdicts, limits, records."""
