"""The Plan & cost page's figures: cost against time to train (the Pareto front over GPU counts
and systems, the plan's answer marked) and the lost-node view of the planned job."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import log_ticks
from dashboard.figures.common import check_frame, empty_figure, finite_rows
from dashboard.figures.compare import SYSTEM_COLORS
from dashboard.figures.hover import Hover, floats
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import GREY, PALETTE, TEXT, base_layout, line_width, marker_size

CLIFF_COLOR = PALETTE[1]  # vermillion: where the job falls off
FRONT_COLOR = TEXT


def _system_traces(rows: pd.DataFrame, ms: float) -> list[dict]:
    """One marker trace per system, each its own colour (as in the system comparison)."""
    data = []
    for i, (system, part) in enumerate(rows.groupby("system", sort=False)):
        hover = (Hover(part, f"<b>{system}</b>").add("gpus", "GPUs", ",")
                 .add("train_days", "training time", ".4g", " days")
                 .add("cost_usd", "cost $", ",.0f").add("energy_mwh", "energy", ",.0f", " MWh")
                 .add("samples_per_s", "samples/s", ".4g").add("mfu", "MFU", ".1%").config())
        color = SYSTEM_COLORS[i % len(SYSTEM_COLORS)]
        data.append(dict(type="scatter", mode="markers", name=str(system),
                         x=part["train_days"].to_numpy(), y=part["cost_usd"].to_numpy(),
                         marker=dict(color=color, size=ms * 0.7, opacity=0.75),
                         **hover.trace_kwargs(group=str(system))))
    return data


def _target_shapes(target_days: float | None, budget_usd: float | None) -> list[dict]:
    line = dict(color=GREY, width=1.5, dash="dash")
    shapes = []
    if target_days:
        shapes.append(dict(type="line", xref="x", x0=target_days, x1=target_days,
                           yref="y domain", y0=0, y1=1, line=line))
    if budget_usd:
        shapes.append(dict(type="line", yref="y", y0=budget_usd, y1=budget_usd,
                           xref="x domain", x0=0, x1=1, line=line))
    return shapes


def pareto_figure(frame: pd.DataFrame, answer: pd.Series | None = None,
                  target_days: float | None = None, budget_usd: float | None = None,
                  presentation: bool = False, plain: bool = False) -> go.Figure:
    """Cost (USD) against training days, log-log: the best configuration of every GPU count
    searched, one marker trace per system (``system`` column); the points no other beats in both
    (``pareto``) joined as "Pareto front"; the plan's ``answer`` row as a star; the target days
    and the budget as dashed lines. Points without a cost (no price) are left out."""
    msg = check_frame(frame, ("system", "gpus", "train_days", "cost_usd", "pareto"),
                      "cost against time")
    if msg:
        return empty_figure(msg, presentation)
    rows = finite_rows(frame, ("train_days", "cost_usd"), positive=True)
    if rows.empty:
        return empty_figure("No priced system has a configuration in range.", presentation)
    ms, lw = marker_size(presentation), line_width(presentation)
    data = _system_traces(rows, ms)
    front = rows[rows["pareto"].astype(bool)].sort_values("train_days")
    data.append(dict(type="scatter", mode="lines", name="Pareto front",
                     x=front["train_days"].to_numpy(), y=front["cost_usd"].to_numpy(),
                     line=dict(color=FRONT_COLOR, width=lw, shape="hv"), hoverinfo="skip"))
    if answer is not None and np.isfinite(floats([answer["cost_usd"]])[0]):
        data.append(dict(type="scatter", mode="markers", name=f"plan: {int(answer['gpus']):,} GPUs",
                         x=[float(answer["train_days"])], y=[float(answer["cost_usd"])],
                         marker=dict(symbol="star", size=ms * 2.2, color=CLIFF_COLOR,
                                     line=dict(color=TEXT, width=1)),
                         hovertemplate="plan: %{x:,.4~r} days, $%{y:,.0f}<extra></extra>"))
    layout = base_layout("Cost against time to train", presentation)
    layout.update(
        xaxis=dict(type="log", title=dict(text="training time (days)"),
                   **log_ticks(rows["train_days"])),
        yaxis=dict(type="log", title=dict(text="cost (USD)"), **log_ticks(rows["cost_usd"])),
        shapes=_target_shapes(target_days, budget_usd))
    return make_figure(data, layout, plain=plain)


def lost_node_figure(frame: pd.DataFrame, cliff_ratio: float,
                     presentation: bool = False, plain: bool = False) -> go.Figure:
    """Throughput per GPU left, relative to the full job's, as the job loses nodes (GPUs left on
    a reversed axis): the best configuration on at most the GPUs left, the best using all of
    them (gaps where none does), the cliff points (below ``cliff_ratio`` or nothing runs)
    marked, and the ratio as a dashed line. ``frame``:
    :func:`model.studies.lost_node.lost_node_frame`."""
    msg = check_frame(frame, ("available_gpus", "gpus", "samples_per_s", "relative_efficiency",
                              "all_used_samples_per_s", "cliff"), "lost-node view")
    if msg:
        return empty_figure(msg, presentation)
    left = floats(frame["available_gpus"])
    full = floats(frame["samples_per_s"])[0] / left[0]
    every = floats(frame["all_used_samples_per_s"]) / left / full
    ms, lw = marker_size(presentation), line_width(presentation)
    hover = (Hover(frame, "GPUs left %{x:,}").add("gpus", "GPUs used", ",")
             .add("train_days", "training time", ".4g", " days")
             .add("samples_per_s", "samples/s", ".4g").config())
    cliff = frame["cliff"].astype(bool).to_numpy()
    shown = np.where(np.isfinite(floats(frame["relative_efficiency"])),
                     floats(frame["relative_efficiency"]), 0.0)  # nothing runs: 0
    data = [
        dict(type="scatter", mode="lines+markers", name="best on the GPUs left", x=left,
             y=shown, line=dict(color=PALETTE[0], width=lw), marker=dict(size=ms),
             **hover.trace_kwargs(group="best")),
        dict(type="scatter", mode="lines+markers", name="using every GPU left", x=left,
             y=every, line=dict(color=GREY, width=lw, dash="dot"), marker=dict(size=ms * 0.8),
             connectgaps=False, hovertemplate="every GPU left: %{y:.3f}<extra></extra>"),
        dict(type="scatter", mode="markers", name=f"cliff (< {cliff_ratio:g})", x=left[cliff],
             y=shown[cliff], marker=dict(symbol="x", size=ms * 1.6, color=CLIFF_COLOR),
             hoverinfo="skip"),
    ]
    layout = base_layout("Losing nodes from the planned job", presentation)
    layout.update(
        xaxis=dict(title=dict(text="GPUs left"), autorange="reversed", tickformat=","),
        yaxis=dict(title=dict(text="throughput per GPU left / full job's"), rangemode="tozero"),
        shapes=[dict(type="line", yref="y", y0=cliff_ratio, y1=cliff_ratio, xref="x domain",
                     x0=0, x1=1, line=dict(color=GREY, width=1.5, dash="dash"))])
    return make_figure(data, layout, plain=plain)
