"""Text from a run, or a file's name, stays inert in every Markdown the grader writes: rendered by two real
CommonMark renderers (markdown-it-py with GFM tables and strikethrough; mistune with tables, strikethrough,
footnotes and bare-URL autolinks), it forms no link, image, autolink, HTML, heading, list, table, quote or
emphasis, and every character it holds is still shown (nothing swallowed as markup).

Hostile strings are hand-written (one per construct) and generated (seeded random strings over the characters
Markdown gives meaning to)."""

from __future__ import annotations

import html
import random
import re
from html.parser import HTMLParser

import mistune
import pytest
from markdown_it import MarkdownIt

from grader.common.markdown import md_block, md_inline, md_line
from grader.lms.gradescope import results_json
from grader.outputs.writers import feedback_markdown

RENDERERS = {
    "markdown-it": MarkdownIt("commonmark").enable(["table", "strikethrough"]).render,
    "mistune": mistune.create_markdown(escape=False, plugins=["table", "strikethrough", "url", "footnotes"]),
}

HOSTILE = [
    "![pic](http://evil.example/p.png)", "[click](http://evil.example)", "[ref][1]\n\n[1]: http://evil.example",
    "<http://evil.example>", "http://evil.example/x", "www.evil.example", "mail me@evil.example", "<img src=x onerror=1>",
    "<script>alert(1)</script>", "&lt;b&gt; &#x3C;i&#x3E;", "x\n# 100 / 100", "x\r# heading", "x\r\n## heading",
    "> quote", "- item\n+ item\n* item", "1. one\n2) two", "| a | b |\n|---|---|\n| c | d |", "a | b\n:-- | --:",
    "```\nfence\n```", "~~~\nfence\n~~~", "`a\n# b`", "foo `bar\nbaz` [x](http://e) `q`", "__init__ *em* **strong** ~~s~~",
    "text\n===", "text\n---", "***", "[^1]\n\n[^1]: note", "\\`[x](http://e)\\`", "`` [x](http://e) ``",
    "```x``` ```", "\\<b>", "a  \nb", "tab\tseparated\n\tindented", "    indented code\n\n    more",
    "\x1b[31mred\x1b[0m", "nul\x00byte", "line\u2028separator", "[x](javascript:alert(1))", "<!-- comment -->",
    "<div>\n*block*\n</div>", "!", "`", "``", "a`", "\\", "x\\\n# y",
]
ALPHABET = "`*_[]()!<>&#:/.@\\|~-=+ \n\r\t1wh"


def generated(count: int = 1000, seed: int = 20) -> list[str]:
    rng = random.Random(seed)
    words = ["http://e.x", "www.e.x", "a@b.c", "<b>", "](", "![", "```", "\n# ", "\n- ", "\n1. ", "&amp;", "`x`"]
    return ["".join(rng.choice(words) if rng.random() < 0.2 else rng.choice(ALPHABET)
                    for _ in range(rng.randint(1, 40))) for _ in range(count)]


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.tags.append("!--")


def parse(rendered: str) -> Tags:
    tags = Tags()
    tags.feed(rendered)
    return tags


OWN_TAGS = {"ul", "li", "p", "strong", "code", "br", "pre", "h1", "h2", "table", "thead", "tbody", "tr", "th", "td"}


def inert_problems(rendered: str, headings: dict[str, int] | None = None, tables: int = 0) -> list[str]:
    """What in a rendered page the grader did not write itself: tags beyond its own, more headings or tables than
    it writes (`headings`: tag -> at most how many)."""
    tags = parse(rendered).tags
    problems = [f"<{tag}>" for tag in sorted(set(tags) - OWN_TAGS)]
    for tag, most in {"h1": 0, "h2": 0, **(headings or {})}.items():
        if tags.count(tag) > most:
            problems.append(f"{tags.count(tag)} <{tag}>")
    if tags.count("table") > tables:
        problems.append(f"{tags.count('table')} <table>")
    return problems


def shown(text: str) -> str:
    """The characters a reader sees, backticks (code span delimiters) and whitespace aside (a code span drops a
    space at each end, and the renderers join lines)."""
    return re.sub(r"\s+", "", html.unescape(text).replace("`", ""))


