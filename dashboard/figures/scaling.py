"""Strong-scaling views of a sweep's best configurations (``model.studies.sweep.best_frame``).

Strategies no production stack ships (``model.physics.strategies.IDEALISED``) are named
"(idealised)" and drawn with hollow markers; parallel efficiency is measured against each
curve's most efficient count (``model.engine.efficiency``), and the recommended size (the
knee, ``model.engine.efficiency.knee``) is marked when the caller gives it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import (
    SMALL_MULTIPLE_LABELS,
    axis_key,
    axis_ref,
    count_label,
    gpu_ticks,
    hline,
    log_ticks,
    pow2_ticks,
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
from dashboard.figures.hover import Hover, config_columns, floats
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    AXIS_LINE,
    DIMENSION_COLORS,
    DIMENSION_LABELS,
    DIMENSION_ORDER,
    DIMENSION_SYMBOLS,
    FONT_SIZE,
    GREY,
    TEXT,
    base_layout,
    line_width,
    marker_size,
    scale,
    strategy_color,
)
from model.cli.numbers import count, duration_days
from model.engine.efficiency import parallel_efficiency
from model.physics.strategies import IDEALISED

KNEE_LABEL = "recommended (knee)"


def _scaling_rows(scaling: pd.DataFrame | None, value: str) -> tuple[pd.DataFrame | None, str]:
    """The best row per (strategy, gpus) with a finite positive ``value``, or a message."""
    msg = check_frame(scaling, ("strategy", "gpus", value), "scaling results")
    if msg:
        return None, msg
    rows = best_rows(scaling, finite=("gpus", value), positive=True)
    if rows.empty:
        return None, "No feasible configuration at any GPU count."
    return rows, ""


def _config_hover(rows: Rows, header: str) -> Hover:
    return (Hover(rows, header)
            .add("train_days", "training time", ".4g", " days")
            .add("iteration_time_s", "iteration", ".4g", " s")
            .add("samples_per_s", "samples/s", ".4g")
            .add("mfu", "MFU", ".1%").add("mfu_peak_tflops", "of the peak", ".4g", " TFLOP/s")
            .add("precision", "precision")
            .config())


# (line dash, width factor, marker symbol, size factor) per strategy, drawn in this order: two
# strategies often give the same best configuration (the context strategy with no context
# parallelism is 1D), and a line drawn over an identical one hid it (issue 21: the 1D line
# under the context line). The first drawn is solid, wide, with large markers; each later one
# is narrower, dotted or dash-dotted, with smaller markers of another shape, so that where
# they coincide both show.
STRATEGY_LOOK = {"1d": ("solid", 1.6, "circle", 1.5), "summa": ("dashdot", 1.0, "square", 1.0),
                 "context": ("dot", 0.9, "diamond", 0.8)}


def _look(strategy: str, color: str, width: float, size: float) -> dict:
    """The line and markers of a strategy's curve (:data:`STRATEGY_LOOK`); idealised
    strategies get hollow markers."""
    dash, w, symbol, m = STRATEGY_LOOK.get(strategy, ("solid", 1.0, "circle", 1.0))
    return dict(line=dict(color=color, width=width * w, dash=dash),
                marker=dict(color=color, size=size * m, line=dict(color=color, width=2),
                            symbol=f"{symbol}-open" if strategy in IDEALISED else symbol))


def _knee_trace(x: float, y: float, text: str, size: float, xaxis: str = "x",
                yaxis: str = "y") -> dict:
    """The recommended size as a star (named in the legend)."""
    return dict(type="scatter", x=[x], y=[y], mode="markers", name=KNEE_LABEL, xaxis=xaxis,
                yaxis=yaxis, marker=dict(symbol="star", size=size * 2.2, color="white",
                                         line=dict(color=TEXT, width=2)),
                hovertemplate=text + "<extra></extra>", cliponaxis=False,
                meta={"group": "knee", "customdata": []})


def _ideal_anchor(rows: pd.DataFrame) -> tuple[str, float, float]:
    """(strategy, GPUs n0, days at n0) of the ideal-scaling line: the best strategy (the
    fastest production one, as the page's headline; any when none is production) at its
    smallest fitting GPU count."""
    strategies = rows["strategy"].to_numpy(dtype=object)
    production = ~np.isin(strategies, list(IDEALISED))
    pool = rows[production] if production.any() else rows
    best = str(pool["strategy"].to_numpy(dtype=object)[np.argmin(floats(pool["train_days"]))])
    own = rows[strategies == best]
    first = int(np.argmin(floats(own["gpus"])))
    return best, float(floats(own["gpus"])[first]), float(floats(own["train_days"])[first])


def _within_range(rows: pd.DataFrame, start_gpus: float) -> pd.DataFrame:
    """The rows to draw: every production strategy's; an idealised strategy's only from the
    counts the best strategy fits at (where it is a choice beside it: below, e.g. 2D SUMMA
    on 128 GPUs with TP across nodes at 148,753 days, it would stretch the axis over
    decades), all of them when no production strategy is shown."""
    idealised = np.isin(rows["strategy"].to_numpy(dtype=object), list(IDEALISED))
    if idealised.all():
        return rows
    return rows[~idealised | (floats(rows["gpus"]) >= start_gpus)].reset_index(drop=True)


def training_time_figure(scaling: pd.DataFrame, presentation: bool = False,
                         knee: tuple[int, str] | None = None, plain: bool = False) -> go.Figure:
    """Training time (days) vs GPU count, log-log, one line per strategy.

    One dashed ideal-scaling line from the best strategy's smallest fitting GPU count n0
    (:func:`_ideal_anchor`): days(n0) · n0 / n. Idealised strategies are drawn from n0 on
    (:func:`_within_range`), so they never anchor the axes. Hover: GPUs, days, samples/s,
    MFU (with its peak), the configuration and its NVLink placement. If several rows share
    (strategy, gpus), the fastest is plotted. ``knee`` = (GPUs, strategy) marks the
    recommended size with a star.
    """
    rows, msg = _scaling_rows(scaling, "train_days")
    if rows is None:
        return empty_figure(msg, presentation)
    anchor, n0, days0 = _ideal_anchor(rows)
    rows = _within_range(rows, n0)
    lw, ms = line_width(presentation), marker_size(presentation)
    data: list[dict] = []
    plotted: list[float] = []
    for s, part in by_strategy(rows):
        color, label = strategy_color(s), strategy_name(s)
        gpus, days = floats(part["gpus"]), floats(part["train_days"])
        hover = _config_hover(part, f"<b>{label}</b><br>GPUs %{{x}}")
        data.append(dict(
            type="scatter", x=gpus, y=days, name=label, mode="lines+markers", legendgroup=s,
            **_look(s, color, lw, ms), **hover.trace_kwargs(group=s)))
        plotted += [*days]
    counts = np.unique(floats(rows["gpus"]))
    counts = counts[counts >= n0]
    ideal = days0 * n0 / counts
    plotted += [*ideal]
    data.append(dict(
        type="scatter", x=counts, y=ideal, mode="lines",
        name=f"ideal scaling from {strategy_name(anchor)} at {count_label(n0)}",
        line=dict(color=GREY, width=lw * 0.8, dash="dash"),
        hovertemplate=(f"<b>ideal scaling</b> from {strategy_name(anchor)} on "
                       f"{count_label(n0)} GPUs<br>GPUs %{{x}}<br>"
                       "training time %{y:,.4~r} days<extra></extra>"),
        meta={"group": "ideal", "customdata": []}))
    at = _knee_row(rows, knee)
    if at is not None:
        data.append(_knee_trace(float(at["gpus"]), float(at["train_days"]),
                                f"<b>{KNEE_LABEL}</b><br>{strategy_name(knee[1])} on "
                                f"{count(at['gpus'], 'GPU')}: "
                                f"{duration_days(float(at['train_days']))}",
                                ms))
    layout = base_layout("Training time vs GPU count", presentation)
    layout.update(
        xaxis=dict(type="log", title=dict(text="GPUs"), **gpu_ticks(rows["gpus"])),
        yaxis=dict(type="log", title=dict(text="training time (days)"), **log_ticks(plotted)))
    return make_figure(data, layout, plain=plain)


def _knee_row(rows: pd.DataFrame, knee: tuple[int, str] | None) -> dict[str, float] | None:
    """The GPUs, training days and (when there) efficiency of the knee's (GPUs, strategy)
    plotted row, or None."""
    if knee is None:
        return None
    hit = np.flatnonzero((floats(rows["gpus"]) == knee[0])
                         & (rows["strategy"].to_numpy(dtype=object) == knee[1]))
    if not hit.size:
        return None
    names = [c for c in ("gpus", "train_days", "efficiency") if c in rows.columns]
    return {c: rows[c].to_numpy()[hit[0]] for c in names}


def efficiency_figure(scaling: pd.DataFrame, presentation: bool = False,
                      threshold: float | None = None,
                      knee: tuple[int, str] | None = None, plain: bool = False) -> go.Figure:
    """Strong-scaling speedup (left) and parallel efficiency (right) vs GPU count.

    Per strategy, against its most efficient count b (the highest samples/s per GPU; see
    :mod:`model.engine.efficiency`): speedup = samples/s(n) / samples/s(b) (dashed: ideal
    n/b), efficiency = speedup / (n/b) ≤ 1 (dotted: 1). The baseline of each strategy is
    written under the plots. ``threshold`` (0…1) draws the efficiency the knee must keep;
    ``knee`` = (GPUs, strategy) marks the recommended size on the efficiency plot.
    """
    rows, msg = _scaling_rows(scaling, "samples_per_s")
    if rows is None:
        return empty_figure(msg, presentation)
    lw, ms = line_width(presentation), marker_size(presentation)
    eff_rows = parallel_efficiency(rows)
    data: list[dict] = []
    plotted: list[float] = []
    baselines: list[str] = []
    for s, part in by_strategy(eff_rows):
        color, label = strategy_color(s), strategy_name(s)
        gpus = floats(part["gpus"])
        speedup, ideal = floats(part["speedup"]), floats(part["ideal_speedup"])
        baselines.append(f"{label}: {count_label(part['baseline_gpus'][0])} GPUs")
        plotted += [*speedup, *ideal]
        common = dict(type="scatter", mode="lines+markers", legendgroup=s,
                      **_look(s, color, lw, ms))
        hover = (_config_hover(part, f"<b>{label}</b><br>GPUs %{{x}}")
                 .add("baseline_gpus", "baseline (most efficient) GPUs")
                 .add("speedup", "speedup", ".3g", "×").add("efficiency", "efficiency", ".1%"))
        data.append(dict(x=gpus, y=speedup, name=label, xaxis="x", yaxis="y", **common,
                         **hover.trace_kwargs(group=s, extra="speedup")))
        data.append(dict(type="scatter", x=gpus, y=ideal, name=f"{label} ideal", mode="lines",
                         legendgroup=s, showlegend=False, xaxis="x", yaxis="y",
                         line=dict(color=color, width=lw * 0.6, dash="dash"),
                         hovertemplate=f"{label} ideal speedup %{{y:,.3~r}}×<extra></extra>",
                         meta={"group": s, "customdata": []}))
        data.append(dict(x=gpus, y=floats(part["efficiency"]), name=f"{label} efficiency",
                         showlegend=False, xaxis="x2", yaxis="y2", **common,
                         **hover.trace_kwargs(group=s, extra="efficiency")))
    at = _knee_row(eff_rows, knee)
    if at is not None:
        data.append(_knee_trace(float(at["gpus"]), float(at["efficiency"]),
                                f"<b>{KNEE_LABEL}</b><br>{int(at['gpus'])} GPUs, efficiency "
                                f"{float(at['efficiency']):.0%}", ms, "x2", "y2"))
    layout = base_layout("Strong scaling: speedup and efficiency", presentation)
    layout.update(subplots_layout(("Speedup", "Parallel efficiency"), 0.2, presentation))
    k = scale(presentation)
    layout["margin"] = dict(layout["margin"], b=round(110 * k))
    layout["annotations"].append(dict(
        text="baseline: each strategy's most efficient count (highest samples/s per GPU)<br>"
             + " · ".join(baselines), x=0.0, xref="paper", xanchor="left", y=0.0,
        yref="paper", yanchor="top", yshift=-52 * k, showarrow=False, align="left",
        font=dict(size=FONT_SIZE * 0.85 * k, color=AXIS_LINE)))
    layout["shapes"] = [hline(1.0, dict(color=GREY, dash="dot", width=1), col=2)]
    if threshold is not None:
        layout["shapes"].append(hline(float(threshold), dict(color=TEXT, dash="dash",
                                                             width=1), col=2))
        data.append(dict(type="scatter", x=[None], y=[None], mode="lines", hoverinfo="skip",
                         name=f"threshold {float(threshold):.0%}", xaxis="x2", yaxis="y2",
                         line=dict(color=TEXT, dash="dash", width=1),
                         meta={"group": "threshold", "customdata": []}))
    ticks = gpu_ticks(rows["gpus"], SMALL_MULTIPLE_LABELS)
    for col in (1, 2):
        layout[axis_key("x", col)].update(type="log", title=dict(text="GPUs"), **ticks)
    layout["yaxis"].update(type="log", title=dict(text="speedup (×)"), **log_ticks(plotted))
    layout["yaxis2"].update(title=dict(text="parallel efficiency"), tickformat=".0%",
                            range=[0, 1.08])
    return make_figure(data, layout, plain=plain)


def optimal_config_figure(scaling: pd.DataFrame, presentation: bool = False,
                          plain: bool = False) -> go.Figure:
    """The best configuration's parallel dimensions (tp1, tp2, pp, dp, microbatch, nb; ep and
    etp when some configuration spreads the experts) vs GPUs.

    One subplot per strategy, log2 y axis (dimension size, a count); the hover gives the whole
    configuration and its NVLink placement (GPUs of each dimension inside one NVLink domain).
    """
    rows, msg = _scaling_rows(scaling, "gpus")
    if rows is None:
        return empty_figure(msg, presentation)
    shown = set(config_columns(rows))  # ep, etp: only where the experts are spread
    dims = [d for d in DIMENSION_ORDER if d in shown]
    if not dims:
        return empty_figure("No parallel dimensions in the scaling results.", presentation)
    groups = by_strategy(rows)
    strategies = [s for s, _ in groups]
    lw, ms = line_width(presentation), marker_size(presentation)
    values = np.concatenate([floats(rows[d]) for d in dims])
    values = values[np.isfinite(values) & (values > 0)]
    data: list[dict] = []
    for col, (s, part) in enumerate(groups, start=1):
        gpus = part["gpus"]
        xref, yref = axis_ref("x", col), axis_ref("y", col)
        # one hover (customdata) for the strategy's traces; each names its dimension
        hover = Hover(part).add("train_days", "training time", ".4g", " days").config()
        for dim in dims:
            y = floats(part[dim])
            y = np.where(y > 0, y, np.nan)
            header = (f"<b>{strategy_name(s)}</b> · GPUs %{{x}}<br>"
                      f"{DIMENSION_LABELS[dim]} = %{{y}}")
            data.append(dict(
                type="scatter", x=gpus, y=y, name=DIMENSION_LABELS[dim], legendgroup=dim,
                showlegend=col == 1, mode="lines+markers", xaxis=xref, yaxis=yref,
                line=dict(color=DIMENSION_COLORS[dim], width=lw),
                marker=dict(color=DIMENSION_COLORS[dim], size=ms,
                            symbol=DIMENSION_SYMBOLS[dim]),
                **hover.trace_kwargs(group=s, extra=DIMENSION_LABELS[dim], header=header)))
    layout = base_layout("Optimal configuration vs GPU count", presentation)
    titles = [strategy_title(s) for s in strategies]
    layout.update(subplots_layout(titles, 0.04, presentation,
                                  colors=[strategy_color(s) for s in strategies],
                                  shared_y=True))
    room_for_titles(layout, titles, presentation)
    lo, hi = (float(values.min()), float(values.max())) if values.size else (1.0, 1.0)
    xticks, yticks = gpu_ticks(rows["gpus"], SMALL_MULTIPLE_LABELS), pow2_ticks(lo, hi)
    for col in range(1, len(strategies) + 1):
        layout[axis_key("x", col)].update(type="log", title=dict(text="GPUs"), **xticks)
        layout[axis_key("y", col)].update(type="log", **yticks)
    layout["yaxis"]["title"] = dict(text="dimension size (log2)")
    return make_figure(data, layout, plain=plain)
