"""Shared pieces of the figures: the empty-figure message, input checks, hover data, axes.

Figures are built as plain dicts (traces and layout) and turned into a plotly Figure once, by
:func:`~dashboard.figures.maker.make_figure` (re-exported here, with ``plain`` and
``plain_figures``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from model.physics.strategies import IDEALISED

from ..theme import FONT_SIZE, GREY, STRATEGY_ORDER, base_layout, scale, strategy_label
from .maker import make_figure, plain, plain_figures  # noqa: F401 - re-exported

# Parallel configuration shown in every hover: (column, label).
CONFIG_FIELDS: tuple[tuple[str, str], ...] = (
    ("dp", "dp"), ("tp1", "tp1"), ("tp2", "tp2"), ("pp", "pp"), ("microbatch", "mb"),
    ("nb", "nb"),
)
PLACEMENT_COLUMNS = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")
PLACEMENT_LABEL = "NVLink placement (tp1×tp2×dp×pp)"
IDEALISED_SUFFIX = " (idealised)"
# GPU-count tick labels on one axis: horizontal and this few, none runs into the next (a small
# multiple is a third of a card wide)
MAIN_LABELS = 8
SMALL_MULTIPLE_LABELS = 4


def strategy_name(strategy: str) -> str:
    """A strategy's display name, marked when no production stack ships it
    (``model.physics.strategies.IDEALISED``): '2D SUMMA (idealised)'."""
    return strategy_label(strategy) + (IDEALISED_SUFFIX if strategy in IDEALISED else "")


def strategy_title(strategy: str) -> str:
    """A strategy's name as a small multiple's title: on two lines when idealised (one line
    would run into the neighbouring titles)."""
    return strategy_name(strategy).replace(IDEALISED_SUFFIX, "<br>" + IDEALISED_SUFFIX.strip())


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


def empty_figure(message: str, presentation: bool = False) -> go.Figure:
    """A blank figure (no axes) with ``message`` centred: shown when there is nothing to plot."""
    layout = base_layout(None, presentation)
    layout.update(
        annotations=[dict(text=message, x=0.5, y=0.5, xref="paper", yref="paper",
                          showarrow=False,
                          font=dict(size=FONT_SIZE * 1.2 * scale(presentation), color=GREY))],
        xaxis=dict(visible=False), yaxis=dict(visible=False), showlegend=False)
    return make_figure([], layout)


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


def floats(values: object) -> np.ndarray:
    """A column (Series, array, list) as a float array, NaN where it is not a number."""
    if isinstance(values, pd.Series) and pd.api.types.is_numeric_dtype(values.dtype):
        return values.to_numpy(dtype=float, na_value=np.nan)
    return pd.to_numeric(pd.Series(values) if not isinstance(values, pd.Series) else values,
                         errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _finite(frame: pd.DataFrame, columns: Iterable[str], positive: bool) -> np.ndarray:
    keep = np.ones(len(frame), dtype=bool)
    for c in columns:
        v = floats(frame[c])
        keep &= np.isfinite(v) & (v > 0) if positive else np.isfinite(v)
    return keep


def finite_rows(frame: pd.DataFrame, columns: Iterable[str], positive: bool = False
                ) -> pd.DataFrame:
    """Rows of ``frame`` whose ``columns`` are all finite numbers (and > 0 if ``positive``)."""
    return frame.loc[_finite(frame, columns, positive)]


def strategies_in(frame: pd.DataFrame) -> list[str]:
    """The strategies of ``frame`` in the canonical order (1d, summa, context, then others)."""
    return _canonical(str(s) for s in frame["strategy"].tolist())


def _canonical(strategies: Iterable[str]) -> list[str]:
    present = dict.fromkeys(strategies)
    return [s for s in STRATEGY_ORDER if s in present] + sorted(
        s for s in present if s not in STRATEGY_ORDER)


def _sort_codes(values: pd.Series) -> np.ndarray:
    """Floats ordering ``values`` like ``sort_values`` (NaN, missing last)."""
    if pd.api.types.is_numeric_dtype(values.dtype):
        return floats(values)
    codes = pd.factorize(values, sort=True)[0].astype(float)
    codes[codes < 0] = np.inf
    return codes


def best_order(frame: pd.DataFrame, keys: Sequence[str] = ("strategy", "gpus")) -> np.ndarray:
    """Positions of the fastest row per ``keys`` (by iteration time, else training days),
    sorted by keys: what :func:`best_rows` keeps."""
    score = next((c for c in ("iteration_time_s", "train_days") if c in frame.columns), None)
    keys = [k for k in keys if k in frame.columns]
    order = np.arange(len(frame))
    if score is not None:
        order = np.argsort(floats(frame[score]), kind="stable")  # NaN last
    if keys:
        codes = [_sort_codes(frame[k]) for k in keys]
        first: dict[tuple, int] = {}
        for i, key in zip(order.tolist(), zip(*(c[order].tolist() for c in codes))):
            first.setdefault(key, i)
        order = np.fromiter(first.values(), dtype=np.intp, count=len(first))
        order = order[np.lexsort([c[order] for c in reversed(codes)])]
    return order


def best_rows(frame: pd.DataFrame, keys: Sequence[str] = ("strategy", "gpus"),
              finite: Sequence[str] = (), positive: bool = False) -> pd.DataFrame:
    """The fastest row per ``keys`` (by iteration time, else training days), sorted by keys.

    With ``finite``, only those of these rows whose ``finite`` columns are finite numbers (and
    > 0 if ``positive``): ``finite_rows(best_rows(frame, keys), finite, positive)``.
    """
    order = best_order(frame, keys)
    if finite:
        order = order[_finite(frame, finite, positive)[order]]
    return frame.iloc[order].reset_index(drop=True)


def placement(frame: pd.DataFrame) -> list[str]:
    """Each row's NVLink placement as 'nv_tp1×nv_tp2×nv_dp×nv_pp' ('' when unknown)."""
    if missing(frame, PLACEMENT_COLUMNS):
        return [""] * len(frame)
    return config_values(frame[list(PLACEMENT_COLUMNS)])["placement"]


