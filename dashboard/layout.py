"""The app shell: header with navigation and presentation toggle, the control panel, the page,
and the stores every page reads (the validated scenario)."""

from __future__ import annotations

import dash
from dash import dcc, html

from .controls import panel
from .scenario import default_scenario


def shell() -> html.Div:
    """Layout of every page (Dash Pages fills ``page_container``)."""
    scn = default_scenario()
    nav = [dcc.Link(page["name"], href=page["relative_path"], className="nav-link",
                    id=f"nav-{page['module'].split('.')[-1]}")
           for page in dash.page_registry.values()]
    return html.Div(id="root", className="root", children=[
        dcc.Location(id="url", refresh=False),
        dcc.Store(id="scenario", data=scn),
        dcc.Store(id="hydrated", data=False),
        dcc.Store(id="applied-presets", data={"model": scn["model"], "system": scn["system"]}),
        html.Header(className="header", children=[
            html.H1("Transformer training what-if"),
            html.Nav(nav, className="nav"),
            dcc.Checklist(id="ctl-presentation", className="presentation-toggle",
                          options=[{"label": " presentation mode", "value": "on"}], value=[]),
        ]),
        html.Div(className="body", children=[
            panel(scn),
            html.Main(dash.page_container, className="page"),
        ]),
    ])
