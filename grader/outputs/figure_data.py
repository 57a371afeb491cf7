"""What of a figure's data can be drawn, read from untrusted data of any shape, and how it differs from the reference's.

The figure format is the course's generic one: `{"kind": "panels", "panels": [panel, ...]}` where a panel is
`{"kind": "bar", "title": str, "labels": [str, ...], "ylabel": str, "series": [{"label": str, "y": [number]}]}`.
`read_figure` never raises: it keeps what can be drawn (bounded: a few panels, series and bars) and says in plain
words what it could not draw. Drawing it is figures.py's job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_PANELS = 6
MAX_SERIES = 4
MAX_BARS = 40
MAX_TEXT = 60


@dataclass(frozen=True)
class Series:
    label: str
    y: tuple[float | None, ...]  # None: a value that is not drawn (missing or not a number)


@dataclass(frozen=True)
class Panel:
    number: int  # 1-based position in the student's list
    title: str
    ylabel: str
    labels: tuple[str, ...]
    series: tuple[Series, ...]


@dataclass
class ReadFigure:
    panels: list[Panel] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be drawn, in words


def _text(value: Any, limit: int = MAX_TEXT) -> str | None:
    """A short label from a scalar; None for anything else (a list, a dict...)."""
    text: str | None
    if isinstance(value, str):
        text = " ".join(value.split())
    elif isinstance(value, bool) or value is None:
        text = str(value) if value is not None else None
    elif isinstance(value, (int, float)):
        text = f"{value:g}" if isinstance(value, float) else str(value)
    else:
        return None
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


MAX_MAGNITUDE = 1e200  # beyond this an axis cannot be laid out; such a value is reported, not drawn


def _number(value: Any) -> float | None:
    """A drawable number (a bool counts as 0/1); None for anything else, for non-finite and for huge values."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if math.isfinite(number) and abs(number) <= MAX_MAGNITUDE else None
    return None


def _kind_of(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, str):
        shown = value if len(value) <= 20 else value[:19] + "…"
        return f"the string {shown!r}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "a dict"
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def read_figure(figure: Any, name: str = "figure") -> ReadFigure:
    """What of `figure` can be drawn, and sentences about the rest. Never raises, whatever `figure` is."""
    result = ReadFigure()
    try:
        _read(figure, name, result)
    except Exception as error:  # a bug here must never cost a student their page
        result.panels = []
        result.notes.append(f"`{name}` could not be read ({type(error).__name__}).")
    return result


def _read(figure: Any, name: str, result: ReadFigure) -> None:
    notes = result.notes
    if figure is None:
        notes.append(f"`{name}` was not defined (or its value could not be read), so there is nothing to draw.")
        return
    if not isinstance(figure, dict):
        notes.append(f"`{name}` should be a dict with kind 'panels'; it is {_kind_of(figure)}.")
        return
    kind = figure.get("kind")
    if kind != "panels":
        if "kind" not in figure:
            notes.append(f"`{name}` has no 'kind' (it should be 'panels'): it is not drawn.")
        else:
            shown = repr(_text(kind)) if _text(kind) is not None else _kind_of(kind)
            notes.append(f"`{name}` has kind {shown}, not 'panels': it is not drawn.")
        return
    panels = figure.get("panels")
    if not isinstance(panels, list):
        notes.append(f"`{name}` has no panels (its 'panels' is {_kind_of(panels)}, not a list).")
        return
    if not panels:
        notes.append(f"`{name}` has no panels (its 'panels' list is empty).")
        return
    if len(panels) > MAX_PANELS:
        notes.append(f"`{name}` has {len(panels)} panels; only the first {MAX_PANELS} are drawn.")
    for number, panel in enumerate(panels[:MAX_PANELS], start=1):
        read = _read_panel(number, panel, notes)
        if read is not None:
            result.panels.append(read)


