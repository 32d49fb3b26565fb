"""System comparison: the scenario's model on the systems picked here — presets and the system as
edited in the control panel — at their own NVLink domains or any others, best strategy per
point (the paper's 9-system figure, for any systems)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html

from model import list_systems

from .. import compute, figures
from ..export import graph_card

dash.register_page(__name__, path="/systems", name="Compare systems", order=2,
                   title="Compare systems — transformer training what-if")

DOMAINS = (4, 8, 16, 32, 64, 72)
MAX_CURVES = 24  # systems × domains: each is a sweep of every strategy and GPU count
OWN = 0  # the system's own NVLink domain


def _options() -> list[dict[str, str]]:
    presets = [{"label": name.upper(), "value": name} for name in list_systems()]
    return [{"label": "edited system (the control panel's)", "value": compute.EDITED}, *presets]


layout = html.Div(className="page-body", children=[
    html.Div(id="systems-compare-busy", className="busy"),
    html.P(className="summary", children=(
        "The model and run settings on the left, on the systems picked here: presets, and the "
        "system as edited in the control panel, each at its own NVLink domain or at the domain "
        "sizes ticked. Each point is the fastest strategy and configuration that fits.")),
    html.Div(className="card compare-form", children=[
        html.Label(className="compare-systems", htmlFor="systems-pick", children=[
            "Systems",
            dcc.Dropdown(id="systems-pick", multi=True, options=_options(),
                         value=[*compute.COMPARE_SYSTEMS, compute.EDITED], clearable=False)]),
        html.Div(className="compare-domains", children=[
            html.Span("NVLink domains (GPUs)"),
            dcc.Checklist(id="systems-domains", inline=True, value=[OWN], options=[
                {"label": " each system's own", "value": OWN},
                *[{"label": f" {n}", "value": n} for n in DOMAINS]])]),
        html.Div(id="systems-error", className="ctl-error", role="alert"),
    ]),
    html.Div(className="grid", children=[
        graph_card("systems-compare", "Training time on the systems compared", height=560),
    ]),
    html.Div(id="systems-skipped", className="alert", role="status"),
])


def choice_error(names: list[str] | None, domains: list[int] | None) -> str:
    """Why the picked systems and domains cannot be compared ('' when they can)."""
    if not names:
        return "pick at least one system"
    if not domains:
        return "tick at least one NVLink domain size"
    curves = len(names) * len(domains)
    if curves > MAX_CURVES:
        return (f"{len(names)} systems × {len(domains)} domain sizes = {curves} curves; at most "
                f"{MAX_CURVES} (each is a sweep of every strategy and GPU count)")
    return ""


def build(scn: dict[str, Any], names: list[str] | None = None,
          domains: list[int] | None = None) -> tuple:
    """(figure, error, skipped systems) for the picked systems and domains."""
    names = list(compute.COMPARE_SYSTEMS) if names is None else list(names)
    domains = list(compute.COMPARE_NVS) if domains is None else list(domains)
    pres = bool(scn.get("presentation"))
    error = choice_error(names, domains)
    if error:
        return dash.no_update, error, dash.no_update
    valid = set(list_systems()) | {compute.EDITED}
    names = [n for n in names if n in valid]  # the options are the only values a user sends
    domains = sorted({int(n) for n in domains if n == OWN or n in DOMAINS})
    frame = compute.systems(scn, tuple(names), tuple(domains))
    skipped = ""
    if "skipped" in frame.columns:
        rows = frame[frame["skipped"].notna()]
        skipped = "Not compared: " + "; ".join(
            f"{r['system']} — {r['skipped']}" for r in rows.to_dict("records")) if len(rows) else ""
    if frame.empty or frame.get("train_days") is None:
        return (figures.empty_figure("No system fits this model in the GPU range.", pres), "",
                skipped)
    return figures.systems_figure(frame, presentation=pres), "", skipped


@callback(Output({"type": "graph", "name": "systems-compare"}, "figure"),
          Output("systems-error", "children"), Output("systems-skipped", "children"),
          Input("scenario", "data"), Input("systems-pick", "value"),
          Input("systems-domains", "value"), background=True,
          running=[(Output("systems-compare-busy", "children"), "Computing the systems…", "")])
def update(scn: dict[str, Any], names: list[str] | None, domains: list[int] | None):
    return build(scn, names, domains)
