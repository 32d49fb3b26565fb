"""Strong-scaling views of a sweep's best configurations (``model.sweep.best_frame``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..theme import (
    DIMENSION_COLORS,
    DIMENSION_LABELS,
    DIMENSION_ORDER,
    DIMENSION_SYMBOLS,
    GREY,
    apply_layout,
    line_width,
    marker_size,
    strategy_color,
    strategy_label,
)
from .common import (
    Hover,
    best_rows,
    check_frame,
    empty_figure,
    finite_rows,
    gpu_ticks,
    log_ticks,
    pow2_ticks,
    strategies_in,
    subplot_title_colors,
)


def _scaling_rows(scaling: pd.DataFrame | None, value: str) -> tuple[pd.DataFrame | None, str]:
    """The best row per (strategy, gpus) with a finite positive ``value``, or a message."""
    msg = check_frame(scaling, ("strategy", "gpus", value), "scaling results")
    if msg:
        return None, msg
    rows = finite_rows(best_rows(scaling), ("gpus", value), positive=True)
    if rows.empty:
        return None, "No feasible configuration at any GPU count."
    return rows, ""


def _config_hover(rows: pd.DataFrame, header: str) -> Hover:
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
    fig = go.Figure()
    lw, ms = line_width(presentation), marker_size(presentation)
    plotted: list[float] = []
    for s in strategies_in(rows):
        part = rows[rows["strategy"].astype(str) == s].sort_values("gpus")
        color, label = strategy_color(s), strategy_label(s)
        gpus = part["gpus"].to_numpy(dtype=float)
        days = part["train_days"].to_numpy(dtype=float)
        hover = _config_hover(part, f"<b>{label}</b><br>GPUs %{{x}}")
        fig.add_trace(go.Scatter(
            x=gpus, y=days, name=label, mode="lines+markers", legendgroup=s,
            line=dict(color=color, width=lw), marker=dict(color=color, size=ms),
            **hover.trace_kwargs(group=s)))
        ideal = days[0] * gpus[0] / gpus
        plotted += [*days, *ideal]
        fig.add_trace(go.Scatter(
            x=gpus, y=ideal, name=f"{label} ideal", mode="lines", legendgroup=s,
            showlegend=False, line=dict(color=color, width=lw * 0.6, dash="dash"),
            hovertemplate=(f"<b>{label} ideal scaling</b><br>GPUs %{{x}}<br>"
                           "training time %{y:.4g} days<extra></extra>"),
            meta={"group": s, "customdata": []}))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="ideal scaling",
                             line=dict(color=GREY, dash="dash", width=lw * 0.6),
                             hoverinfo="skip", meta={"group": None, "customdata": []}))
    fig.update_xaxes(type="log", title_text="GPUs", **gpu_ticks(rows["gpus"]))
    fig.update_yaxes(type="log", title_text="training time (days)", **log_ticks(plotted))
    return apply_layout(fig, "Training time vs GPU count", presentation)


def efficiency_figure(scaling: pd.DataFrame, presentation: bool = False) -> go.Figure:
    """Strong-scaling speedup (left) and parallel efficiency (right) vs GPU count.

    Per strategy, from its smallest feasible GPU count n0: speedup = samples/s(n) /
    samples/s(n0) (dashed: ideal n/n0), efficiency = speedup / (n/n0) (1 = ideal, dotted).
    Both dimensionless; efficiency above 1 means superlinear scaling (e.g. n0 memory-bound).
    """
    rows, msg = _scaling_rows(scaling, "samples_per_s")
    if rows is None:
        return empty_figure(msg, presentation)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("Speedup", "Parallel efficiency"))
    lw, ms = line_width(presentation), marker_size(presentation)
    plotted: list[float] = []
    for s in strategies_in(rows):
        part = rows[rows["strategy"].astype(str) == s].sort_values("gpus").copy()
        color, label = strategy_color(s), strategy_label(s)
        gpus = part["gpus"].to_numpy(dtype=float)
        thr = part["samples_per_s"].to_numpy(dtype=float)
        ratio = gpus / gpus[0]
        part["speedup"] = thr / thr[0]
        part["efficiency"] = part["speedup"] / ratio
        part["n0"] = int(gpus[0])
        plotted += [*part["speedup"], *ratio]
        common = dict(mode="lines+markers", legendgroup=s, line=dict(color=color, width=lw),
                      marker=dict(color=color, size=ms))
        hover = (_config_hover(part, f"<b>{label}</b><br>GPUs %{{x}}")
                 .add("n0", "baseline GPUs n0").add("speedup", "speedup", ".3g", "×")
                 .add("efficiency", "efficiency", ".1%"))
        fig.add_trace(go.Scatter(x=gpus, y=part["speedup"], name=label, **common,
                                 **hover.trace_kwargs(group=s, extra="speedup")), row=1, col=1)
        fig.add_trace(go.Scatter(x=gpus, y=ratio, name=f"{label} ideal", mode="lines",
                                 legendgroup=s, showlegend=False,
                                 line=dict(color=color, width=lw * 0.6, dash="dash"),
                                 hovertemplate=(f"{label} ideal speedup %{{y:.3g}}×"
                                                "<extra></extra>"),
                                 meta={"group": s, "customdata": []}), row=1, col=1)
        fig.add_trace(go.Scatter(x=gpus, y=part["efficiency"], name=f"{label} efficiency",
                                 showlegend=False, **common,
                                 **hover.trace_kwargs(group=s, extra="efficiency")),
                      row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color=GREY, dash="dot", width=1), row=1, col=2)
    ticks = gpu_ticks(rows["gpus"])
    fig.update_xaxes(type="log", title_text="GPUs", **ticks)
    fig.update_yaxes(type="log", title_text="speedup (×, vs smallest feasible count)",
                     row=1, col=1, **log_ticks(plotted))
    fig.update_yaxes(title_text="parallel efficiency", tickformat=".0%", rangemode="tozero",
                     row=1, col=2)
    apply_layout(fig, "Strong scaling: speedup and efficiency", presentation)
    return fig


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
    strategies = strategies_in(rows)
    fig = make_subplots(rows=1, cols=len(strategies), shared_yaxes=True,
                        horizontal_spacing=0.04,
                        subplot_titles=[strategy_label(s) for s in strategies])
    lw, ms = line_width(presentation), marker_size(presentation)
    values = rows[dims].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    for col, s in enumerate(strategies, start=1):
        part = rows[rows["strategy"].astype(str) == s].sort_values("gpus")
        for dim in dims:
            y = pd.to_numeric(part[dim], errors="coerce").where(lambda v: v > 0)
            hover = (Hover(part, f"<b>{strategy_label(s)}</b> · GPUs %{{x}}<br>"
                                 f"{DIMENSION_LABELS[dim]} = %{{y}}")
                     .add("train_days", "training time", ".4g", " days").config())
            fig.add_trace(go.Scatter(
                x=part["gpus"], y=y, name=DIMENSION_LABELS[dim], legendgroup=dim,
                showlegend=col == 1, mode="lines+markers",
                line=dict(color=DIMENSION_COLORS[dim], width=lw),
                marker=dict(color=DIMENSION_COLORS[dim], size=ms,
                            symbol=DIMENSION_SYMBOLS[dim]),
                **hover.trace_kwargs(group=s, extra=DIMENSION_LABELS[dim])), row=1, col=col)
    fig.update_xaxes(type="log", title_text="GPUs", **gpu_ticks(rows["gpus"]))
    lo, hi = (float(values.min()), float(values.max())) if values.size else (1.0, 1.0)
    fig.update_yaxes(type="log", **pow2_ticks(lo, hi))
    fig.update_yaxes(title_text="dimension size (log2)", row=1, col=1)
    subplot_title_colors(fig, [strategy_color(s) for s in strategies])
    return apply_layout(fig, "Optimal configuration vs GPU count", presentation)