@pytest.mark.parametrize("renderer", sorted(RENDERERS))
def test_run_text_forms_no_markup_and_loses_no_character(renderer):
    render = RENDERERS[renderer]
    problems = []
    for text in HOSTILE + generated():
        for kind, made in (("block", "- **FAIL** `check.id`: " + md_block(text)), ("line", "Submission " + md_line(text))):
            parsed = parse(render(made))
            extra = [tag for tag in parsed.tags if tag not in ("ul", "li", "p", "strong", "code", "br")]
            if kind == "line":
                extra += [tag for tag in parsed.tags if tag in ("ul", "li", "strong", "br")]
            if extra or parsed.tags.count("li") > 1 or parsed.tags.count("strong") > 1:
                problems.append(f"{kind} {text!r} -> {made!r} made {parsed.tags}")
                continue
            expected = re.sub(r"\r\n|\r|\n", "\n" if kind == "block" else lambda m: repr(m.group())[1:-1], text)
            expected = re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]", lambda m: repr(m.group())[1:-1], expected)
            prefix = "FAIL check.id: " if kind == "block" else "Submission "
            if shown("".join(parsed.text)) != shown(prefix + expected):
                problems.append(f"{kind} {text!r} shows {shown(''.join(parsed.text))!r}")
    assert not problems, "\n".join(problems[:20])


def test_our_own_code_spans_stay_code():
    rendered = RENDERERS["markdown-it"](md_inline("`finite` = 0.5, but `eps` is `1e-3`; use (f(x+εv) − f(x−εv)) / 2ε."))
    assert rendered.count("<code>") == 3 and "<code>finite</code>" in rendered
    assert md_inline("`hvp_plain` is not `x_2`") == "`hvp_plain` is not `x_2`"   # nothing escaped inside code


def test_a_line_break_in_a_name_shows_as_an_escape_and_starts_nothing():
    assert md_line("alice\n# 100 / 100") == "alice\\\\n# 100 / 100"   # one line: the `#` starts nothing
    for render in RENDERERS.values():
        assert "<h1>" not in render(md_line("alice\n# 100 / 100")) and "\\n# 100 / 100" in render(md_line("alice\n# 100 / 100"))


HOSTILE_RECORD_TEXT = "![x](http://evil.example/i.png) [here](http://evil.example) <b>bold</b> www.evil.example\n# 100 / 100"


def hostile_record() -> dict:
    feedback = f"`finite` should be a single real number; found the string {HOSTILE_RECORD_TEXT!r}.\n{HOSTILE_RECORD_TEXT}"
    return {"submission": "mallory\n# 100 / 100 ![x](http://evil.example/i.png)", "file": "mal\nlory/[x](http://e).py",
            "assignment": "demo", "title": "Demo", "status": "graded", "score": 1.0, "max_score": 2.0,
            "groups": {"runs": {"score": 1.0, "max_score": 2.0}},
            "checks": [{"id": "runs.a", "group": "runs", "score": 0.0, "max_score": 1.0, "visibility": "visible",
                        "feedback": feedback},
                       {"id": "runs.b", "group": "runs", "score": 1.0, "max_score": 1.0, "visibility": "visible",
                        "feedback": "Passed."}],
            "messages": [f"In the baseline run, line 3 raised ValueError: {HOSTILE_RECORD_TEXT}"],
            "output": {"head": HOSTILE_RECORD_TEXT, "tail": "", "bytes": 10, "omitted_bytes": 0}}


@pytest.mark.parametrize("renderer", sorted(RENDERERS))
def test_feedback_file_and_gradescope_output_carry_run_text_inertly(renderer):
    render = RENDERERS[renderer]
    record = hostile_record()
    parsed = parse(render(feedback_markdown(record)))
    assert not {"a", "img", "b", "script", "h3"} & set(parsed.tags), parsed.tags
    assert parsed.tags.count("h1") == 1 and parsed.tags.count("h2") == 3     # ours: title, group, notes, output
    assert parsed.tags.count("table") == 1                                  # ours: the group scores
    assert "mallory\\n# 100 / 100" in "".join(parsed.text)
    for test in results_json(record)["tests"]:
        tags = parse(render(test["output"])).tags
        assert not {"a", "img", "b", "h1", "h2", "table"} & set(tags), (test["name"], tags)


def test_feedback_page_carries_run_text_as_text(tmp_path):
    """The HTML feedback page (Jinja, autoescaped) turns only our own backticks into <code>: no link or image of
    the run's forms, and a line break in a name stays text."""
    import types

    from grader.outputs.reports import feedback_page_name, write_reports

    record = hostile_record()
    assignment = types.SimpleNamespace(id="demo", title="Demo", max_score=2.0, groups={}, checks=[], scenarios={},
                                       figure_name=None)
    write_reports(tmp_path, [record], assignment, {}, {})
    page = (tmp_path / feedback_page_name(record["submission"])).read_text(encoding="utf-8")
    assert "could not be drawn" not in page
    assert 'href="http' not in page and 'src="http' not in page and "<b>bold" not in page
    assert "[here](http://evil.example)" in page and "&lt;b&gt;bold&lt;/b&gt;" in page
