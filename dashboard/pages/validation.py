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

from dashboard import figures
from dashboard.figures.validation import (
    MEMORY_METRICS,
    METRIC_LABELS,
    METRIC_UNITS,
    SET_LABELS,
    calibration_role,
    predicted_rows,
)
from dashboard.jobs import compute
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import page_callback
from dashboard.views import coverage_card, kernel_validation, serve_validation
from dashboard.views.grid import number_column as _num
from dashboard.views.grid import text_column as _text
from dashboard.views.runs_upload import runs_card
from model.errors import ModelError
from model.validation import summary
from model.validation.cross_validation import cross_validation_runs, cross_validation_sources

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
CV_COLUMNS = [  # one row per source: sortable, no filters
    _text("source", "source", 175, filter=False, pinned="left"),
    _num("runs", "runs", "d", 62, filter=False),
    _text("confidence", "transcription", 112, filter=False),
    _num("in_sample_mean_pct", "in sample mean |err| %", ".2f", 100, filter=False),
    _num("in_sample_max_pct", "in sample max |err| %", ".2f", 100, filter=False),
    _num("cross_validated_mean_pct", "cross-validated mean |err| %", ".2f", 118, flag=True,
         filter=False),
    _num("cross_validated_max_pct", "cross-validated max |err| %", ".2f", 118, flag=True,
         filter=False),
    _text("reading", "what the cross-validated error measures", 300, filter=False, flex=1,
          minWidth=300),
]
RECORD_COLUMNS = [
    _text("id", "record", 320, pinned="left", tooltipField="id"), _text("set", "set", 185),
    _text("metric_label", "metric", 225), _num("measured", "measured", ".4g", 125),
    _num("predicted", "predicted", ".4g", 125), _text("unit", "unit", 85),
    _num("error_pct", "error %", "+.1f", 110, flag=True),
    _num("peer_calculon", "Calculon", ".4g", 120),
    _num("peer_error_pct", "Calculon error %", "+.1f", 160, flag=True),
    _text("source", "source", 110), _text("role", "used for", 125),
    _text("skipped", "skipped because", 440, tooltipField="skipped"),
]


def _intro() -> html.Div:
    """What is compared, the error convention and what was fitted on what."""
    return html.Div(className="summary", children=[
        html.P([
            "How far the estimator's predictions are from published training runs. ",
            html.B("Korthikanti 2022"), ": the eight Megatron-LM runs of Korthikanti et al. "
            "(arXiv 2205.05198; 22B–1T parameters on DGX A100 80GB, full recompute and "
            "sequence parallelism + selective recompute): iteration time, and memory per GPU "
            "(parameters + gradients + optimizer state, activations) without and with "
            "SP + selective recompute; Calculon's published predictions of the same runs are "
            "shown beside ours. ", html.B("Other published runs"), ": Narayanan et al. 2021 "
            "(PTD-P and ZeRO-3 on A100), BLOOM, and Megatron-Bridge Llama 3 runs on H100, B200, "
            "GB200 and GB300 from its 25.09, 25.11 and 26.02 releases; throughput is turned "
            "into iteration time with its source's formula; records the model cannot express "
            "are listed at the bottom with the reason."]),
        html.P([
            html.B("Error"), " = 100·(1 − predicted / measured): positive when the estimator "
            "predicts less than was measured. ", html.B("Calibration"), ": one parameter per "
            "software stack and GPU, the fraction η of the tensor-core peak its matmuls reach, "
            "fitted by least squares over that stack's firm runs of that GPU (scripts/calibrate)"
            " — so the errors of those runs below are in sample. ",
            html.B("Cross-validated"), " (the table and figure just below): each source — a "
            "paper or a framework release — predicted with η fitted on every other source only. "
            "Uncertain sources (configuration or measurement partly inferred) are never fitted; "
            "they are hollow markers and hatched bars."]),
        html.P([
            html.B("Mixture of experts"), ": 63 Megatron-Bridge runs of DeepSeek-V3 and "
            "Qwen3-235B-A22B (releases 25.09–26.08, H100 to GB300; 61 predicted), each with "
            "its model as a Hugging Face config. Their experts' GEMMs run at the release's "
            "dense efficiency; one more parameter per release and GPU, the fraction η_t of the "
            "HBM bandwidth the MoE token kernels (router, permutation, unpermutation) reach, is "
            "fitted on these runs only — charged per routed byte, so models of few large "
            "experts pay little of it. Their own section below leaves one release out at a "
            "time; other MoE models (Mixtral, DeepSeek-V3 on H800) are held out "
            "(bench/moe_held_out.py, README)."]),
    ])


# cells and headers wrap onto more lines instead of being cut with '…' (issue 29: the summary's
# set labels and the records' reasons were truncated)
WRAPPED = {"resizable": True, "wrapText": True, "autoHeight": True, "wrapHeaderText": True,
           "autoHeaderHeight": True, "cellStyle": {"lineHeight": "1.4", "wordBreak": "normal"}}
CV_TABLE_OPTIONS = dict(
    defaultColDef={"resizable": True, "wrapText": True, "autoHeight": True,
                   "wrapHeaderText": True, "autoHeaderHeight": True},
    dashGridOptions={"domLayout": "autoHeight", "animateRows": False},
    style={"height": None}, className="ag-theme-alpine cv-table")
