"""Design-space page: a heatmap of the best time over two chosen parallel dimensions at one GPU
count (infeasible cells and the optimum marked), the sortable table of the top configurations,
and for a selected row its per-op breakdown and roofline."""

from __future__ import annotations

import math
from typing import Any

import dash
import dash_ag_grid as dag
from dash import Input, Output, State, callback, html, no_update

from dashboard import figures
from dashboard.controls.scenario import build_inputs
from dashboard.figures.common import strategy_name
from dashboard.figures.theme import dimension_label
from dashboard.jobs import compute
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import bad_request, page_callback
from dashboard.views import notes, selected
from dashboard.views.explain import no_configuration_text
from dashboard.views.grid import SIGNIFICANT, number_column, text_column
from model import ModelError
from model.engine.space import COLUMNS as CONFIG_KEYS
from model.physics.strategies import STRATEGIES

dash.register_page(__name__, path="/design", name="Design space", order=1,
                   title="Design space — transformer training what-if")


TOP_COLUMNS = [
    number_column("samples_per_s", "samples/s", ".2f", 130),
    number_column("train_days", "days", ".1f", 105), number_column("mfu", "MFU", ".0%", 100),
    number_column("mfu_peak_tflops", "MFU peak TFLOP/s", SIGNIFICANT, 150),
    *[number_column(k, label, "d", width) for k, label, width in (
        ("dp", "dp", 90), ("tp1", "tp1", 90), ("tp2", "tp2", 90), ("pp", "pp", 90),
        ("microbatch", "mb", 85), ("nb", "nb", 85), ("ep", "ep", 85), ("etp", "etp", 90))],
    text_column("placement", "NVLink tp1×tp2×dp×pp", 150, filter=False),
    number_column("memory_gb", "memory GB", ".1f", 130),
    # "tight": the memory model's interval holds the usable HBM (may not fit; kept, ranked)
    text_column("memory_fit", "HBM fit", 110, filter=False),
    number_column("iteration_time_s", "iter s", ".2f", 115),
    number_column("t_compute_s", "compute s", ".2f", 125),
    number_column("t_tp_comm_s", "TP comm s", ".2f", 125),
    number_column("t_ep_comm_s", "EP all-to-all s", ".2f", 140),
    number_column("t_pp_comm_s", "PP comm s", ".2f", 125),
    number_column("t_dp_comm_s", "DP comm s", ".2f", 125),
    number_column("t_bubble_s", "bubble s", ".2f", 115),
    number_column("t_memory_s", "memory s", ".2f", 120),
    number_column("t_optimizer_s", "optimizer s", ".3f", 125),
]
OPS_COLUMNS = [
    text_column("op", "op", 140, filter=False), text_column("where", "where", 75, filter=False,
                                                            sortable=False),
    text_column("kind", "kind", 120, filter=False, sortable=False),
    number_column("t_iteration_s", "s / iteration", ".3f", 140),
    number_column("flop_fwd", "FLOP fwd", ".3s", 120),
    number_column("flop_bwd", "FLOP bwd", ".3s", 120),
    number_column("hbm_bytes_fwd", "HBM B fwd", ".3s", 125),
    number_column("hbm_bytes_bwd", "HBM B bwd", ".3s", 125),
    number_column("intensity_flop_per_byte", "FLOP/B", ".1f", 105),
    # the efficiencies its kernel time implies (model.engine.kernel_report)
    number_column("implied_flop_efficiency_fwd", "FLOP eff fwd", ".1%", 125),
    number_column("implied_flop_efficiency_bwd", "FLOP eff bwd", ".1%", 125),
    number_column("implied_hbm_efficiency_fwd", "HBM eff fwd", ".1%", 125),
    number_column("implied_hbm_efficiency_bwd", "HBM eff bwd", ".1%", 125),
    text_column("bound", "bound", 115, filter=False, sortable=False),
    text_column("collectives", "collectives", 420, filter=False, sortable=False),
]

