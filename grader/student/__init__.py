"""Students check their own work before submitting: `grader check FILE` in a terminal, `check()` in a notebook."""


def check(*args, **kwargs):
    """Grade the saved notebook (or a file) and show the visible feedback here; see grader.student.notebook.check."""
    from grader.student.notebook import check as run

    return run(*args, **kwargs)
