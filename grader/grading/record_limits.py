"""How much text one record may hold, and so every page made from it (feedback .md and .html, Gradescope JSON, the
class report): a documented length for each text that reaches it.

Why: the texts come from what a run sent. A check may quote a student's value whole (a 2-million-character repr), a
run may print until its limit, a statement may raise with a huge message. Without a cap one file's record and pages
grow to megabytes, and the class report with them. Each cut text ends with "… cut, N characters", so nobody takes a
cut text for the whole. With these limits a record stays under RECORD_BYTES (tests/test_record_limits.py measures it
with hostile runs).
"""

from __future__ import annotations

import json
from typing import Any

from grader.common.text import cut

FEEDBACK_CHARS = 4_000       # one check's feedback (an honest one is a few hundred)
MESSAGE_CHARS = 1_000        # one submission-level message
MESSAGES = 40                # messages a record keeps; one more says how many were left out
OUTPUT_CHARS = 16_000        # of a run's printed output, the head and the tail each
ERROR_CHARS = 4_000          # one traceback kept for the instructor (`check_errors`, `grader_error`)
FIGURE_BYTES = 64 * 1024     # one run's figure data as JSON (the lesson's is about 1 KiB); larger is not kept
RECORD_BYTES = 256 * 1024    # what a record (and each page of it) stays under, whatever its run sent


def bounded_feedback(text: str) -> str:
    return cut(text, FEEDBACK_CHARS)


def bounded_messages(messages: list[str]) -> list[str]:
    kept = [cut(message, MESSAGE_CHARS) for message in messages[:MESSAGES]]
    if len(messages) > MESSAGES:
        kept.append(f"… and {len(messages) - MESSAGES} more messages, cut.")
    return kept


def bounded_output(head: str, tail: str) -> tuple[str, str]:
    """The head's first and the tail's last OUTPUT_CHARS characters (what is dropped is counted by the caller)."""
    return head[:OUTPUT_CHARS], tail[-OUTPUT_CHARS:] if len(tail) > OUTPUT_CHARS else tail


def bounded_errors(errors: dict[str, str]) -> dict[str, str]:
    return {name: cut(text, ERROR_CHARS) for name, text in errors.items()}


def bounded_figure(figure: Any) -> Any:
    """A run's figure data as it is, or a sentence saying it was too large to keep (the report says it cannot draw it)."""
    size = len(json.dumps(figure, default=str))
    return figure if size <= FIGURE_BYTES else f"(not kept: {size} bytes of figure data, over {FIGURE_BYTES})"


def capped_texts(feedback: dict[str, str], messages: list[str], output_omitted: bool,
                 figures_not_kept: tuple[str, ...] = ()) -> list[str]:
    """What of a record is cut to these limits (from the texts before cutting), for the instructor: the summary
    names every such record."""
    parts = [f"feedback of {name}" for name, text in feedback.items() if len(text) > FEEDBACK_CHARS]
    if len(messages) > MESSAGES or any(len(m) > MESSAGE_CHARS for m in messages):
        parts.append("messages")
    if output_omitted:
        parts.append("printed output")
    parts += [f"figure data of the {name} run" for name in figures_not_kept]
    return parts
