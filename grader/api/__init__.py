"""What check authors import: value coercions (`values`), method-evidence questions (`methods`) and comparisons that
record themselves for the instructor's `grader explain` (`comparisons`).

How to write a check, what `run` offers and how to credit a method by origin rather than presence:
docs/writing-checks.md.

`Missing` (a contract name absent or still a TODO; raise or catch it in a check) is re-exported here and from
`grader.api.values`, so a check imports only from `grader.api`. `Undecidable` (raise it where a run's values cannot
decide the check: it is held for the instructor instead of failed or passed) is defined in `grader.api.verdict`.
"""

from grader.api.verdict import Undecidable
from grader.runs.snapshot import Missing

__all__ = ["Missing", "Undecidable"]
