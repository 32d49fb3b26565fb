"""Axes of the figures: number and GPU-count labels, tick values, subplot rows, lines.

Plain layout dicts (see :mod:`dashboard.figures.maker`); no data frames.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from dashboard.figures.theme import FONT_SIZE, scale

# GPU-count tick labels on one axis: horizontal and this few, none runs into the next (a small
# multiple is a third of a card wide)
MAIN_LABELS = 8
SMALL_MULTIPLE_LABELS = 4


def count_label(n: float) -> str:
    """A GPU count as a short tick label: '512', '1K' (1,024), '16K', '1M' (2^20); counts that
    are not multiples of 1,024 keep every digit."""
    value = int(n)
    if value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 20}M"
    if value >= 1024 and value % 1024 == 0:
        return f"{value >> 10}K"
    return str(value)


def every_nth(count: int, max_labels: int) -> list[int]:
    """Positions of at most ``max_labels`` of ``count`` ticks, evenly strided and ending at the
    last one (the largest GPU count is always labelled)."""
    stride = max(1, math.ceil(count / max(1, max_labels)))
    return [i for i in range(count) if (count - 1 - i) % stride == 0]


def fmt_int(value: object) -> str:
    """An integer-valued number as text ('8'), '–' for NaN/None."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(f):
        return "–"
    return str(int(f)) if f == int(f) else f"{f:g}"


def gpu_ticks(values: Iterable[float], max_labels: int = MAIN_LABELS) -> dict:
    """Axis settings putting ticks at the given GPU counts, labelled compactly ('16K', see
    :func:`count_label`), horizontal; at most ``max_labels`` of them (the largest always)."""
    ticks = sorted({int(v) for v in values})
    ticks = [ticks[i] for i in every_nth(len(ticks), max_labels)]
    return dict(tickvals=ticks, ticktext=[count_label(v) for v in ticks], tickangle=0)


def pow2_ticks(lo: float, hi: float) -> dict:
    """Tick values/labels at the powers of two covering [lo, hi] (a log2 axis)."""
    lo, hi = max(lo, 1e-12), max(hi, lo)
    ks = range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)
    ticks = [2.0 ** k for k in ks]
    return dict(tickvals=ticks, ticktext=[fmt_int(t) if t >= 1 else f"1/{fmt_int(1 / t)}"
                                          for t in ticks])


def nice_log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 values spanning [lo, hi] (both > 0), at least the two ends."""
    if not (lo > 0 and hi > 0 and math.isfinite(lo) and math.isfinite(hi)):
        return []
    ticks = [m * 10.0 ** k for k in range(math.floor(math.log10(lo)) - 1,
                                          math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    inside = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
    if len(inside) > 8:
        inside = [t for t in inside if round(t / 10 ** math.floor(math.log10(t))) == 1]
    return inside if len(inside) >= 2 else [lo, hi]


def fmt_tick(value: float) -> str:
    """A tick label: '0.5', '20', '1000', '20000' (3 significant digits below 1)."""
    if 1 <= abs(value) < 1e7 and abs(value - round(value)) < 1e-9 * abs(value):
        return str(int(round(value)))
    return f"{value:.3g}"


def log_ticks(values: Iterable[float], decades: bool = False) -> dict:
    """Tick values/labels for a log axis over the positive finite ``values``: 1-2-5 steps
    (decades only when that gives too many ticks, or with ``decades=True``)."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    arr = arr[np.isfinite(arr) & (arr > 0)]
    if arr.size == 0:
        return {}
    lo, hi = float(arr.min()), float(arr.max())
    if decades:
        ticks = [10.0 ** k for k in range(math.floor(math.log10(lo)),
                                          math.ceil(math.log10(hi)) + 1)]
    else:
        pad_lo, pad_hi = lo / 1.25, hi * 1.25
        ticks = nice_log_ticks(pad_lo, pad_hi)
    return dict(tickvals=ticks, ticktext=[fmt_tick(t) for t in ticks])


def fmt_num(value: float) -> str:
    """A number with 3 significant digits ('21.2', '0.0123'), whole below 1e6 ('1043')."""
    if not math.isfinite(value):
        return "–"
    if 1000 <= abs(value) < 1e6:
        return f"{value:.0f}"
    return f"{value:.3g}"


def axis_ref(letter: str, col: int) -> str:
    """A trace's axis reference for subplot column ``col`` (1-based): 'x', 'x2', …"""
    return letter if col == 1 else f"{letter}{col}"


def axis_key(letter: str, col: int) -> str:
    """The layout key of that axis: 'xaxis', 'xaxis2', …"""
    return f"{letter}axis" if col == 1 else f"{letter}axis{col}"


def subplots_layout(titles: Sequence[str], spacing: float, presentation: bool = False,
                    colors: Sequence[str] | None = None, shared_y: bool = False,
                    title_size: float = 16.0) -> dict:
    """Axes and title annotations of one row of ``len(titles)`` subplots, as plain layout keys
    (what ``make_subplots(rows=1, cols=n, horizontal_spacing=spacing)`` makes, far faster).

    Subplot i has axes x{i}/y{i} side by side; with ``shared_y`` every y axis matches the
    first and only the first shows tick labels. Titles sit above each plot, centred; with
    ``colors`` they are bold, in those colours, at 1.1× the base font (else ``title_size``).
    """
    n = len(titles)
    width = (1.0 - spacing * (n - 1)) / n
    k = scale(presentation)
    layout: dict = {}
    annotations = []
    for col, title in enumerate(titles, start=1):
        lo = (col - 1) * (width + spacing)
        layout[axis_key("x", col)] = dict(domain=[lo, lo + width], anchor=axis_ref("y", col))
        yaxis = dict(domain=[0.0, 1.0], anchor=axis_ref("x", col))
        if shared_y and col > 1:
            yaxis.update(matches="y", showticklabels=False)
        layout[axis_key("y", col)] = yaxis
        font = dict(size=title_size * k)
        if colors is not None:
            font = dict(color=colors[col - 1], size=FONT_SIZE * 1.1 * k)
            title = f"<b>{title}</b>"
        annotations.append(dict(text=title, x=lo + width / 2, y=1.0, xref="paper", yref="paper",
                                xanchor="center", yanchor="bottom", showarrow=False, font=font))
    layout["annotations"] = annotations
    return layout


def room_for_titles(layout: dict, titles: Sequence[str], presentation: bool = False) -> dict:
    """Raise the top margin of ``layout`` by one line per extra line of the tallest subplot
    title (a two-line title would otherwise run into the figure's title); returns it."""
    extra = max((t.count("<br>") for t in titles), default=0)
    if extra:
        line = FONT_SIZE * 1.1 * 1.25 * scale(presentation)
        layout["margin"] = dict(layout["margin"], t=round(layout["margin"]["t"] + extra * line))
    return layout


def hline(y: float, line: dict, col: int = 1) -> dict:
    """A horizontal line shape across subplot ``col`` at data value ``y`` (like add_hline)."""
    return dict(type="line", xref=f"{axis_ref('x', col)} domain", x0=0, x1=1,
                yref=axis_ref("y", col), y0=y, y1=y, line=line)
