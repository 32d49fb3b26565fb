"""Scaling page: the headline (fastest with production strategies, the idealised ones beside it,
and the recommended size — the knee — at an efficiency threshold set here), then training time,
time and memory breakdown, optimal configuration and parallel efficiency vs GPU count, for the
scenario's strategies."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
from dash import Input, Output, callback, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard import figures
from dashboard.controls.scenario import build_inputs, gpu_counts
from dashboard.figures.common import strategy_name
from dashboard.figures.theme import dimension_label
from dashboard.jobs import compute, studies
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import page_callback
from dashboard.views import notes, selected
from dashboard.views.explain import no_configuration_text
from model import ModelError
from model.cli.numbers import duration_days, quantity
from model.engine.efficiency import knee
from model.physics.strategies import IDEALISED, PRODUCTION, TRAITS

dash.register_page(__name__, path="/", name="Scaling", order=0,
                   title="Scaling — transformer training what-if")

TEXTS = ("scaling-summary", "scaling-idealised", "scaling-knee", "scaling-infeasible")
GRAPHS = ("scaling-time", "scaling-breakdown", "scaling-memory", "scaling-config",
          "scaling-efficiency")
DEFAULT_THRESHOLD_PCT = 50
BREAKDOWN_SCALES = (("log", "seconds (log axis)"), ("share", "share of the iteration"))


def _headline() -> html.Div:
    return html.Div(className="headline", children=[
        html.P(id="scaling-summary", className="summary"),
        html.P(id="scaling-idealised", className="summary idealised"),
        html.Div(className="knee-row", children=[
            html.P(id="scaling-knee", className="summary"),
            html.Label(className="knee-control", htmlFor="scaling-threshold", title=(
                "The recommended size is the largest GPU count whose parallel efficiency "
                "(against the most efficient count) stays at or above this share."), children=[
                "efficiency threshold (%)",
                dcc.Input(id="scaling-threshold", type="number", value=DEFAULT_THRESHOLD_PCT,
                          min=1, max=100, step=1, debounce=True, className="ctl-input")]),
        ]),
        html.Div(id="scaling-threshold-error", className="ctl-error", role="alert"),
    ])


layout = html.Div(className="page-body", children=[
    _headline(),
    html.Div(id="scaling-infeasible", className="alert", role="status"),
    html.Div(className="grid", children=[
        graph_card("scaling-time", "Training time vs GPUs", note=(
            "Best configuration per strategy and GPU count; dashed: ideal scaling from the "
            "best strategy's smallest count that fits; hollow markers: idealised strategies "
            "no production stack ships (drawn from that count on); ★: the recommended "
            "size.")),
        graph_card("scaling-breakdown", "Where the time goes (best configuration)", note=(
            "Log axis: a bar's top is the iteration time and each boundary a running total, so "
            "lower parts look larger than they are; compare parts with 'share of the "
            "iteration'."),
                   extra=dcc.RadioItems(id="scaling-breakdown-scale", inline=True, value="log",
                                        className="card-switch",
                                        options=[{"label": f" {t}", "value": v}
                                                 for v, t in BREAKDOWN_SCALES])),
        graph_card("scaling-memory", "Memory per GPU vs HBM capacity"),
        graph_card("scaling-config", "Optimal configuration vs GPUs"),
        graph_card("scaling-efficiency", "Speedup and parallel efficiency", note=(
            "Against each strategy's most efficient count, not its smallest (often "
            "memory-starved: full recompute, deep pipelines); dashed: the threshold of the "
            "recommended size ★.")),
    ]),
])


def infeasible_text(scn: dict[str, Any], frame: pd.DataFrame) -> str:
    """An explanation when some or all GPU counts have no configuration that fits."""
    if not frame.empty:
        return ""
    if not gpu_counts(scn):
        return (f"No GPU count lies between {scn['gpus_min']} and {scn['gpus_max']} (counts are "
                "powers of two; in the paper mode, multiples of the NVLink domain when it is not "
                "one): widen the range.")
    try:
        floor = studies.memory_floor(scn)
    except ModelError as exc:
        return (f"No configuration fits in {scn['hbm_gb']:g} GB of HBM at any GPU count up to "
                f"{scn['gpus_max']:,}; explaining why was refused: {exc}.")
    if floor.get("no_candidates"):
        return no_configuration_text(scn, floor["gpus"], floor["strategy"])
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


def _config(row: pd.Series) -> str:
    """The configuration in words; ep and etp only when the experts are spread."""
    keys = ["dp", "tp1", "tp2", "pp", "microbatch"]
    keys += [k for k in ("ep", "etp") if pd.notna(row.get(k)) and int(row.get(k)) > 1]
    return " · ".join(f"{dimension_label(k, str(row.get('strategy')))} {int(row[k])}"
                      for k in keys)


def _mfu(row: pd.Series) -> str:
    """MFU with the peak it is measured against (the matmuls' precision)."""
    precision = str(row.get("precision", "bf16")) if pd.notna(row.get("precision")) else "bf16"
    return (f"MFU {100 * row['mfu']:.0f}% of the {quantity(row['mfu_peak_tflops'], 'TFLOP/s', 4)}"
            f" {precision} peak")


def _stacks(strategies: list[str]) -> str:
    stacks = dict.fromkeys(s for name in strategies for s in TRAITS[name].implemented_by)
    return ", ".join(stacks)


def summary_text(frame: pd.DataFrame, scn: dict[str, Any] | None = None) -> str:
    """The headline: the fastest configuration of the production strategies in the frame (of
    the idealised ones, labelled so, when the frame holds no production strategy), its time
    and rate with their cross-validated range (the scenario's software stack; none in the
    paper mode or without a stack)."""
    if frame.empty:
        return ""
    scn = scn or {}
    production = [s for s in PRODUCTION if s in set(frame["strategy"])]
    rows = frame[frame["strategy"].isin(production)] if production else frame
    best = rows.loc[rows["train_days"].idxmin()]
    lineage = notes.stack_lineage(scn)
    who = ("idealised strategies only: no production stack ships them" if not production
           else f"production strategies, as {lineage} runs them" if lineage
           else f"production strategies, as {_stacks(production)} ship them")
    bar = notes.error_bar_of(scn, str(best["strategy"]))  # once for both texts
    return (f"Fastest ({who}): {strategy_name(best['strategy'])} on {int(best['gpus']):,} GPUs — "
            f"{notes.days_text(scn, best['train_days'], bar=bar)}, "
            f"{notes.rate_text(scn, best['samples_per_s'], bar=bar)}, "
            f"{_mfu(best)} ({_config(best)}).{tight_text(frame, scn, best)}")


def tight_text(frame: pd.DataFrame, scn: dict[str, Any], best: pd.Series) -> str:
    """' Tight: …' when the headline's configuration or any count's best may not fit (the
    memory model's interval holds the usable HBM: :func:`dashboard.views.selected.fit_state`),
    else '' (and '' without a scenario)."""
    if "mode" not in scn or "hbm_capacity_gb" not in frame:
        return ""
    states = [selected.fit_state(scn, row) for _, row in frame.iterrows()]
    tight = [int(row["gpus"]) for (_, row), (state, _) in zip(frame.iterrows(), states,
                                                               strict=True) if state == "tight"]
    if not tight:
        return ""
    state, words = selected.fit_state(scn, best)
    head = f" Tight: {words}." if state == "tight" else ""
    counts = ", ".join(f"{g:,}" for g in sorted(set(tight)))
    return f"{head} Tight (may not fit) at {counts} GPUs."


def idealised_text(frame: pd.DataFrame) -> str:
    """The idealised strategies' fastest point, beside the headline ('' when none is shown or
    the headline is already theirs)."""
    if frame.empty:
        return ""
    shown = set(frame["strategy"])
    ideal = [s for s in IDEALISED if s in shown]
    if not ideal or not any(s in shown for s in PRODUCTION):
        return ""
    rows = frame[frame["strategy"].isin(ideal)]
    best = rows.loc[rows["train_days"].idxmin()]
    return (f"Beside it, idealised (modelled, not shipped by a production stack): "
            f"{strategy_name(best['strategy'])} on {int(best['gpus']):,} GPUs — "
            f"{duration_days(best['train_days'])}, {_mfu(best)}.")


def knee_text(frame: pd.DataFrame, threshold: float) -> tuple[str, tuple[int, str] | None]:
    """The recommended size at ``threshold`` (0…1) and (GPUs, strategy) to mark it."""
    production = [s for s in PRODUCTION if s in set(frame["strategy"])]
    k = knee(frame, threshold, production or None)
    if k is None:
        return "", None
    row, base = k.row, k.baseline
    return (f"Recommended size: {k.gpus:,} GPUs ({strategy_name(k.strategy)}) — "
            f"{duration_days(row['train_days'])}, {_mfu(row)}; parallel efficiency "
            f"{100 * k.efficiency:.0f}% against the most efficient count ({k.baseline_gpus:,} "
            f"GPUs, {duration_days(base['train_days'])}, MFU {100 * base['mfu']:.0f}%): the "
            f"largest count whose efficiency stays at or above {100 * threshold:.0f}%"
            + (" — the last count of the range: raise 'GPUs to' to find where it drops."
               if k.gpus == k.largest_gpus else ".")), (k.gpus, k.strategy)


def parse_threshold(value: Any) -> float | None:
    """The efficiency threshold (0…1) from the page's percent box, or None when the box does
    not hold a number from 1 to 100."""
    try:
        pct = float(value)
    except (TypeError, ValueError):
        return None
    return pct / 100 if 1 <= pct <= 100 else None


def threshold_error(value: Any) -> str:
    """The message shown under the threshold box ('' when it is valid)."""
    if parse_threshold(value) is not None:
        return ""
    return ("the efficiency threshold must be a number from 1 to 100 (%); the views keep the "
            "last valid one")


def build(scn: dict[str, Any], threshold_pct: Any = DEFAULT_THRESHOLD_PCT,
          breakdown: str = "log", plain: bool = False) -> tuple:
    """Every output of the page for a scenario (the callback, callable without a browser):
    the texts of :data:`TEXTS`, then the figures of :data:`GRAPHS` (plain dicts with
    ``plain``: they are only serialised)."""
    frame = compute.scaling(scn)
    pres = bool(scn.get("presentation"))
    _, system = build_inputs(scn)
    if frame.empty:
        msg = "No configuration fits in HBM: see the explanation above."
        empty = figures.empty_figure(msg, pres, plain=plain)
        return ("", "", "", infeasible_text(scn, frame), *[empty] * len(GRAPHS))
    threshold = parse_threshold(threshold_pct)
    if threshold is None:
        threshold = DEFAULT_THRESHOLD_PCT / 100
    knee_line, at = knee_text(frame, threshold)
    unvalidated = notes.not_validated(scn)
    drawn = (figures.training_time_figure(frame, presentation=pres, knee=at, plain=plain),
             figures.time_breakdown_figure(frame, presentation=pres,
                                           normalized=breakdown == "share", plain=plain),
             figures.memory_figure(frame, system.hbm_capacity_gb, presentation=pres,
                                   plain=plain),
             figures.optimal_config_figure(frame, presentation=pres, plain=plain),
             figures.efficiency_figure(frame, presentation=pres, threshold=threshold, knee=at,
                                     plain=plain))
    return (
        summary_text(frame, scn), idealised_text(frame), knee_line, infeasible_text(scn, frame),
        *(figures.mark_not_validated(fig, unvalidated, pres) for fig in drawn),
    )


def failed(message: str) -> tuple:
    """The outputs for an invalid scenario or a refused computation: the message, in place of
    the headline; the figures keep what they showed."""
    return ("", "", "", message, *[no_update] * (2 * len(GRAPHS)))


@callback(
    *[Output(t, "children") for t in TEXTS],
    *[Output({"type": "graph", "name": g}, "figure") for g in GRAPHS],
    *[Output({"type": "export-context", "name": g}, "data") for g in GRAPHS],
    Input("scenario", "data"), Input("scaling-threshold", "value"),
    Input("scaling-breakdown-scale", "value"),
)
@page_callback(0, failed)
def update(scn: dict[str, Any], threshold_pct: Any = DEFAULT_THRESHOLD_PCT,
           breakdown: Any = "log") -> list:
    """The callback: :func:`outputs` of the validated scenario, and what the export of each
    figure needs besides it (the threshold and the breakdown's scale). An invalid threshold
    changes nothing (its message is shown by :func:`show_threshold_error`)."""
    threshold = parse_threshold(threshold_pct)
    if threshold is None:
        raise PreventUpdate
    scale = "share" if breakdown == "share" else "log"
    return [*outputs(scn, threshold, scale), *[[100 * threshold, scale]] * len(GRAPHS)]


def outputs(scn: dict[str, Any], threshold: float, scale: str) -> list:
    """:func:`build` (figures as plain dicts: they are only serialised), its outputs cached as
    JSON for repeated what-ifs. Raises ModelError (e.g. over the request's budget)."""
    def built() -> tuple:
        return build(scn, 100 * threshold, scale, plain=True)
    payload = {**compute.page_payload(scn), "threshold": threshold, "breakdown": scale}
    return compute.cached_outputs("page-scaling", payload, built)


def _exported(scn: dict[str, Any], context: Any) -> dict[str, Any]:
    """The figures as the page shows them (its threshold and scale, checked again)."""
    pct, scale = context if isinstance(context, list) and len(context) == 2 else (None, None)
    threshold = parse_threshold(pct) or DEFAULT_THRESHOLD_PCT / 100
    built = outputs(scn, threshold, "share" if scale == "share" else "log")
    return dict(zip(GRAPHS, built[len(TEXTS):]))


register_exports(GRAPHS, _exported)


@callback(Output("scaling-threshold-error", "children"), Input("scaling-threshold", "value"))
def show_threshold_error(value: Any) -> str:
    return threshold_error(value)