CV_SECTIONS = {  # part → (graph name, title, note)
    "dense": ("validation-cv", "Cross-validated error per source (leave-one-source-out)",
              "Bars: mean |error| of a source's runs, in sample (η fitted on every source) and "
              "cross-validated (fitted without the source); dots: each run; hatched: uncertain "
              "source; shaded: releases of the same recipes, whose held-out error measures "
              "repeatability across releases, not generalisation. "
              "From model/data/reference/cross_validation.json (scripts/calibrate --write), "
              "the numbers of the README's Accuracy table."),
    "moe": ("validation-moe-cv",
            "Mixture of experts: error per release (leave-one-release-out)",
            "The 61 Megatron-Bridge DeepSeek-V3 and Qwen3-235B-A22B runs: bars, mean |error| "
            "of a release's runs with the MoE token-kernel efficiency η_t fitted on its own "
            "runs (in sample) and on the other releases' runs only (cross-validated); dots: "
            "each run. Releases of the same recipes: repeatability, not generalisation (other "
            "MoE models: bench/moe_held_out.py, README). From the moe part of "
            "model/data/reference/cross_validation.json."),
}


def _cross_validation_card(part: str) -> html.Div:
    """The leave-one-source-out table of one part (dense or MoE runs) and its figure."""
    name, title, note = CV_SECTIONS[part]
    card = graph_card(name, title, grow=True, note=note,
                      extra=dag.AgGrid(id=f"{name}-table", columnDefs=CV_COLUMNS, rowData=[],
                                       **CV_TABLE_OPTIONS))
    card.className = "card wide"
    return card


def _records_card() -> html.Div:
    return html.Div(className="card wide", children=[
        html.H3("Every record (sortable; skipped records with the reason)"),
        dag.AgGrid(id="validation-records", columnDefs=RECORD_COLUMNS, rowData=[],
                   defaultColDef=WRAPPED,
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
    dcc.Store(id="validation-cv-presentation"),  # … and of the cross-validation section
    _intro(),
    html.Div(id="validation-message", className="alert", role="status"),
    html.Div(id="validation-cv-message", className="alert", role="status"),
    html.Div(className="grid", children=[
        html.Div(className="card wide", children=[
            html.H3("Accuracy per set and metric (predicted records)"),
            dag.AgGrid(id="validation-summary", columnDefs=SUMMARY_COLUMNS, rowData=[],
                       defaultColDef=WRAPPED,
                       dashGridOptions={"domLayout": "autoHeight", "animateRows": False,
                                        "suppressHorizontalScroll": True},
                       columnSize="sizeToFit", style={"height": None},
                       className="ag-theme-alpine"),
        ]),
        _cross_validation_card("dense"),
        _cross_validation_card("moe"),
        coverage_card.card(),
        coverage_card.memory_card(),
        graph_card("validation-time", "Iteration time: predicted vs measured", height=520,
                   note=("Log-log; dashed: y = x, shaded: within ±10%. Diamonds: Calculon's "
                         "published predictions of the same runs.")),
        graph_card("validation-memory", "Memory per GPU: predicted vs measured", height=520,
                   note=("Korthikanti's measured memory breakdown, without and with sequence "
                         "parallelism + selective recompute; shaded: within ±10%.")),
        _error_card(),
        _records_card(),
        serve_validation.section(),
        kernel_validation.section(),
        runs_card(),
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


def cross_validation_rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The per-source table as grid rows (NaN → null)."""
    rows = []
    for rec in table.to_dict("records"):
        row = {k: _clean(v) for k, v in rec.items() if k != "same_recipes"}
        row["confidence"] = "uncertain" if rec["uncertain"] else "firm"
        rows.append(row)
    return rows


def build_cross_validation(presentation: bool = False, part: str = "dense") -> tuple:
    """(table rows, figure, message) of one leave-one-source-out section (``part``: the dense
    runs or the MoE runs); a message and an empty figure when the stored table cannot be
    read."""
    try:
        table = cross_validation_sources(part=part)
        runs = cross_validation_runs(part=part)
    except (OSError, ValueError, KeyError) as exc:
        return [], figures.empty_figure("No cross-validation table.", presentation), (
            f"The cross-validation table could not be read: {exc}")
    return (cross_validation_rows(table),
            figures.cross_validation_figure(table, runs, presentation=presentation), "")


@callback(
    *[o for part in CV_SECTIONS for o in (
        Output(f"{CV_SECTIONS[part][0]}-table", "rowData"),
        Output({"type": "graph", "name": CV_SECTIONS[part][0]}, "figure"))],
    Output("validation-cv-message", "children"), Output("validation-cv-presentation", "data"),
    Input("validation-load", "data"), Input("scenario", "data"),
    State("validation-cv-presentation", "data"), prevent_initial_call=False,
)
@page_callback(1, lambda message: [*[no_update] * (2 * len(CV_SECTIONS)), message, no_update])
def update_cross_validation(_load: Any, scn: dict[str, Any], shown: Any) -> list:
    """On page load, and when presentation mode changes: both sections, one message."""
    pres = bool(scn["presentation"])
    if shown is not None and bool(shown) == pres:
        raise PreventUpdate
    built = [build_cross_validation(pres, part) for part in CV_SECTIONS]
    message = " ".join(dict.fromkeys(m for _, _, m in built if m))
    return [*[x for rows, fig, _ in built for x in (rows, fig)], message, pres]


def _cross_validation_figures(scn: dict[str, Any], _context: Any) -> dict[str, Any]:
    out = {}
    for part, (name, _, _) in CV_SECTIONS.items():
        _, figure, message = build_cross_validation(bool(scn["presentation"]), part)
        if message:
            raise ModelError(message)
        out[name] = figure
    return out


register_exports([name for name, _, _ in CV_SECTIONS.values()], _cross_validation_figures)
