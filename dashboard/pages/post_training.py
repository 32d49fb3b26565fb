"""Post-training: the scenario's model on its system (the control panel's hardware what-ifs
included) fine-tuned by full SFT, LoRA and QLoRA side by side, or trained by RL (GRPO/PPO) with
colocated or split GPUs — memory per GPU and days/cost by method, one RL step's timeline per
GPU pool and the step against the split (docs/post_training.md). The work is in
:mod:`dashboard.views.post_training_view`; this module only wires it."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, callback, html, no_update

from dashboard.form_link import exports_from, form_widgets, link_form
from dashboard.jobs import compute
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import page_callback
from dashboard.views.post_training_view import (
    CARDS,
    COMMON_INPUTS,
    DEFAULT_FORM,
    FIELDS,
    FINETUNE_INPUTS,
    RL_INPUTS,
    build,
    form_from_query,
    form_query,
    page_range,
)

dash.register_page(__name__, path="/post-training", name="Post-training", order=7,
                   title="Post-training — fine-tuning and RL what-if")

FORM_KEYS = tuple(DEFAULT_FORM)
FINETUNE_CARDS, RL_CARDS = CARDS[:2], CARDS[2:]
# the default question's parts shown at first; a change of question (typed, or from a link)
# shows the other's (:func:`question_parts`: no initial call — the link's callback before it
# may prevent its update, which Dash then does not pass on)
HIDDEN, SHOWN = {"display": "none"}, {}


def _hidden(card: html.Div) -> html.Div:
    card.style = HIDDEN
    return card


layout = html.Div(className="page-body", children=[
    html.P(className="summary", children=(
        "The model and system of the control panel after pre-training: fine-tuned by full "
        "SFT, LoRA and QLoRA (each method's fastest layout that fits on the GPUs below; "
        "tokens/s counts training tokens), or one RL step (rollouts by the serving model, "
        "forward passes, the update, the weight sync) on shared or split GPUs.")),
    html.Div(className="card sweep-form", children=[
        *form_widgets("post", COMMON_INPUTS, FIELDS, page_range),
        html.Div(id="post-finetune-form", className="form-part",
                 children=form_widgets("post", FINETUNE_INPUTS, FIELDS, page_range)),
        html.Div(id="post-rl-form", className="form-part", style=HIDDEN,
                 children=form_widgets("post", RL_INPUTS, FIELDS, page_range)),
        html.Button("Run", id="post-run", className="btn"),
        html.Div(id="post-error", className="ctl-error", role="alert"),
    ]),
    html.P(id="post-headline", className="headline", role="status"),
    html.Div(className="grid", children=[
        graph_card("post-memory", "Memory per GPU by method (its fastest layout)"),
        graph_card("post-days", "Days and cost by method"),
        _hidden(graph_card("post-timeline", "One RL step per GPU pool")),
        _hidden(graph_card("post-split", "RL step against the generation pool's size")),
    ]),
])


def form_of(values: tuple) -> dict[str, Any]:
    """The form as a dict of its controls' values (checked by the view)."""
    return dict(zip(FORM_KEYS, values))


def _failed(message: str) -> tuple:
    return (*(no_update for _ in CARDS), no_update, message, *(no_update for _ in CARDS))


@callback(*(Output({"type": "graph", "name": n}, "figure") for n in CARDS),
          Output("post-headline", "children"), Output("post-error", "children"),
          *(Output({"type": "export-context", "name": n}, "data") for n in CARDS),
          Input("scenario", "data"), Input("post-run", "n_clicks"),
          *(State(f"post-{k}", "value") for k in FORM_KEYS))
@page_callback(0, _failed)
def update(scn: dict[str, Any], _clicks: Any, *values: Any) -> tuple:
    """The answer, on the scenario's change or Run (the form is read when Run is pressed),
    cached as JSON under the scenario's estimator inputs and the form, as the Serving page's (a
    repeat cost as much as a new question); a form the checks refuse raises, uncached."""
    form = form_of(values)

    def built() -> tuple:
        figs, text = build(scn, form)
        return (*(figs[n] for n in CARDS), text, "", *(form for _ in CARDS))
    payload = {**compute.page_payload(scn, "model", "system"), "form": form}
    return tuple(compute.cached_outputs("page-post-training", payload, built))


@callback(Output("post-finetune-form", "style"), Output("post-rl-form", "style"),
          *(Output(f"card-{n}", "style") for n in CARDS), Input("post-question", "value"),
          prevent_initial_call=True)
def question_parts(question: Any) -> tuple:
    """Only the form fields and the cards of the chosen question are shown."""
    rl = question == "rl"
    def show(on: bool) -> dict:
        return SHOWN if on else HIDDEN
    return (show(not rl), show(rl), *(show(not rl) for _ in FINETUNE_CARDS),
            *(show(rl) for _ in RL_CARDS))


link_form("post", FORM_KEYS, form_from_query, form_query, run="post-run")
register_exports(CARDS, exports_from(build))
