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
from collections.abc import Callable
from typing import Any

from grader.common.text import cut
from grader.model.job import without_run_tags

FEEDBACK_CHARS = 4_000       # one check's feedback (an honest one is a few hundred)
MESSAGE_CHARS = 1_000        # one submission-level message
MESSAGES = 40                # messages a record keeps; one more says how many were left out
OUTPUT_CHARS = 16_000        # of a run's printed output, the head and the tail each
ERROR_CHARS = 4_000          # one traceback kept for the instructor (`check_errors`, `grader_error`)
FIGURE_BYTES = 64 * 1024     # one run's figure data as JSON (the lesson's is about 1 KiB); larger is not kept
RECORD_BYTES = 256 * 1024    # what a record (and each page of it) stays under, whatever its run sent


# Every text a student reads passes through bounded_feedback, bounded_messages or shown_output, which also take each
# run's tag folder out of the file names it shows (model/job.py: the tag proves nothing, and a student never sees it).

def bounded_feedback(text: str) -> str:
    return cut(without_run_tags(text), FEEDBACK_CHARS)


def bounded_messages(messages: list[str]) -> list[str]:
    kept = [cut(without_run_tags(message), MESSAGE_CHARS) for message in messages[:MESSAGES]]
    if len(messages) > MESSAGES:
        kept.append(f"… and {len(messages) - MESSAGES} more messages, cut.")
    return kept


def bounded_output(head: str, tail: str, omitted: bool) -> tuple[str, str]:
    """The first and the last OUTPUT_CHARS characters of what the run printed (`head` and `tail` as the sandbox kept
    them; `omitted`: it dropped a middle already). What is dropped is counted by the caller, before the tag folders
    are taken out of the texts (`shown_output`)."""
    if omitted:
        return head[:OUTPUT_CHARS], tail[-OUTPUT_CHARS:]
    whole = head + tail
    if len(whole) <= 2 * OUTPUT_CHARS:
        return whole[:OUTPUT_CHARS], whole[OUTPUT_CHARS:]
    return whole[:OUTPUT_CHARS], whole[-OUTPUT_CHARS:]


def shown_output(head: str, tail: str) -> tuple[str, str]:
    """The kept head and tail as a student reads them: without the run's tag folders."""
    return without_run_tags(head), without_run_tags(tail)


def fit(record: dict[str, Any], encoded_size: Callable[[dict[str, Any]], int]) -> None:
    """The last guard: where escaping made the texts above larger than RECORD_BYTES once written (`encoded_size`),
    cut every check's feedback, explanation and message shorter, halving until the record fits."""
    limit = FEEDBACK_CHARS
    while encoded_size(record) > RECORD_BYTES and limit > 50:
        limit //= 2
        for check in record.get("checks", []):
            check["feedback"] = cut(check["feedback"], limit)
        for worlds in (record.get("explanations") or {}).values():
            for entry in worlds.values() if isinstance(worlds, dict) else ():
                if isinstance(entry, dict):
                    entry.pop("values", None)
                    entry.pop("comparisons", None)
                    entry["feedback"] = cut(str(entry.get("feedback", "")), limit)
        record["messages"] = [cut(message, limit) for message in record.get("messages", [])]
        output = record.get("output")
        if output:
            output["head"], output["tail"] = output["head"][:limit], output["tail"][-limit:]
        record["capped"] = sorted(set(record.get("capped", [])) | {"every text, to fit the record's size"})


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
