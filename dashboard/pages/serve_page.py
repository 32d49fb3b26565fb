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
from dashboard.form_link import exports_from, link_form
from dashboard.jobs import compute
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import page_callback
from dashboard.views.serve_view import (
    CARDS,
    DEFAULT_FORM,
    build,
    engines,
    form_from_query,
    form_query,
)
from model.specs.serving import KV_PRECISIONS, MTP_DEPTH, WEIGHT_PRECISIONS
from model.specs.transformer import list_models

dash.register_page(__name__, path="/serving", name="Serving", order=6,
                   title="Serving — transformer inference what-if")

FORM_KEYS = tuple(DEFAULT_FORM)
# the page's own default scenario: Llama 3 70B on 8 H100 (with the form's FP8 and 64 users)
SERVING_DEFAULT = "#model=llama3-70b&system=h100"
_AUTO = [{"label": "search", "value": "auto"}]


def _number(key: str, label: str, step: str = "any") -> html.Label:
    return html.Label([label, dcc.Input(id=f"serve-{key}", type="number", step=step,
                                        value=DEFAULT_FORM[key], debounce=True)])


def _choice(key: str, label: str, options: list) -> html.Label:
    return html.Label([label, dcc.Dropdown(id=f"serve-{key}", options=options,
                                           value=DEFAULT_FORM[key], clearable=False)])


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
        _number("gpus", "GPUs", "1"), _number("input_tokens", "Input tokens", "1"),
        _number("output_tokens", "Output tokens", "1"),
        _choice("mode", "Mode", [{"label": "offline (max throughput)", "value": "offline"},
                                 {"label": "concurrent users", "value": "concurrency"},
                                 {"label": "request rate (Poisson)",
                                  "value": "request-rate"}]),
        _number("load", "Users or requests/s"),
        _choice("precision", "Weights", [{"label": p, "value": p} for p in WEIGHT_PRECISIONS]),
        _choice("kv_precision", "KV cache", [{"label": "auto", "value": "auto"}]
                + [{"label": p, "value": p} for p in KV_PRECISIONS]),
        _number("ttft_max_s", "TTFT limit (s)"), _number("tpot_max_s", "TPOT limit (s)"),
        _choice("tp", "TP", _AUTO + [{"label": str(2**i), "value": 2**i} for i in range(8)]),
        _choice("pp", "PP", _AUTO + [{"label": str(2**i), "value": 2**i} for i in range(6)]),
        _choice("ep", "EP", _AUTO + [{"label": str(2**i), "value": 2**i} for i in range(8)]),
        _number("replicas", "Replicas (empty: searched)", "1"),
        _number("prefill_instances", "Prefill instances (xPyD)", "1"),
        _number("decode_instances", "Decode instances (xPyD)", "1"),
        _number("max_batch", "Largest batch per instance", "1"),
        _choice("mtp", "MTP depth", [{"label": str(k), "value": k}
                                     for k in range(int(MTP_DEPTH.lo), int(MTP_DEPTH.hi) + 1)]),
        _number("mtp_acceptance", "MTP acceptance per draft"),
        _choice("draft_model", "Draft model", [{"label": "none (MTP head)", "value": "none"}]
                + [{"label": m, "value": m} for m in list_models()]),
        _choice("engine", "Engine", [{"label": e, "value": e} for e in engines()]),
        _choice("attention_dp", "Attention DP", [{"label": "search", "value": "auto"},
                                                 {"label": "on", "value": "on"},
                                                 {"label": "off", "value": "off"}]),
        _number("prefix_hit", "Prefix-cache hit share"),
        _number("kv_offload_gb", "Host KV pool per GPU (GB)"),
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
