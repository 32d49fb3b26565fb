"""Maps over two dimensions: the design space at one GPU count, and an HBM what-if sweep."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from dashboard.figures.axes import fmt_int, fmt_num
from dashboard.figures.common import check_frame, empty_figure
from dashboard.figures.hover import CONFIG_FIELDS, config_columns
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import (
    FONT_SIZE,
    LIGHT_GREY,
    SEQUENTIAL_SCALE,
    TEXT,
    WARNING,
    base_layout,
    font_size,
    scale,
)

# Colour value of a cell, by preference: (column, label with unit).
CELL_VALUES = (("best_time_s", "best iteration time (s)"),
               ("iteration_time_s", "best iteration time (s)"),
               ("train_days", "training time (days)"))
# The colour of a cell: how much slower it is than the best cell, in bins whose edges are these
# ratios to the best (+1 %, +2 %, +5 %, … 10×). A linear scale of the time painted every cell
# within ~15 % of the best the same colour (issue 21), hiding the non-convexities the map is
# for; equal steps of log(time / best) would still give +1 % and +5 % nearly one colour.
RATIO_EDGES = (1.01, 1.02, 1.05, 1.1, 1.2, 1.5, 2.0, 5.0, 10.0, 100.0)
MAX_CELL_TEXT = 150  # write the value in each cell up to this many cells
# A cell whose best may not fit (only "tight" candidates: within the memory model's interval of
# the HBM limit, model.engine.tight): a pale vermillion outside the Viridis scale, marked ⚠.
TIGHT_FILL = "#F6D5C3"
TIGHT_MARK = "⚠"
TIGHT_WORDS = "may not fit in HBM (within the memory model's interval of the limit)"


def _categories(values: pd.Series) -> list[object]:
    """Distinct values sorted numerically when they are numbers, else as text."""
    uniq = pd.unique(values.dropna())
    num = pd.to_numeric(pd.Series(uniq), errors="coerce")
    if num.notna().all():
        return [v for _, v in sorted(zip(num, uniq))]
    return sorted(uniq, key=str)


def _edge_text(ratio: float) -> str:
    """A bin edge as the colourbar writes it: '+5 %' up to 2×, then '5×'."""
    return f"+{100 * (ratio - 1):.0f} %" if ratio < 2 else f"{ratio:g}×"


def relative_colors(worst: float) -> tuple[list[list], dict, np.ndarray]:
    """(stepped colour scale, colour bar, the bins' edges as log10 ratios) for the ratios to
    the best up to ``worst``: one colour per bin of :data:`RATIO_EDGES`, the best bin the
    brightest; z (:func:`bin_position`) runs 0…bins, one unit per bin, so that every bin
    (+1 % as +50 %) has the same height on the colour bar, ticked at its edges."""
    top = math.log10(max(worst, RATIO_EDGES[0]))
    edges = np.array([0.0, *[math.log10(r) for r in RATIO_EDGES if math.log10(r) < top], top])
    bins = len(edges) - 1
    # the best (smallest ratio) the brightest end of the scale, as before
    colors = sample_colorscale(SEQUENTIAL_SCALE, [1.0 - i / max(bins - 1, 1)
                                                  for i in range(bins)])
    scale_steps: list[list] = []
    for i, color in enumerate(colors):
        scale_steps += [[i / bins, color], [(i + 1) / bins, color]]
    bar = dict(title=dict(text="slower than the best cell (colour bins; text: time)",
                          side="right"), thickness=16, outlinewidth=0,
               tickvals=list(range(bins)),
               ticktext=["best", *[_edge_text(10 ** e) for e in edges[1:-1]]])
    return scale_steps, bar, edges


def bin_position(ratio: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """z of a cell: its bin's index plus how far into the bin its log10 ratio lies (0 for the
    best; monotonic in the time)."""
    return np.interp(np.log10(ratio), edges, np.arange(len(edges), dtype=float))


def _cell_values(frame: pd.DataFrame, value_col: str
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's colour value (NaN where it does not fit), whether it is infeasible and
    whether it is tight (cells only: none fits, some may — ``feasible`` 0, ``tight`` > 0 — with
    the fastest tight one's value)."""
    value = np.array(pd.to_numeric(frame[value_col], errors="coerce"), dtype=float)
    value[~np.isfinite(value) | (value <= 0)] = np.nan
    if "fits" in frame.columns and "feasible" not in frame.columns:  # a raw design space
        value[~frame["fits"].astype(bool).to_numpy()] = np.nan
    infeasible = np.isnan(value)
    tight = np.zeros(len(value), dtype=bool)
    if "feasible" in frame.columns:
        none = pd.to_numeric(frame["feasible"], errors="coerce").fillna(0).to_numpy() == 0
        if "tight" in frame.columns:
            some = pd.to_numeric(frame["tight"], errors="coerce").fillna(0).to_numpy() > 0
            tight = none & some & ~infeasible
        infeasible |= none & ~tight
    value[infeasible] = np.nan
    return value, infeasible, tight


