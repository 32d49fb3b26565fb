"""The serving part of the Validation page: predicted vs measured offline output tokens/s on
TensorRT-LLM's perf overview (the only data the trtllm-1.0 serving stack is fitted to), with
the in-sample error and the leave-one-model-out and leave-one-GPU-out errors the fit recorded
(``model.validation.serving``, docs/serving.md)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from dash import Input, Output, callback, dcc, html

from dashboard.figures.common import empty_figure
from dashboard.figures.maker import make_figure
from dashboard.figures.theme import base_layout
from dashboard.server.export import graph_card, register_exports
from model.cli.numbers import count
from model.specs import memo
from model.validation import serving as sv

CARD = "validation-serving"


def section() -> html.Div:
    """The serving card and its error summary (drawn on page load)."""
    return html.Div(className="card wide", children=[
        html.H3("Serving: TensorRT-LLM offline throughput, predicted vs measured"),
        dcc.Store(id="validation-serving-load", data=True),
        html.P(id="validation-serving-summary", className="summary"),
        graph_card(CARD, "Output tokens/s: predicted vs measured", height=480,
                   note="Log-log; dashed: y = x. Fitted on these runs (five values per GPU "
                        "generation); the summary gives the leave-one-out errors."),
    ])


@memo.lru("serving validation frame", 1)
def _frame() -> pd.DataFrame:
    return pd.DataFrame(sv.records())


def summary_text(summary: dict) -> str:
    ins = summary["in_sample"]
    parts = [f"In sample: mean |error| {ins['mean_abs_error_pct']:.1f} % over {ins['runs']} "
             f"runs (max {ins['max_abs_error_pct']:.0f} %)."]
    for name, label in (("leave_one_model_out", "Leaving one model out"),
                        ("leave_one_gpu_out", "Leaving one GPU out")):
        rows = summary.get(name) or {}
        if rows:
            parts.append(f"{label}: " + ", ".join(
                f"{k} {v['mean_abs_error_pct']:.0f} %" for k, v in rows.items()) + ".")
    pops = summary.get("populations") or {}
    if pops:
        parts.append("Throughput by population: " + ", ".join(
            f"{k.replace('/', ' ')} {v['output_tokens_per_s']['mean_abs_error_pct']:.0f} % "
            f"({count(v['output_tokens_per_s']['runs'], 'run')})" for k, v in pops.items()) + ".")
    if summary.get("latency_note"):
        parts.append(summary["latency_note"])
    return " ".join(parts)


def figure(frame: pd.DataFrame, presentation: bool = False, plain: bool = False) -> Any:
    if frame.empty:
        return empty_figure("No serving runs.", presentation)
    data = []
    for model, rows in frame.groupby("model", sort=True):
        data.append(dict(type="scatter", mode="markers", name=model,
                         x=rows["output_tokens_per_s"].tolist(),
                         y=rows["predicted_tokens_per_s"].tolist(),
                         text=[f"{r.system} tp{r.tp} {r.weight_precision} "
                               f"{r.input_tokens}/{r.output_tokens}: {r.error_pct:+.0f} %"
                               for r in rows.itertuples()],
                         hovertemplate="%{text}<extra>%{fullData.name}</extra>"))
    lo = float(frame[["output_tokens_per_s", "predicted_tokens_per_s"]].min().min())
    hi = float(frame[["output_tokens_per_s", "predicted_tokens_per_s"]].max().max())
    data.append(dict(type="scatter", mode="lines", name="y = x", x=[lo, hi], y=[lo, hi],
                     line=dict(dash="dash"), hoverinfo="skip"))
    layout = base_layout(None, presentation)
    layout.update(xaxis=dict(title="measured output tokens/s", type="log"),
                  yaxis=dict(title="predicted output tokens/s", type="log"))
    return make_figure(data, layout, plain=plain)


@callback(Output({"type": "graph", "name": CARD}, "figure"),
          Output("validation-serving-summary", "children"),
          Input("validation-serving-load", "data"))
def draw(_load: Any) -> tuple:
    frame = _frame()
    return figure(frame), summary_text(sv.summary(frame))


register_exports([CARD], lambda scn, context: {CARD: figure(_frame())})
