"""Validation page: the estimator's predictions against published training runs
(``model.validation``), with Calculon's published predictions beside ours for the Korthikanti
runs: the accuracy summary, predicted-vs-measured scatters (iteration time, memory), the error
of every record and the full record table (skipped records with their reason).

The page does not depend on the scenario: it is computed once (cached on disk) and redrawn only
when presentation mode changes.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import dash
import dash_ag_grid as dag
import pandas as pd
from dash import Input, Output, State, callback, dcc, html, no_update
from dash.exceptions import PreventUpdate

from model import load_system
from model.errors import ModelError
from model.validation import summary

from .. import compute, figures
from ..export import graph_card, register_exports
from ..figures.validation import (
    MEMORY_METRICS,
    METRIC_LABELS,
    METRIC_UNITS,
    SET_LABELS,
    calibration_role,
    predicted_rows,
)
from ..grid import number_column as _num
from ..grid import text_column as _text
from ..guard import page_callback

dash.register_page(__name__, path="/validation", name="Validation", order=4,
                   title="Validation — transformer training what-if")

GRAPHS = ("validation-time", "validation-memory", "validation-errors")
SUMMARY_COLUMNS = [  # a few rows: sortable, no filters (their icons crowd the headers)
    _text("set_label", "set", 250, filter=False),
    _text("metric_label", "metric", 210, filter=False),
    _text("sources", "sources", 90, filter=False), _num("n", "n", "d", 55, filter=False),
    _num("mean_abs_error_pct", "mean |err| %", ".1f", 115, flag=True, filter=False),
    _num("max_abs_error_pct", "max |err| %", ".1f", 110, flag=True, filter=False),
    _num("calculon_mean_abs_error_pct", "Calculon mean |err| %", ".1f", 170, flag=True,
         filter=False),
    _num("calculon_max_abs_error_pct", "Calculon max |err| %", ".1f", 165, flag=True,
         filter=False),
]
RECORD_COLUMNS = [
    _text("id", "record", 320, pinned="left"), _text("set", "set", 185),
    _text("metric_label", "metric", 225), _num("measured", "measured", ".4g", 125),
    _num("predicted", "predicted", ".4g", 125), _text("unit", "unit", 85),
    _num("error_pct", "error %", "+.1f", 110, flag=True),
    _num("peer_calculon", "Calculon", ".4g", 120),
    _num("peer_error_pct", "Calculon error %", "+.1f", 160, flag=True),
    _text("source", "source", 110), _text("role", "used for", 125),
    _text("skipped", "skipped because", 440, tooltipField="skipped"),
]


def _intro() -> html.Div:
    """What is compared, the error convention and what the efficiencies were fitted on."""
    a100, h100 = load_system("a100"), load_system("h100")
    b200, gb200 = load_system("b200"), load_system("gb200-nvl72")
    return html.Div(className="summary", children=[
        html.P([
            "How far the estimator's predictions are from published training runs. ",
            html.B("Korthikanti 2022"), ": the eight Megatron-LM runs of Korthikanti et al. "
            "(arXiv 2205.05198; 22B–1T parameters on DGX A100 80GB, full recompute and "
            "sequence parallelism + selective recompute): iteration time, and memory per GPU "
            "(parameters + gradients + optimizer state, activations) without and with "
            "SP + selective recompute; Calculon's published predictions of the same runs are "
            "shown beside ours. ", html.B("Other published runs"), ": Narayanan et al. 2021 "
            "(PTD-P and ZeRO-3 on A100) and Megatron-Bridge Llama 3 FP8 runs on H100, B200, "
            "GB200 and GB300, plus the same summary's 25.09 and 26.02 releases (never fitted; "
            "model/data/reference/megatron_bridge_extra.json); throughput is turned into "
            "iteration time with its source's formula;"
            " records the model cannot express are listed at the bottom with the reason."]),
        html.P([
            html.B("Error"), " = 100·(1 − predicted / measured): positive when the estimator "
            "predicts less than was measured. ", html.B("Calibration"),
            f": the A100 FLOP efficiency ({a100.flop_efficiency:g}) was fitted on Korthikanti's "
            "four full-recompute runs; the FP8 efficiency "
            f"({h100.flop_efficiency_fp8:g}) and the attention efficiencies (H100 "
            f"{h100.attention_efficiency:g}, B200 {b200.attention_efficiency:g}) on the "
            "Megatron-Bridge 25.11 H100 and DGX B200 Llama 3 runs, the GB200's own FP8 "
            f"efficiency ({gb200.flop_efficiency_fp8:g}) on its 25.11 runs; the overlap slowdown "
            f"({h100.overlap_slowdown:g}) is set a priori (sources in model/data/systems/*.json, "
            "method in bench/calibrate.py). Every other record — selective recompute, memory, "
            "Narayanan, GB300 and the 25.09/26.02 releases — is held out. "
            "Uncertain sources (configuration or measurement partly inferred) are hollow "
            "markers and hatched bars."]),
    ])


def _records_card() -> html.Div:
    return html.Div(className="card wide", children=[
        html.H3("Every record (sortable; skipped records with the reason)"),
        dag.AgGrid(id="validation-records", columnDefs=RECORD_COLUMNS, rowData=[],
                   defaultColDef={"resizable": True},
                   dashGridOptions={"animateRows": False, "tooltipShowDelay": 300},
                   style={"height": "560px"}, className="ag-theme-alpine"),
    ])


def _error_card() -> html.Div:
    card = graph_card("validation-errors", "Error per record: ours and Calculon's", grow=True,
                      note=("Bars: error % per predicted record (Calculon's beside ours where "
                            "it published a prediction); dotted ±5%, dashed ±10%; hatched: "
                            "uncertain source."))
    card.className = "card wide"
    return card


layout = html.Div(className="page-body", children=[
    dcc.Store(id="validation-load", data=True),  # triggers the callback on page load
    dcc.Store(id="validation-presentation"),  # the presentation flag last drawn
    _intro(),
    html.Div(id="validation-message", className="alert", role="status"),
    html.Div(className="grid", children=[
        html.Div(className="card wide", children=[
            html.H3("Accuracy per set and metric (predicted records)"),
            dag.AgGrid(id="validation-summary", columnDefs=SUMMARY_COLUMNS, rowData=[],
                       defaultColDef={"resizable": True},
                       dashGridOptions={"domLayout": "autoHeight", "animateRows": False,
                                        "suppressHorizontalScroll": True},
                       columnSize="sizeToFit", style={"height": None},
                       className="ag-theme-alpine"),
        ]),
        graph_card("validation-time", "Iteration time: predicted vs measured", height=520,
                   note=("Log-log; dashed: y = x, shaded: within ±10%. Diamonds: Calculon's "
                         "published predictions of the same runs.")),
        graph_card("validation-memory", "Memory per GPU: predicted vs measured", height=520,
                   note=("Korthikanti's measured memory breakdown, without and with sequence "
                         "parallelism + selective recompute; shaded: within ±10%.")),
        _error_card(),
        _records_card(),
    ]),
])


def _clean(value: Any) -> Any:
    """NaN → None (JSON null: '–' in the tables), numpy scalars → Python."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value.item() if hasattr(value, "item") else value


