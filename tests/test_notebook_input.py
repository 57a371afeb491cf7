"""Notebook cells become the Python Jupyter runs (IPython's own input transformer), numbered as Jupyter numbers them.

The table gives cells as a student writes them; each is checked against IPython itself: the same notebook runs in a
real Jupyter kernel (nbclient), and the names it leaves must equal those our conversion leaves when run as plain
Python, with the kernel's `In [N]` equal to ours for every cell.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from grader.intake.ipython_cells import cell_python
from grader.intake.notebook import notebook_cells, where

# cell source -> (the Python it becomes, [(cell line, what did not run)])
CELLS = {
    'loss = 2.5\nprint("loss %.3f"\n      % loss)\n':
        ('loss = 2.5\nprint("loss %.3f"\n      % loss)\n', []),                  # a continuation, not a magic
    "a = 7 \\\n  % 3\n": ("a = 7 \\\n  % 3\n", []),
    "%time t = 1 + 1\nu = t * 3\n": ("t = 1 + 1\nu = t * 3\n", []),
    "v = %time 2 ** 5\n": ("v = (2 ** 5)\n", []),
    "%timeit -n 1 -r 1 w = 4\n": ("pass\n", [(1, "%timeit -n 1 -r 1 w = 4")]),   # IPython times it in a function
    "%%time\nq = 10\nr = %time q + 1\n": ("pass\nq = 10\nr = (q + 1)\n", []),
    "%%timeit -n 1 -r 1 s0 = 5\ns1 = s0 + 1\n": ("pass\n", [(1, "%%timeit -n 1 -r 1 s0 = 5")]),
    "%%time x0 = 1\nx1 = 2\n": ("pass\n", [(1, "%%time x0 = 1")]),               # IPython refuses a statement there
    "%%capture\ncap = 'ran'\n": ("pass\ncap = 'ran'\n", []),
    "%matplotlib inline\nm = 1\n": ("pass\nm = 1\n", [(1, "%matplotlib inline")]),
    "!echo hi\nlisting = !echo hi\n": ("pass\nlisting = None\n", [(1, "!echo hi"), (2, "!echo hi")]),
    "len?\nlen??\nh = 2\n": ("pass\npass\nh = 2\n", [(1, "len?"), (2, "len??")]),
    "%config Completer.use_jedi = \\\n    False\nafter = 3\n": ("pass\n\nafter = 3\n",
                                                          [(1, "%config Completer.use_jedi =      False")]),
    "if True:\n    %time inside = 4\n": ("if True:\n    inside = 4\n", []),
    "\n\n%%capture\nlate = 1\n": ("\n\npass\nlate = 1\n", []),
    "%%bash\necho hi\n": ("pass\n", [(1, "%%bash")]),
    "%%writefile helper_mod.py\nVALUE = 11\n": ("open('helper_mod.py', 'w', encoding='utf-8').write('VALUE = 11\\n')\n", []),
}


@pytest.mark.parametrize("cell", list(CELLS), ids=range(len(CELLS)))
def test_cell_becomes_the_python_ipython_runs(cell):
    python = cell_python(cell)
    assert (python.source, python.not_run) == CELLS[cell]


def test_a_cell_python_cannot_parse_is_left_for_the_run_to_report_in_place():
    assert cell_python("x = (\n").source == "x = (\n"
    assert cell_python("").source == ""


def _notebook(sources: list[tuple[str, str]]) -> str:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(s) if kind == "markdown" else nbformat.v4.new_code_cell(s)
                      for kind, s in sources]
    return nbformat.writes(notebook)


NAMES = ["loss", "a", "t", "u", "v", "q", "r", "cap", "m", "h", "after", "inside", "late"]
ABSENT = ["w", "s0", "s1", "x0", "x1"]     # %timeit keeps nothing; `%%time x0 = 1` is refused


def test_the_kernel_and_the_grader_agree_on_values_and_cell_numbers(tmp_path, monkeypatch):
    """One notebook, run by a real IPython kernel and by our conversion as plain Python."""
    import nbclient

    sources = [("markdown", "# A notebook")]
    for cell in CELLS:
        if cell.startswith(("%%bash", "!echo", "%%time x0")):
            continue      # shell commands: the kernel runs them, a graded run does not (the note says so)
        sources += [("code", cell), ("markdown", "prose between cells"), ("code", "   \n")]
    sources.append(("code", f"import json\nprint(json.dumps({{n: globals().get(n, 'absent') for n in {NAMES + ABSENT!r}}}))"))
    text = _notebook(sources)
    monkeypatch.chdir(tmp_path)
    executed = nbformat.reads(text, as_version=4)
    nbclient.NotebookClient(executed, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                            ).execute()
    kernel_counts = [c.execution_count for c in executed.cells if c.cell_type == "code" and c.source.strip()]
    kernel_values = json.loads(executed.cells[-1].outputs[-1]["text"])

    cells, _ = notebook_cells(text)
    assert [cell.number for cell in cells] == kernel_counts == list(range(1, len(cells) + 1))
    namespace: dict = {}
    for cell in cells[:-1]:
        exec(compile(cell.source, f"<cell {cell.number}>", "exec"), namespace)
    assert {name: namespace.get(name, "absent") for name in NAMES + ABSENT} == kernel_values
    assert all(kernel_values[name] == "absent" for name in ABSENT)


def test_a_place_in_a_notebook_is_cited_as_jupyter_shows_the_cell():
    assert where(2, 8) == "In [8], line 2" and where(None, 8) == "In [8]" and where(12) == "line 12"


def test_a_notebook_of_nothing_but_magics_costs_a_bounded_amount(monkeypatch):
    """IPython re-tokenizes a whole cell after each transform (quadratic: 400 `%time` lines take it 12 s); here each
    top-level statement is transformed alone, and a notebook's budget stops a file made only of magics."""
    from IPython.core.inputtransformer2 import TransformerManager

    calls = []
    real = TransformerManager.do_one_token_transform
    monkeypatch.setattr(TransformerManager, "do_one_token_transform",
                        lambda self, lines: calls.append(sum(map(len, lines))) or real(self, lines))
    cell = "".join(f"%time x{i} = {i}\n" for i in range(400))
    python = cell_python(cell)
    assert python.source == "".join(f"x{i} = {i}\n" for i in range(400)) and python.not_run == []
    assert max(calls) < 80 and len(calls) == 800           # one statement at a time: a transform and a last look
    calls.clear()
    notebook = _notebook([("code", cell)] * 10)              # 4000 magic lines
    cells, notes = notebook_cells(notebook)
    assert len(calls) <= 2 * 2000 + 10                       # the budget: 2000 lines converted per notebook
    assert "too many in this notebook to convert" in notes[0] and "(In [6], line 1)" in notes[0]
    assert cells[4].source.startswith("x0 = 0\n") and cells[5].source.startswith("%time x0 = 0\n")


