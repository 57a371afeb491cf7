"""The gradebook never waits for the similarity report (issue 56): grades.csv and the LMS files are written as soon as
the last record is in, before the similarity stage starts; report.html, which shows that report, comes after it.
The tiny lesson (no JAX), with the similarity stage replaced by one that records what already exists."""

from __future__ import annotations

import shutil
from pathlib import Path

import grader.cli.batch
from grader.config.assignment import load
from grader.similarity.report import SimilarityOptions

TINY = Path(__file__).with_name("fixtures") / "tiny_project"


def test_the_gradebook_is_written_before_the_similarity_report_starts(tmp_path, monkeypatch):
    root = tmp_path / "project"
    shutil.copytree(TINY, root)
    submissions = root / "submissions"
    submissions.mkdir()
    for name in ("ada", "bo"):
        (submissions / f"{name}.py").write_text((TINY / "solutions" / "tiny.py").read_text())
    out = root / "results"
    seen: dict[str, bool] = {}
    real = grader.cli.batch.safe_similarity

    def watched(folder, assignment, options):
        seen.update({name: (folder / name).exists()
                     for name in ("grades.csv", "final_grades.csv", "canvas.csv", "gradescope", "report.html")})
        return real(folder, assignment, options)

    monkeypatch.setattr(grader.cli.batch, "safe_similarity", watched)
    assignment = load("tiny", root)
    grader.cli.batch.grade_folder(assignment, submissions, out, workers=1, progress=lambda line: None,
                                  similarity=SimilarityOptions(enabled=True))
    assert seen == {"grades.csv": True, "final_grades.csv": True, "canvas.csv": True, "gradescope": True,
                    "report.html": False}, seen
    assert (out / "report.html").exists()
