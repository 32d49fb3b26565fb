"""Figures of the Post-training page: memory per GPU and days/cost by fine-tuning method, one RL
step's timeline per GPU pool, and the RL step against the generation pool's size. Plain dicts
in (the studies' summaries), plain figures out; an empty figure with a message when there is
nothing to draw. Axis titles are title objects (Plotly.js 3 draws no bare-string title)."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.figures.common import empty_figure
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import base_layout

MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations")
PHASES = (("generation", "generation_s"), ("forward passes", "reference_s"),
          ("update", "training_s"), ("weight sync", "sync_s"), ("offload", "offload_s"))


def _title(text: str) -> dict:
    return {"text": text}


def memory_figure(answers: dict[str, dict], hbm_gb: float, presentation: bool = False
                  , plain: bool = False) -> go.Figure:
    """HBM per GPU by part (weights, gradients, optimizer, activations) of each fine-tuning
    method's fastest fitting layout, against the GPU's capacity."""
    if not answers:
        return empty_figure("No method fits on these GPUs.", presentation)
    methods = list(answers)
    data = [dict(type="bar", name=part, x=methods,
                 y=[answers[m]["memory_breakdown_gb"][part] for m in methods],
                 hovertemplate="%{x}: %{y:.1f} GB<extra>" + part + "</extra>")
            for part in MEMORY_PARTS]
    layout = base_layout(None, presentation, legend="top")
    layout.update(barmode="stack", xaxis=dict(title=_title("method (its fastest layout)")),
                  yaxis=dict(title=_title("HBM per GPU (GB)")),
                  shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=hbm_gb, y1=hbm_gb,
                               line=dict(dash="dash"))],
                  annotations=[dict(xref="paper", x=1, y=hbm_gb, yanchor="bottom",
                                    xanchor="right", showarrow=False,
                                    text=f"HBM {hbm_gb:,.0f} GB")])
    return make_figure(data, layout, plain=plain)


def days_figure(answers: dict[str, dict], presentation: bool = False,
                plain: bool = False) -> go.Figure:
    """Days to fine-tune and its cost, by method."""
    if not answers:
        return empty_figure("No method fits on these GPUs.", presentation)
    methods = list(answers)
    data = [dict(type="bar", name="days", x=methods, y=[answers[m]["days"] for m in methods],
                 hovertemplate="%{x}: %{y:,.3~r} days<extra></extra>"),
            dict(type="scatter", mode="markers", name="cost ($)", x=methods,
                 y=[answers[m]["cost_usd"] for m in methods], yaxis="y2",
                 marker=dict(size=12, symbol="diamond"),
                 hovertemplate="%{x}: $%{y:,.0f}<extra></extra>")]
    layout = base_layout(None, presentation, legend="top")
    layout.update(xaxis=dict(title=_title("method")), yaxis=dict(title=_title("days")),
                  yaxis2=dict(title=_title("cost ($)"), overlaying="y", side="right",
                              tickformat="$,.0f"))
    return make_figure(data, layout, plain=plain)


def timeline_figure(step: dict, presentation: bool = False, plain: bool = False) -> go.Figure:
    """One RL step as bars in time per GPU pool: each phase where it runs, the rest waiting."""
    if not step:
        return empty_figure("No RL step to draw.", presentation)
    colocated = step["placement"] == "colocated"
    pools = ["all GPUs"] if colocated else [
        f"generation ({step['generation_gpus']} GPUs)", f"training ({step['training_gpus']} GPUs)"]
    runs = _schedule(step, colocated)
    data = []
    for name, key in PHASES:
        spans = [(pool, start, length) for pool, phase, start, length in runs if phase == key]
        if not spans:
            continue
        data.append(dict(type="bar", orientation="h", name=name,
                         y=[pools[p] for p, _, _ in spans], x=[length for _, _, length in spans],
                         base=[start for _, start, _ in spans],
                         hovertemplate="%{y}: " + name + " %{x:,.3~r} s from %{base:,.3~r} s"
                                       "<extra></extra>"))
    layout = base_layout(None, presentation, legend="top")
    layout.update(barmode="overlay", xaxis=dict(title=_title("seconds into the step")),
                  yaxis=dict(title=_title("GPU pool"), autorange="reversed"))
    if step["tail_s"] > 0:
        end = step["generation_s"]
        layout.update(shapes=[dict(type="rect", xref="x", yref="paper", x0=end - step["tail_s"],
                                   x1=end, y0=0, y1=1, opacity=0.15, line=dict(width=0),
                                   fillcolor="grey")],
                      annotations=[dict(xref="x", yref="paper", x=end, y=1, yanchor="bottom",
                                        xanchor="right", showarrow=False,
                                        text="straggler tail")])
    return make_figure(data, layout, plain=plain)


def _schedule(step: dict, colocated: bool) -> list[tuple[int, str, float, float]]:
    """(pool index, phase key, start s, length s) of the step's phases (docs/post_training.md:
    colocated in sequence; split on-policy generation, sync, then forwards and update on the
    training pool; off-policy the two pools side by side, then the sync)."""
    gen, ref, train = step["generation_s"], step["reference_s"], step["training_s"]
    sync, off = step["sync_s"], step["offload_s"]
    if colocated:
        t, out = 0.0, []
        for key, length in (("generation_s", gen), ("reference_s", ref),
                            ("training_s", train), ("sync_s", sync), ("offload_s", off)):
            out.append((0, key, t, length))
            t += length
        return out
    if step["off_policy"]:
        end = max(gen, ref + train)
        return [(0, "generation_s", 0.0, gen), (1, "reference_s", 0.0, ref),
                (1, "training_s", ref, train), (0, "sync_s", end, sync), (1, "sync_s", end, sync)]
    return [(0, "generation_s", 0.0, gen), (0, "sync_s", gen, sync), (1, "sync_s", gen, sync),
            (1, "reference_s", gen + sync, ref), (1, "training_s", gen + sync + ref, train)]


def split_figure(splits: list, chosen: int, presentation: bool = False,
                 plain: bool = False) -> go.Figure:
    """The RL step against the generation pool's size (split placement), the chosen marked."""
    if not splits:
        return empty_figure("Colocated: every GPU runs every phase (no split to size).",
                            presentation)
    data = [dict(type="scatter", mode="lines+markers", name="step",
                 x=[g for g, _ in splits], y=[s for _, s in splits],
                 hovertemplate="%{x} generation GPUs: %{y:,.3~r} s per step<extra></extra>"),
            dict(type="scatter", mode="markers", name="chosen",
                 x=[chosen], y=[dict(splits)[chosen]] if chosen in dict(splits) else [],
                 marker=dict(size=14, symbol="star"))]
    layout = base_layout(None, presentation, legend="top")
    layout.update(xaxis=dict(title=_title("GPUs that generate (the rest train)")),
                  yaxis=dict(title=_title("seconds per RL step")))
    return make_figure(data, layout, plain=plain)
