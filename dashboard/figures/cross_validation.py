"""Leave-one-source-out cross-validation per source: in-sample vs cross-validated error.

Inputs are ``model.validation.cross_validation.cross_validation_sources()`` (one row per
source, the summary row last) and ``cross_validation_runs()`` (one row per run). Errors are
|100·(1 − predicted / measured)| of the iteration time, in percent.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.common import check_frame, empty_figure
from dashboard.figures.hover import Columns, Hover
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    AXIS_LINE,
    FONT_SIZE,
    GREY,
    PALETTE,
    base_layout,
    marker_size,
    scale,
)
from model.validation.calibrate import ALL_FIRM_PYTORCH
from model.validation.cross_validation import ALL_FIRM

SOURCE_COLUMNS = ("source", "runs", "uncertain", "in_sample_mean_pct", "cross_validated_mean_pct")
RUN_COLUMNS = ("source", "in_sample_error_pct", "cross_validated_error_pct")
KINDS = (("in_sample", "in sample", PALETTE[5]), ("cross_validated", "cross-validated",
                                                   PALETTE[1]))
OFFSET = 0.2  # each source's row: in sample above (−), cross-validated below (+)
FAMILY_FILL = "rgba(230, 159, 0, 0.12)"


def source_label(row: dict) -> str:
    """'korthikanti-2022 · 8 runs', '… (uncertain)' for uncertain sources."""
    runs = int(row["runs"])
    tail = " (uncertain)" if row.get("uncertain") and row["source"] != ALL_FIRM else ""
    return f"{row['source']} · {runs} run{'s' if runs != 1 else ''}{tail}"


def _bars(sources: pd.DataFrame, kind: str, name: str, color: str, sign: float) -> dict:
    y = np.arange(len(sources)) + sign * OFFSET
    uncertain = sources["uncertain"].fillna(False).astype(bool).to_numpy()
    view = Columns(sources, label=[source_label(r) for r in sources.to_dict("records")])
    hover = Hover(view)
    hover.line(f"<b>{hover.ref('label')}</b> · {name}")
    hover.add(f"{kind}_mean_pct", "mean |error|", ".2f", " %")
    hover.add(f"{kind}_max_pct", "max |error|", ".2f", " %")
    return dict(type="bar", orientation="h", x=sources[f"{kind}_mean_pct"].to_numpy(float), y=y,
                width=0.36, name=f"{name}: mean |error|", legendgroup=kind,
                marker=dict(color=color, line=dict(color=color, width=0.5),
                            pattern=dict(shape=np.where(uncertain, "/", ""), fgcolor="white",
                                         fillmode="overlay", solidity=0.45)),
                **hover.trace_kwargs(group=kind))


def _dots(sources: pd.DataFrame, runs: pd.DataFrame, kind: str, name: str, color: str,
          sign: float, size: float) -> dict:
    """Each run's |error|, on its source's row (the summary row: every firm run)."""
    xs, ys, ids = [], [], []
    firm = ~runs["uncertain"].fillna(False).astype(bool) if "uncertain" in runs.columns else True
    # the summary rows: the Megatron family's firm runs (ALL_FIRM), the PyTorch family's
    pytorch = (runs["family"] == "pytorch" if "family" in runs.columns
               else pd.Series(False, index=runs.index))
    for i, src in enumerate(sources["source"]):
        if src == ALL_FIRM:
            part = runs[firm & ~pytorch]
        elif src == ALL_FIRM_PYTORCH:
            part = runs[firm & pytorch]
        else:
            part = runs[runs["source"] == src]
        err = np.abs(part[f"{kind}_error_pct"].to_numpy(float))
        xs.extend(err.tolist())
        ys.extend([i + sign * OFFSET] * len(err))
        ids.extend(part["id"].astype(str).tolist() if "id" in part.columns else [""] * len(err))
    view = {"run": ids}
    hover = Hover(view)
    hover.line(f"<b>{hover.ref('run')}</b>")
    hover.line(f"{name} |error| %{{x:.2f}} %")
    return dict(type="scatter", mode="markers", x=np.array(xs), y=np.array(ys),
                name=f"{name}: each run", legendgroup=kind + "-runs",
                marker=dict(color="white", size=size * 0.7, symbol="circle",
                            line=dict(color=color, width=1.5)),
                **hover.trace_kwargs(group=kind + "-runs"))


def cross_validation_figure(sources: pd.DataFrame, runs: pd.DataFrame,
                            presentation: bool = False, plain: bool = False) -> go.Figure:
    """Per source, the mean |error| of its runs in sample (efficiencies fitted on every source)
    and cross-validated (fitted without it), as horizontal bars, with every run's |error| as a
    dot. Uncertain sources are hatched; releases of the same recipes (``same_recipes``) share a
    shaded band labelled as a test of repeatability, not generalisation."""
    msg = check_frame(sources, SOURCE_COLUMNS, "cross-validation table")
    if msg:
        return empty_figure(msg, presentation)
    if check_frame(runs, RUN_COLUMNS, "cross-validated runs"):
        runs = pd.DataFrame(columns=[*RUN_COLUMNS, "uncertain", "id"])
    sources = sources.reset_index(drop=True)
    ms, k = marker_size(presentation), scale(presentation)
    data: list[dict] = []
    for (kind, name, color), sign in zip(KINDS, (-1.0, 1.0)):
        data.append(_bars(sources, kind, name, color, sign))
    for (kind, name, color), sign in zip(KINDS, (-1.0, 1.0)):
        data.append(_dots(sources, runs, kind, name, color, sign, ms))
    shapes, annotations = _families(sources, k)
    n = len(sources)
    if n > 1 and sources["source"].iloc[-1] == ALL_FIRM:  # the summary row, set apart
        shapes.append(dict(type="line", xref="paper", x0=0, x1=1, yref="y", y0=n - 1.5,
                           y1=n - 1.5, line=dict(color=AXIS_LINE, width=1, dash="dot")))
    highest = float(np.nanmax([*np.abs(runs["cross_validated_error_pct"].to_numpy(float)),
                               *np.abs(runs["in_sample_error_pct"].to_numpy(float)),
                               *sources["cross_validated_mean_pct"].to_numpy(float), 1.0]))
    layout = base_layout("Error per source: in sample vs leave-one-source-out", presentation)
    layout.update(
        barmode="overlay", shapes=shapes, annotations=annotations,
        height=int(max(430, 58 * k * n + 170 * k)),
        xaxis=dict(title=dict(text="|error| of the iteration time (%)"), ticksuffix=" %",
                   range=[0, highest * 1.08], zeroline=False),
        yaxis=dict(tickvals=list(range(n)),
                   ticktext=[source_label(r) for r in sources.to_dict("records")],
                   range=[n - 0.5, -0.5], showgrid=False))
    return make_figure(data, layout, plain=plain)


def _families(sources: pd.DataFrame, k: float) -> tuple[list[dict], list[dict]]:
    """A shaded band and a label over the rows of each family of releases."""
    shapes, annotations = [], []
    if "family" not in sources.columns:
        return shapes, annotations
    for family in dict.fromkeys(f for f in sources["family"] if f):
        rows = np.flatnonzero((sources["family"] == family).to_numpy())
        if len(rows) < 2:
            continue
        lo, hi = float(rows.min()) - 0.45, float(rows.max()) + 0.45
        shapes.append(dict(type="rect", xref="paper", x0=0, x1=1, yref="y", y0=lo, y1=hi,
                           fillcolor=FAMILY_FILL, line=dict(width=0), layer="below"))
        annotations.append(dict(
            text=f"{family}: releases of the same recipes — repeatability, not generalisation",
            xref="paper", x=0.995, xanchor="right", yref="y", y=lo, yanchor="top", yshift=-1,
            showarrow=False, font=dict(size=FONT_SIZE * 0.8 * k, color=GREY)))
    return shapes, annotations