OPS_NOTE = ("FLOP eff: the time the op's FLOPs take at peak (matrix FLOPs at the peak of the "
            "precision it runs in, vector FLOPs at the vector peak) over its kernel time; "
            "HBM eff: its HBM bytes over its kernel time and the nominal HBM bandwidth — the "
            "efficiencies a kernel would need to run in the time the estimate gives it.")

layout = html.Div(className="page-body", children=[
    html.Div(id="design-infeasible", className="alert", role="status"),
    html.Div(className="grid", children=[
        graph_card("design-heatmap", "Design space: best time per pair of dimensions",
                   height=520, note=("Each cell: the fastest configuration over every other "
                                     "dimension; ✕: candidates exist but none fits in HBM; "
                                     "★: the optimum.")),
        html.Div(className="card", children=[
            html.H3("Top configurations (select a row for its breakdown)"),
            dag.AgGrid(id="design-top", columnDefs=TOP_COLUMNS, rowData=[],
                       dashGridOptions={"rowSelection": {"mode": "singleRow",
                                                         "enableClickSelection": True},
                                        "animateRows": False,
                                        # every column in the page, not only those scrolled
                                        # into view: at most TOP_K rows, cheap to render
                                        "suppressColumnVirtualisation": True},
                       defaultColDef={"resizable": True}, style={"height": "470px"},
                       className="ag-theme-alpine"),
        ]),
        html.Div(id="design-selected", className="summary card wide"),
        html.Div(id="design-ops-message", className="alert wide", role="status"),
        graph_card("design-ops", "Where the time goes, per op (selected configuration)",
                   grow=True),
        graph_card("design-roofline", "Roofline of the selected configuration's ops",
                   note="Marker area ∝ the op's time per iteration; colour: what bounds it."),
        html.P(id="design-timeline-summary", className="summary card wide"),
        graph_card("design-timeline", "One iteration, stage by stage (selected configuration)",
                   note=("The pipeline schedule (1F1B, or interleaved with V virtual stages) "
                         "played out from the estimator's own stage times; grey: each stage's "
                         "idle time, the bubble; then the data-parallel sync and the optimizer "
                         "step.")),
        graph_card("design-memory", "Memory per GPU (selected configuration)", note=(
            "The binding stage's weights, gradients, optimizer state and activations, the "
            "reserve the software stack keeps, and what is left of the HBM.")),
        html.Div(className="card wide", children=[
            html.H3("Per-op breakdown (selected configuration)"),
            html.Div(OPS_NOTE, className="card-note"),
            dag.AgGrid(id="design-ops-table", columnDefs=OPS_COLUMNS, rowData=[],
                       # every column rendered (the efficiencies too), as the top table: a few
                       # dozen ops at most
                       dashGridOptions={"suppressColumnVirtualisation": True},
                       defaultColDef={"resizable": True}, style={"height": "420px"},
                       className="ag-theme-alpine"),
        ]),
    ]),
])


def _rows(frame, scn: dict[str, Any]) -> list[dict[str, Any]]:
    """The top table's rows: with the NVLink placement and whether each fits ("fits" |
    "tight": :func:`dashboard.views.selected.fit_state`)."""
    out = frame.copy()
    out["memory_fit"] = [selected.fit_state(scn, row)[0] for _, row in frame.iterrows()]
    out["placement"] = (out["nv_tp1"].astype(str) + "×" + out["nv_tp2"].astype(str) + "×"
                        + out["nv_dp"].astype(str) + "×" + out["nv_pp"].astype(str))
    return out.to_dict("records")


def infeasible_text(scn: dict[str, Any], cells) -> str:
    """Why the design space at the scenario's GPU count is empty or has nothing that fits."""
    if cells.empty:
        return no_configuration_text(scn, scn["gpus"], scn["design_strategy"])
    if "feasible" in cells.columns and not cells["feasible"].any():
        _, system = build_inputs(scn)
        if "tight" in cells.columns and cells["tight"].any():
            return (f"None of the {int(cells['candidates'].sum())} {scn['design_strategy']} "
                    f"configurations on {scn['gpus']} GPUs surely fits in "
                    f"{system.hbm_capacity_gb:g} GB of HBM; the ⚠ cells may (within the memory "
                    "model's interval of the limit: hover them).")
        return (f"None of the {int(cells['candidates'].sum())} {scn['design_strategy']} "
                f"configurations on {scn['gpus']} GPUs fits in {system.hbm_capacity_gb:g} GB of "
                "HBM (✕ cells): add GPUs or HBM, or recompute more (the Scaling page says what "
                "dominates the memory).")
    return ""


