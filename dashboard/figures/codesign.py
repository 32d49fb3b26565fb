"""The co-design study as a map: one row per design (the varied system fields' values), one
column per model, the best design of each model starred. ``frame``: the rows of
:func:`model.studies.codesign.codesign`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.axes import fmt_int, fmt_num
from dashboard.figures.common import check_frame, empty_figure
from dashboard.figures.hover import floats
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import SEQUENTIAL_SCALE, TEXT, base_layout, font_size

# colour value: (column, label with unit)
METRICS = {"samples_per_s_per_musd": "samples/s per $M (of the GPUs used)",
           "samples_per_s": "samples/s"}
# the hover's lines after the value: (column, label, d3 format, unit)
HOVER = (("price_per_gpu_usd", "price per GPU $", ",.0f", ""),
         ("max_gpus", "GPUs the budget buys", ",", ""), ("gpus", "GPUs used", ",", ""),
         ("config", "configuration", "", ""))
# short names of the usual varied fields in the row labels
SHORT = {"hbm_capacity_gb": ("HBM", "GB"), "host_memory_gb": ("host", "GB"),
         "hbm_bandwidth_gb_per_s": ("HBM", "GB/s"), "nvlink_domain_size": ("NVLink domain", ""),
         "nic_bandwidth_gb_per_s": ("NIC", "GB/s")}


def design_label(row: pd.Series | dict, varied: Sequence[str]) -> str:
    """'HBM 80 GB · host 256 GB': the design's varied values (field names when not short)."""
    parts = []
    for key in varied:
        name, unit = SHORT.get(key, (key, ""))
        parts.append(f"{name} {fmt_int(row[key])}{' ' + unit if unit else ''}")
    return " · ".join(parts)


def config_text(frame: pd.DataFrame) -> list[str]:
    """Each row's configuration in a few words ('tp 8 · pp 4 · dp 16 · mb 1 · selective ·
    offload optimizer'); '–' where nothing fits."""
    out = []
    for rec in frame.to_dict("records"):
        if not floats([rec.get("gpus")])[0] > 0:
            out.append("–")
            continue
        text = " · ".join(f"{k} {fmt_int(rec.get(c))}" for c, k in (
            ("tp1", "tp"), ("pp", "pp"), ("dp", "dp"), ("microbatch", "mb")) if c in rec)
        text += f" · {rec.get('recompute', '')}"
        if rec.get("offload") not in (None, "none"):
            text += f" · offload {rec['offload']}"
        out.append(text)
    return out


def _grid(frame: pd.DataFrame, labels: list[str], models: list[str],
          values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """z (the value over the model's best, NaN where nothing fits), text and customdata
    ([value, *HOVER columns]) of the designs × models grid."""
    shape = (len(labels), len(models))
    z, text = np.full(shape, np.nan), np.full(shape, "no fit", dtype=object)
    custom = np.full(shape + (1 + len(HOVER),), None, dtype=object)
    best = frame.assign(_v=values).groupby("model")["_v"].max()
    for k, rec in enumerate(frame.to_dict("records")):
        i, j = labels.index(rec["_label"]), models.index(rec["model"])
        custom[i, j] = [values[k], *[rec.get(c) for c, *_ in HOVER]]
        if values[k] > 0:
            z[i, j] = values[k] / best[rec["model"]]
            text[i, j] = fmt_num(values[k])
    return z, text, custom


def codesign_figure(frame: pd.DataFrame, varied: Sequence[str],
                    metric: str = "samples_per_s_per_musd",
                    presentation: bool = False, plain: bool = False) -> go.Figure:
    """Designs (rows, in the study's order) × models (columns): each cell's colour is its
    ``metric`` (:data:`METRICS`) relative to the model's best design (models differ by orders
    of magnitude), its text the value itself; ★ marks each model's best design by samples/s
    (``best``) and outlined. Hover: the value, price per GPU, GPUs bought and used, and the
    configuration."""
    varied = list(varied)
    if metric not in METRICS:
        return empty_figure(f"Unknown metric {str(metric)[:40]!r}.", presentation)
    msg = check_frame(frame, ("model", "gpus", "best", metric, *varied,
                              *(c for c, *_ in HOVER[:3])), "co-design rows")
    if msg:
        return empty_figure(msg, presentation)
    frame = frame.assign(_label=[design_label(r, varied) for _, r in frame.iterrows()],
                         config=config_text(frame))
    labels = list(dict.fromkeys(frame["_label"]))
    models = list(dict.fromkeys(frame["model"].astype(str)))
    values = np.nan_to_num(floats(frame[metric]), nan=0.0)
    z, text, custom = _grid(frame, labels, models, values)
    marks = []  # each model's best design: ★ in the cell and an outline round it
    for rec in frame[frame["best"].astype(bool)].to_dict("records"):
        i, j = labels.index(rec["_label"]), models.index(str(rec["model"]))
        text[i, j] = f"★ {text[i, j]}"
        marks.append(dict(type="rect", xref="x", yref="y", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5,
                          y1=i + 0.5, line=dict(color=TEXT, width=3), layer="above"))
    names = [metric, *(c for c, *_ in HOVER)]
    hover = "<br>".join(["<b>%{x}</b> on %{y}", f"{METRICS[metric]} %{{customdata[0]:,.4~r}}",
                         *(f"{label} %{{customdata[{i}]{':' + fmt if fmt else ''}}}{unit}"
                           for i, (_, label, fmt, unit) in enumerate(HOVER, start=1))])
    size = font_size(presentation)
    data: list[dict] = [dict(
        type="heatmap", x=models, y=labels, z=z, zmin=0, zmax=1, colorscale=SEQUENTIAL_SCALE,
        name=METRICS[metric], text=text, texttemplate="%{text}", textfont=dict(size=size * 0.8),
        hoverongaps=False, xgap=2, ygap=2, customdata=custom,
        hovertemplate=hover + "<extra></extra>",
        colorbar=dict(title=dict(text="of the model's best", side="right"), thickness=16,
                      outlinewidth=0, tickformat=".0%"),
        meta={"group": "designs", "customdata": names})]
    short = METRICS[metric].split(" (")[0]  # the title stays clear of the tool bar
    layout = base_layout(f"Co-design: {short}", presentation)
    layout.update(
        xaxis=dict(type="category", title=dict(text="model"), showgrid=False),
        yaxis=dict(type="category", categoryorder="array", categoryarray=labels,
                   autorange="reversed", title=dict(text="design"), showgrid=False,
                   automargin=True),
        showlegend=False, shapes=marks)
    return make_figure(data, layout, plain=plain)