def _cell_hover(x: str, y: str, value_title: str, names: list[str], others: list[str],
                extra: list[str]) -> str:
    """The hover template of a feasible cell (its values in customdata, named by ``names``)."""
    hover = [f"{x} = %{{x}} · {y} = %{{y}}", f"{value_title}: %{{customdata[0]:,.4~r}}"]
    config = " · ".join(f"{label} %{{customdata[{names.index(c)}]}}"
                        for c, label in CONFIG_FIELDS if c in others)
    if config:
        hover.append("best config: " + config)
    hover.append(f"NVLink placement (tp1×tp2×dp×pp) %{{customdata[{names.index('placement')}]}}")
    for c, label, unit in (("train_days", "training time", " days"),
                           ("samples_per_s", "samples/s", ""), ("memory_gb", "memory", " GB")):
        if c in extra:
            hover.append(f"{label} %{{customdata[{names.index(c)}]:.4g}}{unit}")
    return "<br>".join(hover) + _candidates_line(names) + "<extra></extra>"


def heatmap_figure(cells: pd.DataFrame, x: str, y: str, presentation: bool = False,
                   plain: bool = False) -> go.Figure:
    """Design-space map from ``model.best_per_cell(frame, x, y)``: the best configuration that
    fits in each (x, y) cell, the remaining dimensions free.

    Colour = how much slower the cell's best is than the best cell, in the bins of
    :data:`RATIO_EDGES` (+1 %, +2 %, +5 %, …; z: :func:`bin_position`), so the non-convexity
    shows;
    text = the best iteration time in seconds (``best_time_s``; training days only if no
    time column exists). Cells holding candidates of which none fits are grey
    with a ✕ ("does not fit"), unless some are tight (``tight`` > 0: within the memory model's
    interval of the limit, :mod:`model.engine.tight`): then pale vermillion, marked ⚠ with the
    fastest tight one's time, and hovered "may not fit: X ± Y GB of Z" (``memory_fit``);
    cells without candidates are blank. A star marks the optimum.
    The hover gives the best configuration's other dimensions.
    """
    msg = check_frame(cells, (x, y), "design-space cells")
    if msg:
        return empty_figure(msg, presentation)
    value_col, value_title = next(((c, t) for c, t in CELL_VALUES if c in cells.columns),
                                  (None, ""))
    if value_col is None:
        return empty_figure("No design-space cells to show: no time column.", presentation)
    frame = cells.copy()
    frame[x] = frame[x].map(fmt_int) if _numeric(frame[x]) else frame[x].astype(str)
    frame[y] = frame[y].map(fmt_int) if _numeric(frame[y]) else frame[y].astype(str)
    xs, ys = _categories(cells[x]), _categories(cells[y])
    xs = [fmt_int(v) if _numeric(cells[x]) else str(v) for v in xs]
    ys = [fmt_int(v) if _numeric(cells[y]) else str(v) for v in ys]
    value, infeasible, tight = _cell_values(frame, value_col)
    # several rows per cell (a raw design space): infeasible first, then slowest to fastest,
    # so that the fastest feasible row is written last
    frame = frame.assign(_value=value, _infeasible=infeasible, _tight=tight)
    frame = frame.sort_values("_value", ascending=False, na_position="first", kind="stable")
    value, infeasible = frame["_value"].to_numpy(), frame["_infeasible"].to_numpy()
    tight = frame["_tight"].to_numpy()
    finite = value[np.isfinite(value) & ~tight]
    if finite.size == 0 and not (infeasible | tight).any():
        return empty_figure("No design-space cells to show.", presentation)
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (1.0, 1.0)

    ix = {v: i for i, v in enumerate(xs)}
    iy = {v: i for i, v in enumerate(ys)}
    shape = (len(ys), len(xs))
    z = np.full(shape, np.nan)
    bad = np.full(shape, np.nan)
    maybe = np.full(shape, np.nan)  # the tight cells
    text = np.full(shape, "", dtype=object)
    others = [c for c in config_columns(frame) if c not in (x, y)]
    extra = [c for c in ("train_days", "samples_per_s", "memory_gb", "candidates", "feasible")
             if c in frame.columns and c != value_col]
    words = ["memory_fit"] if tight.any() else []  # the tight cells' words, last
    names = [value_col, *others, "placement", *extra, *words]
    custom = np.full(shape + (len(names),), None, dtype=object)
    show_text = len(frame) <= MAX_CELL_TEXT
    for rec in frame.to_dict("records"):
        i, j = iy.get(rec[y]), ix.get(rec[x])
        if i is None or j is None:
            continue
        v = rec["_value"]
        custom[i, j] = [_clean(v), *[fmt_int(rec[c]) for c in others], _placement(rec),
                        *[_clean(rec[c]) for c in extra], *[_fit_words(rec) for _ in words]]
        if rec["_infeasible"]:
            bad[i, j] = 1.0
            text[i, j] = "✕"
        elif rec["_tight"]:
            maybe[i, j] = 1.0
            text[i, j] = f"{TIGHT_MARK} {fmt_num(v)}" if show_text else TIGHT_MARK
        else:
            z[i, j] = v / lo  # the ratio to the best: its bin below
            bad[i, j] = np.nan
            text[i, j] = fmt_num(v) if show_text else ""

    size = font_size(presentation)
    # object arrays as lists: the same JSON, which the encoder writes at once (an object array
    # sends plotly's to_json_plotly through a per-element clean-up of the callback's outputs)
    listed = custom.tolist()
    data: list[dict] = [dict(
        type="heatmap", x=xs, y=ys, z=bad, name="does not fit", showscale=False,
        hoverongaps=False, colorscale=[[0, LIGHT_GREY], [1, LIGHT_GREY]], zmin=0, zmax=1,
        xgap=1, ygap=1, text=np.where(np.isnan(bad), "", text).tolist(), texttemplate="%{text}",
        textfont=dict(color="#777777", size=size), customdata=listed,
        hovertemplate=(f"{x} = %{{x}} · {y} = %{{y}}<br><b>does not fit</b> in HBM"
                       + _candidates_line(names) + "<extra></extra>"),
        meta={"group": "does not fit", "customdata": names})]
    cell_hover = _cell_hover(x, y, value_title, names, others, extra)
    if not np.isnan(maybe).all():
        data.append(dict(
            type="heatmap", x=xs, y=ys, z=maybe, name="may not fit", showscale=False,
            hoverongaps=False, colorscale=[[0, TIGHT_FILL], [1, TIGHT_FILL]], zmin=0, zmax=1,
            xgap=1, ygap=1, text=np.where(np.isnan(maybe), "", text).tolist(),
            texttemplate="%{text}", textfont=dict(color=WARNING, size=size * 0.8),
            customdata=listed,
            hovertemplate=cell_hover.replace(
                "<extra>", f"<br><b>%{{customdata[{len(names) - 1}]}}</b><extra>"),
            meta={"group": "may not fit", "customdata": names}))
    colorscale, colorbar, edges = relative_colors(hi / lo)
    z = bin_position(z, edges)
    data.append(dict(
        type="heatmap", x=xs, y=ys, z=z, name=value_title, colorscale=colorscale,
        zmin=0.0, zmax=float(len(edges) - 1), hoverongaps=False, xgap=1, ygap=1,
        text=np.where(np.isnan(z), "", text).tolist(), texttemplate="%{text}",
        textfont=dict(size=size * 0.8), colorbar=colorbar, customdata=listed,
        hovertemplate=cell_hover,
        meta={"group": "feasible", "customdata": names, "best": lo,
              "z": "bin of the time / the best (RATIO_EDGES), plus the position in it"}))
    layout = base_layout(f"Design space: best per ({x}, {y}) cell", presentation)
    # the categorical axes span exactly the cells: no padding for the star
    layout.update(
        xaxis=dict(type="category", categoryorder="array", categoryarray=xs,
                   range=[-0.5, len(xs) - 0.5], title=dict(text=x), showgrid=False),
        yaxis=dict(type="category", categoryorder="array", categoryarray=ys,
                   range=[-0.5, len(ys) - 0.5], title=dict(text=y), showgrid=False),
        showlegend=False, annotations=[])
    if finite.size:
        k = int(np.nanargmin(np.where(infeasible | tight, np.nan, value)))
        j, i = ix[frame[x].iloc[k]], iy[frame[y].iloc[k]]
        data.append(dict(  # the very category strings of the heatmaps' x and y
            type="scatter", x=[xs[j]], y=[ys[i]], mode="markers", name="optimum",
            cliponaxis=False,
            marker=dict(symbol="star", size=22, color="white", line=dict(color=TEXT, width=2)),
            hovertemplate="<b>optimum</b> " + cell_hover,
            meta={"group": "optimum", "customdata": names}, customdata=[listed[i][j]]))
        # above the plot, right-aligned, never over a cell: the star marks the cell
        unit = " days" if value_col == "train_days" else " s"
        layout["annotations"].append(dict(
            x=1.0, xref="paper", xanchor="right", y=1.0, yref="paper", yanchor="bottom",
            yshift=4, showarrow=False,
            text=f"★ <b>best {fmt_num(value[k])}{unit}</b> at {x} = {xs[j]}, {y} = {ys[i]}",
            font=dict(size=FONT_SIZE * 0.9 * scale(presentation), color=TEXT)))
    return make_figure(data, layout, plain=plain)


