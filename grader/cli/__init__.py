"""The `grader` command and the batch it runs."""