def _read_panel(number: int, panel: Any, notes: list[str]) -> Panel | None:
    where = f"Panel {number}"
    if not isinstance(panel, dict):
        notes.append(f"{where} is {_kind_of(panel)}, not a dict: it is not drawn.")
        return None
    title = _text(panel.get("title")) or ""
    if title:
        where += f" ({title!r})"
    kind = panel.get("kind")
    if "kind" not in panel:
        notes.append(f"{where} has no 'kind' (it should be 'bar'): it is not drawn.")
        return None
    if kind != "bar":
        shown = repr(_text(kind)) if _text(kind) is not None else _kind_of(kind)
        notes.append(f"{where} has kind {shown}; only 'bar' panels are drawn.")
        return None
    raw_series = panel.get("series")
    if raw_series is None and "y" in panel:  # a single series written at the panel level
        raw_series = [{"label": "", "y": panel.get("y")}]
    if not isinstance(raw_series, list) or not raw_series:
        notes.append(f"{where} has no series (its 'series' is {_kind_of(raw_series)}): nothing to draw.")
        return None
    if len(raw_series) > MAX_SERIES:
        notes.append(f"{where} has {len(raw_series)} series; only the first {MAX_SERIES} are drawn.")
    series = []
    for index, item in enumerate(raw_series[:MAX_SERIES], start=1):
        read = _read_series(f"{where}, series {index}", item, notes)
        if read is not None:
            series.append(read)
    if not series:
        notes.append(f"{where} has no numeric y values: nothing drawn.")
        return None
    width = max(len(s.y) for s in series)
    raw_labels = panel.get("labels")
    labels: list[str] = []
    if isinstance(raw_labels, list):
        labels = [(_text(label, 24) or "?") for label in raw_labels[:width]]
        if len(raw_labels) != width:
            notes.append(f"{where} has {len(raw_labels)} labels for {width} bars.")
    elif raw_labels is not None:
        notes.append(f"{where}: its 'labels' is {_kind_of(raw_labels)}, not a list; bars are numbered instead.")
    labels += [str(i + 1) for i in range(len(labels), width)]
    ylabel = _text(panel.get("ylabel")) or ""
    return Panel(number, title, ylabel, tuple(labels), tuple(series))


def _read_series(where: str, item: Any, notes: list[str]) -> Series | None:
    if not isinstance(item, dict):
        notes.append(f"{where} is {_kind_of(item)}, not a dict with 'y': not drawn.")
        return None
    label = _text(item.get("label")) or ""
    if label:
        where += f" ({label!r})"
    raw = item.get("y")
    if not isinstance(raw, list):
        notes.append(f"{where}: y is {_kind_of(raw)}, not a list of numbers: not drawn.")
        return None
    if len(raw) > MAX_BARS:
        notes.append(f"{where} has {len(raw)} values; only the first {MAX_BARS} are drawn.")
    values = tuple(_number(v) for v in raw[:MAX_BARS])
    bad = [raw[i] for i, v in enumerate(values) if v is None]
    if bad:
        missing = sum(1 for b in bad if b is None)
        huge = sum(1 for b in bad if isinstance(b, (int, float)) and not isinstance(b, bool))
        other = [b for b in bad if b is not None and not isinstance(b, (int, float))]
        parts = []
        if missing:
            parts.append(f"{missing} missing (None: NaN or not recorded)")
        if huge:
            parts.append(f"{huge} not finite or too large to draw")
        if other:
            parts.append(f"{len(other)} not a number (e.g. {_kind_of(other[0])})")
        notes.append(f"{where}: {' and '.join(parts)} of its {len(values)} values not drawn.")
    if all(v is None for v in values):
        return None
    return Series(label, values)


def differences(student: ReadFigure, reference: ReadFigure) -> list[str]:
    """Sentences naming where the student's drawable figure differs from the reference's in its structure:
    number of panels, titles, axis labels, bar labels, series labels (not values: they may depend on a seed)."""
    if not student.panels or not reference.panels:
        return []
    notes = []
    if len(student.panels) != len(reference.panels):
        notes.append(f"You drew {len(student.panels)} panel(s); the reference draws {len(reference.panels)}.")
    for mine, theirs in zip(student.panels, reference.panels):
        where = f"Panel {theirs.number}"
        if mine.title != theirs.title:
            notes.append(f"{where}: your title is {mine.title!r}; the reference's is {theirs.title!r}.")
        if mine.ylabel != theirs.ylabel:
            notes.append(f"{where}: your y axis says {mine.ylabel!r}; the reference's says {theirs.ylabel!r}.")
        if mine.labels != theirs.labels:
            notes.append(f"{where}: your bars are labelled {', '.join(mine.labels[:6])}; "
                         f"the reference's are {', '.join(theirs.labels[:6])}.")
        mine_series = [s.label for s in mine.series]
        their_series = [s.label for s in theirs.series]
        if mine_series != their_series:
            notes.append(f"{where}: your series {', '.join(map(repr, mine_series[:4]))}; "
                         f"the reference's {', '.join(map(repr, their_series[:4]))}.")
    return notes
