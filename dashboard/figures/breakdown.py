"""Stacked breakdowns of the best configuration per GPU count: iteration time and memory."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..theme import (
    AXIS_LINE,
    COMPONENT_COLORS,
    COMPONENT_LABELS,
    COMPONENT_ORDER,
    FONT_SIZE,
    MEMORY_COLORS,
    MEMORY_LABELS,
    MEMORY_ORDER,
    apply_layout,
    strategy_color,
    strategy_label,
)
from .common import (
    Hover,
    best_rows,
    check_frame,
    empty_figure,
    finite_rows,
    fmt_int,
    strategies_in,
    subplot_title_colors,
)


def _stacked(frame: pd.DataFrame | None, parts: tuple[str, ...], what: str
             ) -> tuple[pd.DataFrame | None, list[str], list[str], str]:
    """(best rows, strategies, component columns present, message if nothing to plot)."""
    msg = check_frame(frame, ("strategy", "gpus"), what)
    if msg:
        return None, [], [], msg
    present = [c for c in parts if c in frame.columns]
    if not present:
        return None, [], [], f"No {what} to show: no component columns."
    rows = finite_rows(best_rows(frame), ["gpus"], positive=True)
    if rows.empty:
        return None, [], [], f"No {what} to show (no feasible configuration)."
    rows = rows.copy()
    for c in present:
        rows[c] = pd.to_numeric(rows[c], errors="coerce").fillna(0.0)
    return rows, strategies_in(rows), present, ""


def _subplots(strategies: list[str]) -> go.Figure:
    fig = make_subplots(rows=1, cols=len(strategies), shared_yaxes=True,
                        horizontal_spacing=0.03,
                        subplot_titles=[strategy_label(s) for s in strategies])
    subplot_title_colors(fig, [strategy_color(s) for s in strategies])
    return fig


def _gpu_categories(fig: go.Figure, rows: pd.DataFrame, strategies: list[str]) -> None:
    for col, s in enumerate(strategies, start=1):
        gpus = sorted(rows.loc[rows["strategy"].astype(str) == s, "gpus"].astype(int))
        fig.update_xaxes(type="category", categoryorder="array",
                         categoryarray=[fmt_int(g) for g in gpus], title_text="GPUs",
                         row=1, col=col)


def time_breakdown_figure(scaling: pd.DataFrame, presentation: bool = False,
                          normalized: bool = False) -> go.Figure:
    """Where the best configuration's iteration time goes, per GPU count and strategy.

    Stacked bars of compute, exposed memory, TP/PP/DP communication and pipeline bubble in
    seconds per iteration (they add up to ``iteration_time_s``), or as a fraction of the
    iteration with ``normalized=True``. One subplot per strategy, shared y axis.
    """
    rows, strategies, comps, msg = _stacked(scaling, COMPONENT_ORDER, "time breakdown")
    if rows is None:
        return empty_figure(msg, presentation)
    fig = _subplots(strategies)
    total = rows[comps].sum(axis=1).to_numpy(dtype=float)
    if "iteration_time_s" in rows.columns:
        it = pd.to_numeric(rows["iteration_time_s"], errors="coerce").to_numpy(dtype=float)
        total = np.where(np.isfinite(it) & (it > 0), it, total)
    rows["iteration_s"] = total
    for col, s in enumerate(strategies, start=1):
        part = rows[rows["strategy"].astype(str) == s].sort_values("gpus")
        denom = part["iteration_s"].to_numpy(dtype=float)
        for comp in comps:
            sec = part[comp].to_numpy(dtype=float)
            share = np.divide(sec, denom, out=np.zeros_like(sec), where=denom > 0)
            view = part.assign(seconds=sec, share=share)
            label = COMPONENT_LABELS.get(comp, comp)
            hover = (Hover(view, f"<b>{strategy_label(s)}</b> · GPUs %{{x}}")
                     .add("seconds", label, ".4g", " s")
                     .add("share", "share of iteration", ".1%")
                     .add("iteration_s", "iteration", ".4g", " s").config())
            fig.add_trace(go.Bar(
                x=[fmt_int(g) for g in part["gpus"]], y=share if normalized else sec,
                name=label, legendgroup=comp, showlegend=col == 1,
                marker=dict(color=COMPONENT_COLORS.get(comp), line=dict(width=0)),
                **hover.trace_kwargs(group=s, extra=label)), row=1, col=col)
    _gpu_categories(fig, rows, strategies)
    if normalized:
        fig.update_yaxes(tickformat=".0%", range=[0, 1])
        fig.update_yaxes(title_text="fraction of iteration time", row=1, col=1)
    else:
        fig.update_yaxes(title_text="time per iteration (s)", row=1, col=1)
    fig.update_layout(barmode="stack", bargap=0.25)
    title = "Iteration time breakdown" + (" (fraction)" if normalized else "")
    return apply_layout(fig, title, presentation)


def memory_figure(scaling: pd.DataFrame, hbm_capacity_gb: float | None = None,
                  presentation: bool = False) -> go.Figure:
    """Memory per GPU (GB = 1e9 bytes) of the best configuration, per GPU count and strategy.

    Stacked bars of weights, gradients, optimizer state and activations (they add up to
    ``memory_gb``); a dashed horizontal line marks the HBM capacity (``hbm_capacity_gb``, or
    the frame's ``hbm_capacity_gb`` column when not given).
    """
    rows, strategies, comps, msg = _stacked(scaling, MEMORY_ORDER, "memory breakdown")
    if rows is None:
        return empty_figure(msg, presentation)
    cap = _capacity(rows, hbm_capacity_gb)
    fig = _subplots(strategies)
    total = rows[comps].sum(axis=1).to_numpy(dtype=float)
    if "memory_gb" in rows.columns:
        mem = pd.to_numeric(rows["memory_gb"], errors="coerce").to_numpy(dtype=float)
        total = np.where(np.isfinite(mem), mem, total)
    rows["total_gb"] = total
    for col, s in enumerate(strategies, start=1):
        part = rows[rows["strategy"].astype(str) == s].sort_values("gpus")
        for comp in comps:
            label = MEMORY_LABELS.get(comp, comp)
            view = part.assign(gb=part[comp])
            hover = (Hover(view, f"<b>{strategy_label(s)}</b> · GPUs %{{x}}")
                     .add("gb", label, ".4g", " GB").add("total_gb", "total", ".4g", " GB")
                     .config())
            fig.add_trace(go.Bar(
                x=[fmt_int(g) for g in part["gpus"]], y=part[comp].to_numpy(dtype=float),
                name=label, legendgroup=comp, showlegend=col == 1,
                marker=dict(color=MEMORY_COLORS.get(comp), line=dict(width=0)),
                **hover.trace_kwargs(group=s, extra=label)), row=1, col=col)
    _gpu_categories(fig, rows, strategies)
    top = float(np.nanmax(total)) if np.isfinite(total).any() else 0.0
    if cap is not None:
        top = max(top, cap)
        for col in range(1, len(strategies) + 1):
            fig.add_hline(y=cap, line=dict(color=AXIS_LINE, dash="dash", width=1.5),
                          row=1, col=col)
        fig.add_annotation(text=f"HBM capacity {cap:g} GB", xref="x domain", yref="y",
                           x=0.0, y=cap, xanchor="left", yanchor="bottom", showarrow=False,
                           font=dict(size=FONT_SIZE * 0.9, color=AXIS_LINE))
    fig.update_yaxes(range=[0, top * 1.12 if top > 0 else 1])
    fig.update_yaxes(title_text="memory per GPU (GB)", row=1, col=1)
    fig.update_layout(barmode="stack", bargap=0.25)
    return apply_layout(fig, "Memory per GPU", presentation)


def _capacity(rows: pd.DataFrame, given: float | None) -> float | None:
    """The HBM capacity to draw: the argument if finite, else the frame's column, else None."""
    try:
        if given is not None and math.isfinite(float(given)):
            return float(given)
    except (TypeError, ValueError):
        pass
    if "hbm_capacity_gb" in rows.columns:
        caps = pd.to_numeric(rows["hbm_capacity_gb"], errors="coerce").dropna()
        if len(caps):
            return float(caps.max())
    return None
