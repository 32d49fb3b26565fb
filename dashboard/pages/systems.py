"""System comparison: the scenario's model on A100 / H200 / B200 × NVLink domains 4 / 8 / 64
(the paper's 9-system figure), best strategy per point."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, html

from .. import compute, figures
from ..export import graph_card

dash.register_page(__name__, path="/systems", name="Compare systems", order=2,
                   title="Compare systems — transformer training what-if")

layout = html.Div(className="page-body", children=[
    html.Div(id="systems-compare-busy", className="busy"),
    html.P(className="summary", children=(
        "The model and run settings on the left, on three GPU generations (their presets) and "
        "three NVLink domain sizes. Each point is the fastest strategy and configuration that "
        "fits.")),
    html.Div(className="grid", children=[
        graph_card("systems-compare", "Training time on 9 systems", height=560),
    ]),
])


def build(scn: dict[str, Any]):
    frame = compute.systems(scn)
    pres = bool(scn.get("presentation"))
    if frame.empty:
        return figures.empty_figure("No system fits this model in the GPU range.", pres)
    return figures.systems_figure(frame, presentation=pres)


@callback(Output({"type": "graph", "name": "systems-compare"}, "figure"),
          Input("scenario", "data"), background=True,
          running=[(Output("systems-compare-busy", "children"), "Computing 9 systems…", "")])
def update(scn: dict[str, Any]):
    return build(scn)

