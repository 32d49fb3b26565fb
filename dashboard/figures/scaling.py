"""Strong-scaling views of a sweep's best configurations (``model.explore.sweep.best_frame``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..theme import (
    DIMENSION_COLORS,
    DIMENSION_LABELS,
    DIMENSION_ORDER,
    DIMENSION_SYMBOLS,
    GREY,
    base_layout,
    line_width,
    marker_size,
    strategy_color,
    strategy_label,
)
from .common import (
    Columns,
    Hover,
    axis_key,
    axis_ref,
    best_rows,
    by_strategy,
    check_frame,
    empty_figure,
    floats,
    gpu_ticks,
    hline,
    log_ticks,
    make_figure,
    pow2_ticks,
    subplots_layout,
)


def _scaling_rows(scaling: pd.DataFrame | None, value: str) -> tuple[pd.DataFrame | None, str]:
    """The best row per (strategy, gpus) with a finite positive ``value``, or a message."""
    msg = check_frame(scaling, ("strategy", "gpus", value), "scaling results")
    if msg:
        return None, msg
    rows = best_rows(scaling, finite=("gpus", value), positive=True)
    if rows.empty:
        return None, "No feasible configuration at any GPU count."
    return rows, ""


def _config_hover(rows: pd.DataFrame | Columns, header: str) -> Hover:
    return (Hover(rows, header)
            .add("train_days", "training time", ".4g", " days")
            .add("iteration_time_s", "iteration", ".4g", " s")
            .add("samples_per_s", "samples/s", ".4g")
            .add("mfu", "MFU", ".1%")
            .config())


def training_time_figure(scaling: pd.DataFrame, presentation: bool = False) -> go.Figure:
    """Training time (days) vs GPU count, log-log, one line per strategy.

    Each strategy also gets a dashed ideal-scaling line from its smallest feasible GPU count
    n0: days(n0) · n0 / n. Hover: GPUs, days, samples/s, MFU, the configuration and its NVLink
    placement. If several rows share (strategy, gpus), the fastest is plotted.
    """
    rows, msg = _scaling_rows(scaling, "train_days")
    if rows is None:
        return empty_figure(msg, presentation)
    lw, ms = line_width(presentation), marker_size(presentation)
    data: list[dict] = []
    plotted: list[float] = []
    for s, part in by_strategy(rows):
        color, label = strategy_color(s), strategy_label(s)
        gpus = part["gpus"].to_numpy(dtype=float)
        days = part["train_days"].to_numpy(dtype=float)
        hover = _config_hover(part, f"<b>{label}</b><br>GPUs %{{x}}")
        data.append(dict(
            type="scatter", x=gpus, y=days, name=label, mode="lines+markers", legendgroup=s,
            line=dict(color=color, width=lw), marker=dict(color=color, size=ms),
            **hover.trace_kwargs(group=s)))
        ideal = days[0] * gpus[0] / gpus
        plotted += [*days, *ideal]
        data.append(dict(
            type="scatter", x=gpus, y=ideal, name=f"{label} ideal", mode="lines",
            legendgroup=s, showlegend=False, line=dict(color=color, width=lw * 0.6, dash="dash"),
            hovertemplate=(f"<b>{label} ideal scaling</b><br>GPUs %{{x}}<br>"
                           "training time %{y:.4g} days<extra></extra>"),
            meta={"group": s, "customdata": []}))
    data.append(dict(type="scatter", x=[None], y=[None], mode="lines", name="ideal scaling",
                     line=dict(color=GREY, dash="dash", width=lw * 0.6), hoverinfo="skip",
                     meta={"group": None, "customdata": []}))
    layout = base_layout("Training time vs GPU count", presentation)
    layout.update(
        xaxis=dict(type="log", title=dict(text="GPUs"), **gpu_ticks(rows["gpus"])),
        yaxis=dict(type="log", title=dict(text="training time (days)"), **log_ticks(plotted)))
    return make_figure(data, layout)


def efficiency_figure(scaling: pd.DataFrame, presentation: bool = False) -> go.Figure:
    """Strong-scaling speedup (left) and parallel efficiency (right) vs GPU count.

    Per strategy, from its smallest feasible GPU count n0: speedup = samples/s(n) /
    samples/s(n0) (dashed: ideal n/n0), efficiency = speedup / (n/n0) (1 = ideal, dotted).
    Both dimensionless; efficiency above 1 means superlinear scaling (e.g. n0 memory-bound).
    """
    rows, msg = _scaling_rows(scaling, "samples_per_s")
    if rows is None:
        return empty_figure(msg, presentation)
    lw, ms = line_width(presentation), marker_size(presentation)
    data: list[dict] = []
    plotted: list[float] = []
    for s, part in by_strategy(rows):
        color, label = strategy_color(s), strategy_label(s)
        gpus = part["gpus"].to_numpy(dtype=float)
        thr = part["samples_per_s"].to_numpy(dtype=float)
        ratio = gpus / gpus[0]
        speedup = thr / thr[0]
        efficiency = speedup / ratio
        view = Columns(part, speedup=speedup, efficiency=efficiency,
                       n0=[int(gpus[0])] * len(gpus))
        plotted += [*speedup, *ratio]
        common = dict(type="scatter", mode="lines+markers", legendgroup=s,
                      line=dict(color=color, width=lw), marker=dict(color=color, size=ms))
        hover = (_config_hover(view, f"<b>{label}</b><br>GPUs %{{x}}")
                 .add("n0", "baseline GPUs n0").add("speedup", "speedup", ".3g", "×")
                 .add("efficiency", "efficiency", ".1%"))
        data.append(dict(x=gpus, y=speedup, name=label, xaxis="x", yaxis="y", **common,
                         **hover.trace_kwargs(group=s, extra="speedup")))
        data.append(dict(type="scatter", x=gpus, y=ratio, name=f"{label} ideal", mode="lines",
                         legendgroup=s, showlegend=False, xaxis="x", yaxis="y",
                         line=dict(color=color, width=lw * 0.6, dash="dash"),
                         hovertemplate=f"{label} ideal speedup %{{y:.3g}}×<extra></extra>",
                         meta={"group": s, "customdata": []}))
        data.append(dict(x=gpus, y=efficiency, name=f"{label} efficiency", showlegend=False,
                         xaxis="x2", yaxis="y2", **common,
                         **hover.trace_kwargs(group=s, extra="efficiency")))
    layout = base_layout("Strong scaling: speedup and efficiency", presentation)
    layout.update(subplots_layout(("Speedup", "Parallel efficiency"), 0.2, presentation))
    layout["shapes"] = [hline(1.0, dict(color=GREY, dash="dot", width=1), col=2)]
    ticks = gpu_ticks(rows["gpus"])
    for col in (1, 2):
        layout[axis_key("x", col)].update(type="log", title=dict(text="GPUs"), **ticks)
    layout["yaxis"].update(type="log", title=dict(text="speedup (×, vs smallest feasible count)"),
                           **log_ticks(plotted))
    layout["yaxis2"].update(title=dict(text="parallel efficiency"), tickformat=".0%",
                            rangemode="tozero")
    return make_figure(data, layout)


def optimal_config_figure(scaling: pd.DataFrame, presentation: bool = False) -> go.Figure:
    """The best configuration's parallel dimensions (tp1, tp2, pp, dp, microbatch, nb) vs GPUs.

    One subplot per strategy, log2 y axis (dimension size, a count); the hover gives the whole
    configuration and its NVLink placement (GPUs of each dimension inside one NVLink domain).
    """
    rows, msg = _scaling_rows(scaling, "gpus")
    if rows is None:
        return empty_figure(msg, presentation)
    dims = [d for d in DIMENSION_ORDER if d in rows.columns]
    if not dims:
        return empty_figure("No parallel dimensions in the scaling results.", presentation)
    groups = by_strategy(rows)
    strategies = [s for s, _ in groups]
    lw, ms = line_width(presentation), marker_size(presentation)
    values = np.concatenate([floats(rows[d]) for d in dims])
    values = values[np.isfinite(values) & (values > 0)]
    data: list[dict] = []
    for col, (s, part) in enumerate(groups, start=1):
        gpus = part["gpus"].to_numpy()
        xref, yref = axis_ref("x", col), axis_ref("y", col)
        # one hover (customdata) for the strategy's traces; each names its dimension
        hover = Hover(part).add("train_days", "training time", ".4g", " days").config()
        for dim in dims:
            y = floats(part[dim])
            y = np.where(y > 0, y, np.nan)
            header = (f"<b>{strategy_label(s)}</b> · GPUs %{{x}}<br>"
                      f"{DIMENSION_LABELS[dim]} = %{{y}}")
            data.append(dict(
                type="scatter", x=gpus, y=y, name=DIMENSION_LABELS[dim], legendgroup=dim,
                showlegend=col == 1, mode="lines+markers", xaxis=xref, yaxis=yref,
                line=dict(color=DIMENSION_COLORS[dim], width=lw),
                marker=dict(color=DIMENSION_COLORS[dim], size=ms,
                            symbol=DIMENSION_SYMBOLS[dim]),
                **hover.trace_kwargs(group=s, extra=DIMENSION_LABELS[dim], header=header)))
    layout = base_layout("Optimal configuration vs GPU count", presentation)
    layout.update(subplots_layout([strategy_label(s) for s in strategies], 0.04, presentation,
                                  colors=[strategy_color(s) for s in strategies],
                                  shared_y=True))
    lo, hi = (float(values.min()), float(values.max())) if values.size else (1.0, 1.0)
    xticks, yticks = gpu_ticks(rows["gpus"]), pow2_ticks(lo, hi)
    for col in range(1, len(strategies) + 1):
        layout[axis_key("x", col)].update(type="log", title=dict(text="GPUs"), **xticks)
        layout[axis_key("y", col)].update(type="log", **yticks)
    layout["yaxis"]["title"] = dict(text="dimension size (log2)")
    return make_figure(data, layout)
