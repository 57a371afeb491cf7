"""grader.intake.discovery.discover and grader.intake.notebook.notebook_to_source on hand-built folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grader.intake.discovery import discover, load_single, safe_filename
from grader.intake.notebook import NotebookError, notebook_to_source

EXPECTED = "performance-05.py"
CODE = "x = 1\nprint(x)\n"


def by_id(folder: Path, max_bytes: int = 10_000, **kwargs):
    found = discover(folder, EXPECTED, max_bytes, **kwargs)
    ids = [s.id for s in found]
    assert len(ids) == len(set(ids)), ids
    return {s.id: s for s in found}


def notebook(*cells) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                       "cells": [{"cell_type": kind, "metadata": {}, "source": source} for kind, source in cells]})


# ---- single files -----------------------------------------------------------------------------------

def test_plain_python_file(tmp_path):
    (tmp_path / "alice.py").write_text(CODE)
    found = by_id(tmp_path)
    alice = found["alice"]
    assert alice.problem is None and alice.source == CODE and alice.relative == "alice.py"
    assert alice.path == tmp_path / "alice.py"
    import hashlib
    assert alice.sha256 == hashlib.sha256(CODE.encode()).hexdigest()


def test_utf8_bom_is_accepted(tmp_path):
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + CODE.encode())
    assert by_id(tmp_path)["bom"].source == CODE


def test_notebook_file(tmp_path):
    (tmp_path / "nb.ipynb").write_text(notebook(("markdown", "# Title\n%not code"), ("code", ["x = 1\n", "%time y = 2\n"]),
                                                ("code", "!pip install jax\nz = 3")))
    nb = by_id(tmp_path)["nb"]
    assert nb.problem is None
    assert "x = 1" in nb.source and "z = 3" in nb.source
    assert "# Title" not in nb.source
    assert [cell.source for cell in nb.cells] == ["x = 1\ny = 2\n", "pass\nz = 3\n"]   # %time runs its statement
    assert any("1 IPython-only line(s) did not run" in note and "`!pip install jax` (In [2], line 1)" in note
               for note in nb.notes)
    compile(nb.source, "nb.py", "exec")


@pytest.mark.parametrize("name, data, fragment", [
    ("empty.py", b"", "is empty"),
    ("blank.py", b"  \n\t\n   \n", "is empty"),
    ("binary.py", b"x = 1\n\x00\x01\x02", "binary"),
    ("latin.py", "s = 'café'\n".encode("latin-1"), "UTF-8"),
    ("notes.txt", b"x = 1\n", "not a .py or .ipynb"),
    ("broken.ipynb", b"{not json", "not a readable notebook"),
    ("prose.ipynb", notebook(("markdown", "just words")).encode(), "no code cells"),
    ("big.py", b"x = 1\n" * 200, "over the 1000-byte limit"),
])
def test_files_that_cannot_be_graded_get_a_problem(tmp_path, name, data, fragment):
    (tmp_path / name).write_bytes(data)
    found = discover(tmp_path, EXPECTED, 1000)
    assert len(found) == 1
    assert found[0].problem and fragment in found[0].problem, found[0].problem
    assert found[0].source == ""


def test_symlinks_are_refused(tmp_path):
    target = tmp_path.parent / f"{tmp_path.name}-target.py"
    target.write_text(CODE)
    (tmp_path / "linked.py").symlink_to(target)
    (tmp_path / "linkdir").symlink_to(tmp_path.parent)
    found = by_id(tmp_path)
    assert "symbolic link" in found["linked"].problem
    assert "symbolic link" in found["linkdir"].problem
    assert found["linked"].source == ""


def test_fifo_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    found = by_id(tmp_path)
    assert "not a regular file" in found["pipe"].problem


def test_unreadable_file_gets_a_problem(tmp_path, monkeypatch):
    (tmp_path / "locked.py").write_text(CODE)
    (tmp_path / "fine.py").write_text(CODE)
    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "locked.py":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)   # root can read anything, so simulate chmod 000
    found = by_id(tmp_path)
    assert "could not be read" in found["locked"].problem and "Permission denied" in found["locked"].problem
    assert found["fine"].problem is None


# ---- folders --------------------------------------------------------------------------------------------

def test_folder_with_one_file(tmp_path):
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "homework.py").write_text(CODE)
    bob = by_id(tmp_path)["bob"]
    assert bob.problem is None and bob.source == CODE
    assert bob.relative == "bob/homework.py"
    assert bob.notes == []       # one file is that file, whatever its name: as Gradescope and otter run read it


def test_folder_with_the_expected_file_among_others(tmp_path):
    folder = tmp_path / "carol"
    (folder / "scratch").mkdir(parents=True)
    (folder / EXPECTED).write_text(CODE)
    (folder / "helper.py").write_text("y = 2\n")
    (folder / "scratch" / "old.ipynb").write_text(notebook(("code", "z = 1")))
    carol = by_id(tmp_path)["carol"]
    assert carol.problem is None and carol.source == CODE
    assert carol.relative == f"carol/{EXPECTED}" and carol.path == folder / EXPECTED
    assert any("Several files" in note for note in carol.notes)


def test_folder_with_several_other_files_is_an_error(tmp_path):
    folder = tmp_path / "dave"
    folder.mkdir()
    (folder / "a.py").write_text(CODE)
    (folder / "b.ipynb").write_text(notebook(("code", "x = 1")))
    dave = by_id(tmp_path)["dave"]
    assert dave.problem and "several candidate files" in dave.problem and EXPECTED in dave.problem
    assert "a.py" in dave.problem and "b.ipynb" in dave.problem


def test_empty_folder_and_folder_without_code(tmp_path):
    (tmp_path / "erin").mkdir()
    (tmp_path / "frank").mkdir()
    (tmp_path / "frank" / "readme.txt").write_text("hello")
    found = by_id(tmp_path)
    assert "holds no .py or .ipynb" in found["erin"].problem
    assert "readme.txt is not a .py or .ipynb file" in found["frank"].problem   # its one file, read as a file


def test_checkpoints_and_hidden_files_inside_a_folder_are_ignored(tmp_path):
    folder = tmp_path / "gina"
    (folder / ".ipynb_checkpoints").mkdir(parents=True)
    (folder / "__pycache__").mkdir()
    (folder / "work.ipynb").write_text(notebook(("code", "x = 1")))
    (folder / ".ipynb_checkpoints" / "work-checkpoint.ipynb").write_text(notebook(("code", "x = 0")))
    (folder / "__pycache__" / "work.cpython-311.py").write_text("junk")
    (folder / ".hidden.py").write_text("secret = 1\n")
    gina = by_id(tmp_path)["gina"]
    assert gina.problem is None and "x = 1" in gina.source and gina.relative == "gina/work.ipynb"


def test_symlink_inside_a_folder_is_refused(tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-answers.py"
    outside.write_text("answers = 42\n")
    (tmp_path / "hank").mkdir()
    (tmp_path / "hank" / EXPECTED).symlink_to(outside)
    hank = by_id(tmp_path)["hank"]
    assert hank.problem and "symbolic link" in hank.problem and hank.source == ""


# ---- the folder as a whole -------------------------------------------------------------------------------

def test_dotfiles_and_system_entries_are_ignored_and_nothing_else_is(tmp_path):
    (tmp_path / ".hidden.py").write_text(CODE)
    (tmp_path / ".DS_Store").write_bytes(b"\0\0")
    (tmp_path / "__MACOSX").mkdir()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "Thumbs.db").write_bytes(b"\0")
    (tmp_path / "ok.py").write_text(CODE)
    (tmp_path / "notes.md").write_text("x")
    found = by_id(tmp_path)
    assert sorted(found) == ["notes.md", "ok"]
    assert found["notes.md"].problem


def test_duplicate_ids_are_made_unique(tmp_path):
    (tmp_path / "alice.py").write_text(CODE)
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / EXPECTED).write_text(CODE)
    (tmp_path / "alice.ipynb").write_text(notebook(("code", "x = 1")))
    found = by_id(tmp_path)
    assert set(found) == {"alice", "alice.py", "alice.ipynb"}          # the folder keeps the plain id
    assert found["alice"].from_folder
    assert all(any("map to the id alice" in note for note in s.notes) for s in found.values())
    # without the folder, the file is plain alice again; with it, the same names always give the same ids
    (tmp_path / "alice").rename(tmp_path / "zed")
    assert "alice" in by_id(tmp_path)


def test_made_unique_ids_do_not_collide_with_real_ones(tmp_path):
    """alice/, alice.py and alice-2.py: the renamed duplicate must not take alice-2's id (their outputs would clash)."""
    (tmp_path / "alice.py").write_text(CODE)
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / EXPECTED).write_text(CODE)
    (tmp_path / "alice-2.py").write_text(CODE)
    found = discover(tmp_path, EXPECTED, 10_000)
    ids = [s.id for s in found]
    assert len(found) == 3
    assert len(set(ids)) == 3, ids


