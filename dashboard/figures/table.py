"""The tidy data behind a figure, for CSV export."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

BASE_COLUMNS = ("trace", "type", "group", "x", "y", "z", "text")


def _decode(value: dict) -> object:
    """A plotly typed-array spec ({'dtype', 'bdata', 'shape'}, what ``fig.to_dict()`` and the
    browser give for numpy arrays) or a JSON-ified typed array ({'0': v0, '1': v1, ...}) as a
    numpy array / list; any other dict as None."""
    if "bdata" in value and "dtype" in value:
        try:
            raw = base64.b64decode(value["bdata"])
            arr = np.frombuffer(raw, dtype=np.dtype(str(value["dtype"])).newbyteorder("<"))
        except (ValueError, TypeError):
            return None
        shape = value.get("shape")
        if isinstance(shape, str):
            shape = [int(p) for p in shape.split(",") if p.strip()]
        return arr.reshape(shape) if shape else arr
    if value and all(str(k).isdigit() for k in value):
        return [value[k] for k in sorted(value, key=int)]
    return None


def _seq(value: object) -> list | None:
    """A trace array attribute as a list (None when unset or scalar)."""
    if isinstance(value, dict):
        value = _decode(value)
    if value is None or isinstance(value, (str, bytes, dict)):
        return None
    if isinstance(value, np.ndarray):  # plain Python numbers, whatever the array's width
        return value.tolist() if value.ndim else None
    try:
        return list(value)  # type: ignore[call-overload]
    except TypeError:
        return None


def _custom_names(trace: go.BaseTraceType, width: int) -> list[str]:
    meta = trace.meta if isinstance(trace.meta, dict) else {}
    names = list(meta.get("customdata") or [])
    return (names + [f"customdata_{i}" for i in range(len(names), width)])[:width]


def _row_items(row: object) -> list:
    if row is None:
        return []
    if isinstance(row, (list, tuple, np.ndarray)):
        return list(row)
    return [row]


def _one_d(trace: go.BaseTraceType, base: dict) -> list[dict]:
    xs, ys = _seq(getattr(trace, "x", None)), _seq(getattr(trace, "y", None))
    n = max(len(xs or ()), len(ys or ()))
    texts = _seq(getattr(trace, "text", None))
    scalar_text = trace.text if isinstance(getattr(trace, "text", None), str) else None
    custom = _seq(getattr(trace, "customdata", None)) or []
    width = max((len(_row_items(r)) for r in custom), default=0)
    names = _custom_names(trace, width)
    rows = []
    for i in range(n):
        x = xs[i] if xs is not None and i < len(xs) else None
        y = ys[i] if ys is not None and i < len(ys) else None
        if x is None and y is None:
            continue  # a legend-only placeholder
        row = dict(base, x=x, y=y)
        if texts is not None and i < len(texts):
            row["text"] = texts[i]
        elif scalar_text is not None:
            row["text"] = scalar_text
        items = _row_items(custom[i]) if i < len(custom) else []
        row.update({name: v for name, v in zip(names, items)})
        rows.append(row)
    return rows


def _two_d(trace: go.BaseTraceType, base: dict, z: Sequence) -> list[dict]:
    xs, ys = _seq(trace.x), _seq(trace.y)
    texts = _seq(getattr(trace, "text", None))
    custom = _seq(getattr(trace, "customdata", None))
    width = 0
    if custom is not None:
        width = max((len(_row_items(c)) for r in custom for c in _seq(r) or ()), default=0)
    names = _custom_names(trace, width)
    rows = []
    for i, zrow in enumerate(z):
        for j, value in enumerate(_seq(zrow) or ()):
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue  # a gap: nothing drawn there
            row = dict(base, x=xs[j] if xs and j < len(xs) else j,
                       y=ys[i] if ys and i < len(ys) else i, z=value)
            if texts is not None and i < len(texts):
                trow = _seq(texts[i])
                if trow is not None and j < len(trow):
                    row["text"] = trow[j]
            if custom is not None and i < len(custom):
                crow = _seq(custom[i]) or []
                items = _row_items(crow[j]) if j < len(crow) else []
                row.update({name: v for name, v in zip(names, items)})
            rows.append(row)
    return rows


def figure_table(fig: go.Figure) -> pd.DataFrame:
    """One row per plotted point (per cell for heatmaps/contours) of every trace of ``fig``.

    Columns: ``trace`` (name), ``type``, ``group`` (the strategy, system or category the
    trace belongs to, from its ``meta``), ``x``, ``y``, ``z`` and ``text`` where present, then
    the hover data (configuration, metrics) named as in the figure. Values are those plotted:
    e.g. a log-scale heatmap's ``z`` is log10 of the value, which its hover columns hold in
    real units. Empty when the figure has no data.
    """
    rows: list[dict] = []
    for trace in fig.data:
        meta = trace.meta if isinstance(trace.meta, dict) else {}
        base = {"trace": trace.name, "type": trace.type, "group": meta.get("group")}
        z = _seq(getattr(trace, "z", None))
        if z is not None and any(_seq(r) is not None for r in z):
            rows.extend(_two_d(trace, base, z))
        else:
            rows.extend(_one_d(trace, base))
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=list(BASE_COLUMNS))
    for col in BASE_COLUMNS:
        if col not in table.columns:
            table[col] = None
    extra = [c for c in table.columns if c not in BASE_COLUMNS]
    table = table[list(BASE_COLUMNS) + extra]
    empty = [c for c in ("z", "text") if table[c].isna().all()]
    return table.drop(columns=empty)
