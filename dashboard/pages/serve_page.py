"""Serving: the scenario's model on its system (the control panel's hardware what-ifs included)
served under the form's workload — the best layout within the SLAs, the Pareto front of tokens/s
per user against tokens/s per GPU, latency against Poisson load with its knee, memory per GPU,
the decode step by op and $ per million tokens against the TPOT limit (docs/serving.md). The
work is in :mod:`dashboard.views.serve_view`; this module only wires it."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, callback, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.controls.scenario import default_scenario
from dashboard.form_link import exports_from, form_widgets, link_form
from dashboard.jobs import compute
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import page_callback
from dashboard.views.serve_view import (
    CARDS,
    DEFAULT_FORM,
    FIELDS,
    INPUTS,
    build,
    form_from_query,
    form_query,
    page_range,
)

dash.register_page(__name__, path="/serving", name="Serving", order=6,
                   title="Serving — transformer inference what-if")

FORM_KEYS = tuple(DEFAULT_FORM)
# the page's own default scenario: Llama 3 70B on 8 H100 (with the form's FP8 and 64 users)
SERVING_DEFAULT = "#model=llama3-70b&system=h100"


layout = html.Div(className="page-body", children=[
    dcc.Store(id="serve-defaulted", storage_type="session"),
    dcc.Interval(id="serve-default-tick", interval=600, max_intervals=4),
    html.P(className="summary", children=(
        "The model and system of the control panel served under the workload below: the "
        "layout with the most output tokens/s per GPU within the SLAs (TTFT: arrival to first "
        "token; TPOT = (end-to-end − TTFT)/(output tokens − 1)), on the engine chosen below: "
        "TensorRT-LLM 1.0 fitted to its published throughput, or vLLM and SGLang from their "
        "defaults (not validated end to end).")),
    html.Div(className="card sweep-form", children=[
        *form_widgets("serve", INPUTS, FIELDS, page_range, debounce=True),
        html.Div(id="serve-error", className="ctl-error", role="alert"),
    ]),
    html.P(id="serve-headline", className="headline", role="status"),
    html.Div(className="grid", children=[
        graph_card("serve-pareto", "Pareto front: tokens/s per user vs per GPU"),
        graph_card("serve-load", "Latency against load (Poisson), with the knee"),
        graph_card("serve-memory", "Memory per GPU", height=260),
        graph_card("serve-step", "One decode step by op", grow=True, height=360),
        graph_card("serve-cost", "$ per million output tokens against the TPOT limit"),
    ]),
])


def form_of(values: tuple) -> dict[str, Any]:
    """The form as a dict of its controls' values (checked by serve_view.checked_form)."""
    return dict(zip(FORM_KEYS, values))


def _failed(message: str) -> tuple:
    return (*(no_update for _ in CARDS), no_update, message, *(no_update for _ in CARDS))


@callback(*(Output({"type": "graph", "name": n}, "figure") for n in CARDS),
          Output("serve-headline", "children"), Output("serve-error", "children"),
          *(Output({"type": "export-context", "name": n}, "data") for n in CARDS),
          Input("scenario", "data"), *(Input(f"serve-{k}", "value") for k in FORM_KEYS))
@page_callback(0, _failed)
def update(scn: dict[str, Any], *values: Any) -> tuple:
    """The page's figures, headline and export contexts, cached as JSON under the scenario's
    estimator inputs and the form (issue 29: the page cached nothing, and a repeat cost as
    much as a new request); a form the checks refuse raises, uncached, its message shown."""
    form = form_of(values)

    def built() -> tuple:
        figs, text = build(scn, form)
        return (*(figs[n] for n in CARDS), text, "", *(form for _ in CARDS))
    payload = {**compute.page_payload(scn, "model", "system"), "form": form}
    return tuple(compute.cached_outputs("page-serving", payload, built))


@callback(Output("url", "hash", allow_duplicate=True), Output("serve-defaulted", "data"),
          Input("serve-default-tick", "n_intervals"), State("hydrated", "data"),
          State("serve-defaulted", "data"), State("scenario", "data"),
          prevent_initial_call=True)
def serving_default(_: Any, hydrated: Any, defaulted: Any, scn: Any) -> tuple[str, bool]:
    """The first time this tab opens the page on the untouched default scenario (a training
    one: GPT-3 1T on H200) it loads a model people serve instead, :data:`SERVING_DEFAULT`
    (its presets fill the control panel, through the link's fragment); a scenario the user
    chose or linked stays, and so does one chosen afterwards.

    Triggered by the page's own timer shortly after it opens: after the link was read and the
    navigation's fragment written (``dashboard/state.py``: ``hydrate``, ``keep_fragment``,
    which would otherwise race it), and from nothing the scenario drives (a trigger
    downstream of the scenario closes a loop, and Dash then never redraws the page)."""
    if hydrated is not True or defaulted is True or scn != default_scenario():
        raise PreventUpdate
    return SERVING_DEFAULT, True


link_form("serve", FORM_KEYS, form_from_query, form_query)
register_exports(CARDS, exports_from(build))
