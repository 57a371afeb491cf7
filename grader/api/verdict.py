"""What a check raises when the values of a run cannot decide it: `Undecidable`.

Why: a check judges a method by a value the grader controls (a world's hidden change that only the method follows).
Where a world's change is too small along what the file chose (a tangent, a step), no value of that run tells an
honest method from a shortcut: failing would lower an honest grade for the grader's own shortcoming, passing would
credit what nothing showed. The check raises `Undecidable(sentence)` instead; the engine scores it 0 there and, when
no other run decides it (a real failure elsewhere still counts), holds it for the instructor's review with that
sentence as the evidence (grading/run_plan.py `held_by_checks`), as the other holds are shown and decided.
"""

from __future__ import annotations


class Undecidable(Exception):
    """This run's values cannot decide the check: `str(self)` says why, in words true for the student."""
