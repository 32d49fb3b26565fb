"""Shared pieces of the figures: strategy names, the empty-figure message, input checks, the
best row per strategy and GPU count.

Figures are built as plain dicts (traces and layout) and turned into a plotly Figure once, by
:func:`~dashboard.figures.maker.make_figure`. The axes helpers (:mod:`.axes`), the hover data
(:mod:`.hover`) and the maker (:mod:`.maker`) live in their own modules: a figure module imports
each piece from its home.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.hover import (
    PLACEMENT_COLUMNS,
    config_values,
    floats,
)
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    FONT_SIZE,
    GREY,
    STRATEGY_ORDER,
    WARNING,
    base_layout,
    scale,
    strategy_label,
)
from model.physics.strategies import IDEALISED

IDEALISED_SUFFIX = " (idealised)"


def strategy_name(strategy: str) -> str:
    """A strategy's display name, marked when no production stack ships it
    (``model.physics.strategies.IDEALISED``): '2D SUMMA (idealised)'."""
    return strategy_label(strategy) + (IDEALISED_SUFFIX if strategy in IDEALISED else "")


def strategy_title(strategy: str) -> str:
    """A strategy's name as a small multiple's title: on two lines when idealised (one line
    would run into the neighbouring titles)."""
    return strategy_name(strategy).replace(IDEALISED_SUFFIX, "<br>" + IDEALISED_SUFFIX.strip())


def empty_figure(message: str, presentation: bool = False, plain: bool = False) -> go.Figure:
    """A blank figure (no axes) with ``message`` centred: shown when there is nothing to plot."""
    layout = base_layout(None, presentation)
    layout.update(
        annotations=[dict(text=message, x=0.5, y=0.5, xref="paper", yref="paper",
                          showarrow=False,
                          font=dict(size=FONT_SIZE * 1.2 * scale(presentation), color=GREY))],
        xaxis=dict(visible=False), yaxis=dict(visible=False), showlegend=False)
    return make_figure([], layout, plain=plain)


def mark_not_validated(fig: go.Figure | dict, text: str, presentation: bool = False
                       ) -> go.Figure | dict:
    """``fig`` marked, in the top-right corner of its plot area, with ``text`` ('not
    validated: no published dense run on mi300x was ever scored') when it is not empty: a
    figure of an unvalidated system or stack says so wherever it is shown or exported. A plotly
    Figure or the plain dict of ``plain=True``, changed in place and returned."""
    if not text:
        return fig
    note = dict(text=f"⚠ {text[:160]}", x=1.0, xref="paper", xanchor="right", y=1.0,
                yref="paper", yanchor="top", showarrow=False, name="not validated",
                font=dict(size=FONT_SIZE * 0.85 * scale(presentation), color=WARNING),
                bgcolor="rgba(255,255,255,0.85)")
    if isinstance(fig, dict):
        layout = fig["layout"]
        layout["annotations"] = [*(layout.get("annotations") or []), note]
    else:
        fig.add_annotation(note)
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


def by_strategy(rows: pd.DataFrame) -> list[tuple[str, Rows]]:
    """(strategy, its rows sorted by GPU count) for each strategy of ``rows``, in the
    canonical order (see :func:`strategies_in`); the parts share one read of each column."""
    keys = np.array([str(s) for s in rows["strategy"].tolist()], dtype=object)
    gpus = floats(rows["gpus"])
    columns = _ColumnArrays(rows)
    out = []
    for s in _canonical(keys.tolist()):
        idx = np.flatnonzero(keys == s)
        out.append((s, Rows(columns, idx[np.argsort(gpus[idx], kind="stable")])))
    return out


class _ColumnArrays:
    """The columns of a frame as numpy arrays, each read once (on first use)."""

    def __init__(self, frame: pd.DataFrame):
        self.frame, self.columns, self._arrays = frame, frame.columns, {}

    def __getitem__(self, key: str) -> np.ndarray:
        array = self._arrays.get(key)
        if array is None:
            array = self._arrays[key] = self.frame[key].to_numpy()
        return array


class Rows(Mapping):
    """Some rows of a frame, by position, as column name → numpy array: the part of a frame
    one trace draws, without building a DataFrame for it (pandas costs ~0.1 ms per take and
    per column read on the few rows a figure has)."""

    def __init__(self, columns: _ColumnArrays, index: np.ndarray):
        self._source, self.index, self.columns = columns, index, columns.columns
        self._taken: dict[str, np.ndarray] = {}

    def __getitem__(self, key: str) -> np.ndarray:
        array = self._taken.get(key)
        if array is None:
            array = self._taken[key] = self._source[key][self.index]
        return array

    def __contains__(self, key: object) -> bool:
        return key in self.columns

    def __iter__(self):
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)