def hbm_contour_figure(sweep: pd.DataFrame, presentation: bool = False,
                       plain: bool = False) -> go.Figure:
    """Training time (days) over HBM capacity (GB, x) × HBM bandwidth (TB/s, y).

    A contour map when both axes have at least 3 values, else a heatmap; several rows per
    point (e.g. strategies) keep the fastest. Infeasible points (NaN days) are left blank.
    """
    cols = ("hbm_capacity_gb", "hbm_bandwidth_gb_per_s", "train_days")
    msg = check_frame(sweep, cols, "HBM sweep")
    if msg:
        return empty_figure(msg, presentation)
    frame = sweep[list(cols)].apply(pd.to_numeric, errors="coerce")
    frame = frame[np.isfinite(frame["hbm_capacity_gb"]) & np.isfinite(
        frame["hbm_bandwidth_gb_per_s"])]
    frame.loc[~(frame["train_days"] > 0), "train_days"] = np.nan
    if frame.empty or frame["train_days"].isna().all():
        return empty_figure("No feasible configuration anywhere in the HBM sweep.", presentation)
    grid = frame.groupby(["hbm_bandwidth_gb_per_s", "hbm_capacity_gb"])["train_days"].min()
    grid = grid.unstack("hbm_capacity_gb").sort_index().sort_index(axis=1)
    xs = grid.columns.to_numpy(dtype=float)
    ys = grid.index.to_numpy(dtype=float) / 1000.0
    z = grid.to_numpy(dtype=float)
    hover = ("HBM %{x:,.4~r} GB · %{y:,.4~r} TB/s<br>training time %{z:,.4~r} days"
             "<extra></extra>")
    bar = dict(title=dict(text="training time (days)", side="right"), thickness=16,
               outlinewidth=0)
    common = dict(x=xs, y=ys, z=z, colorscale=SEQUENTIAL_SCALE, reversescale=True, colorbar=bar,
                  hovertemplate=hover, name="training time (days)",
                  meta={"group": None, "customdata": []})
    if len(xs) >= 3 and len(ys) >= 3:
        trace = dict(type="contour", **common, connectgaps=False, hoverongaps=False,
                     contours=dict(showlabels=True,
                                   labelfont=dict(size=font_size(presentation) * 0.8,
                                                  color="white")),
                     line=dict(width=0.5))
    else:
        trace = dict(type="heatmap", **common, hoverongaps=False, xgap=1, ygap=1)
    points = dict(
        type="scatter", x=frame["hbm_capacity_gb"].to_numpy(),
        y=frame["hbm_bandwidth_gb_per_s"].to_numpy() / 1000.0, mode="markers",
        name="evaluated", marker=dict(size=4, color="rgba(255,255,255,0.6)",
                                      line=dict(color="rgba(0,0,0,0.5)", width=0.5)),
        hoverinfo="skip", showlegend=False, meta={"group": "points", "customdata": []})
    layout = base_layout("Training time vs HBM capacity and bandwidth", presentation)
    layout.update(xaxis=dict(title=dict(text="HBM capacity (GB)"), showgrid=False),
                  yaxis=dict(title=dict(text="HBM bandwidth (TB/s)"), showgrid=False))
    return make_figure([trace, points], layout, plain=plain)


def _numeric(values: pd.Series) -> bool:
    return bool(pd.to_numeric(values, errors="coerce").notna().all())


def _clean(value: object) -> object:
    """None for NaN (JSON-safe customdata), else a float or the value."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return value
    return f if math.isfinite(f) else None


def _placement(rec: dict) -> str:
    keys = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")
    if any(k not in rec for k in keys):
        return ""
    vals = [fmt_int(rec[k]) for k in keys]
    return "" if all(v == "–" for v in vals) else "×".join(vals)


def _candidates_line(names: list[str]) -> str:
    if "candidates" not in names or "feasible" not in names:
        return ""
    return (f"<br>%{{customdata[{names.index('feasible')}]}} of "
            f"%{{customdata[{names.index('candidates')}]}} candidates fit")


def _fit_words(rec: dict) -> str:
    """The hover's memory words of a tight cell: its ``memory_fit`` column ("may not fit: X ± Y
    GB of Z", written by the page, which knows the usable HBM) or :data:`TIGHT_WORDS`."""
    if not rec["_tight"]:
        return ""
    words = rec.get("memory_fit")
    return words if isinstance(words, str) and words else TIGHT_WORDS
