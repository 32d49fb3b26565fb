"""A page's own form (Serving, Post-training): its widgets made from its input records
(:class:`dashboard.views.page_form.FormInput`), kept in step with the URL's query, and its
exports drawn again from the form each card was drawn with: the callbacks every such page
registers, written once. A page calls :func:`form_widgets`, :func:`link_form` and
:func:`exports_from` at import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dash import Input, Output, State, callback, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.views.page_form import FormInput, tip
from model import ModelError
from model.specs.schema import Field


def form_widgets(prefix: str, inputs: tuple[FormInput, ...], fields: dict[str, Field],
                 page_range: Callable[[str], tuple[float, float]],
                 debounce: bool = False) -> list[html.Label]:
    """A labelled widget per input, ``{prefix}-{key}``: a number box or a dropdown, its tooltip
    its field's help and the range the page allows (``page_range(field name)``)."""
    out = []
    for i in inputs:
        field = fields.get(i.field) if i.field else None
        lo, hi = page_range(i.field) if field is not None and i.widget == "number" else (
            None, None)
        if i.widget == "choice":
            box = dcc.Dropdown(id=f"{prefix}-{i.key}", value=i.default, clearable=False,
                               options=[{"label": label, "value": v} for label, v in i.options])
        else:
            box = dcc.Input(id=f"{prefix}-{i.key}", type="number", step=i.step,
                            value=i.default, debounce=debounce)
        out.append(html.Label([i.label, box], title=tip(field, lo, hi)))
    return out


def link_form(prefix: str, keys: tuple[str, ...],
              from_query: Callable[[Any], dict[str, Any]],
              to_query: Callable[[dict[str, Any]], str], run: str | None = None) -> None:
    """Callbacks of the form whose controls are ``{prefix}-{key}``: a link's query fills the
    form (at load, or when the query changes; the rest stays), and the form goes into the
    query — at every change, or only when the button ``run`` is pressed (a form read on Run)."""
    ids = [f"{prefix}-{k}" for k in keys]

    @callback(*(Output(i, "value") for i in ids), Input("url", "search"),
              *(State(i, "value") for i in ids))
    def form_from_url(search: Any, *current: Any) -> tuple:
        given = from_query(search)
        form = dict(zip(keys, current))
        if not given or all(form.get(k) == v for k, v in given.items()):
            raise PreventUpdate
        return tuple(given[k] if k in given else no_update for k in keys)

    trigger = [Input(run, "n_clicks")] if run else [Input(i, "value") for i in ids]
    values = [State(i, "value") for i in ids] if run else []

    @callback(Output("url", "search", allow_duplicate=True), *trigger, *values,
              State("url", "search"), prevent_initial_call=True)
    def form_to_url(*args: Any) -> str:
        *given, search = args
        query = to_query(dict(zip(keys, given[1:] if run else given)))
        if query == search:
            raise PreventUpdate
        return query


def exports_from(build: Callable[[dict[str, Any], Any], tuple[dict[str, Any], str]]
                 ) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The export function of a page whose cards keep the form they were drawn with as their
    context: the figures of ``build`` for that form (checked again)."""
    def exported(scn: dict[str, Any], context: Any) -> dict[str, Any]:
        if not isinstance(context, dict):
            raise ModelError("draw the figure first")
        return build(scn, context)[0]
    return exported
