"""The app shell: header with navigation and presentation toggle, the control panel, the page,
and the stores every page reads (the validated scenario)."""

from __future__ import annotations

import dash
from dash import dcc, html

from dashboard.controls.banner import banner
from dashboard.controls.panel import HEADER, panel, widget
from dashboard.controls.presets import PRESET_OF
from dashboard.controls.scenario import default_scenario


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
        dcc.Store(id="fitted-stack"),  # the fit applied to this session (controls/fitted.py)
        dcc.Store(id="applied-presets", data={p.key: scn[p.key] for p in PRESET_OF.values()}),
        html.Header(className="header", children=[
            html.H1("Transformer training what-if"),
            html.Nav(nav, className="nav"),
            *[widget(c, scn[c.key]) for c in HEADER],
        ]),
        html.Div(className="body", children=[
            panel(scn),
            html.Main([banner(), dash.page_container], className="page"),
        ]),
    ])
