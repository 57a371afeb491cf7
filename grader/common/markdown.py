"""Markdown that carries text from a student's run (or a file's name) without letting it act as Markdown.

Feedback mixes our own wording, where `backticked` names are meant as code, with text a run chose (error
messages, strings, file names). Whoever wrote it, the result must be inert: no heading, quote, list, table,
fence or HTML block can start, and no link, image, autolink, bare URL, raw HTML, entity, emphasis or footnote
can form inline. The text is split the way a CommonMark renderer splits it into code spans and the rest:

- a code span (a run of n backticks up to the next run of exactly n in the same paragraph) is inert whatever it
  holds; it is written back on one line with a fence longer than any backtick run inside it, so that where it
  ends is ours to say;
- everything else has each character that could start an inline construct escaped (a backslash, or an entity
  for `<`, `>` and `&`), the `:` of `scheme://`, the `.` of `www.` and the `@` of an address broken, and every
  line start that could open a block escaped.

Backslashes and entities show literally inside code spans, so only text outside them is escaped: our own code
spans read as written.
"""

from __future__ import annotations

import re

LINE_BREAK = re.compile(r"\r\n|\r|\n")     # CommonMark's line endings
BACKTICKS = re.compile(r"`+")
# Characters shown as escapes: C0 and C1 controls (tab aside), DEL, and the Unicode line and paragraph separators.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
INLINE = {"\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "~": "\\~", "[": "\\[", "]": "\\]", "|": "\\|",
          "<": "&lt;", ">": "&gt;", "&": "&amp;"}
INLINE_CHARS = re.compile("[" + re.escape("".join(INLINE)) + "]")
AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(:)(?=//)|(?<=[wW]{3})(\.)|(@)")
BLOCK_START = re.compile(r"^([ \t]*)(?:([#>+=:\-])|(\d{1,9})([.)]))?")


def _shown(char: re.Match) -> str:
    """A control character as the escape Python would print for it (a newline in a name reads `\\n`)."""
    return repr(char.group())[1:-1]


def _escape_text(text: str, at_line_start: bool) -> str:
    """Text outside code spans, inert inline and at every line start it holds."""
    text = INLINE_CHARS.sub(lambda m: INLINE[m.group()], text)
    text = AUTOLINK.sub(lambda m: "\\" + m.group(), text)
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if number or at_line_start:
            lines[number] = BLOCK_START.sub(_escape_block_start, line, count=1)
    return "\n".join(lines)


def _escape_block_start(match: re.Match) -> str:
    """Indentation as no-break spaces (never an indented code block) and a block marker escaped."""
    space, marker, digits, delimiter = match.groups()
    space = space.replace("\t", "    ").replace(" ", "\u00a0")
    if marker:
        return f"{space}\\{marker}"
    return f"{space}{digits}\\{delimiter}" if digits else space


def _code_span(content: str) -> str:
    """A code span holding `content` on one line, fenced longer than any backtick run inside it."""
    content = content.replace("\n", " ")
    fence = "`" * (max((len(run) for run in BACKTICKS.findall(content)), default=0) + 1)
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return f"{fence}{pad}{content}{pad}{fence}"


def _paragraph(text: str) -> str:
    """One paragraph (no blank line inside): code spans kept, the rest escaped."""
    out: list[str] = []
    position = 0
    runs = list(BACKTICKS.finditer(text))
    index = 0
    while index < len(runs):
        opener = runs[index]
        closer = next((i for i in range(index + 1, len(runs)) if len(runs[i].group()) == len(opener.group())), None)
        if closer is None:                     # no closing run: these backticks are literal text
            index += 1
            continue
        before = text[position:opener.start()]
        out.append(_escape_text(before, at_line_start=position == 0 or text[position - 1] == "\n"))
        out.append(_code_span(text[opener.end():runs[closer].start()]))
        position = runs[closer].end()
        index = closer + 1
    out.append(_escape_text(text[position:], at_line_start=position == 0 or text[position - 1] == "\n"))
    return "".join(out)


def md_inline(text: str) -> str:
    """Text of any number of lines made inert (see the module's docstring); blank lines stay paragraph breaks."""
    text = CONTROL.sub(_shown, LINE_BREAK.sub("\n", str(text)))
    paragraphs = re.split(r"(\n[ \t]*\n)", text)
    return "".join(part if index % 2 else _paragraph(part) for index, part in enumerate(paragraphs))


def md_line(text: str) -> str:
    """One line of text that came (at least in part) from a run or a file name, made inert; a line break in it is
    shown as `\\n`, so it cannot start a new line (a heading, say)."""
    return md_inline(CONTROL.sub(_shown, LINE_BREAK.sub(lambda m: repr(m.group())[1:-1], str(text))))


def md_block(text: str, indent: str = "  ") -> str:
    """Several such lines as one list item's continuation."""
    return ("\n" + indent).join(md_inline(text).split("\n"))


def fence(text: str, info: str = "text") -> list[str]:
    """A fenced block longer than any run of backticks inside it, so the text cannot close it early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marker = "`" * max(3, longest + 1)
    return [marker + info, text, marker]
