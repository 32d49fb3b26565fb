"""HBM sweep: training days over a grid of HBM capacity × bandwidth at the scenario's design GPU
count (the paper's sweep), as a background job with progress and cancel."""

from __future__ import annotations

import math
from typing import Any

import dash
import numpy as np
from dash import Input, Output, State, callback, dcc, html

from dashboard import figures
from dashboard.controls.control_table import BY_KEY
from dashboard.controls.inputs import check_value
from dashboard.jobs import budget, studies
from dashboard.jobs.background import job_callback
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import page_callback
from model import ModelError

dash.register_page(__name__, path="/hbm", name="HBM sweep", order=3,
                   title="HBM sweep — transformer training what-if")

MAX_POINTS = 400  # a sweep is one search per point and strategy: keep it bounded
# the grid's axes are the control panel's HBM records: their ranges, units and tooltips
CAPACITY, BANDWIDTH = BY_KEY["hbm_gb"], BY_KEY["hbm_tb_per_s"]

layout = html.Div(className="page-body", children=[
    html.P(className="summary", children=(
        "Training days of the best configuration at the design-space GPU count (left panel) "
        "for every HBM capacity × bandwidth on the grid; the rest of the system is fixed.")),
    html.Div(className="card sweep-form", children=[
        # no min/max/step on the boxes: the browser would send a value outside them as empty,
        # and grid() must say what is wrong with it
        *[html.Label([label, dcc.Input(id=f"hbm-{key}", type="number", value=value, step="any")],
                     title=tip)
          for key, label, value, tip in (
              ("cap-min", f"Capacity from ({CAPACITY.unit})", 40, CAPACITY.tip),
              ("cap-max", f"to ({CAPACITY.unit})", 400, CAPACITY.tip),
              ("bw-min", f"Bandwidth from ({BANDWIDTH.unit})", 1, BANDWIDTH.tip),
              ("bw-max", f"to ({BANDWIDTH.unit})", 16, BANDWIDTH.tip),
              ("steps", "Points per axis", 8, "Grid points on each axis (2 to 20)."))],
        html.Button("Run sweep", id="hbm-run", className="btn-primary"),
        html.Button("Cancel", id="hbm-cancel", disabled=True),
        html.Progress(id="hbm-progress", value="0", max="100"),
        html.Span(id="hbm-progress-text", className="progress-text"),
        html.Div(id="hbm-error", className="ctl-error", role="alert"),
    ]),
    html.Div(className="grid", children=[
        graph_card("hbm-contour", "Training days over HBM capacity × bandwidth", height=560,
                   placeholder="Set the grid above and press Run sweep: the map of training "
                               "days appears here."),
    ]),
])


def grid(cap_min, cap_max, bw_min, bw_max, steps) -> tuple[list[float], list[float]]:
    """The sweep grid, or ValueError with a message for the page."""
    values = (cap_min, cap_max, bw_min, bw_max, steps)
    if any(v is None for v in values):
        raise ValueError("fill in every field of the sweep")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
           for v in values):
        raise ValueError("every field of the sweep is a number")
    if not (0 < cap_min < cap_max) or not (0 < bw_min < bw_max):
        raise ValueError("each range needs 0 < from < to")
    for control, value in ((CAPACITY, cap_min), (CAPACITY, cap_max), (BANDWIDTH, bw_min),
                           (BANDWIDTH, bw_max)):
        _, message = check_value(control, value)  # the panel's range, in its words
        if message:
            raise ValueError(message)
    if steps != int(steps) or not 2 <= steps <= 20 or steps * steps > MAX_POINTS:
        raise ValueError("points per axis must be a whole number between 2 and 20")
    steps = int(steps)
    return (list(np.linspace(cap_min, cap_max, steps)),
            list(np.round(np.linspace(bw_min, bw_max, steps), 3)))


def sweep_failed(exc: Exception) -> tuple:
    """The sweep raised, or its worker died (``dashboard.jobs.background``): say why in the page and
    keep the figure shown."""
    reason = str(exc).removeprefix("An error occurred inside a background callback: ").strip()
    first = reason.splitlines()[0] if reason else repr(exc)
    return dash.no_update, f"The sweep failed: {first}", dash.no_update


def failed(message: str) -> tuple:
    return dash.no_update, message, dash.no_update


@callback(
    Output({"type": "graph", "name": "hbm-contour"}, "figure"), Output("hbm-error", "children"),
    Output({"type": "export-context", "name": "hbm-contour"}, "data"),
    Input("hbm-run", "n_clicks"),
    State("hbm-cap-min", "value"), State("hbm-cap-max", "value"), State("hbm-bw-min", "value"),
    State("hbm-bw-max", "value"), State("hbm-steps", "value"), State("scenario", "data"),
    **job_callback("hbm", sweep_failed),
)
@page_callback(7, failed)
def run_sweep(set_progress, _n: int, cap_min, cap_max, bw_min, bw_max, steps,
              scn: dict[str, Any]) -> tuple:
    values = [cap_min, cap_max, bw_min, bw_max, steps]
    try:
        caps, bws = grid(*values)
    except ValueError as exc:
        return failed(str(exc))

    def progress(done: int, total: int) -> None:
        set_progress((str(done), str(total), f"{done} / {total} systems"))

    frame = studies.hbm_sweep(scn, caps, bws, progress)  # ModelError: shown by page_callback
    return figures.hbm_contour_figure(frame, presentation=bool(scn.get("presentation"))), "", \
        values


def _contour(scn: dict[str, Any], context: Any) -> dict[str, Any]:
    """The sweep's figure again (from the results cache; recomputed within the request's time
    budget if it was evicted), for the grid the page last ran."""
    if not isinstance(context, list) or len(context) != 5:
        raise ModelError("run the sweep first")
    try:
        caps, bws = grid(*context)
    except ValueError as exc:
        raise ModelError(str(exc)) from None
    frame = studies.hbm_sweep(scn, caps, bws, time_budget_s=budget.TIME_BUDGET_S)
    return {"hbm-contour": figures.hbm_contour_figure(
        frame, presentation=bool(scn.get("presentation")))}


register_exports(["hbm-contour"], _contour)
