"""One configuration up close: the timeline of one iteration (its pipeline schedule, stage by
stage) and where its HBM goes (:mod:`model.studies.timeline`, :mod:`model.studies.memory_parts`
give the frames)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import fmt_num
from dashboard.figures.common import check_frame, empty_figure
from dashboard.figures.hover import Columns, Hover
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    AXIS_LINE,
    COMPONENT_COLORS,
    GREY,
    LIGHT_GREY,
    MEMORY_COLORS,
    base_layout,
    scale,
)
from model.studies.memory_parts import FREE, HOST, OVER, RESERVE
from model.studies.timeline import BACKWARD, FORWARD, IDLE, TAIL

PHASE_COLORS = {FORWARD: "#0072B2", BACKWARD: "#56B4E9", IDLE: LIGHT_GREY,
                "data-parallel sync (exposed)": COMPONENT_COLORS["t_dp_comm_s"],
                "optimizer step": COMPONENT_COLORS["t_optimizer_s"],
                "offload (exposed)": COMPONENT_COLORS["t_offload_s"]}
PHASE_LABELS = {FORWARD: "forward", BACKWARD: "backward", IDLE: "idle (bubble)"}
PHASES = (FORWARD, BACKWARD, IDLE, *(phase for phase, _ in TAIL))
PART_COLORS = {"weights": MEMORY_COLORS["weights_gb"],
               "gradients": MEMORY_COLORS["gradients_gb"],
               "optimizer state": MEMORY_COLORS["optimizer_gb"],
               "activations": MEMORY_COLORS["activations_gb"], RESERVE: GREY,
               FREE: "#F2F2F2", OVER: "#CC3311", HOST: "#DDCC77"}
TIMELINE_COLUMNS = ("stage", "phase", "microbatch", "virtual_stage", "start_s", "duration_s")


def timeline_figure(timeline: pd.DataFrame, title: str = "",
                    presentation: bool = False, plain: bool = False) -> go.Figure:
    """Horizontal bars, one row per pipeline stage (stage 0 on top): each forward and backward
    chunk (microbatch, virtual stage and its times in the hover), the idle gaps (the bubble)
    and the data-parallel / optimizer / offload tail, on a time axis in seconds."""
    msg = check_frame(timeline, TIMELINE_COLUMNS, "iteration timeline")
    if msg:
        return empty_figure(msg, presentation)
    pp = int(timeline["stage"].max()) + 1
    data: list[dict] = []
    for phase in PHASES:
        part = timeline[timeline["phase"] == phase]
        if part.empty:
            continue
        label = PHASE_LABELS.get(phase, phase)
        end = part["start_s"].to_numpy() + part["duration_s"].to_numpy()
        hover = (Hover(Columns(part, end_s=end), f"<b>stage %{{y}}</b> · {label}")
                 .add("microbatch", "microbatch").add("virtual_stage", "virtual stage")
                 .add("start_s", "from", ".4g", " s").add("end_s", "to", ".4g", " s")
                 .add("duration_s", "lasting", ".3g", " s"))
        if phase not in (FORWARD, BACKWARD):  # no microbatch: a gap or the tail
            hover = (Hover(Columns(part, end_s=end), f"<b>stage %{{y}}</b> · {label}")
                     .add("start_s", "from", ".4g", " s").add("end_s", "to", ".4g", " s")
                     .add("duration_s", "lasting", ".3g", " s"))
        data.append(dict(
            type="bar", orientation="h", name=label, y=part["stage"].to_numpy(),
            x=part["duration_s"].to_numpy(), base=part["start_s"].to_numpy(),
            marker=dict(color=PHASE_COLORS.get(phase, GREY),
                        line=dict(width=0.5 if phase in (FORWARD, BACKWARD) else 0,
                                  color="white")),
            **hover.trace_kwargs(group=phase, extra=label)))
    total = float((timeline["start_s"] + timeline["duration_s"]).max())
    layout = base_layout(title or "One iteration, stage by stage", presentation, legend="top")
    # the legend under the axis: its six phases wrap to a second line above the plot, which
    # then covered the title
    layout["legend"].update(y=-0.3, yanchor="top")
    layout["margin"].update(t=60, b=round(150 * scale(presentation)))
    layout.update(
        barmode="overlay", bargap=0.15,
        xaxis=dict(title=dict(text="time in the iteration (s)"), range=[0, total * 1.01]),
        yaxis=dict(title=dict(text="pipeline stage"), autorange="reversed",
                   tickmode="array" if pp <= 32 else "auto",
                   tickvals=list(range(pp)) if pp <= 32 else None),
        shapes=[dict(type="line", x0=total, x1=total, y0=0, y1=1, yref="paper",
                     line=dict(color=AXIS_LINE, dash="dash", width=1))])
    return make_figure(data, layout, plain=plain)


def memory_parts_figure(parts: pd.DataFrame, title: str = "",
                        presentation: bool = False, plain: bool = False) -> go.Figure:
    """One stacked horizontal bar of the HBM (weights, gradients, optimizer state,
    activations, the reserve, free HBM or the excess) with the capacity marked, and what
    offload keeps in host memory as a second bar."""
    msg = check_frame(parts, ("part", "tier", "memory_gb", "share_of_capacity",
                              "hbm_capacity_gb"), "memory breakdown")
    if msg:
        return empty_figure(msg, presentation)
    hbm = parts[parts["tier"] == "HBM"]
    capacity = float(parts["hbm_capacity_gb"].iloc[0])
    data: list[dict] = []
    for _, row in parts.iterrows():
        name = str(row["part"])
        frame = pd.DataFrame([row])
        hover = (Hover(frame, f"<b>{name}</b>").add("memory_gb", "", ".4g", " GB")
                 .add("share_of_capacity", "of the HBM capacity", ".1%"))
        data.append(dict(type="bar", orientation="h", name=name, y=[row["tier"]],
                         x=[float(row["memory_gb"])],
                         marker=dict(color=PART_COLORS.get(name, GREY),
                                     line=dict(width=0.5, color=AXIS_LINE)),
                         **hover.trace_kwargs(group=str(row["tier"]), extra=name)))
    used = float(hbm.loc[~hbm["part"].isin([FREE, OVER]), "memory_gb"].sum())
    layout = base_layout(title or "Memory per GPU (binding stage)", presentation,
                         legend="top")
    # below the axis (seven long names), in the bars' order
    layout["legend"].update(y=-0.3, yanchor="top", traceorder="normal")
    layout["margin"].update(t=60, b=150)
    layout.update(
        barmode="stack",
        xaxis=dict(title=dict(text="GB per GPU")),
        yaxis=dict(title=dict(text=""), categoryorder="array",
                   categoryarray=["host", "HBM"]),
        shapes=[dict(type="line", x0=capacity, x1=capacity, y0=0, y1=1, yref="paper",
                     line=dict(color=AXIS_LINE, dash="dash", width=1.5))],
        annotations=[dict(x=capacity, y=1, yref="paper", yanchor="bottom", showarrow=False,
                          text=f"HBM capacity {fmt_num(capacity)} GB · used "
                               f"{fmt_num(used)} GB")])
    return make_figure(data, layout, plain=plain)
