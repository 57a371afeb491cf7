"""`check()` in a notebook cell: grade the notebook as saved, in the sandbox, and show the feedback inline.

    from grader.student import check
    check()                  # every visible check
    check("directional")     # one group, faster

The notebook graded is, in order: the `path=` given; the one Jupyter names for this kernel
(`JPY_SESSION_NAME`, or VS Code's `__vsc_ipynb_file__`); `<submission name>.ipynb` in the working folder; the
only `.ipynb` there; else the most recently saved one. The output says which file was graded and when it was
saved: unsaved edits are not graded, as they would not be submitted. Feedback cites "In [N], line M", each code
cell numbered as Jupyter numbers it when the notebook runs from the top. The result comes back as a StudentCheck
for code to read; its repr is one line, so the cell shows the feedback table and not the whole record under it.
"""

from __future__ import annotations

import html
import os
import sys
import time
from pathlib import Path

from grader.model.verdicts import mark
from grader.sandbox.isolation import WeakIsolation
from grader.student.machine import prepare_runs
from grader.student.session import CheckError, StudentCheck, locate, run_check
from grader.student.terminal import report_text

MARK_STYLE = {"pass": "#1a7f37", "partial": "#9a6700", "fail": "#cf222e"}


def check(group: str | None = None, path: str | os.PathLike | None = None, assignment: str | None = None,
          show: bool = True) -> StudentCheck | None:
    """Grade the saved notebook (or `path`) and display the visible feedback; returns the result."""
    try:
        target, bundle = locate(assignment)
        if bundle is not None:   # the student's own notebook, in this kernel's Python (student/machine.py)
            prepare_runs()
        notebook = Path(path) if path is not None else find_notebook(Path.cwd(), target.submission_filename)
        result = run_check(notebook, target, bundle, group)
    except (CheckError, WeakIsolation) as error:
        _show(f"<p><b>check()</b>: {html.escape(str(error))}</p>", f"check(): {error}", show)
        return None
    saved = time.strftime("%H:%M:%S", time.localtime(notebook.stat().st_mtime))
    _show(report_html(result, saved), report_text(result), show)
    return result


def find_notebook(folder: Path, submission_filename: str) -> Path:
    named = _named_by_the_front_end()
    if named is not None:
        return named
    wanted = folder / (Path(submission_filename).stem + ".ipynb")
    if wanted.is_file():
        return wanted
    found = sorted((p for p in folder.glob("*.ipynb") if p.is_file()), key=lambda p: p.stat().st_mtime)
    if not found:
        raise CheckError(f"no notebook found in {folder}: save it there, or pass check(path='your.ipynb')")
    return found[-1]


def _named_by_the_front_end() -> Path | None:
    candidates = [os.environ.get("JPY_SESSION_NAME")]
    shell = _ipython()
    if shell is not None:
        candidates.append(shell.user_ns.get("__vsc_ipynb_file__"))
    for candidate in candidates:
        if candidate and str(candidate).endswith(".ipynb") and Path(candidate).is_file():
            return Path(candidate)
    return None


def _ipython():
    module = sys.modules.get("IPython")
    try:
        return module.get_ipython() if module else None
    except Exception:  # noqa: BLE001 - any trouble asking IPython means: not in IPython
        return None


def _show(markup: str, text: str, show: bool) -> None:
    if not show:
        return
    if _ipython() is not None:
        from IPython.display import HTML, display

        display(HTML(markup))
    else:
        print(text)


def report_html(result: StudentCheck, saved: str) -> str:
    scope = f", group <code>{html.escape(result.group)}</code>" if result.group else ""
    verdict = "all visible checks pass" if result.full_marks else "not all visible checks pass"
    parts = [(f"<div class='grader-check'><p><b>{html.escape(result.title)}</b>: checked "
             f"<code>{html.escape(result.file)}</code> as saved at {saved}{scope}. "
             f"<b>{result.score:g} / {result.max_score:g}</b> ({verdict}).</p>"),
             f"<p>{html.escape(result.ran_on)}</p>"]   # what a student asking for help names
    if result.version_note:
        parts.append(f"<p><b>Note:</b> {html.escape(result.version_note)}</p>")
    notes = "<ul>" + "".join(f"<li>{html.escape(m)}</li>" for m in result.messages) + "</ul>" if result.messages else ""
    if result.stopped_early:      # what stopped the notebook explains the failures below: read first
        parts.append(notes)
    parts.append("<table><thead><tr><th>check</th><th>score</th><th style='text-align:left'>feedback</th></tr></thead><tbody>")
    for check in result.checks:
        verdict_mark = mark(check["score"], check["max_score"])
        colour = MARK_STYLE.get(verdict_mark, "inherit")
        parts.append(f"<tr><td style='text-align:left'><span style='color:{colour}'>{verdict_mark.upper()}</span> "
                     f"{html.escape(check['id'])}</td><td>{check['score']:g}/{check['max_score']:g}</td>"
                     f"<td style='text-align:left;white-space:pre-wrap'>{html.escape(check['feedback'])}</td></tr>")
    parts.append("</tbody></table>")
    if not result.stopped_early:
        parts.append(notes)
    return "\n".join(parts) + "</div>"