def test_ids_are_filename_safe(tmp_path):
    names = ["bob smith.py", "weird;name|$(rm).py", "tab\there.py", "a b.py", "a_b.py", "über.py"]
    for name in names:
        (tmp_path / name).write_text(CODE)
    found = discover(tmp_path, EXPECTED, 10_000)
    ids = [s.id for s in found]
    assert len(found) == len(names) and len(set(ids)) == len(names)
    for submission in found:
        assert submission.id == safe_filename(submission.id)
        assert not set(submission.id) & set(" /\\;|$()\t\n"), submission.id
        assert submission.problem is None
    assert "über" in ids and "a_b" in ids                         # safe names are kept as they are
    assert any(i.startswith("bob_smith-") for i in ids)           # a changed name carries a hash of the real one


def test_safe_filename():
    assert safe_filename("a/b") == "a_b"
    assert safe_filename("..") == "submission"
    assert safe_filename(".hidden") == "hidden"
    assert safe_filename("") == "submission"
    assert safe_filename("ok-name_1.2@x+y") == "ok-name_1.2@x+y"


def test_results_are_sorted_and_missing_folder_raises(tmp_path):
    for name in ("zed.py", "amy.py", "mia.py"):
        (tmp_path / name).write_text(CODE)
    assert [s.id for s in discover(tmp_path, EXPECTED, 10_000)] == ["amy", "mia", "zed"]
    with pytest.raises(FileNotFoundError):
        discover(tmp_path / "nope", EXPECTED, 10_000)


