"""Draw figure data as small greyscale PNGs for the HTML reports, and charts for the class report.

The figure format is the course's generic one: `{"kind": "panels", "panels": [panel, ...]}` where a panel is
`{"kind": "bar", "title": str, "labels": [str, ...], "ylabel": str, "series": [{"label": str, "y": [number]}]}`.
A student's figure is untrusted data of any shape: `read_figure` never raises; it keeps what can be drawn
(bounded: a few panels, series and bars) and says in plain words what it could not draw. Drawing uses
`matplotlib.figure.Figure` with the Agg canvas (no pyplot, no global state); bars are told apart by hatching,
grey levels and value labels, so the images read without colour.
"""

from __future__ import annotations

import base64
import io
import json
import math
import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from PIL import Image  # Pillow: a dependency of matplotlib

MAX_PANELS = 6
MAX_SERIES = 4
MAX_BARS = 40
MAX_TEXT = 60
DPI = 90          # student and reference figures: ~360 px wide
CHART_DPI = 100   # the class report's charts
HATCHES = ("//", "..", "xx", "\\\\")
GREYS = ("0.45", "0.85", "1.0", "0.65")


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


# ---- drawing -----------------------------------------------------------------------------------------

def _png(figure: Figure, dpi: int = DPI) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.3g}"


PANEL_WIDTH_IN, PANEL_LEFT_IN, PANEL_RIGHT_IN = 4.0, 0.8, 0.15


def draw_panel(panel: Panel) -> np.ndarray:
    """One bar panel as a greyscale pixel array (rows x 360 columns at DPI 90).

    The layout is computed here in inches (every label is bounded in length) rather than by a matplotlib
    layout engine, which halves the drawing time; panels are drawn one by one so that a cache can reuse
    a panel that several figures share."""
    rotate = len(panel.labels) > 4 or any(len(label) > 14 for label in panel.labels)
    bottom_in = (0.85 if rotate else 0.4) + (0.3 if len(panel.series) > 1 else 0.0)
    top_in, axes_in = 0.55, 1.5
    height_in = top_in + axes_in + bottom_in
    figure = Figure(figsize=(PANEL_WIDTH_IN, height_in), dpi=DPI)
    ax = figure.add_axes((PANEL_LEFT_IN / PANEL_WIDTH_IN, bottom_in / height_in,
                          (PANEL_WIDTH_IN - PANEL_LEFT_IN - PANEL_RIGHT_IN) / PANEL_WIDTH_IN, axes_in / height_in))
    _draw_panel(ax, panel, rotate)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    return (rgba[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)).astype(np.uint8)


def png_of_pixels(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def draw_panels(panels: list[Panel]) -> bytes:
    """A column of bar panels as one greyscale PNG (hatched, value-labelled: it reads without colour)."""
    return png_of_pixels(np.vstack([draw_panel(panel) for panel in panels]))


def _wrap(text: str, width: int, lines: int = 2) -> str:
    wrapped = textwrap.wrap(text, width) or [""]
    return "\n".join(wrapped[:lines]) + ("…" if len(wrapped) > lines else "")


def _draw_panel(ax, panel: Panel, rotate: bool) -> None:
    width = len(panel.labels)
    step = 0.8 / len(panel.series)
    handles = []
    for index, series in enumerate(panel.series):
        grey, hatch = GREYS[index % len(GREYS)], HATCHES[index % len(HATCHES)]
        xs = [i - 0.4 + step * (index + 0.5) for i, v in enumerate(series.y) if v is not None]
        ys = [v for v in series.y if v is not None]
        bars = ax.bar(xs, ys, width=step * 0.95, color=grey, edgecolor="black", hatch=hatch, linewidth=0.8)
        if width * len(panel.series) <= 12:
            ax.bar_label(bars, labels=[_fmt(v) for v in ys], fontsize=8, padding=1)
        handles.append(Patch(facecolor=grey, edgecolor="black", hatch=hatch, label=series.label or f"series {index + 1}"))
        for i, v in enumerate(series.y):  # an explicit mark where a value could not be drawn
            if v is None:
                ax.plot([i - 0.4 + step * (index + 0.5)], [0], marker="x", color="black", markersize=6)
    ax.set_xticks(range(width))
    ax.set_xticklabels(panel.labels, fontsize=8, rotation=30 if rotate else 0, ha="right" if rotate else "center")
    ax.set_xlim(-0.6, width - 0.4)
    values = [v for s in panel.series for v in s.y if v is not None]
    if min(values) >= 0:  # counts and bytes: the axis starts at 0, and all-zero bars still show an axis
        ax.set_ylim(0, max(values) * 1.18 if max(values) > 0 else 1)
    else:
        ax.margins(y=0.18)
    title = _wrap(f"{panel.number}. {panel.title}" if panel.title else f"panel {panel.number}", 48,
                  1 if len(panel.series) == 1 and panel.series[0].label else 2)
    if len(panel.series) == 1 and panel.series[0].label:  # one series: its label under the title, no legend
        title += f"\n[{_wrap(panel.series[0].label, 44, 1)}]"
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(_wrap(panel.ylabel, 30), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.axhline(0, color="black", linewidth=0.6)
    if len(panel.series) > 1:  # below the axes, where it hides no bar
        ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.5 if rotate else -0.14),
                  ncol=min(len(handles), 2), frameon=False)


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