def with_fit_words(scn: dict[str, Any], cells):
    """``cells`` with a ``memory_fit`` column where none fits but some are tight: the words of
    the cell's fastest tight configuration ("may not fit: X ± Y GB of Z", as the top table's
    :func:`dashboard.views.selected.fit_state`)."""
    if cells.empty or "tight" not in cells.columns:
        return cells
    tight = (cells["feasible"] == 0) & (cells["tight"] > 0)
    if not tight.any():
        return cells
    capacity = build_inputs(scn)[1].hbm_capacity_gb
    words = [selected.fit_state(scn, {"hbm_capacity_gb": capacity, "memory_gb": m,
                                      "fits": False})[1]
             for m in cells.loc[tight, "memory_gb"]]
    out = cells.copy()
    out["memory_fit"] = ""
    out.loc[tight, "memory_fit"] = words
    return out


def build_space(scn: dict[str, Any]) -> tuple:
    """Heatmap figure, top-configuration rows (and the selected one) and the explanation when
    nothing can be shown, for a scenario."""
    pres = bool(scn.get("presentation"))
    cells = compute.design(scn)
    why = infeasible_text(scn, cells)
    if cells.empty:
        heat = figures.empty_figure(f"No configuration exists on {scn['gpus']} GPUs: see the "
                                    "explanation above.", pres)
    else:
        heat = figures.mark_not_validated(
            figures.heatmap_figure(with_fit_words(scn, cells), scn["x_axis"], scn["y_axis"],
                                   presentation=pres),
            notes.not_validated(scn, strategy=scn["design_strategy"]), pres)
    rows = _rows(compute.top(scn), scn)
    return heat, rows, rows[:1], why


@callback(
    Output({"type": "graph", "name": "design-heatmap"}, "figure"),
    Output("design-top", "rowData"), Output("design-top", "selectedRows"),
    Output("design-infeasible", "children"),
    Input("scenario", "data"),
)
@page_callback(0, lambda message: (no_update, no_update, no_update, message))
def update_space(scn: dict[str, Any]) -> list:
    return space_outputs(scn)


def space_outputs(scn: dict[str, Any]) -> list:
    """:func:`build_space`, cached as JSON (ModelError when over the request's budget)."""
    keys = ("gpus", "design_strategy", "x_axis", "y_axis")
    return compute.cached_outputs("page-design", compute.page_payload(scn, *keys),
                                  lambda: build_space(scn))


def build_ops(scn: dict[str, Any], selected: list[dict[str, Any]] | None) -> tuple:
    """Per-op figures and table of the selected configuration."""
    pres = bool(scn.get("presentation"))
    if not selected:
        empty = figures.empty_figure("Select a configuration in the table.", pres)
        return empty, empty, []
    ops = compute.ops(scn, selected[0])
    _, system = build_inputs(scn)
    roof = figures.roofline_figure(ops, system.matrix_tflops_fp16, system.vector_tflops_fp16,
                                   system.hbm_bandwidth_gb_per_s, presentation=pres)
    why = notes.not_validated(scn, strategy=selected[0]["strategy"])
    return (figures.mark_not_validated(figures.ops_breakdown_figure(ops, presentation=pres),
                                       why, pres),
            figures.mark_not_validated(roof, why, pres), ops.to_dict("records"))




def checked_rows(selected: Any) -> list[dict[str, Any]]:
    """The table's selection as the callback may use it: [] or [one configuration row] with
    positive integer dimensions (400 for anything else)."""
    if selected is None or selected == []:
        return []
    row = selected[0] if isinstance(selected, list) else None
    if not isinstance(row, dict) or row.get("strategy") not in STRATEGIES:
        raise bad_request("design: the selected row is not a configuration")
    clean: dict[str, Any] = {"strategy": row["strategy"]}
    for key in ("gpus", *CONFIG_KEYS):
        value = row.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**7:
            raise bad_request(f"design: the selected row's {key} is not a positive integer")
        clean[key] = value
    return [clean]


