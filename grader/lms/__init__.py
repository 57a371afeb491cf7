"""LMS formats and integrations: Gradescope results, otter's CSV, Canvas, the otter zip and runner."""
