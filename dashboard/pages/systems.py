"""System comparison: the scenario's model on A100 / H200 / B200 × NVLink domains 4 / 8 / 64
(the paper's 9-system figure), best strategy per point. A background job (a child process or a
Celery worker), sized and time-limited like every study (:mod:`dashboard.studies`)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, html, no_update

from .. import figures, studies
from ..export import graph_card, register_exports
from ..guard import page_callback

dash.register_page(__name__, path="/systems", name="Compare systems", order=2,
                   title="Compare systems — transformer training what-if")

layout = html.Div(className="page-body", children=[
    html.Div(id="systems-compare-busy", className="busy"),
    html.P(className="summary", children=(
        "The model and run settings on the left, on three GPU generations (their presets) and "
        "three NVLink domain sizes. Each point is the fastest strategy and configuration that "
        "fits.")),
    html.Div(id="systems-message", className="alert", role="status"),
    html.Div(className="grid", children=[
        graph_card("systems-compare", "Training time on 9 systems", height=560),
    ]),
])


def build(scn: dict[str, Any], time_budget_s: float | None = None):
    frame = studies.systems(scn, time_budget_s=time_budget_s)
    pres = bool(scn.get("presentation"))
    if frame.empty:
        return figures.empty_figure("No system fits this model in the GPU range.", pres)
    return figures.systems_figure(frame, presentation=pres)


def failed(exc: Exception) -> tuple:
    """The job raised or its process died: say why, keep the figure."""
    reason = str(exc).removeprefix("An error occurred inside a background callback: ").strip()
    return no_update, f"The comparison failed: {reason.splitlines()[0] if reason else exc!r}"


@callback(Output({"type": "graph", "name": "systems-compare"}, "figure"),
          Output("systems-message", "children"),
          Input("scenario", "data"), background=True, on_error=failed,
          running=[(Output("systems-compare-busy", "children"), "Computing 9 systems…", "")])
@page_callback(0, lambda message: (no_update, message))
def update(scn: dict[str, Any]):
    return build(scn, time_budget_s=studies.SWEEP_TIME_BUDGET_S), ""


register_exports(["systems-compare"],
                 lambda scn, _context: {"systems-compare": build(scn)})