@callback(
    Output({"type": "graph", "name": "design-ops"}, "figure"),
    Output({"type": "graph", "name": "design-roofline"}, "figure"),
    Output("design-ops-table", "rowData"), Output("design-ops-message", "children"),
    Output({"type": "export-context", "name": "design-ops"}, "data"),
    Output({"type": "export-context", "name": "design-roofline"}, "data"),
    Input("design-top", "selectedRows"), State("scenario", "data"),
)
@page_callback(1, lambda message: (no_update, no_update, no_update, message, None, None))
def update_ops(selected: list[dict[str, Any]] | None, scn: dict[str, Any]) -> tuple:
    rows = checked_rows(selected)
    return (*build_ops(scn, rows), "", rows, rows)


def _ops_figures(scn: dict[str, Any], context: Any) -> dict[str, Any]:
    rows = checked_rows(context)
    if not rows:
        raise ModelError("select a configuration in the table first")
    ops_fig, roof, _ = build_ops(scn, rows)
    return {"design-ops": ops_fig, "design-roofline": roof}


@callback(
    *[Output({"type": "graph", "name": g}, "figure") for g in selected.GRAPHS],
    Output("design-timeline-summary", "children"),
    *[Output({"type": "export-context", "name": g}, "data") for g in selected.GRAPHS],
    Input("design-top", "selectedRows"), State("scenario", "data"),
)
@page_callback(1, lambda message: (no_update, no_update, message, None, None))
def update_selected_views(selected_rows: list[dict[str, Any]] | None,
                          scn: dict[str, Any]) -> tuple:
    """The selected configuration's iteration timeline and memory breakdown."""
    rows = checked_rows(selected_rows)
    return (*selected.build(scn, rows), rows, rows)


register_exports(selected.GRAPHS,
                 lambda scn, context: selected.exported(scn, context, checked_rows))
register_exports(["design-heatmap"],
                 lambda scn, _context: {"design-heatmap": space_outputs(scn)[0]})
register_exports(["design-ops", "design-roofline"], _ops_figures)


def selected_text(scn: dict[str, Any], selected: list[dict[str, Any]] | None) -> str:
    """The selected configuration in one line: its time and rate with their cross-validated
    range (none in the paper mode or without a software stack)."""
    if not selected:
        return ""
    row = selected[0]
    keys = ["dp", "tp1", "tp2", "pp", "microbatch"]
    keys += [k for k in ("ep", "etp") if int(row.get(k, 1) or 1) > 1]  # experts spread (MoE)
    config = " · ".join(f"{dimension_label(k, str(row['strategy']))} {int(row[k])}"
                        for k in keys)
    bar = notes.error_bar_of(scn, str(row["strategy"]))  # the row's strategy's own
    return (f"Selected: {strategy_name(row['strategy'])} on {int(row['gpus'])} GPUs ({config}) — "
            f"{notes.days_text(scn, float(row['train_days']), bar=bar)}, "
            f"{notes.rate_text(scn, float(row['samples_per_s']), bar=bar)}, "
            f"MFU {100 * row['mfu']:.0f}%.")


RESULT_KEYS = ("train_days", "samples_per_s", "mfu")


def checked_results(selected: Any) -> list[dict[str, Any]]:
    """:func:`checked_rows` with the row's results (finite non-negative numbers; 400 else)."""
    rows = checked_rows(selected)
    for row in rows:
        for key in RESULT_KEYS:
            value = selected[0].get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value >= 0):
                raise bad_request(f"design: the selected row's {key} is not a number")
            row[key] = float(value)
    return rows


@callback(Output("design-selected", "children"), Input("design-top", "selectedRows"),
          State("scenario", "data"))
@page_callback(1, lambda message: "")
def update_selected(selected: list[dict[str, Any]] | None, scn: dict[str, Any]) -> str:
    return selected_text(scn, checked_results(selected))
