"""Predicted vs measured: the estimator against published training runs
(``model.validation.run_validation``), and Calculon's published predictions beside ours.

The frame has one row per measured quantity: ``id``, ``set``, ``metric``, ``measured``,
``predicted``, ``error_pct`` = 100·(1 − predicted/measured) (positive: the estimator predicts
less than was measured), ``peer_calculon``, ``peer_error_pct``, ``uncertain`` and ``skipped``
(the reason, '' when predicted). Skipped rows are never plotted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import axis_key, axis_ref, log_ticks, subplots_layout
from dashboard.figures.common import check_frame, empty_figure
from dashboard.figures.hover import Columns, Hover, floats
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    AXIS_LINE,
    FONT_SIZE,
    GREY,
    PALETTE,
    base_layout,
    line_width,
    marker_size,
    scale,
)
from model.validation.cross_validation import fitted_run_ids

COLUMNS = ("id", "set", "metric", "measured", "predicted", "error_pct", "skipped")
SET_ORDER: tuple[str, ...] = ("korthikanti", "korthikanti-memory", "measurements",
                               "megatron-bridge-extra", "pytorch")
SET_LABELS: dict[str, str] = {
    "korthikanti": "Korthikanti 2022 (A100)",
    "korthikanti-memory": "Korthikanti 2022 memory (A100)",
    "measurements": "other published runs",
    "megatron-bridge-extra": "Megatron-Bridge 25.09/26.02",
    "moe": "Megatron-Bridge MoE (DeepSeek-V3, Qwen3)",
    "pytorch": "PyTorch FSDP (llm-foundry A100, torchtitan H100)",
}
SET_COLORS: dict[str, str] = {"korthikanti": PALETTE[0], "korthikanti-memory": PALETTE[2],
                              "measurements": PALETTE[1], "megatron-bridge-extra": PALETTE[3],
                              "moe": PALETTE[5], "pytorch": PALETTE[7]}
CALCULON_COLOR = PALETTE[4]
CALCULON_LABEL = "Calculon (published)"
METRIC_ORDER: tuple[str, ...] = ("iteration_time_s", "params_grads_optimizer_gib",
                                 "activations_gib")
METRIC_LABELS: dict[str, str] = {
    "iteration_time_s": "iteration time",
    "params_grads_optimizer_gib": "params + grads + optimizer",
    "activations_gib": "activations",
}
METRIC_UNITS: dict[str, str] = {"iteration_time_s": "s", "params_grads_optimizer_gib": "GiB",
                                "activations_gib": "GiB"}
MEMORY_METRICS: tuple[str, ...] = ("params_grads_optimizer_gib", "activations_gib")
BAND = 0.10  # the shaded band: predicted within ±10% of measured
REFERENCE_LINES = ((5.0, "dot", "±5%"), (10.0, "dash", "±10%"))
BAND_FILL = "rgba(158, 158, 158, 0.22)"


def calibration_role(ids: Sequence[str], sets: Sequence[str] | None = None) -> list[str]:
    """'calibration' for the runs the stacks' efficiencies were fitted on (scripts/calibrate:
    each stack's η per GPU, by least squares over its firm runs of that GPU —
    ``model.validation.cross_validation.fitted_run_ids``), else 'held out' (the uncertain
    transcriptions, the memory records). A fitted run's error on unseen data is its
    cross-validated one (leave-one-source-out, the table of the Validation page)."""
    fitted = fitted_run_ids()
    return ["calibration" if str(i) in fitted else "held out" for i in ids]


def predicted_rows(frame: pd.DataFrame | None, metrics: Sequence[str] | None = None
                   ) -> pd.DataFrame:
    """The rows that were predicted (not skipped, finite positive measured and predicted),
    of ``metrics`` when given, ordered by set, metric, then as in the frame."""
    if check_frame(frame, COLUMNS, "validation records"):
        return pd.DataFrame(columns=list(COLUMNS))
    measured, predicted = floats(frame["measured"]), floats(frame["predicted"])
    skipped = frame["skipped"].fillna("").astype(str).to_numpy() != ""
    keep = ~skipped & np.isfinite(measured) & np.isfinite(predicted) & (measured > 0) & (
        predicted > 0)
    if metrics is not None:
        keep &= frame["metric"].isin(list(metrics)).to_numpy()
    rows = frame.loc[keep]
    rank = {s: i for i, s in enumerate(SET_ORDER)}
    mrank = {m: i for i, m in enumerate(METRIC_ORDER)}
    set_key = np.array([rank.get(s, len(rank)) for s in rows["set"]], dtype=float)
    metric_key = np.array([mrank.get(m, len(mrank)) for m in rows["metric"]], dtype=float)
    order = np.lexsort([np.arange(len(rows)), metric_key, set_key])
    return rows.iloc[order].reset_index(drop=True)


def _uncertain(rows: pd.DataFrame) -> np.ndarray:
    if "uncertain" not in rows.columns:
        return np.zeros(len(rows), dtype=bool)
    return rows["uncertain"].fillna(False).astype(bool).to_numpy()


def _peer(rows: pd.DataFrame, column: str) -> np.ndarray:
    return floats(rows[column]) if column in rows.columns else np.full(len(rows), np.nan)


def _sets(rows: pd.DataFrame) -> list[str]:
    present = dict.fromkeys(str(s) for s in rows["set"])
    return [s for s in SET_ORDER if s in present] + sorted(s for s in present
                                                           if s not in SET_ORDER)


def _point_hover(view: Columns | pd.DataFrame, unit: str, peer: bool = False) -> Hover:
    """Hover of a scatter point: id, measured, predicted (ours or Calculon's), error %."""
    hover = Hover(view)
    hover.line(f"<b>{hover.ref('id')}</b>")
    hover.line(f"measured %{{x:,.4~r}} {unit}")
    who = "Calculon predicted" if peer else "predicted"
    hover.line(f"{who} %{{y:,.4~r}} {unit}")
    hover.add("peer_error_pct" if peer else "error_pct", "error", "+.1f", "%")
    if not peer:
        hover.add("role", "used for").add("source", "source")
    return hover


def _span(values: np.ndarray, log: bool) -> tuple[float, float]:
    """The y = x line's (and both axes') extent: the data with a margin; linear axes start
    at 0 unless the data sit far from it."""
    lo, hi = float(np.min(values)), float(np.max(values))
    if log:
        return lo / 1.3, hi * 1.3
    return (0.0 if lo < 0.4 * hi else lo - 0.15 * (hi - lo) - 0.05 * hi), hi * 1.08


def validation_scatter_figure(frame: pd.DataFrame, metric: str | Sequence[str],
                              presentation: bool = False, plain: bool = False) -> go.Figure:
    """Predicted (y) vs measured (x) for the predicted rows of ``metric`` (a sequence of
    metrics gives one subplot each, side by side).

    One marker trace per set (uncertain sources hollow), Calculon's published predictions
    (``peer_calculon``) as a separate trace with a diamond where present, the y = x line and a
    shaded band where the prediction is within ±10% of the measurement. Iteration times are
    on log-log axes in seconds, memory on linear axes in GiB.
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    rows = predicted_rows(frame, metrics)
    metrics = [m for m in metrics if (rows["metric"] == m).any()]
    if not metrics:
        return empty_figure("No predicted validation record for this metric.", presentation)
    lw, ms = line_width(presentation), marker_size(presentation) * 1.15
    data: list[dict] = []
    shown: set[str] = set()

    def legend(key: str) -> bool:
        first = key not in shown
        shown.add(key)
        return first

    title = "Predicted vs measured: " + (
        METRIC_LABELS.get(metrics[0], metrics[0]) if len(metrics) == 1 else "memory per GPU")
    layout = base_layout(title, presentation)
    layout["margin"] = dict(layout["margin"], t=round(48 * scale(presentation)))
    # below the plot, across the figure (plotly makes room for it): the plot stays square-ish
    layout["legend"] = dict(orientation="h", x=0.0, xanchor="left", yref="container", y=0.0,
                            yanchor="bottom", font=layout["legend"]["font"])
    if len(metrics) > 1:
        layout.update(subplots_layout([METRIC_LABELS.get(m, m) for m in metrics], 0.12,
                                      presentation, title_size=FONT_SIZE))
    layout["margin"] = dict(layout["margin"], t=round(56 * scale(presentation)))
    for col, m in enumerate(metrics, start=1):
        part = rows[rows["metric"] == m].reset_index(drop=True)
        unit, log = METRIC_UNITS.get(m, ""), m == "iteration_time_s"
        xref, yref = axis_ref("x", col), axis_ref("y", col)
        measured, predicted = floats(part["measured"]), floats(part["predicted"])
        peer = _peer(part, "peer_calculon")
        has_peer = np.isfinite(peer) & (peer > 0)
        lo, hi = _span(np.concatenate([measured, predicted, peer[has_peer]]), log)
        axes = dict(xaxis=xref, yaxis=yref)
        data.append(dict(
            type="scatter", x=[lo, hi, hi, lo, lo],
            y=[lo * (1 - BAND), hi * (1 - BAND), hi * (1 + BAND), lo * (1 + BAND),
               lo * (1 - BAND)],
            mode="lines", fill="toself", fillcolor=BAND_FILL, line=dict(width=0),
            name=f"±{BAND:.0%} band", legendgroup="band", showlegend=legend("band"),
            hoverinfo="skip", meta={"group": "band", "customdata": []}, **axes))
        data.append(dict(
            type="scatter", x=[lo, hi], y=[lo, hi], mode="lines", name="y = x",
            line=dict(color=AXIS_LINE, width=lw * 0.6, dash="dash"), legendgroup="identity",
            showlegend=legend("identity"), hoverinfo="skip",
            meta={"group": "identity", "customdata": []}, **axes))
        uncertain = _uncertain(part)
        role = np.array(calibration_role(part["id"], part["set"]), dtype=object)
        source = np.where(uncertain, "uncertain", "firm").astype(object)
        for s in _sets(part):
            idx = np.flatnonzero(part["set"].astype(str).to_numpy() == s)
            idx = idx[np.argsort(uncertain[idx], kind="stable")]  # firm first: the legend icon
            sub = part.iloc[idx]
            color = SET_COLORS.get(s, GREY)
            hover = _point_hover(Columns(sub, role=role[idx], source=source[idx]), unit)
            data.append(dict(
                type="scatter", x=measured[idx], y=predicted[idx], mode="markers",
                name=SET_LABELS.get(s, s), legendgroup=s, showlegend=legend(s),
                marker=dict(color=color, size=ms, line=dict(color=color, width=1.5),
                            symbol=np.where(uncertain[idx], "circle-open", "circle")),
                **hover.trace_kwargs(group=s, extra=SET_LABELS.get(s, s)), **axes))
        if has_peer.any():
            idx = np.flatnonzero(has_peer)
            hover = _point_hover(part.iloc[idx], unit, peer=True)
            data.append(dict(
                type="scatter", x=measured[idx], y=peer[idx], mode="markers",
                name=CALCULON_LABEL, legendgroup="calculon", showlegend=legend("calculon"),
                marker=dict(color=CALCULON_COLOR, size=ms * 0.95, symbol="diamond-open",
                            line=dict(color=CALCULON_COLOR, width=2)),
                **hover.trace_kwargs(group="calculon", extra="Calculon"), **axes))
        if uncertain.any() and "uncertain" not in shown:
            shown.add("uncertain")
            data.append(dict(type="scatter", x=[None], y=[None], mode="markers",
                             name="hollow: uncertain source", hoverinfo="skip",
                             marker=dict(color=GREY, size=ms, symbol="circle-open",
                                         line=dict(color=GREY, width=1.5)),
                             meta={"group": "uncertain", "customdata": []}, **axes))
        label = f"{METRIC_LABELS.get(m, m)} " if len(metrics) == 1 else ""
        x_title, y_title = f"measured {label}({unit})", f"predicted {label}({unit})"
        xaxis = layout.setdefault(axis_key("x", col), {})
        yaxis = layout.setdefault(axis_key("y", col), {})
        if log:
            ticks = log_ticks([lo, hi])
            rng = [float(np.log10(lo)), float(np.log10(hi))]
            xaxis.update(type="log", range=rng, **ticks)
            yaxis.update(type="log", range=rng, **ticks)
        else:
            xaxis.update(range=[lo, hi])
            yaxis.update(range=[lo, hi])
        xaxis.update(title=dict(text=x_title))
        yaxis.update(title=dict(text=y_title))
    return make_figure(data, layout, plain=plain)


def _error_hover(view: Columns) -> Hover:
    hover = Hover(view)
    hover.line(f"<b>{hover.ref('id')}</b>")
    hover.line(f"measured {hover.ref('measured', '.4g')} {hover.ref('unit')}")
    return hover


def validation_error_figure(frame: pd.DataFrame, presentation: bool = False,
                            plain: bool = False) -> go.Figure:
    """Error % = 100·(1 − predicted/measured) per predicted record, horizontal bars (one row
    per record, Korthikanti's iteration times, then memory, then the other runs), ours and
    Calculon's side by side where Calculon published a prediction, with ±5% (dotted) and ±10%
    (dashed) reference lines. Uncertain sources are hatched."""
    rows = predicted_rows(frame)
    if rows.empty:
        return empty_figure("No predicted validation record.", presentation)
    n = len(rows)
    labels = rows["id"].astype(str).tolist()
    peer_error = _peer(rows, "peer_error_pct")
    has_peer = np.isfinite(peer_error)
    half = 0.4
    uncertain = _uncertain(rows)
    unit = [METRIC_UNITS.get(m, "") for m in rows["metric"]]
    view = Columns(rows, unit=unit, role=calibration_role(rows["id"], rows["set"]),
                   metric_label=[METRIC_LABELS.get(m, m) for m in rows["metric"]])
    data: list[dict] = []
    for s in _sets(rows):
        idx = np.flatnonzero(rows["set"].astype(str).to_numpy() == s)
        color = SET_COLORS.get(s, GREY)
        sub = Columns(rows.iloc[idx], **{k: np.asarray(view[k])[idx]
                                         for k in ("unit", "role", "metric_label")})
        hover = _error_hover(sub)
        hover.line(f"predicted {hover.ref('predicted', '.4g')} {hover.ref('unit')}")
        hover.line("error %{x:+.1f}%").add("metric_label", "metric").add("role", "used for")
        data.append(dict(
            type="bar", orientation="h", x=floats(rows["error_pct"])[idx],
            y=[labels[i] for i in idx], name=f"ours: {SET_LABELS.get(s, s)}", legendgroup=s,
            offset=np.full(len(idx), -half), width=np.where(has_peer[idx], half, 2 * half),
            marker=dict(color=color, line=dict(color=color, width=0.5),
                        pattern=dict(shape=np.where(uncertain[idx], "/", ""),
                                     fillmode="overlay", fgcolor="white", solidity=0.45)),
            **hover.trace_kwargs(group=s, extra="ours")))
    if has_peer.any():
        idx = np.flatnonzero(has_peer)
        sub = Columns(rows.iloc[idx], unit=np.asarray(unit)[idx])
        hover = _error_hover(sub)
        hover.line(f"Calculon predicted {hover.ref('peer_calculon', '.4g')} "
                   f"{hover.ref('unit')}")
        hover.line("Calculon error %{x:+.1f}%")
        data.append(dict(
            type="bar", orientation="h", x=peer_error[idx], y=[labels[i] for i in idx],
            name=CALCULON_LABEL, legendgroup="calculon", offset=np.zeros(len(idx)),
            width=np.full(len(idx), half), marker=dict(color=CALCULON_COLOR),
            **hover.trace_kwargs(group="calculon", extra="Calculon")))
    lw = line_width(presentation)
    for _, dash, name in REFERENCE_LINES:
        data.append(dict(type="scatter", x=[None], y=[None], mode="lines", name=name,
                         line=dict(color=GREY, dash=dash, width=lw * 0.75), hoverinfo="skip",
                         meta={"group": "reference", "customdata": []}))
    shapes = [dict(type="line", xref="x", x0=0, x1=0, yref="paper", y0=0, y1=1,
                   line=dict(color=AXIS_LINE, width=1))]
    for value, dash, _ in REFERENCE_LINES:
        for sign in (-1, 1):
            shapes.append(dict(type="line", xref="x", x0=sign * value, x1=sign * value,
                               yref="paper", y0=0, y1=1,
                               line=dict(color=GREY, dash=dash, width=lw * 0.75)))
    errors = np.concatenate([floats(rows["error_pct"]), peer_error[has_peer]])
    lo, hi = min(float(errors.min()), -12.0), max(float(errors.max()), 12.0)
    pad = 0.04 * (hi - lo)
    # legend on the right: above the plot its entries wrapped into the title
    layout = base_layout("Error per record: ours and Calculon's", presentation)
    k = scale(presentation)
    layout.update(
        barmode="overlay", bargap=0.25, shapes=shapes,
        height=int(max(430, (20 * k) * n + 150 * k)),
        xaxis=dict(title=dict(text="error % = 100·(1 − predicted / measured)   "
                                   "(> 0: predicted below measured)"),
                   range=[lo - pad, hi + pad], ticksuffix="%", zeroline=False),
        yaxis=dict(type="category", categoryorder="array", categoryarray=labels,
                   autorange="reversed", tickfont=dict(size=11 * k)),
    )
    return make_figure(data, layout, plain=plain)
