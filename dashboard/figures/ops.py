"""Per-op views of one configuration (``model.evaluate(...).ops``, see
model.engine.report.op_table)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import fmt_num, log_ticks
from dashboard.figures.common import check_frame, empty_figure
from dashboard.figures.hover import Columns, Hover
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    AXIS_LINE,
    BOUND_COLORS,
    FONT_SIZE,
    GREY,
    OP_COMPONENT_COLORS,
    OP_COMPONENT_LABELS,
    OP_COMPONENT_ORDER,
    base_layout,
    font_size,
    line_width,
    scale,
)
from model.physics.optable import ALLTOALL_OPS

ROOF_COLORS = {"matrix": "#000000", "vector": "#666666", "hbm": "#888888"}
# legend names of what bounds an op (model.engine.report._bound)
BOUND_LABELS = {"overhead": "launch-overhead-bound"}
MIN_HEIGHT = 430  # px, the dashboard's graph card: the ops breakdown grows beyond it with the ops
# op kinds whose collectives are the expert-parallel all-to-alls (MoE dispatch and combine)
ALLTOALL_KINDS = tuple(kind.value for kind in ALLTOALL_OPS)


def _num(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A column as floats, NaN → 0 (missing column → zeros)."""
    if column not in frame.columns:
        return np.zeros(len(frame))
    return pd.to_numeric(frame[column], errors="coerce").fillna(0.0).to_numpy(dtype=float)


