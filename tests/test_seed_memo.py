"""A requested seed's world is found once per cache folder: later processes read the answer (grader/runs/seed_memo.py)."""

from __future__ import annotations

import json

from grader.common.user_cache import CACHE_DIR_ENV
from grader.runs.seed_memo import remembered


def test_a_mapping_is_computed_once_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    calls = []

    def compute(value):
        return lambda: calls.append(value) or value

    assert remembered("lesson", "f1", 7, frozenset(), compute(11)) == 11
    assert remembered("lesson", "f1", 7, frozenset(), compute(99)) == 11          # read back, not computed
    assert remembered("lesson", "f1", 7, frozenset({11}), compute(12)) == 12      # another question
    assert remembered("lesson", "f2", 7, frozenset(), compute(13)) == 13          # another assignment version
    assert remembered("lesson", "f1", 7, frozenset({11}), compute(0)) == 12
    assert calls == [11, 12, 13]


def test_a_damaged_file_is_computed_again(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    assert remembered("lesson", "f1", 7, frozenset(), lambda: 5) == 5
    (path,) = (tmp_path / "suitable-seeds").glob("*.json")
    path.write_text("{not json")
    assert remembered("lesson", "f1", 7, frozenset(), lambda: 6) == 6
    assert json.loads(path.read_text()) == {"7:": 6}
    path.write_text(json.dumps({"7:": "forged"}))
    assert remembered("lesson", "f1", 7, frozenset(), lambda: 8) == 8
