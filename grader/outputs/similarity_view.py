"""The similarity report as the instructor reads it: a section of report.html and OUT/similarity.csv.

Instructor-only, like report.html itself: no student-facing writer (feedback files, Gradescope results, grade
CSVs, records) reads anything from here. Student text (ids, file names, code, values) reaches the page only
through Jinja's autoescaping and the CSV only through `safe_cell`.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from grader.common.files import atomic_write
from grader.lms.otter_csv import safe_cell
from grader.similarity.report import PairResult, SimilarityReport

CSV_NAME = "similarity.csv"
COLUMNS = ["kind", "rank", "a", "b", "flagged", "score", "code_score", "a_in_b", "b_in_a", "shared_tokens",
           "value_score", "shared_values", "matching_code"]


def _place(side_term: str, cell: int | None, lines: tuple[int, int]) -> str:
    at = f"lines {lines[0]}-{lines[1]}" if lines[0] != lines[1] else f"line {lines[0]}"
    return f"cell {cell}, {at}" if cell is not None else at


def _name(side) -> str:
    return f"{side.id} (earlier term {side.term})" if side.term else side.id


def _values_text(values) -> str:
    return "; ".join(f"{v.names} = {v.shown} ({v.reason}, {v.holders} submissions hold it)" for v in values)


def similarity_csv(report: SimilarityReport) -> str:
    """One row a listed pair, then one a cluster; the first row is the caution."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerow(["note", "", report.caution] + [""] * (len(COLUMNS) - 3))   # the caution, in column `a`
    for rank, pair in enumerate(report.pairs, start=1):
        code = pair.code
        matching = " | ".join(f"a {_place(pair.a.term, r.a_cell, r.a_lines)} ~ b {_place(pair.b.term, r.b_cell, r.b_lines)}"
                              for r in code.regions)
        writer.writerow([safe_cell(x) for x in ["pair", rank, _name(pair.a), _name(pair.b), "yes" if pair.flagged else "no",
                                                f"{pair.score:.3f}", f"{code.score:.3f}", f"{code.a_in_b:.3f}",
                                                f"{code.b_in_a:.3f}", code.shared_tokens, f"{pair.value_score:.3f}",
                                                _values_text(pair.values), matching]])
    for rank, cluster in enumerate(report.clusters, start=1):
        writer.writerow([safe_cell(x) for x in ["cluster", rank, " ".join(cluster.members), "", "",
                                                f"{cluster.top_score:.3f}", "", "", "", "", "",
                                                _values_text(cluster.values), ""]])
    return buffer.getvalue()


def write_similarity_csv(out: Path, report: SimilarityReport) -> Path:
    path = Path(out) / CSV_NAME
    atomic_write(path, similarity_csv(report))
    return path


def _pair_context(rank: int, pair: PairResult) -> dict[str, Any]:
    return {"rank": rank, "a": _name(pair.a), "b": _name(pair.b), "a_file": pair.a.file, "b_file": pair.b.file,
            "score": pair.score, "flagged": pair.flagged, "code": pair.code, "value_score": pair.value_score,
            "shared": pair.values,
            "regions": [{"a_where": _place(pair.a.term, r.a_cell, r.a_lines), "a_text": r.a_text,
                         "b_where": _place(pair.b.term, r.b_cell, r.b_lines), "b_text": r.b_text, "tokens": r.tokens}
                        for r in pair.code.regions]}


def similarity_context(report: SimilarityReport) -> dict[str, Any]:
    return {"caution": report.caution, "threshold": report.threshold, "documents": report.documents,
            "earlier": report.earlier, "flagged": report.flagged, "compared_pairs": report.compared_pairs,
            "pairs": [_pair_context(rank, pair) for rank, pair in enumerate(report.pairs, start=1)],
            "clusters": [{"members": c.members, "top_score": c.top_score, "shared": c.values} for c in report.clusters],
            "notes": report.notes, "boilerplate": report.boilerplate, "seconds": report.seconds, "csv": CSV_NAME}