def op_components(ops: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each op's time split as the per-op views show it (seconds per call, NaN → 0): compute,
    exposed memory, and its communication — that of the MoE dispatch and combine ops (kinds
    ``ALLTOALL_KINDS``) as the EP all-to-all (``t_ep_comm_s``), the rest as ``t_comm_s`` —
    as the iteration breakdown splits them (``model.engine.evaluate``)."""
    comm = _num(ops, "t_comm_s")
    kinds = ops["kind"].astype(str) if "kind" in ops.columns else pd.Series([""] * len(ops))
    alltoall = kinds.isin(ALLTOALL_KINDS).to_numpy()
    return {"t_compute_s": _num(ops, "t_compute_s"),
            "t_memory_exposed_s": _num(ops, "t_memory_exposed_s"),
            "t_comm_s": np.where(alltoall, 0.0, comm), "t_ep_comm_s": np.where(alltoall, comm, 0.0)}


def _labels(ops: pd.DataFrame) -> list[str]:
    """Op names, with the place ('block', 'pre', 'post') appended only where names repeat."""
    names = ops["op"].astype(str).tolist()
    where = ops["where"].astype(str).tolist() if "where" in ops.columns else [""] * len(names)
    dup = {n for n in names if names.count(n) > 1}
    return [f"{n} ({w})" if n in dup and w else n for n, w in zip(names, where)]


def _positive(value: float) -> bool:
    try:
        return math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        return False


def roofline_figure(ops: pd.DataFrame, matrix_tflops: float, vector_tflops: float,
                    hbm_gb_per_s: float, presentation: bool = False,
                    plain: bool = False) -> go.Figure:
    """Roofline of one configuration's ops: arithmetic intensity (FLOP/byte of HBM traffic,
    log x) vs achieved TFLOP/s (log y).

    Roofs: matrix and vector peaks (TFLOP/s, horizontal) and the HBM slope (intensity ×
    GB/s / 1000). One marker per op, area ∝ its time per iteration (``t_iteration_s``), colour
    by what bounds it (compute, memory, communication, launch overhead). Achieved TFLOP/s =
    (flop_fwd + flop_bwd) / (t_compute_s + t_memory_exposed_s) / 1e12 (communication
    excluded); the hover adds each direction's kernel time and the FLOP and HBM efficiencies it
    implies where the frame has them (model.engine.kernel_report). Ops with no FLOPs or no HBM
    bytes are left out.
    """
    msg = check_frame(ops, ("op", "flop_fwd", "flop_bwd", "hbm_bytes_fwd", "hbm_bytes_bwd"),
                      "ops")
    if msg:
        return empty_figure(msg, presentation)
    flops = _num(ops, "flop_fwd") + _num(ops, "flop_bwd")
    nbytes = _num(ops, "hbm_bytes_fwd") + _num(ops, "hbm_bytes_bwd")
    busy = _num(ops, "t_compute_s") + _num(ops, "t_memory_exposed_s")
    keep = (flops > 0) & (nbytes > 0) & (busy > 0)
    if not keep.any():
        return empty_figure("No op with both FLOPs and HBM traffic to place on the roofline.",
                            presentation)
    frame = ops.loc[keep].copy()
    frame["label"] = np.array(_labels(ops), dtype=object)[keep]
    frame["flop"] = flops[keep]
    frame["gflop"] = flops[keep] / 1e9
    frame["hbm_mb"] = nbytes[keep] / 1e6
    frame["intensity"] = flops[keep] / nbytes[keep]
    frame["achieved_tflops"] = flops[keep] / busy[keep] / 1e12
    frame["t_iter"] = _num(frame, "t_iteration_s")
    if "bound" not in frame.columns:
        frame["bound"] = "compute"
    frame["bound"] = frame["bound"].fillna("unknown").astype(str)

    lw = line_width(presentation)
    peak_size = 46.0 if presentation else 34.0
    t_max = float(frame["t_iter"].max())
    sizeref = 2.0 * t_max / peak_size ** 2 if t_max > 0 else 1.0
    order = [b for b in BOUND_COLORS if b in set(frame["bound"])]
    order += sorted(set(frame["bound"]) - set(order))
    bounds = frame["bound"].to_numpy()
    data: list[dict] = []
    for bound in order:
        part = frame[bounds == bound]
        sizes = part["t_iter"].to_numpy() if t_max > 0 else np.full(len(part), 1.0)
        hover = Hover(part)
        hover.line(f"<b>{hover.ref('label')}</b>")
        (hover.add("where", "in").add("kind", "kind")
         .add("gflop", "FLOPs (fwd+bwd)", ".4g", " GFLOP")
         .add("hbm_mb", "HBM traffic", ".4g", " MB")
         .add("intensity", "intensity", ".4g", " FLOP/B")
         .add("achieved_tflops", "achieved", ".4g", " TFLOP/s")
         .add("kernel_time_fwd_s", "kernel time fwd", ".4g", " s")
         .add("kernel_time_bwd_s", "kernel time bwd", ".4g", " s")
         .add("implied_flop_efficiency_fwd", "implied FLOP efficiency fwd", ".1%")
         .add("implied_flop_efficiency_bwd", "implied FLOP efficiency bwd", ".1%")
         .add("implied_hbm_efficiency_fwd", "implied HBM efficiency fwd", ".1%")
         .add("implied_hbm_efficiency_bwd", "implied HBM efficiency bwd", ".1%")
         .add("t_iter", "time per iteration", ".4g", " s"))
        data.append(dict(
            type="scatter", x=part["intensity"].to_numpy(), y=part["achieved_tflops"].to_numpy(),
            mode="markers", name=BOUND_LABELS.get(bound, f"{bound}-bound"),
            text=part["label"].tolist(),
            marker=dict(size=sizes, sizemode="area", sizeref=sizeref if t_max > 0 else 0.05,
                        sizemin=5, color=BOUND_COLORS.get(bound, GREY), opacity=0.8,
                        line=dict(color="white", width=1)),
            **hover.trace_kwargs(group=bound, extra=BOUND_LABELS.get(bound, f"{bound}-bound"))))

    ridges = [v * 1000.0 / hbm_gb_per_s for v in (matrix_tflops, vector_tflops)
              if _positive(v) and _positive(hbm_gb_per_s)]
    xs = np.concatenate([frame["intensity"].to_numpy(dtype=float), ridges])
    x_lo, x_hi = float(xs.min()) / 4.0, float(xs.max()) * 4.0
    roofs = [("matrix", matrix_tflops, "solid"), ("vector", vector_tflops, "dash")]
    if _positive(hbm_gb_per_s):
        top = max([float(v) for _, v, _ in roofs if _positive(v)], default=None)
        x_end = top * 1000.0 / hbm_gb_per_s if top else x_hi
        x = np.array([x_lo, x_end])
        data.append(dict(
            type="scatter", x=x, y=x * hbm_gb_per_s / 1000.0, mode="lines",
            name=f"HBM {hbm_gb_per_s:g} GB/s", line=dict(color=ROOF_COLORS["hbm"], width=lw),
            hovertemplate="HBM roof: %{y:,.4~r} TFLOP/s at %{x:,.4~r} FLOP/B<extra></extra>",
            meta={"group": "roof", "customdata": []}))
    annotations = []
    for kind, peak, dash in roofs:
        if not _positive(peak):
            continue
        start = peak * 1000.0 / hbm_gb_per_s if _positive(hbm_gb_per_s) else x_lo
        data.append(dict(
            type="scatter", x=[start, x_hi], y=[peak, peak], mode="lines",
            name=f"{kind} peak {peak:g} TFLOP/s",
            line=dict(color=ROOF_COLORS[kind], width=lw, dash=dash),
            hovertemplate=f"{kind} peak {peak:g} TFLOP/s<extra></extra>",
            meta={"group": "roof", "customdata": []}))
        annotations.append(dict(
            x=math.log10(x_hi), y=math.log10(peak), xanchor="right", yanchor="bottom",
            showarrow=False, text=f"{kind} {fmt_num(peak)} TFLOP/s",
            font=dict(size=FONT_SIZE * 0.85 * scale(presentation), color=AXIS_LINE)))
    peaks = [float(v) for v in (matrix_tflops, vector_tflops) if _positive(v)]
    layout = base_layout("Roofline of the ops", presentation)
    layout["legend"]["itemsizing"] = "constant"
    layout.update(
        annotations=annotations,
        xaxis=dict(type="log", title=dict(text="arithmetic intensity (FLOP/byte)"),
                   range=[math.log10(x_lo), math.log10(x_hi)],
                   **log_ticks([x_lo, x_hi], decades=True)),
        yaxis=dict(type="log", title=dict(text="achieved performance (TFLOP/s)"),
                   **log_ticks([*frame["achieved_tflops"], *peaks], decades=True)))
    return make_figure(data, layout, plain=plain)


def ops_breakdown_figure(ops: pd.DataFrame, presentation: bool = False,
                         plain: bool = False) -> go.Figure:
    """Seconds per iteration spent in each op, slowest on top, as horizontal stacked bars.

    Each bar is the op's ``t_iteration_s`` split into compute, exposed memory, communication
    and the EP all-to-all (:func:`op_components`, per op call) scaled by
    ``t_iteration_s / (t_fwd_s + t_bwd_s)`` (the all-to-all only when some op has one).
    With pipelining the embedding ('pre') and the head ('post') run on different stages, so
    the bars add up to more than any one stage's compute + memory + communication time (by
    the 'pre' ops). The figure's height
    grows with the number of ops (at least 430 px) so that every op's label shows.
    """
    msg = check_frame(ops, ("op", "t_iteration_s"), "ops")
    if msg:
        return empty_figure(msg, presentation)
    frame = ops.copy()
    frame["label"] = _labels(ops)
    frame["t_iter"] = _num(frame, "t_iteration_s")
    parts = op_components(frame)
    present = [c for c in OP_COMPONENT_ORDER
               if c in frame.columns or (c == "t_ep_comm_s" and parts[c].any())]
    for comp in present:
        frame[comp] = parts[comp]
    per_call = _num(frame, "t_fwd_s") + _num(frame, "t_bwd_s")
    if not (per_call > 0).any():  # no fwd/bwd times: use the sum of the components
        per_call = sum(parts[c] for c in OP_COMPONENT_ORDER)
    frame["scale"] = np.divide(frame["t_iter"].to_numpy(), per_call,
                               out=np.zeros(len(frame)), where=per_call > 0)
    frame = frame.sort_values("t_iter", kind="stable")
    total = float(frame["t_iter"].sum())
    frame["op_share"] = frame["t_iter"] / total if total > 0 else 0.0
    data: list[dict] = []
    labels, scale_ = frame["label"].tolist(), frame["scale"].to_numpy()
    for comp in present:
        label = OP_COMPONENT_LABELS[comp]
        seconds = _num(frame, comp) * scale_
        hover = (Hover(Columns(frame, seconds=seconds), "<b>%{y}</b>")
                 .add("where", "in").add("kind", "kind")
                 .add("seconds", label, ".4g", " s/iteration")
                 .add("t_iter", "op total", ".4g", " s/iteration")
                 .add("op_share", "share of all ops", ".1%").add("bound", "bound"))
        data.append(dict(
            type="bar", y=labels, x=seconds, orientation="h", name=label,
            marker=dict(color=OP_COMPONENT_COLORS[comp], line=dict(width=0)),
            **hover.trace_kwargs(group=comp, extra=label)))
    layout = base_layout("Time per op (seconds per iteration)", presentation, legend="top")
    layout["legend"]["traceorder"] = "normal"
    margin = layout["margin"]
    layout.update(
        # every op label legible: at least 1.5 lines of tick text per op, never below the card
        height=max(MIN_HEIGHT, round(margin["t"] + margin["b"] + 40
                                     + 1.5 * font_size(presentation) * len(labels))),
        barmode="stack", bargap=0.2,
        yaxis=dict(type="category", categoryorder="array", categoryarray=labels,
                   title=dict(text="op"), showgrid=False),
        xaxis=dict(title=dict(text="time per iteration (s)"), rangemode="tozero"))
    return make_figure(data, layout, plain=plain)
