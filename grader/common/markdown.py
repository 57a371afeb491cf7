"""Markdown that carries text from a student's run without letting it act as Markdown."""

from __future__ import annotations

import re

BLOCK_START = re.compile(r"^(\s*)([#>|=*+\-]|\d+[.)]|`{3,}|~{3,})")


def md_line(text: str) -> str:
    """One line of text that came (at least in part) from a run, made inert: it cannot open a heading, quote, list,
    table, fence or HTML block, whatever it starts with. Inline code and emphasis of our own wording stay."""
    text = text.replace("<", "&lt;").replace(">", "&gt;")
    return BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def md_block(text: str, indent: str = "  ") -> str:
    """Several such lines as one list item's continuation."""
    return ("\n" + indent).join(md_line(line) for line in str(text).split("\n"))


def fence(text: str, info: str = "text") -> list[str]:
    """A fenced block longer than any run of backticks inside it, so the text cannot close it early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marker = "`" * max(3, longest + 1)
    return [marker + info, text, marker]
