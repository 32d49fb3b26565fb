"""A graph card: a figure with export buttons (high-resolution PNG via kaleido, standalone
offline HTML with plotly.js inline, CSV of the data behind it), and the one callback that serves
them for every card. File names are fixed by the card, never taken from user input."""

from __future__ import annotations

import logging
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from dash import ALL, MATCH, Input, Output, State, callback, ctx, dcc, html, no_update

from .figures import figure_table
from .theme import CONFIG

log = logging.getLogger(__name__)
FORMATS = (("png", "PNG"), ("html", "HTML"), ("csv", "CSV"))


def graph_card(name: str, title: str, height: int = 430, note: str = "",
               grow: bool = False) -> html.Div:
    """A titled figure with export buttons; the graph's id is {"type": "graph", "name": name}.

    ``grow``: the figure sets its own height (at least ``height`` px), e.g. one bar per op.
    """
    style = {"minHeight": f"{height}px"} if grow else {"height": f"{height}px"}
    return html.Div(className="card", id=f"card-{name}", children=[
        html.Div(className="card-head", children=[
            html.H3(title),
            html.Div(className="export", children=[
                html.Button(label, id={"type": "export", "name": name, "fmt": fmt},
                            title=f"Download this figure as {label}", className="btn-small")
                for fmt, label in FORMATS]),
        ]),
        dcc.Loading(dcc.Graph(id={"type": "graph", "name": name}, config=CONFIG,
                              style=style), type="dot"),
        html.Div(note, className="card-note") if note else None,
        html.Div(id={"type": "export-msg", "name": name}, className="ctl-error"),
        dcc.Download(id={"type": "download", "name": name}),
    ])


def render(figure: dict[str, Any], fmt: str) -> tuple[bytes | str, str]:
    """The figure as PNG bytes (3× scale), standalone HTML text, or CSV text of its data."""
    fig = go.Figure(figure)
    if fmt == "png":
        return pio.to_image(fig, format="png", scale=3, width=1200, height=700), "png"
    if fmt == "html":
        return fig.to_html(include_plotlyjs=True, full_html=True), "html"
    return figure_table(fig).to_csv(index=False), "csv"


@callback(
    Output({"type": "download", "name": MATCH}, "data"),
    Output({"type": "export-msg", "name": MATCH}, "children"),
    Input({"type": "export", "name": MATCH, "fmt": ALL}, "n_clicks"),
    State({"type": "graph", "name": MATCH}, "figure"),
    prevent_initial_call=True,
)
def export(_clicks: list, figure: dict | None) -> tuple:
    trigger = ctx.triggered_id
    if not figure or not trigger or not any(_clicks):
        return no_update, no_update
    name, fmt = trigger["name"], trigger["fmt"]
    try:
        content, ext = render(figure, fmt)
    except Exception as exc:  # noqa: BLE001 - e.g. no browser for kaleido: say so, keep going
        log.warning("export of %s as %s failed: %s", name, fmt, exc)
        return no_update, f"Export as {fmt.upper()} failed: {exc}"
    filename = f"{name}.{ext}"
    if isinstance(content, bytes):
        return dcc.send_bytes(content, filename), ""
    return dcc.send_string(content, filename), ""