class FigureCache:
    """Draws each distinct panel, and each distinct figure, once per run: most students share the reference's
    figure, and a wrong figure usually differs from it in one panel only."""

    def __init__(self) -> None:
        self._images: dict[str, tuple[str | None, str | None]] = {}  # figure key -> (data URI, why it failed)
        self._panels: dict[str, np.ndarray] = {}
        self.panels_drawn = 0

    def image(self, figure: Any, name: str) -> tuple[str | None, list[str]]:
        """(data URI or None when nothing is drawable, sentences about what was not drawn).

        Equal drawable content gives the very same image (and data URI)."""
        return self.draw(read_figure(figure, name), name)

    def draw(self, read: ReadFigure, name: str) -> tuple[str | None, list[str]]:
        if not read.panels:
            return None, list(read.notes)
        keys = [json.dumps([p.number, p.title, p.ylabel, p.labels, [[s.label, s.y] for s in p.series]])
                for p in read.panels]
        key = "\n".join(keys)
        if key not in self._images:
            try:
                with warnings.catch_warnings():  # odd but finite data: matplotlib's warnings are not the student's
                    warnings.simplefilter("ignore")
                    for panel_key, panel in zip(keys, read.panels):
                        if panel_key not in self._panels:
                            self._panels[panel_key] = draw_panel(panel)
                            self.panels_drawn += 1
                    pixels = np.vstack([self._panels[k] for k in keys])
                self._images[key] = (data_uri(png_of_pixels(pixels)), None)
            except Exception as error:  # matplotlib refusing odd data must not cost the page
                self._images[key] = (None, f"`{name}` could not be drawn ({type(error).__name__}).")
        image, problem = self._images[key]
        return image, list(read.notes) + ([problem] if problem else [])


# ---- class charts ------------------------------------------------------------------------------------

def score_histogram(percents: list[float]) -> str:
    """Counts of submissions per 10-point band of the percent score, as a data URI."""
    bands = [0] * 10
    for p in percents:
        bands[min(9, max(0, int(p // 10)))] += 1
    labels = [f"{10 * i}–{10 * i + 9}" if i < 9 else "90–100" for i in range(10)]
    figure = Figure(figsize=(7.0, 2.8), layout="constrained")
    ax = figure.subplots()
    bars = ax.bar(range(10), bands, color="0.6", edgecolor="black", hatch="//", linewidth=0.8)
    ax.bar_label(bars, labels=[str(b) if b else "" for b in bands], fontsize=8, padding=1)
    ax.set_xticks(range(10))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlabel("score (% of the maximum)", fontsize=9)
    ax.set_ylabel("submissions", fontsize=9)
    locator = ax.yaxis.get_major_locator()
    assert isinstance(locator, MaxNLocator), f"matplotlib's default y locator is now {type(locator).__name__}"
    locator.set_params(integer=True)
    ax.margins(y=0.15)
    ax.set_title(f"Score distribution ({len(percents)} submissions)", fontsize=10)
    return data_uri(_png(figure, CHART_DPI))


def pass_rate_chart(rows: list[tuple[str, float, float]]) -> str:
    """Horizontal bars per (name, full-score fraction, partial fraction): solid black = passed, hatched = partial."""
    height = 0.6 + 0.24 * max(1, len(rows))
    figure = Figure(figsize=(7.0, height), layout="constrained")
    ax = figure.subplots()
    positions = list(range(len(rows)))[::-1]
    full = [100 * r[1] for r in rows]
    partial = [100 * r[2] for r in rows]
    ax.barh(positions, full, color="0.25", edgecolor="black", label="full score", height=0.7)
    ax.barh(positions, partial, left=full, color="white", edgecolor="black", hatch="///", label="partial credit",
            height=0.7)
    for y, f, p in zip(positions, full, partial):
        ax.text(min(f + p, 100) + 1, y, f"{f:.0f}%" + (f" (+{p:.0f}%)" if p else ""), va="center", fontsize=7)
    ax.set_yticks(positions)
    ax.set_yticklabels([r[0] for r in rows], fontsize=7)
    ax.set_xlim(0, 118)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("% of graded submissions", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    return data_uri(_png(figure, CHART_DPI))
