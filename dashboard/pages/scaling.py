"""Scaling page: training time, time and memory breakdown, optimal configuration and parallel
efficiency vs GPU count, for the scenario's strategies."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, html, no_update

from model import ModelError

from .. import compute, figures, notes, studies
from ..export import graph_card, register_exports
from ..guard import page_callback
from ..scenario import build_inputs, gpu_counts

dash.register_page(__name__, path="/", name="Scaling", order=0,
                   title="Scaling — transformer training what-if")

GRAPHS = ("scaling-time", "scaling-breakdown", "scaling-memory", "scaling-config",
          "scaling-efficiency")

layout = html.Div(className="page-body", children=[
    html.Div(id="scaling-summary", className="summary"),
    html.Div(id="scaling-infeasible", className="alert", role="status"),
    html.Div(className="grid", children=[
        graph_card("scaling-time", "Training time vs GPUs", note=(
            "Best configuration per strategy and GPU count; dashed: ideal scaling from the "
            "smallest count that fits.")),
        graph_card("scaling-breakdown", "Where the time goes (best configuration)"),
        graph_card("scaling-memory", "Memory per GPU vs HBM capacity"),
        graph_card("scaling-config", "Optimal configuration vs GPUs"),
        graph_card("scaling-efficiency", "Speedup and parallel efficiency"),
    ]),
])


def infeasible_text(scn: dict[str, Any], frame) -> str:
    """An explanation when some or all GPU counts have no configuration that fits."""
    if not frame.empty:
        return ""
    if not gpu_counts(scn):
        return (f"No GPU count lies between {scn['gpus_min']} and {scn['gpus_max']} (counts are "
                "powers of two, or multiples of the NVLink domain when it is not one): widen "
                "the range.")
    try:
        floor = studies.memory_floor(scn)
    except ModelError as exc:
        return (f"No configuration fits in {scn['hbm_gb']:g} GB of HBM at any GPU count up to "
                f"{scn['gpus_max']:,}; explaining why was refused: {exc}.")
    if floor.get("no_candidates"):
        rest = floor["pipeline_needs"]
        return (f"No parallel configuration exists on {floor['gpus']} GPUs: dp must divide the "
                f"global batch ({scn['global_batch']}), tp the heads and hidden size, and "
                f"pipeline stages (at most one per layer, {scn['layers']}) take the rest"
                + (f" — at least {rest} stages here" if rest > scn["layers"] else "")
                + ". Choose a global batch or GPU range with matching factors (e.g. a global "
                "batch that is a multiple of the NVLink domain).")
    parts = [f"No configuration fits in {floor['capacity_gb']:g} GB of HBM at any GPU count "
             f"up to {floor['gpus']}."]
    if "min_memory_gb" in floor:
        dominant = floor["dominant"].removesuffix("_gb").replace("_", " ")
        parts.append(f"The leanest {floor['strategy']} configuration at {floor['gpus']} GPUs "
                     f"needs {floor['min_memory_gb']:.0f} GB per GPU, mostly {dominant} "
                     f"({floor['parts'][floor['dominant']]:.0f} GB).")
    if "fits_at_gpus" in floor:
        parts.append(f"The smallest GPU count that fits is {floor['fits_at_gpus']}: raise the "
                     "GPU range.")
    else:
        parts.append("Add HBM, shorten the sequence or shrink the model.")
    return " ".join(parts)


def summary_text(frame, scn: dict[str, Any] | None = None) -> str:
    """The headline: the fastest configuration, its time and rate with their cross-validated
    range (the scenario's software stack; none in the paper mode or without a stack)."""
    if frame.empty:
        return ""
    best = frame.loc[frame["train_days"].idxmin()]
    scn = scn or {}
    return (f"Fastest: {best['strategy']} on {int(best['gpus'])} GPUs — "
            f"{notes.days_text(scn, best['train_days'])}, "
            f"{notes.rate_text(scn, best['samples_per_s'])}, "
            f"MFU {100 * best['mfu']:.0f}% (dp {int(best['dp'])} · tp1 {int(best['tp1'])} · "
            f"tp2 {int(best['tp2'])} · pp {int(best['pp'])} · microbatch "
            f"{int(best['microbatch'])}).")


def build(scn: dict[str, Any]) -> tuple:
    """Every output of the page for a scenario (the callback, callable without a browser)."""
    frame = compute.scaling(scn)
    pres = bool(scn.get("presentation"))
    _, system = build_inputs(scn)
    if frame.empty:
        msg = "No configuration fits in HBM: see the explanation above."
        empty = figures.empty_figure(msg, pres)
        return (summary_text(frame, scn), infeasible_text(scn, frame), *[empty] * len(GRAPHS))
    return (
        summary_text(frame, scn), infeasible_text(scn, frame),
        figures.training_time_figure(frame, presentation=pres),
        figures.time_breakdown_figure(frame, presentation=pres),
        figures.memory_figure(frame, system.hbm_capacity_gb, presentation=pres),
        figures.optimal_config_figure(frame, presentation=pres),
        figures.efficiency_figure(frame, presentation=pres),
    )


def failed(message: str) -> tuple:
    """The outputs for an invalid scenario or a refused computation: the message, in place of
    the summary; the figures keep what they showed."""
    return ("", message, *[no_update] * len(GRAPHS))


@callback(
    Output("scaling-summary", "children"), Output("scaling-infeasible", "children"),
    *[Output({"type": "graph", "name": g}, "figure") for g in GRAPHS],
    Input("scenario", "data"),
)
@page_callback(0, failed)
def update(scn: dict[str, Any]) -> list:
    """The callback: :func:`outputs` of the validated scenario."""
    return outputs(scn)


def outputs(scn: dict[str, Any]) -> list:
    """:func:`build` (figures as plain dicts: they are only serialised), its outputs cached as
    JSON for repeated what-ifs. Raises ModelError (e.g. over the request's budget)."""
    def built() -> tuple:
        with figures.plain_figures():
            return build(scn)
    return compute.cached_outputs("page-scaling", compute.page_payload(scn), built)


register_exports(GRAPHS, lambda scn, _context: dict(zip(GRAPHS, outputs(scn)[2:])))