def test_output_folder_inside_submissions_is_excluded(tmp_path):
    (tmp_path / "ok.py").write_text(CODE)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ok.json").write_text("{}")
    assert sorted(s.id for s in discover(tmp_path, EXPECTED, 10_000, exclude=tmp_path / "results")) == ["ok"]


def test_load_single(tmp_path):
    path = tmp_path / "performance-05.py"
    path.write_text(CODE)
    single = load_single(path, EXPECTED, 10_000)
    assert single.problem is None and single.source == CODE and single.id == "performance-05"
    path.write_text("")
    assert "is empty" in load_single(path, EXPECTED, 10_000).problem


# ---- notebooks ------------------------------------------------------------------------------------------

def test_notebook_cells_are_numbered_as_jupyter_numbers_them_and_magics_go_through_ipython():
    text = notebook(("markdown", "Intro"), ("code", "import numpy as np\n%matplotlib inline\n!ls\nx = 1"),
                    ("code", ""), ("raw", "raw text"), ("markdown", "More"),
                    ("code", ["y = 2\n", "z = x + y"]), ("code", "%%capture\nw = z * 2"))
    source, notes = notebook_to_source(text)
    assert "Intro" not in source and "raw text" not in source
    assert source.index("# In [1]") < source.index("import numpy") < source.index("# In [2]") < source.index("y = 2")
    assert "# In [3]" in source and "# In [4]" not in source      # markdown, raw and empty cells get no number
    assert "%matplotlib" not in source and "!ls" not in source
    assert notes == ["2 IPython-only line(s) did not run when graded (shell commands, help lines and most magics have "
                     "no effect there): `%matplotlib inline` (In [1], line 2), `!ls` (In [1], line 3)."]
    namespace: dict = {}
    exec(compile(source.replace("import numpy as np", ""), "nb", "exec"), namespace)
    assert namespace["z"] == 3 and namespace["w"] == 6            # %%capture runs its body, as in Jupyter


def test_notebook_without_magics_has_no_notes():
    source, notes = notebook_to_source(notebook(("code", "a = 1")))
    assert notes == [] and "a = 1" in source


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", json.dumps({"cells": "nope"}), json.dumps({"nbformat": 4}),
                                  json.dumps({"cells": [{"cell_type": "code", "source": 5}]}), "[" * 100000])
def test_invalid_notebooks_raise(text):
    with pytest.raises(NotebookError):
        notebook_to_source(text)


# ---- exercise regions, read once at intake ---------------------------------------------------------------

def test_exercise_regions_are_read_once_at_intake(tmp_path):
    """A submission carries its exercise regions from intake: where each lies (per notebook cell) and which still
    hold `...`, cited as the student reads them; grading reads them from there, never from the source again."""
    (tmp_path / "nb.ipynb").write_text(notebook(
        ("markdown", "# title"), ("code", "x = 1"),
        ("code", "# BEGIN EXERCISE eps\neps = ...\n# END EXERCISE eps"),
        ("code", "# BEGIN EXERCISE done\ny = 2\n# END EXERCISE done")))
    (tmp_path / "script.py").write_text("a = 1\n# BEGIN EXERCISE eps\neps = ...\n# END EXERCISE eps\n")
    found = by_id(tmp_path)
    notebook_exercises, script_exercises = found["nb"].exercises, found["script"].exercises
    assert notebook_exercises.regions == {"eps": [(2, 1, 3)], "done": [(3, 1, 3)]}
    assert notebook_exercises.unfinished == {"eps": [(2, 1)]}
    assert script_exercises.regions == {"eps": [(None, 2, 4)]} and script_exercises.unfinished == {"eps": [(None, 2)]}
    from grader.grading.grade import unfinished_message
    assert unfinished_message(notebook_exercises)[0].startswith("Unfinished exercises (still holding `...`): eps (In [2], line 1). Finish them first")
    assert unfinished_message(script_exercises)[0].startswith("Unfinished exercises (still holding `...`): eps (line 2). Finish them first")


def test_grading_does_not_cut_the_source_into_regions_again():
    import ast
    grade = Path(__file__).resolve().parent.parent / "grader" / "grading" / "grade.py"
    imported = {alias.name for node in ast.walk(ast.parse(grade.read_text())) if isinstance(node, ast.ImportFrom)
                and node.module == "grader.intake.regions" for alias in node.names}
    assert not imported & {"region_lines", "unfinished_exercises", "find_regions"}, imported
