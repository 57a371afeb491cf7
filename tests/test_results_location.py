"""One rule for where the results are (issue 57): `grader grade` writes beside the submissions folder by default, and
`grader adjust` and `grader explain` then find that folder without --out (the last grade's, remembered in the user
cache), say which folder they read in their first line, and stop with the fix when there is none. The tiny lesson."""

from __future__ import annotations

import shutil
from pathlib import Path

from grader.cli.main import main
from grader.common.user_cache import CACHE_DIR_ENV

TINY = Path(__file__).with_name("fixtures") / "tiny_project"


def test_adjust_and_explain_read_the_folder_the_last_grade_wrote(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    root = tmp_path / "project"
    shutil.copytree(TINY, root)
    (root / "class").mkdir()
    (root / "class" / "ada.py").write_text((TINY / "solutions" / "tiny.py").read_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["explain", "ada"]) == 2
    assert "no results folder found: give --out OUT" in capsys.readouterr().err
    assert main(["grade", str(root / "class"), "--root", str(root), "--assignment", "tiny", "--workers", "1",
                 "--no-similarity"]) == 0
    capsys.readouterr()
    assert main(["explain", "ada"]) == 0
    printed = capsys.readouterr()
    assert printed.err.startswith(f"Results: {(root / 'results').resolve()} (the last `grader grade` wrote it")
    assert "ada" in printed.out
    assert main(["adjust", "ada", "area.value", "+0", "--reason", "checked by hand"]) == 0
    assert (root / "results" / "adjustments.toml").exists() and not (elsewhere / "results").exists()