def summary_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """:func:`model.validation.summary` as table rows, with readable set and metric names."""
    table = summary(frame)
    rows = []
    for rec in table.to_dict("records"):
        row = {k: _clean(v) for k, v in rec.items()}
        row.update(set_label=SET_LABELS.get(rec["set"], rec["set"]),
                   metric_label=METRIC_LABELS.get(rec["metric"], rec["metric"]),
                   sources="uncertain" if rec["uncertain"] else "firm")
        rows.append(row)
    return rows


def record_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Every record: the predicted ones (by set and metric), then the skipped ones."""
    done = predicted_rows(frame)
    rest = frame[~frame["id"].isin(set(done["id"]))]
    ordered = pd.concat([done, rest], ignore_index=True)
    roles = calibration_role(ordered["id"], ordered["set"])
    rows = []
    for rec, role in zip(ordered.to_dict("records"), roles):
        row = {k: _clean(v) for k, v in rec.items()}
        skipped = bool(row.get("skipped"))
        row.update(unit=METRIC_UNITS.get(rec["metric"], ""),
                   metric_label=METRIC_LABELS.get(rec["metric"], rec["metric"]),
                   source="uncertain" if rec.get("uncertain") else "firm",
                   role="skipped" if skipped else role)
        rows.append(row)
    return rows


def build(frame: pd.DataFrame, presentation: bool = False) -> tuple:
    """Every output of the page for the validation frame (callable without a browser):
    summary rows, the three figures, the record rows and the message ('' when all is well)."""
    pres = bool(presentation)
    return (
        summary_rows(frame),
        figures.validation_scatter_figure(frame, "iteration_time_s", presentation=pres),
        figures.validation_scatter_figure(frame, MEMORY_METRICS, presentation=pres),
        figures.validation_error_figure(frame, presentation=pres),
        record_rows(frame),
        "",
    )


def outputs(presentation: bool = False) -> list:
    """:func:`build` of the cached validation frame, its outputs cached as JSON; a message
    and empty figures when the reference data cannot be read."""
    try:
        frame = compute.validation()
    except (ModelError, OSError, ValueError) as exc:
        empty = figures.empty_figure("No validation data.", presentation)
        return [[], empty, empty, empty, [], f"The validation could not run: {exc}"]
    digest = hashlib.sha256(frame.to_json(orient="split").encode()).hexdigest()[:16]
    return compute.cached_outputs("page-validation",
                                  {"presentation": bool(presentation), "data": digest},
                                  lambda: build(frame, presentation))


@callback(
    Output("validation-summary", "rowData"),
    *[Output({"type": "graph", "name": g}, "figure") for g in GRAPHS],
    Output("validation-records", "rowData"), Output("validation-message", "children"),
    Output("validation-presentation", "data"),
    Input("validation-load", "data"), Input("scenario", "data"),
    State("validation-presentation", "data"),
    prevent_initial_call=False,
)
@page_callback(1, lambda message: [*[no_update] * 5, message, no_update])
def update(_load: Any, scn: dict[str, Any], shown: Any) -> list:
    """On page load, and when presentation mode changes (other scenario changes: nothing)."""
    pres = bool(scn["presentation"])
    if shown is not None and bool(shown) == pres:
        raise PreventUpdate
    return [*outputs(pres), pres]


def _figures(scn: dict[str, Any], _context: Any) -> dict[str, Any]:
    out = outputs(bool(scn["presentation"]))
    if out[5]:
        raise ModelError(out[5])
    return dict(zip(GRAPHS, out[1:4]))


register_exports(GRAPHS, _figures)