def fmt_int(value: object) -> str:
    """An integer-valued number as text ('8'), '–' for NaN/None."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(f):
        return "–"
    return str(int(f)) if f == int(f) else f"{f:g}"


def config_values(frame: Mapping) -> dict[str, list[str]]:
    """The parallel configuration of each row as text, by column ('dp': ['8', ...]), and the
    NVLink placement ('placement'); only the columns ``frame`` has. For :meth:`Hover.config`,
    computed once when several traces share the rows."""
    out = {column: [fmt_int(v) for v in _as_list(frame[column])]
           for column, _ in CONFIG_FIELDS if column in frame}
    if all(c in frame for c in PLACEMENT_COLUMNS):
        cols = [_as_list(frame[c]) for c in PLACEMENT_COLUMNS]
        out["placement"] = ["×".join(fmt_int(v) for v in row) for row in zip(*cols)]
    return out


def _as_list(values: object) -> list:
    """A Series, array or sequence as a plain list."""
    tolist = getattr(values, "tolist", None)
    return tolist() if tolist is not None else list(values)  # type: ignore[call-overload]


class Hover:
    """customdata columns of a trace and the hovertemplate lines that show them.

    ``frame`` is a DataFrame or a mapping of column name → values (list or array).
    ``add(column, label, fmt, unit)`` appends a column; ``config()`` appends the parallel
    configuration (dp/tp1/tp2/pp/mb/nb on one line) and its NVLink placement. The column names
    go to the trace's ``meta['customdata']`` so :func:`figure_table` can name them.
    """

    def __init__(self, frame: Mapping, header: str | None = None):
        self.frame = frame
        self.columns: list[str] = []
        self.values: list[list[object]] = []
        self.lines: list[str] = [header] if header else []
        self._customdata: np.ndarray | None = None  # built once, for every trace sharing it

    def _push(self, name: str, values: Sequence[object]) -> int:
        self.columns.append(name)
        self.values.append(_as_list(values))
        self._customdata = None
        return len(self.columns) - 1

    def add(self, column: str, label: str, fmt: str = "", unit: str = "") -> Hover:
        if column in self.frame:
            i = self._push(column, self.frame[column])
            spec = f":{fmt}" if fmt else ""
            self.lines.append(f"{label} %{{customdata[{i}]{spec}}}{unit}")
        return self

    def ref(self, column: str, fmt: str = "") -> str:
        """Register ``column`` and return its hovertemplate placeholder ('%{customdata[i]}')."""
        i = self._push(column, self.frame[column])
        return f"%{{customdata[{i}]{':' + fmt if fmt else ''}}}"

    def line(self, text: str) -> Hover:
        self.lines.append(text)
        return self

    def config(self, values: Mapping[str, Sequence[str]] | None = None) -> Hover:
        """Append the configuration; ``values`` from :func:`config_values` (of the same rows)
        saves recomputing it."""
        values = config_values(self.frame) if values is None else values
        parts = []
        for column, label in CONFIG_FIELDS:
            if column in values:
                i = self._push(column, values[column])
                parts.append(f"{label} %{{customdata[{i}]}}")
        if parts:
            self.lines.append(" · ".join(parts))
        if "placement" in values:
            i = self._push("placement", values["placement"])
            self.lines.append(f"{PLACEMENT_LABEL} %{{customdata[{i}]}}")
        return self

    @property
    def customdata(self) -> np.ndarray | None:
        if not self.values:
            return None
        if self._customdata is None:
            out = np.empty((len(self.values[0]), len(self.values)), dtype=object)
            for j, column in enumerate(self.values):
                out[:, j] = column
            self._customdata = out
        return self._customdata

    def template(self, extra: str = "", header: str | None = None) -> str:
        """The hovertemplate; ``header`` is a first line for this trace only."""
        lines = self.lines if header is None else [header, *self.lines]
        return "<br>".join(lines) + f"<extra>{extra}</extra>"

    def trace_kwargs(self, group: str | None = None, extra: str = "",
                     header: str | None = None) -> dict:
        """customdata, hovertemplate and meta for a trace built from this frame (traces of the
        same hover share its customdata array; ``header`` as in :meth:`template`)."""
        return dict(customdata=self.customdata, hovertemplate=self.template(extra, header),
                    meta={"group": group, "customdata": list(self.columns)})


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


def by_strategy(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(strategy, its rows sorted by GPU count) for each strategy of ``rows``, in the
    canonical order (see :func:`strategies_in`)."""
    keys = np.array([str(s) for s in rows["strategy"].tolist()], dtype=object)
    gpus = floats(rows["gpus"])
    out = []
    for s in _canonical(keys.tolist()):
        idx = np.flatnonzero(keys == s)
        out.append((s, rows.iloc[idx[np.argsort(gpus[idx], kind="stable")]]))
    return out


class Columns(Mapping):
    """The columns of ``frame`` plus (or overridden by) ``extra`` arrays, without copying the
    frame: a cheap stand-in for ``frame.assign(**extra)`` as a :class:`Hover` source."""

    def __init__(self, frame: pd.DataFrame, **extra: object):
        self.frame, self.extra = frame, extra

    def __getitem__(self, key: str) -> object:
        return self.extra[key] if key in self.extra else self.frame[key]

    def __contains__(self, key: object) -> bool:
        return key in self.extra or key in self.frame.columns

    def __iter__(self):
        return iter([*self.frame.columns, *(k for k in self.extra if k not in self.frame)])

    def __len__(self) -> int:
        return sum(1 for _ in self)
