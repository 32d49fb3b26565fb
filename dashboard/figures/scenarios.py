"""Scenarios against each other: two scenarios' headline numbers side by side
(:func:`model.studies.compare.compare_frame`) and which hardware input moves the training time
most (:func:`model.studies.sensitivity.sensitivity_frame`, a tornado chart)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.common import check_frame, empty_figure
from dashboard.figures.hover import Hover
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import AXIS_LINE, PALETTE, base_layout
from model.cli.numbers import duration_days

LOW_COLOR, HIGH_COLOR = PALETTE[1], PALETTE[0]  # vermillion: −x %, blue: +x %
BETTER_LOWER = ("train_days", "train_days_with_failures", "memory_gb", "cost_usd", "gpu_hours",
                "iteration_time_s")


def compare_figure(frame: pd.DataFrame, names: tuple[str, str] = ("A", "B"),
                   presentation: bool = False, caption: str = "", plain: bool = False) -> go.Figure:
    """Δ % of scenario B against A for each headline metric (horizontal bars; green where B is
    better: lower time, memory, cost; higher throughput and MFU). ``caption``: what the two
    scenarios are, for an exported figure (``layout.meta``:
    :func:`dashboard.server.export.caption`)."""
    msg = check_frame(frame, ("metric", "label", "unit", "a", "b", "delta_pct"),
                      "scenario comparison")
    if msg:
        return empty_figure(msg, presentation)
    rows = frame[np.isfinite(frame["delta_pct"].to_numpy(dtype=float))]
    rows = rows[rows["metric"] != "gpus"]
    if rows.empty:
        return empty_figure("No number to compare: both scenarios need a configuration that "
                            "fits.", presentation)
    pct = rows["delta_pct"].to_numpy(dtype=float)
    lower = rows["metric"].isin(BETTER_LOWER).to_numpy()
    better = np.where(lower, pct < 0, pct > 0)
    colors = np.where(np.abs(pct) < 1e-9, "#9E9E9E", np.where(better, PALETTE[2], PALETTE[1]))
    a, b = names
    hover = (Hover(rows, "<b>%{y}</b>").add("a", a, ",.4g").add("b", b, ",.4g")
             .add("unit", "unit").add("delta_pct", "Δ", "+.2f", " %"))
    data = [dict(type="bar", orientation="h", name=f"{b} vs {a}", y=rows["label"].to_numpy(),
                 x=pct, marker=dict(color=list(colors)), text=[f"{p:+.1f} %" for p in pct],
                 textposition="outside", cliponaxis=False,
                 **hover.trace_kwargs(group="compare"))]
    layout = base_layout(f"{b} against {a}", presentation)
    span = float(np.max(np.abs(pct))) if len(pct) else 1.0
    layout.update(
        showlegend=False,
        xaxis=dict(title=dict(text=f"change of {b} from {a} (%)"), zeroline=True,
                   zerolinecolor=AXIS_LINE, range=[-1.3 * span - 1, 1.3 * span + 1]),
        yaxis=dict(autorange="reversed"), margin=dict(l=200, r=40, t=70, b=60))
    if caption:
        layout["meta"] = {"caption": caption}
    return make_figure(data, layout, plain=plain)


def tornado_figure(frame: pd.DataFrame, fraction: float, presentation: bool = False
                   , plain: bool = False) -> go.Figure:
    """A tornado chart: for each input (largest swing on top), the change (%) of the training
    time when it is x % lower (one bar) and x % higher (the other)."""
    msg = check_frame(frame, ("label", "low_change_pct", "high_change_pct", "base_days"),
                      "sensitivity")
    if msg:
        return empty_figure(msg, presentation)
    pct = round(100 * fraction, 6)
    data = []
    for side, color, sign in (("low", LOW_COLOR, "−"), ("high", HIGH_COLOR, "+")):
        change = frame[f"{side}_change_pct"].to_numpy(dtype=float)
        finite = np.isfinite(change)
        shown = np.where(finite, change, 0.0)  # nothing fits: a label at 0, no bar
        hover = (Hover(frame, f"<b>%{{y}}</b> {sign}{pct:g} %")
                 .add(f"{side}_value", "value", ".4g").add("unit", "")
                 .add(f"{side}_days", "training time", ".4g", " days")
                 .add("base_days", "baseline", ".4g", " days")
                 .add(f"{side}_change_pct", "change", "+.2f", " %"))
        data.append(dict(type="bar", orientation="h", name=f"input {sign}{pct:g} %",
                         y=frame["label"].to_numpy(), x=shown, marker=dict(color=color),
                         text=["" if f else "nothing fits" for f in finite],
                         textposition="outside", cliponaxis=False,
                         **hover.trace_kwargs(group=side)))
    base = float(frame["base_days"].iloc[0])
    layout = base_layout(f"Baseline {duration_days(base)}", presentation, legend="top")
    layout.update(
        barmode="overlay",
        xaxis=dict(title=dict(text="change of the training time (%)"), zeroline=True,
                   zerolinecolor=AXIS_LINE),
        yaxis=dict(autorange="reversed"), margin=dict(l=250, r=40, t=100, b=60))
    return make_figure(data, layout, plain=plain)
