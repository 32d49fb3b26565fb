"""Figures of the Serving page: the Pareto front, latency against load with its knee, memory
per GPU, the decode step by op, and $ per million tokens against the TPOT limit. Frames in
(``model.serving.serve``), plain figures out; an empty figure with a message when there is
nothing to draw."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import log_ticks
from dashboard.figures.common import empty_figure
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import base_layout, font_size, scale
from model.cli.numbers import number, share


def _finite(values) -> list:
    """A column as a list with infinities and NaN as None (a gap, never a huge number)."""
    arr = np.asarray(values, dtype=float)
    return [float(v) if np.isfinite(v) else None for v in arr]


def batch_unit(prefill_instances: float) -> str:
    """What a layout's batch is counted per: a replica, or a decode instance when prefill and
    decode are disaggregated."""
    return "decode instance" if prefill_instances and prefill_instances > 0 else "replica"


def pareto_figure(front: pd.DataFrame, best: dict, presentation: bool = False,
                  plain: bool = False) -> go.Figure:
    """Tokens/s per user against output tokens/s per GPU: the front, and the chosen layout."""
    if front is None or front.empty:
        return empty_figure("No layout fits: nothing on the front.", presentation)
    text = [f"tp {r.tp:.0f} · pp {r.pp:.0f} · ep {r.ep:.0f}"
            f"{' · attention DP' if r.attention_dp else ''} · batch "
            f"{share(r.batch, batch_unit(getattr(r, 'prefill_instances', 0)))}"
            for r in front.itertuples()]
    data = [dict(type="scatter", mode="lines+markers", name="Pareto front",
                 x=_finite(front["output_tokens_per_s_per_gpu"]),
                 y=_finite(front["tokens_per_s_per_user"]), text=text,
                 hovertemplate="%{x:,.4~r} tok/s/GPU<br>%{y:,.4~r} tok/s/user<br>%{text}"
                               "<extra></extra>"),
            dict(type="scatter", mode="markers", name="best within the SLAs",
                 x=[best["output_tokens_per_s_per_gpu"]], y=[best["tokens_per_s_per_user"]],
                 marker=dict(size=14, symbol="star"))]
    layout = base_layout(None, presentation, legend="top")
    layout.update(xaxis=dict(title=dict(text="output tokens/s per GPU")),
                  yaxis=dict(title=dict(text="tokens/s per user (1 / TPOT)")))
    return make_figure(data, layout, plain=plain)


def load_figure(curve: pd.DataFrame, knee_rate: float, presentation: bool = False,
                plain: bool = False) -> go.Figure:
    """TTFT (s, log) and TPOT (ms, right axis) against the Poisson request rate, the knee
    (ρ = 2/3) marked and the saturated rate past which latency is unbounded. The two marks'
    notes sit inside the plot, under the legend (which is above it)."""
    if curve is None or curve.empty:
        return empty_figure("No stable layout to load.", presentation)
    x = _finite(curve["request_rate_per_s"])
    ttft, tpot_ms = _finite(curve["ttft_s"]), _finite(curve["tpot_s"] * 1e3)
    data = [dict(type="scatter", mode="lines", name="TTFT (s)", x=x, y=ttft,
                 hovertemplate="%{x:,.3~r} requests/s: TTFT %{y:,.3~r} s<extra></extra>"),
            dict(type="scatter", mode="lines", name="TPOT (ms)", x=x, y=tpot_ms, yaxis="y2",
                 hovertemplate="%{x:,.3~r} requests/s: TPOT %{y:,.3~r} ms<extra></extra>")]
    layout = base_layout(None, presentation, legend="top")
    saturated = knee_rate * 1.5
    size = font_size(presentation) * 0.9
    layout["margin"] = dict(layout["margin"], r=round(80 * scale(presentation)))
    layout.update(xaxis=dict(title=dict(text="request rate (requests/s, Poisson)")),
                  yaxis=dict(title=dict(text="TTFT (s)"), type="log", **log_ticks(ttft)),
                  yaxis2=dict(title=dict(text="TPOT (ms)"), overlaying="y", side="right",
                              nticks=6, tickformat=",.3~g", showgrid=False, rangemode="tozero"),
                  shapes=[dict(type="line", x0=knee_rate, x1=knee_rate, yref="paper", y0=0, y1=1,
                               line=dict(dash="dash")),
                          dict(type="line", x0=saturated, x1=saturated, yref="paper", y0=0,
                               y1=1, line=dict(dash="dot"))],
                  annotations=[dict(x=knee_rate, y=0.97, yref="paper", showarrow=False,
                                    text="knee: wait = service time", xanchor="right",
                                    yanchor="top", xshift=-4, font=dict(size=size),
                                    bgcolor="rgba(255,255,255,0.8)"),
                               dict(x=saturated, y=0.97, yref="paper", showarrow=False,
                                    text="saturated", xanchor="left", yanchor="top", xshift=4,
                                    font=dict(size=size), bgcolor="rgba(255,255,255,0.8)")])
    return make_figure(data, layout, plain=plain)


MEMORY_PARTS = (("weights_gb", "weights"), ("activations_gb", "activations"),
                ("kv_used_gb", "KV cache in use"), ("kv_free_gb", "KV cache free"),
                ("free_gb", "free"))


def memory_figure(best: dict, capacity_gb: float, presentation: bool = False,
                  plain: bool = False) -> go.Figure:
    """One GPU's HBM: weights, activations, the KV cache in use and free, the rest."""
    if not best.get("fits"):
        return empty_figure("The layout does not fit in HBM.", presentation)
    values = dict(best, kv_free_gb=max(best["kv_cache_gb"] - best["kv_used_gb"], 0.0))
    data = [dict(type="bar", orientation="h", name=label, y=["GPU"], x=[values[key]],
                 hovertemplate=f"{label}: %{{x:,.3~r}} GB<extra></extra>")
            for key, label in MEMORY_PARTS]
    layout = base_layout(None, presentation, legend="top")
    layout.update(barmode="stack",
                  xaxis=dict(title=dict(text=f"GB (capacity {number(capacity_gb)} GB)")),
                  yaxis=dict(visible=False))
    return make_figure(data, layout, plain=plain)


