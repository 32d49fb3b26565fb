"""Shared pieces of the figures: the empty-figure message, input checks, hover data, axes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..theme import FONT_SIZE, GREY, STRATEGY_ORDER, apply_layout

# Parallel configuration shown in every hover: (column, label).
CONFIG_FIELDS: tuple[tuple[str, str], ...] = (
    ("dp", "dp"), ("tp1", "tp1"), ("tp2", "tp2"), ("pp", "pp"), ("microbatch", "mb"),
    ("nb", "nb"),
)
PLACEMENT_COLUMNS = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")
PLACEMENT_LABEL = "NVLink placement (tp1×tp2×dp×pp)"


def empty_figure(message: str, presentation: bool = False) -> go.Figure:
    """A blank figure (no axes) with ``message`` centred: shown when there is nothing to plot."""
    fig = go.Figure()
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(size=FONT_SIZE * 1.2, color=GREY))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    apply_layout(fig, None, presentation)
    fig.update_layout(showlegend=False)
    return fig


def missing(frame: pd.DataFrame | None, columns: Iterable[str]) -> list[str]:
    """The required ``columns`` that ``frame`` lacks (all of them when it is None)."""
    cols = list(columns)
    if frame is None or not isinstance(frame, pd.DataFrame):
        return cols
    return [c for c in cols if c not in frame.columns]


def check_frame(frame: pd.DataFrame | None, columns: Iterable[str], what: str) -> str | None:
    """A message explaining why ``frame`` cannot be plotted, or None when it can."""
    lacking = missing(frame, columns)
    if frame is None or not isinstance(frame, pd.DataFrame) or frame.empty:
        return f"No {what} to show (no feasible configuration)."
    if lacking:
        return f"No {what} to show: missing column(s) {', '.join(lacking)}."
    return None


def finite_rows(frame: pd.DataFrame, columns: Iterable[str], positive: bool = False
                ) -> pd.DataFrame:
    """Rows of ``frame`` whose ``columns`` are all finite numbers (and > 0 if ``positive``)."""
    keep = np.ones(len(frame), dtype=bool)
    for c in columns:
        v = pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(v)
        if positive:
            ok &= v > 0
        keep &= ok
    return frame.loc[keep]


def strategies_in(frame: pd.DataFrame) -> list[str]:
    """The strategies of ``frame`` in the canonical order (1d, summa, context, then others)."""
    present = [str(s) for s in pd.unique(frame["strategy"].astype(str))]
    return [s for s in STRATEGY_ORDER if s in present] + sorted(
        s for s in present if s not in STRATEGY_ORDER)


def best_rows(frame: pd.DataFrame, keys: Sequence[str] = ("strategy", "gpus")) -> pd.DataFrame:
    """The fastest row per ``keys`` (by iteration time, else training days), sorted by keys."""
    score = next((c for c in ("iteration_time_s", "train_days") if c in frame.columns), None)
    keys = [k for k in keys if k in frame.columns]
    out = frame
    if score is not None:
        out = out.sort_values(score, kind="stable")
    if keys:
        out = out.drop_duplicates(keys).sort_values(keys, kind="stable")
    return out.reset_index(drop=True)


def placement(frame: pd.DataFrame) -> list[str]:
    """Each row's NVLink placement as 'nv_tp1×nv_tp2×nv_dp×nv_pp' ('' when unknown)."""
    if missing(frame, PLACEMENT_COLUMNS):
        return [""] * len(frame)
    out = []
    for row in frame[list(PLACEMENT_COLUMNS)].itertuples(index=False):
        out.append("×".join(fmt_int(v) for v in row))
    return out


def fmt_int(value: object) -> str:
    """An integer-valued number as text ('8'), '–' for NaN/None."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(f):
        return "–"
    return str(int(f)) if f == int(f) else f"{f:g}"


class Hover:
    """customdata columns of a trace and the hovertemplate lines that show them.

    ``add(column, label, fmt, unit)`` appends a frame column; ``config()`` appends the parallel
    configuration (dp/tp1/tp2/pp/mb/nb on one line) and its NVLink placement. The column names
    go to the trace's ``meta['customdata']`` so :func:`figure_table` can name them.
    """

    def __init__(self, frame: pd.DataFrame, header: str | None = None):
        self.frame = frame
        self.columns: list[str] = []
        self.values: list[list[object]] = []
        self.lines: list[str] = [header] if header else []

    def _push(self, name: str, values: Sequence[object]) -> int:
        self.columns.append(name)
        self.values.append(list(values))
        return len(self.columns) - 1

    def add(self, column: str, label: str, fmt: str = "", unit: str = "") -> Hover:
        if column in self.frame.columns:
            i = self._push(column, self.frame[column].tolist())
            spec = f":{fmt}" if fmt else ""
            self.lines.append(f"{label} %{{customdata[{i}]{spec}}}{unit}")
        return self

    def ref(self, column: str, fmt: str = "") -> str:
        """Register ``column`` and return its hovertemplate placeholder ('%{customdata[i]}')."""
        i = self._push(column, self.frame[column].tolist())
        return f"%{{customdata[{i}]{':' + fmt if fmt else ''}}}"

    def line(self, text: str) -> Hover:
        self.lines.append(text)
        return self

    def config(self) -> Hover:
        parts = []
        for column, label in CONFIG_FIELDS:
            if column in self.frame.columns:
                i = self._push(column, [fmt_int(v) for v in self.frame[column]])
                parts.append(f"{label} %{{customdata[{i}]}}")
        if parts:
            self.lines.append(" · ".join(parts))
        if not missing(self.frame, PLACEMENT_COLUMNS):
            i = self._push("placement", placement(self.frame))
            self.lines.append(f"{PLACEMENT_LABEL} %{{customdata[{i}]}}")
        return self

    @property
    def customdata(self) -> np.ndarray | None:
        if not self.values:
            return None
        return np.array(list(zip(*self.values)), dtype=object)

    def template(self, extra: str = "") -> str:
        return "<br>".join(self.lines) + f"<extra>{extra}</extra>"

    def trace_kwargs(self, group: str | None = None, extra: str = "") -> dict:
        """customdata, hovertemplate and meta for a trace built from this frame."""
        return dict(customdata=self.customdata, hovertemplate=self.template(extra),
                    meta={"group": group, "customdata": list(self.columns)})


def gpu_ticks(values: Iterable[float]) -> dict:
    """Axis settings putting ticks exactly at the given GPU counts."""
    ticks = sorted({int(v) for v in values})
    return dict(tickvals=ticks, ticktext=[fmt_int(v) for v in ticks])


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


def subplot_title_colors(fig: go.Figure, colors: Sequence[str]) -> None:
    """Colour the first len(colors) annotations (make_subplots titles) and make them bold."""
    for ann, color in zip(fig.layout.annotations or (), colors):
        ann.font.color = color
        ann.text = f"<b>{ann.text}</b>"
        ann.font.size = FONT_SIZE * 1.1
