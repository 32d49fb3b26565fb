"""The Validation page's interval-coverage card: per population (stack family × dense/MoE × GPU
generation), the runs, the stated coverage, the empirical leave-one-source-out coverage of the
split-conformal intervals and their width (:func:`model.validation.coverage.coverage_table`),
at a coverage the user picks (50–95 %)."""

from __future__ import annotations

import math
from typing import Any

import dash_ag_grid as dag
from dash import Input, Output, callback, dcc, html

from dashboard.views.grid import number_column as _num
from dashboard.views.grid import text_column as _text
from model.errors import ModelError
from model.specs.conformal import COVERAGE
from model.validation import memory_error
from model.validation.coverage import coverage_table

CHOICES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
COLUMNS = [
    _text("population", "population", 330, filter=False, pinned="left"),
    _num("n", "runs", "d", 70, filter=False),
    _num("sources", "sources", "d", 80, filter=False),
    _num("coverage_pct", "stated coverage %", ".0f", 100, filter=False),
    _num("empirical_pct", "empirical coverage % (leave-one-source-out)", ".1f", 150,
         filter=False),
    _num("loo_pct", "empirical coverage % (leave-one-run-out)", ".1f", 140, filter=False),
    _num("low_pct", "interval low %", "+.1f", 100, filter=False),
    _num("high_pct", "interval high %", "+.1f", 100, filter=False),
    _num("width_pct", "width (points)", ".1f", 100, filter=False),
    _num("mean_abs_error_pct", "mean |err| %", ".1f", 100, flag=True, filter=False),
]


def _pct(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else (
        round(100 * float(value), 2))


def _num_or_none(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else (
        round(float(value), 3))


def coverage_rows(coverage: float = COVERAGE) -> list[dict[str, Any]]:
    """The card's rows: one per population, the pooled one last."""
    rows = []
    for r in coverage_table(coverage).to_dict("records"):
        rows.append({"population": r["population"], "n": int(r["n"]),
                     "sources": int(r["sources"]), "coverage_pct": _pct(r["coverage"]),
                     "empirical_pct": _pct(r["empirical_coverage"]),
                     "loo_pct": _pct(r["loo_coverage"]), "low_pct": _num_or_none(r["low_pct"]),
                     "high_pct": _num_or_none(r["high_pct"]),
                     "width_pct": _num_or_none(r["width_pct"]),
                     "mean_abs_error_pct": _num_or_none(r["mean_abs_error_pct"])})
    return rows


MEMORY_COLUMNS = [
    _text("figure", "memory figure", 330, filter=False, pinned="left"),
    _text("source", "source", 150, filter=False),
    _num("measured_gib", "measured GiB", ".2f", 100, filter=False),
    _num("predicted_gib", "predicted GiB", ".2f", 100, filter=False),
    _num("error_pct", "error % (held out: nothing fitted)", "+.2f", 120, flag=True,
         filter=False),
]


def memory_rows() -> list[dict[str, Any]]:
    """The memory model's residuals (allocated bytes: Korthikanti et al. 2022), then
    TorchTitan's peak reserved memory beside the model's allocated figure."""
    rows = [{"figure": f"{r['id']} ({r['metric']})", "source": r["source"],
             "measured_gib": r["measured_gib"], "predicted_gib": r["predicted_gib"],
             "error_pct": round(100 * (r["predicted_gib"] / r["measured_gib"] - 1), 3)}
            for r in memory_error.stored_rows()]
    rows += [{"figure": f"{r['id']} (peak reserved, Table {r['table']})",
              "source": "torchtitan-2024-12 (reserved, not fitted)",
              "measured_gib": r["reserved_gib"], "predicted_gib": r["predicted_allocated_gib"],
              "error_pct": r["gap_pct"]} for r in memory_error.stored_reserved_rows()]
    return rows


def memory_card() -> html.Div:
    r = memory_error.memory_radius(COVERAGE)
    band = "not stated" if r is None else f"±{100 * (math.exp(r) - 1):.1f} %"
    return html.Div(className="card wide", children=[
        html.H3("Memory per GPU: the memory model's error"),
        html.P(f"Allocated-memory figures of the fit data (nothing of the memory model is "
               f"fitted to them); their 80 % split-conformal interval, {band}, is the band in "
               "which a configuration is 'tight' (may not fit). TorchTitan's figures are the "
               "caching allocator's peak reserved memory, above every allocated byte: shown, "
               "not fitted.", className="note"),
        dag.AgGrid(id="validation-memory-table", columnDefs=MEMORY_COLUMNS,
                   rowData=memory_rows(), defaultColDef={"resizable": True},
                   dashGridOptions={"domLayout": "autoHeight", "animateRows": False},
                   style={"height": None}, className="ag-theme-alpine"),
    ])


def card() -> html.Div:
    return html.Div(className="card wide", children=[
        html.H3("Interval coverage per population (split-conformal)"),
        html.P("Each prediction's range is the ⌈(n+1)·q⌉-th smallest |ln(predicted/measured)| "
               "of its population's leave-one-source-out runs. Here each fit run is predicted "
               "so, its own source held out of the interval too: the share inside is the "
               "empirical coverage to compare with the stated one.", className="note"),
        html.Label(["coverage ", dcc.Dropdown(
            id="validation-coverage", options=[{"label": f"{100 * q:.0f} %", "value": q}
                                               for q in CHOICES],
            value=COVERAGE, clearable=False, style={"width": "120px"})]),
        html.Div(id="validation-coverage-message", className="alert", role="status"),
        dag.AgGrid(id="validation-coverage-table", columnDefs=COLUMNS, rowData=[],
                   defaultColDef={"resizable": True, "wrapHeaderText": True,
                                  "autoHeaderHeight": True},
                   dashGridOptions={"domLayout": "autoHeight", "animateRows": False},
                   style={"height": None}, className="ag-theme-alpine"),
    ])


@callback(Output("validation-coverage-table", "rowData"),
          Output("validation-coverage-message", "children"),
          Input("validation-coverage", "value"))
def update_coverage(coverage: Any) -> tuple[list[dict[str, Any]], str]:
    """The rows at the chosen coverage, or a message in words."""
    try:
        return coverage_rows(coverage if coverage is not None else COVERAGE), ""
    except (ModelError, OSError, ValueError) as exc:
        return [], f"The coverage table could not be computed: {exc}"
