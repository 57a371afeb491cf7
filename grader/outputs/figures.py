"""Draw figure data as small greyscale PNGs for the HTML reports, and charts for the class report.

What of a student's figure (untrusted data of any shape) can be drawn is read by figure_data.py. Drawing uses
`matplotlib.figure.Figure` with the Agg canvas (no pyplot, no global state); bars are told apart by hatching,
grey levels and value labels, so the images read without colour.
"""

from __future__ import annotations

import base64
import io
import json
import textwrap
import warnings
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from PIL import Image  # Pillow: a dependency of matplotlib

from grader.outputs.figure_data import Panel, ReadFigure, read_figure

DPI = 90          # student and reference figures: ~360 px wide
CHART_DPI = 100   # the class report's charts
HATCHES = ("//", "..", "xx", "\\\\")
GREYS = ("0.45", "0.85", "1.0", "0.65")


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