def test_plain_python_cells_skip_the_token_transforms_with_the_same_result(monkeypatch):
    """A cell with no IPython syntax is kept as it is (one scan, not IPython's tokenizer and an AST walk: a 1 MiB
    notebook cost its batch's parent 4 CPU-s in them). The result is what the full conversion gives, for every code
    cell of the corpus's notebooks and for cells that only look like IPython (`!=`, `%` formatting, `?` in strings)."""
    import re
    from pathlib import Path

    import grader.intake.ipython_cells as ipython_cells

    corpus = Path(__file__).parent / "assignments" / "performance-05" / "corpus"
    cells = [cell.source for path in sorted(corpus.glob("*.ipynb"))
             for cell in _cells_or_none(path.read_text(encoding="utf-8"), notebook_cells)]
    cells += ["if a != b:\n    s = '%d items' % n\nprint('why?')\n", "  x = 1\n  y = x % 2\n",
              ">>> z = 3\n", "d = {'a?': 1}\n", "x = 1 if y else 2  # really?\n"]
    fast = [cell_python(cell) for cell in cells]
    monkeypatch.setattr(ipython_cells, "IPYTHON_SYNTAX", re.compile(""))   # every cell through the full path
    assert fast == [cell_python(cell) for cell in cells]
    assert len(cells) > 50


def _cells_or_none(text, reader):
    try:
        return reader(text)[0]
    except Exception:   # a corpus notebook that is not readable on purpose
        return []