def step_figure(by_op_s: dict[str, float], presentation: bool = False,
                plain: bool = False) -> go.Figure:
    """One decode step by op (ms, the whole stage's layers on one GPU)."""
    items = [(k, v * 1e3) for k, v in by_op_s.items() if v > 0]
    if not items:
        return empty_figure("No decode step to break down.", presentation)
    items.sort(key=lambda kv: kv[1])
    data = [dict(type="bar", orientation="h", y=[k for k, _ in items], x=[v for _, v in items],
                 hovertemplate="%{y}: %{x:,.3~r} ms<extra></extra>", showlegend=False)]
    layout = base_layout(None, presentation)
    layout.update(xaxis=dict(title=dict(text="ms per decode step")),
                  margin=dict(l=120, r=30, t=40, b=60))
    return make_figure(data, layout, plain=plain)


def cost_figure(costs: pd.DataFrame, presentation: bool = False, plain: bool = False) -> go.Figure:
    """The cheapest $ per million output tokens (all GPU time charged to output) within each
    TPOT limit."""
    if costs is None or costs["usd_per_million_output_tokens"].isna().all():
        return empty_figure("No layout meets any of these TPOT limits.", presentation)
    data = [dict(type="scatter", mode="lines+markers", name="$ per million output tokens",
                 x=_finite(costs["tpot_max_s"] * 1e3),
                 y=_finite(costs["usd_per_million_output_tokens"]),
                 hovertemplate="TPOT ≤ %{x:,.3~r} ms: $%{y:,.3~r}/M<extra></extra>")]
    layout = base_layout(None, presentation)
    layout.update(xaxis=dict(title=dict(text="TPOT limit (ms)"), type="log",
                             **log_ticks(costs["tpot_max_s"] * 1e3)),
                  yaxis=dict(title=dict(text="$ per million output tokens"), type="log"))
    return make_figure(data, layout, plain=plain)
