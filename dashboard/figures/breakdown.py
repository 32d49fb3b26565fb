"""Stacked breakdowns of the best configuration per GPU count: iteration time and memory."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import (
    SMALL_MULTIPLE_LABELS,
    axis_key,
    axis_ref,
    count_label,
    every_nth,
    fmt_int,
    hline,
    log_ticks,
    room_for_titles,
    subplots_layout,
)
from dashboard.figures.common import (
    Rows,
    best_rows,
    by_strategy,
    check_frame,
    empty_figure,
    strategy_name,
    strategy_title,
)
from dashboard.figures.hover import Columns, Hover, config_values, floats
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    AXIS_LINE,
    COMPONENT_COLORS,
    COMPONENT_LABELS,
    COMPONENT_ORDER,
    MEMORY_COLORS,
    MEMORY_LABELS,
    MEMORY_ORDER,
    base_layout,
    strategy_color,
)


def _stacked(frame: pd.DataFrame | None, parts: tuple[str, ...], what: str
             ) -> tuple[list[tuple[str, Rows]], list[str], str]:
    """([(strategy, its best rows by GPU count)], component columns present, message if
    nothing to plot)."""
    msg = check_frame(frame, ("strategy", "gpus"), what)
    if msg:
        return [], [], msg
    present = [c for c in parts if c in frame.columns]
    if not present:
        return [], [], f"No {what} to show: no component columns."
    rows = best_rows(frame, finite=["gpus"], positive=True)
    if rows.empty:
        return [], [], f"No {what} to show (no feasible configuration)."
    return by_strategy(rows), present, ""


def _components(part: Rows, comps: list[str]) -> dict[str, np.ndarray]:
    """Each component column of ``part`` as floats, NaN as 0."""
    out = {}
    for c in comps:
        v = floats(part[c])
        out[c] = np.where(np.isnan(v), 0.0, v)
    return out


def _layout(title: str, groups: list[tuple[str, Rows]], presentation: bool) -> dict:
    """One subplot per strategy (shared y), categorical GPU-count x axes; at most
    ``SMALL_MULTIPLE_LABELS`` compact, horizontal tick labels each ('16K'), so none is cut."""
    strategies = [s for s, _ in groups]
    layout = base_layout(title, presentation)
    titles = [strategy_title(s) for s in strategies]
    layout.update(subplots_layout(titles, 0.05, presentation,
                                  colors=[strategy_color(s) for s in strategies],
                                  shared_y=True))
    room_for_titles(layout, titles, presentation)
    for col, (_, part) in enumerate(groups, start=1):
        cats = _gpu_labels(part)
        shown = [cats[i] for i in every_nth(len(cats), SMALL_MULTIPLE_LABELS)]
        layout[axis_key("x", col)].update(
            type="category", categoryorder="array", categoryarray=cats, tickangle=0,
            tickvals=shown, ticktext=[count_label(float(c)) for c in shown],
            title=dict(text="GPUs"))
    layout.update(barmode="stack", bargap=0.25)
    return layout


def _gpu_labels(part: Rows) -> list[str]:
    return [fmt_int(g) for g in part["gpus"].tolist()]


def time_breakdown_figure(scaling: pd.DataFrame, presentation: bool = False,
                          normalized: bool = False, plain: bool = False) -> go.Figure:
    """Where the best configuration's iteration time goes, per GPU count and strategy.

    Stacked bars of compute, exposed memory, TP/PP/DP communication and pipeline bubble in
    seconds per iteration (they add up to ``iteration_time_s``) on a log axis — iteration
    times span decades across GPU counts, and a linear axis flattens every bar but the
    smallest count's — or as a fraction of the iteration with ``normalized=True``. On the log
    axis each bar's top is its iteration time and each boundary a cumulative time; the axis
    starts at half the smallest first component, so every bar shows. One subplot per
    strategy, shared y axis.
    """
    groups, comps, msg = _stacked(scaling, COMPONENT_ORDER, "time breakdown")
    if msg:
        return empty_figure(msg, presentation)
    data: list[dict] = []
    floor, top = np.inf, 0.0
    for col, (s, part) in enumerate(groups, start=1):
        parts = _components(part, comps)
        cumulative = np.cumsum([parts[c] for c in comps], axis=0)
        positive = cumulative[cumulative > 0]
        if positive.size:
            first = np.where(cumulative > 0, cumulative, np.inf).min(axis=0)
            floor = min(floor, float(first[np.isfinite(first)].min()))
            top = max(top, float(positive.max()))
        denom = sum(parts.values())
        if "iteration_time_s" in part.columns:
            it = floats(part["iteration_time_s"])
            denom = np.where(np.isfinite(it) & (it > 0), it, denom)
        x, config = _gpu_labels(part), config_values(part)
        header = f"<b>{strategy_name(s)}</b> · GPUs %{{x}}"
        refs = dict(xaxis=axis_ref("x", col), yaxis=axis_ref("y", col))
        for comp in comps:
            sec = parts[comp]
            share = np.divide(sec, denom, out=np.zeros_like(sec), where=denom > 0)
            label = COMPONENT_LABELS.get(comp, comp)
            hover = (Hover(Columns(part, seconds=sec, share=share, iteration_s=denom), header)
                     .add("seconds", label, ".4g", " s")
                     .add("share", "share of iteration", ".1%")
                     .add("iteration_s", "iteration", ".4g", " s").config(config))
            data.append(dict(
                type="bar", x=x, y=share if normalized else sec, name=label, legendgroup=comp,
                showlegend=col == 1, **refs,
                marker=dict(color=COMPONENT_COLORS.get(comp), line=dict(width=0)),
                **hover.trace_kwargs(group=s, extra=label)))
    title = "Iteration time breakdown" + (" (fraction)" if normalized else "")
    layout = _layout(title, groups, presentation)
    for col in range(1, len(groups) + 1):
        axis = layout[axis_key("y", col)]
        if normalized:
            axis.update(tickformat=".0%", range=[0, 1])
        elif np.isfinite(floor) and top > 0:
            lo, hi = floor / 2.0, top * 1.3
            axis.update(type="log", range=[math.log10(lo), math.log10(hi)], **log_ticks([lo, hi]))
    layout["yaxis"]["title"] = dict(text="fraction of iteration time" if normalized
                                    else "time per iteration (s, log)")
    return make_figure(data, layout, plain=plain)


def memory_figure(scaling: pd.DataFrame, hbm_capacity_gb: float | None = None,
                  presentation: bool = False, plain: bool = False) -> go.Figure:
    """Memory per GPU (GB = 1e9 bytes) of the best configuration, per GPU count and strategy.

    Stacked bars of weights, gradients, optimizer state and activations (they add up to
    ``memory_gb``); a dashed horizontal line marks the HBM capacity (``hbm_capacity_gb``, or
    the frame's ``hbm_capacity_gb`` column when not given).
    """
    groups, comps, msg = _stacked(scaling, MEMORY_ORDER, "memory breakdown")
    if msg:
        return empty_figure(msg, presentation)
    cap = _capacity(groups, hbm_capacity_gb)
    data: list[dict] = []
    top = 0.0
    for col, (s, part) in enumerate(groups, start=1):
        parts = _components(part, comps)
        total = sum(parts.values())
        if "memory_gb" in part.columns:
            mem = floats(part["memory_gb"])
            total = np.where(np.isfinite(mem), mem, total)
        if np.isfinite(total).any():
            top = max(top, float(np.nanmax(total)))
        x, config = _gpu_labels(part), config_values(part)
        header = f"<b>{strategy_name(s)}</b> · GPUs %{{x}}"
        refs = dict(xaxis=axis_ref("x", col), yaxis=axis_ref("y", col))
        for comp in comps:
            label = MEMORY_LABELS.get(comp, comp)
            gb = parts[comp]
            hover = (Hover(Columns(part, gb=gb, total_gb=total), header)
                     .add("gb", label, ".4g", " GB").add("total_gb", "total", ".4g", " GB")
                     .config(config))
            data.append(dict(
                type="bar", x=x, y=gb, name=label, legendgroup=comp, showlegend=col == 1,
                **refs, marker=dict(color=MEMORY_COLORS.get(comp), line=dict(width=0)),
                **hover.trace_kwargs(group=s, extra=label)))
    layout = _layout("Memory per GPU", groups, presentation)
    if cap is not None:
        top = max(top, cap)
        line = dict(color=AXIS_LINE, dash="dash", width=1.5)
        layout["shapes"] = [hline(cap, line, col) for col in range(1, len(groups) + 1)]
        # named in the legend, so no label can collide with bars or subplot titles
        data.append(dict(type="scatter", x=[None], y=[None], mode="lines", line=line,
                         name=f"HBM capacity {cap:g} GB", hoverinfo="skip"))
    for col in range(1, len(groups) + 1):
        layout[axis_key("y", col)]["range"] = [0, top * 1.12 if top > 0 else 1]
    layout["yaxis"]["title"] = dict(text="memory per GPU (GB)")
    return make_figure(data, layout, plain=plain)


def _capacity(groups: list[tuple[str, Rows]], given: float | None) -> float | None:
    """The HBM capacity to draw: the argument if finite, else the frame's column, else None."""
    try:
        if given is not None and math.isfinite(float(given)):
            return float(given)
    except (TypeError, ValueError):
        pass
    caps = np.concatenate([floats(part["hbm_capacity_gb"]) for _, part in groups
                           if "hbm_capacity_gb" in part.columns] or [np.zeros(0)])
    caps = caps[~np.isnan(caps)]
    return float(caps.max()) if caps.size else None
