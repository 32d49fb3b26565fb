"""Design-space page: a heatmap of the best time over two chosen parallel dimensions at one GPU
count (infeasible cells and the optimum marked), the sortable table of the top configurations,
and for a selected row its per-op breakdown and roofline."""

from __future__ import annotations

from typing import Any

import dash
import dash_ag_grid as dag
from dash import Input, Output, State, callback, html, no_update

from model import ModelError

from .. import compute, figures
from ..export import graph_card, register_exports
from ..guard import bad_request, page_callback
from ..scenario import build_inputs

dash.register_page(__name__, path="/design", name="Design space", order=1,
                   title="Design space — transformer training what-if")


def _col(field: str, header: str, fmt: str | None = None, width: int = 90) -> dict[str, Any]:
    col: dict[str, Any] = {"field": field, "headerName": header, "width": width + 25,
                           "sortable": True, "filter": "agNumberColumnFilter",
                           "headerTooltip": header}
    if fmt:
        col["valueFormatter"] = {"function": f"d3.format('{fmt}')(params.value)"}
    return col


TOP_COLUMNS = [
    _col("samples_per_s", "samples/s", ".2f", 105), _col("train_days", "days", ".1f", 80),
    _col("mfu", "MFU", ".0%", 75), _col("dp", "dp", None, 65), _col("tp1", "tp1", None, 65),
    _col("tp2", "tp2", None, 65), _col("pp", "pp", None, 65),
    _col("microbatch", "mb", None, 60), _col("nb", "nb", None, 60),
    {"field": "placement", "headerName": "NVLink tp1×tp2×dp×pp", "width": 150},
    _col("memory_gb", "memory GB", ".1f", 105), _col("iteration_time_s", "iter s", ".2f", 90),
    _col("t_compute_s", "compute s", ".2f", 100), _col("t_tp_comm_s", "TP comm s", ".2f", 100),
    _col("t_pp_comm_s", "PP comm s", ".2f", 100), _col("t_dp_comm_s", "DP comm s", ".2f", 100),
    _col("t_bubble_s", "bubble s", ".2f", 90), _col("t_memory_s", "memory s", ".2f", 95),
    _col("t_optimizer_s", "optimizer s", ".3f", 100),
]
OPS_COLUMNS = [
    {"field": "op", "headerName": "op", "width": 140, "sortable": True},
    {"field": "where", "headerName": "where", "width": 75},
    _col("t_iteration_s", "s / iteration", ".3f", 115), _col("flop_fwd", "FLOP fwd", ".3s", 95),
    _col("flop_bwd", "FLOP bwd", ".3s", 95), _col("hbm_bytes_fwd", "HBM B fwd", ".3s", 100),
    _col("hbm_bytes_bwd", "HBM B bwd", ".3s", 100),
    _col("intensity_flop_per_byte", "FLOP/B", ".1f", 80),
    {"field": "bound", "headerName": "bound", "width": 115},
    {"field": "collectives", "headerName": "collectives", "width": 420},
]

layout = html.Div(className="page-body", children=[
    html.Div(id="design-message", className="alert", role="status"),
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
                                        "animateRows": False},
                       defaultColDef={"resizable": True}, style={"height": "470px"},
                       className="ag-theme-alpine"),
        ]),
        html.Div(id="design-ops-message", className="alert wide", role="status"),
        graph_card("design-ops", "Where the time goes, per op (selected configuration)",
                   grow=True),
        graph_card("design-roofline", "Roofline of the selected configuration's ops",
                   note="Marker area ∝ the op's time per iteration; colour: what bounds it."),
        html.Div(className="card wide", children=[
            html.H3("Per-op breakdown (selected configuration)"),
            dag.AgGrid(id="design-ops-table", columnDefs=OPS_COLUMNS, rowData=[],
                       defaultColDef={"resizable": True}, style={"height": "420px"},
                       className="ag-theme-alpine"),
        ]),
    ]),
])


def _rows(frame) -> list[dict[str, Any]]:
    out = frame.copy()
    out["placement"] = (out["nv_tp1"].astype(str) + "×" + out["nv_tp2"].astype(str) + "×"
                        + out["nv_dp"].astype(str) + "×" + out["nv_pp"].astype(str))
    return out.to_dict("records")


def build_space(scn: dict[str, Any]) -> tuple:
    """Heatmap figure and top-configuration rows for a scenario."""
    pres = bool(scn.get("presentation"))
    cells = compute.design(scn)
    heat = figures.heatmap_figure(cells, scn["x_axis"], scn["y_axis"], presentation=pres)
    top = compute.top(scn)
    return heat, _rows(top), ([_rows(top)[0]] if len(top) else [])


@callback(
    Output({"type": "graph", "name": "design-heatmap"}, "figure"),
    Output("design-top", "rowData"), Output("design-top", "selectedRows"),
    Output("design-message", "children"),
    Input("scenario", "data"),
)
@page_callback(0, lambda message: (no_update, no_update, no_update, message))
def update_space(scn: dict[str, Any]) -> list:
    return [*space_outputs(scn), ""]


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
    return figures.ops_breakdown_figure(ops, presentation=pres), roof, ops.to_dict("records")


STRATEGIES = ("1d", "summa", "context")


def checked_rows(selected: Any) -> list[dict[str, Any]]:
    """The table's selection as the callback may use it: [] or [one configuration row] with
    positive integer dimensions (400 for anything else)."""
    if selected is None or selected == []:
        return []
    row = selected[0] if isinstance(selected, list) else None
    if not isinstance(row, dict) or row.get("strategy") not in STRATEGIES:
        raise bad_request("design: the selected row is not a configuration")
    clean: dict[str, Any] = {"strategy": row["strategy"]}
    for key in ("gpus", *compute.CONFIG_KEYS):
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


register_exports(["design-heatmap"],
                 lambda scn, _context: {"design-heatmap": space_outputs(scn)[0]})
register_exports(["design-ops", "design-roofline"], _ops_figures)
