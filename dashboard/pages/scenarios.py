"""Scenarios page: named scenarios kept in this browser and in a file, any two of them (or the
control panel's) compared side by side with their deltas, and which hardware input moves the
current scenario's training time most (a tornado chart of ±x % on each)."""

from __future__ import annotations

import base64
from typing import Any

import dash
import dash_ag_grid as dag
from dash import Input, Output, State, callback, dcc, html, no_update
from dash.exceptions import PreventUpdate

from dashboard.controls import saved
from dashboard.controls.panel import HEADER, PANEL, to_widget
from dashboard.controls.presets import PRESET_OF
from dashboard.controls.uploads import checked_json_name, guarded_upload, size_refusal
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import checked_scenario, page_callback
from dashboard.state import CONTROLS_OUT, HEADER_OUT
from dashboard.views import scenarios_view
from dashboard.views.grid import SIGNIFICANT, number_column, text_column
from model import ModelError
from model.cli.numbers import count
from model.studies.sensitivity import MAX_FRACTION

dash.register_page(__name__, path="/scenarios", name="Scenarios", order=3.8,
                   title="Scenarios — transformer training what-if")

DEFAULT_CHANGE_PCT = 10
KEPT = "Nothing from it was added; the saved scenarios are as before."
COMPARE_COLUMNS = [
    text_column("label", "", 230, filter=False, sortable=False),
    number_column("a", "A", SIGNIFICANT, 140), number_column("b", "B", SIGNIFICANT, 140),
    number_column("delta", "B − A", "+" + SIGNIFICANT, 140),
    number_column("delta_pct", "Δ %", "+.2f", 110),
    text_column("unit", "unit", 200, filter=False, sortable=False),
]


def _button(text: str, ident: str) -> html.Button:
    return html.Button(text, id=ident, className="btn-small")


def _entry_options(entries: list[dict[str, Any]]) -> tuple[list, list]:
    names = saved.names(entries)
    plain = [{"label": n, "value": n} for n in names]
    return plain, [{"label": "current (the control panel)", "value": saved.CURRENT}, *plain]


def _saved_card() -> html.Div:
    return html.Div(className="card wide", children=[
        html.H3("Saved scenarios (kept in this browser)"),
        html.Div(className="compare-form", children=[
            dcc.Input(id="scenarios-name", type="text", placeholder="name of the current "
                      "scenario", maxLength=saved.MAX_NAME, debounce=False),
            _button("Save current", "scenarios-save"),
            dcc.Dropdown(id="scenarios-pick", options=[], placeholder="a saved scenario",
                         style={"minWidth": "260px"}),
            _button("Load into the controls", "scenarios-load"),
            _button("Delete", "scenarios-delete"),
            _button("Download all (JSON)", "scenarios-download-btn"),
            guarded_upload("scenarios-upload",
                           _button("Upload scenarios (JSON)", "scenarios-upload-btn"),
                           saved.MAX_FILE_BYTES, "scenarios-message", "Upload rejected",
                           KEPT),
        ]),
        html.Div(id="scenarios-message", className="ctl-error", role="alert"),
        dcc.Download(id="scenarios-download"),
    ])


def _compare_card() -> html.Div:
    # the current scenario offered from the start: a value missing from the options is cleared
    pick = dict(options=_entry_options([])[1], clearable=False, style={"minWidth": "260px"})
    return html.Div(className="card wide", children=[
        html.H3("Two scenarios side by side"),
        html.P(className="card-note", children=(
            "Each scenario's fastest configuration at its Design GPUs count, of its Run "
            "strategies (the production ones when it has any), costed with its own Plan & "
            "cost inputs.")),
        html.Div(className="compare-form", children=[
            html.Label(["A", dcc.Dropdown(id="scenarios-a", value=saved.CURRENT, **pick)]),
            html.Label(["B", dcc.Dropdown(id="scenarios-b", value=saved.CURRENT, **pick)]),
        ]),
        html.Div(id="scenarios-compare-message", className="alert", role="status"),
        dag.AgGrid(id="scenarios-compare-table", columnDefs=COMPARE_COLUMNS, rowData=[],
                   defaultColDef={"resizable": True}, style={"height": "430px"},
                   className="ag-theme-alpine"),
        html.P(id="scenarios-layouts", className="summary"),
    ])


def _change_box() -> html.Div:
    return html.Div(children=[
        html.Label(className="knee-control", htmlFor="scenarios-change", children=[
            "change of each input (± %)",
            dcc.Input(id="scenarios-change", type="number", value=DEFAULT_CHANGE_PCT, min=0.1,
                      max=100 * MAX_FRACTION, step="any", debounce=True,
                      className="ctl-input")]),
        html.Div(id="scenarios-change-error", className="ctl-error", role="alert"),
        html.P(id="scenarios-sensitivity-text", className="card-note"),
    ])


layout = html.Div(className="page-body", children=[
    dcc.Store(id="scenarios-saved", storage_type="local", data=[]),
    dcc.Store(id="scenarios-ab", storage_type="local"),  # the A and B picked
    _saved_card(),
    html.Div(className="grid", children=[
        _compare_card(),
        graph_card("scenarios-compare", "B against A: change of each headline number",
                   note="Green: B is better (less time, memory or cost; more throughput)."),
        graph_card("scenarios-sensitivity", "What moves the training time (current scenario)",
                   height=480, extra=_change_box(), note=(
                       "Each hardware input of the system scaled on its own, the search run "
                       "again (the best layout may change); the current scenario's headline "
                       "strategy at its Design GPUs.")),
    ]),
])


# --------------------------------------------------------------------------- saved scenarios


def done(text: str) -> html.Span:
    """A confirmation in the message line (whose own colour is the errors' red): in the
    confirmations' green, as a status."""
    return html.Span(text, className="ctl-ok", role="status")


def _clicked(clicks: Any) -> None:
    """Only a click acts: a button drawn again (the page re-rendered) has no clicks."""
    if not clicks:
        raise PreventUpdate


@callback(Output("scenarios-pick", "options"), Output("scenarios-a", "options"),
          Output("scenarios-b", "options"), Output("scenarios-a", "value"),
          Output("scenarios-b", "value"), Input("scenarios-saved", "data"),
          State("scenarios-ab", "data"))
def options(data: Any, ab: Any) -> tuple:
    """The pickers' options from the saved scenarios, and the A and B picked before (kept in
    this browser, so that a reload keeps them; a pick since deleted reads 'current')."""
    entries = saved.entries(data)
    plain, compared = _entry_options(entries)
    names = set(saved.names(entries))
    kept = ab if isinstance(ab, list) and len(ab) == 2 else [saved.CURRENT, saved.CURRENT]
    a, b = (v if isinstance(v, str) and v in names else saved.CURRENT for v in kept)
    return plain, compared, compared, a, b


@callback(Output("scenarios-ab", "data"), Input("scenarios-a", "value"),
          Input("scenarios-b", "value"), prevent_initial_call=True)
def remember_picks(a: Any, b: Any) -> list:
    """The A and B picked, kept in this browser (names of at most MAX_NAME characters)."""
    return [str(v)[:saved.MAX_NAME] if v is not None else saved.CURRENT for v in (a, b)]


@callback(Output("scenarios-saved", "data"), Output("scenarios-message", "children"),
          Input("scenarios-save", "n_clicks"), State("scenarios-name", "value"),
          State("scenario", "data"), State("scenarios-saved", "data"),
          prevent_initial_call=True)
@page_callback(2, lambda message: (no_update, message))
def save(clicks: Any, name: Any, scn: dict[str, Any], data: Any) -> tuple:
    _clicked(clicks)
    entries = saved.save(saved.entries(data), name, scn)
    return entries, done(f"Saved '{saved.clean_name(name)}' ({len(entries)} kept in this "
                         f"browser).")


@callback(Output("scenarios-saved", "data", allow_duplicate=True),
          Output("scenarios-message", "children", allow_duplicate=True),
          Input("scenarios-delete", "n_clicks"), State("scenarios-pick", "value"),
          State("scenarios-saved", "data"), prevent_initial_call=True)
def delete(clicks: Any, name: Any, data: Any) -> tuple:
    _clicked(clicks)
    try:
        return saved.delete(saved.entries(data), name), done(f"Deleted '{name}'.")
    except ModelError as exc:
        return no_update, str(exc)


@callback(Output("scenarios-saved", "data", allow_duplicate=True),
          Output("scenarios-message", "children", allow_duplicate=True),
          Input("scenarios-upload", "contents"), State("scenarios-upload", "filename"),
          State("scenarios-saved", "data"), prevent_initial_call=True)
def upload(contents: Any, filename: Any, data: Any) -> tuple:
    """Add an uploaded file's scenarios (checked). Every file is answered in one line: a
    refusal names the file and why (its type, its size, its schema) and says that nothing was
    added, so the line never still shows the previous file's "Added"."""
    shown = filename[:80] if isinstance(filename, str) and filename else "the file"
    try:
        name = checked_json_name(filename)
        if not isinstance(contents, str) or "," not in contents:
            raise ModelError("the upload could not be read")
        try:
            raw = base64.b64decode(contents.split(",", 1)[1], validate=False)
        except ValueError:  # not base64
            raise ModelError("the upload could not be read") from None
        if len(raw) > saved.MAX_FILE_BYTES:
            raise ModelError(size_refusal(len(raw), saved.MAX_FILE_BYTES))
        new = saved.from_file(raw, name or None)
        entries = saved.merged(saved.entries(data), new)
    except ModelError as exc:
        return no_update, f"Upload rejected — {shown}: {exc}. {KEPT}"
    return entries, done(f"Added {count(len(new), 'scenario')} from {shown}.")


@callback(Output("scenarios-download", "data"),
          Output("scenarios-message", "children", allow_duplicate=True),
          Input("scenarios-download-btn", "n_clicks"), State("scenarios-saved", "data"),
          prevent_initial_call=True)
def download(clicks: Any, data: Any) -> tuple:
    _clicked(clicks)
    entries = saved.entries(data)
    if not entries:
        return no_update, "Nothing saved yet: save a scenario first."
    return dcc.send_string(saved.to_file(entries), "scenarios.json"), ""


@callback(*CONTROLS_OUT, *HEADER_OUT, Output("applied-presets", "data", allow_duplicate=True),
          Output("scenarios-message", "children", allow_duplicate=True),
          Input("scenarios-load", "n_clicks"), State("scenarios-pick", "value"),
          State("scenarios-saved", "data"), prevent_initial_call=True)
def load(clicks: Any, name: Any, data: Any) -> tuple:
    """A saved scenario into the control panel (the panel validates it as any edit)."""
    _clicked(clicks)
    keep = (no_update,) * (len(PANEL) + len(HEADER) + 1)
    try:
        scn = saved.find(saved.entries(data), name)
    except ModelError as exc:
        return (*keep, str(exc))
    return (*[scn[c.key] for c in PANEL], *[to_widget(c, scn[c.key]) for c in HEADER],
            {p.key: scn[p.key] for p in PRESET_OF.values()}, done(f"Loaded '{name}'."))


# --------------------------------------------------------------------------- compare


def picked(value: Any, current: dict[str, Any], entries: list[dict[str, Any]]
           ) -> tuple[dict[str, Any], str]:
    """(scenario, its name) of a compare picker's value."""
    if value == saved.CURRENT or value is None:
        return current, "current"
    return saved.find(entries, value), str(value)


def compare_outputs(scn: dict[str, Any], a: Any, b: Any, data: Any) -> tuple:
    entries = saved.entries(data)
    (sa, na), (sb, nb) = picked(a, scn, entries), picked(b, scn, entries)
    if na == nb == "current" and not entries:
        note = "Save a scenario, change the controls, and pick it as A to see the deltas."
    else:
        note = ""
    rows, fig, layouts = scenarios_view.compare(sa, sb, (na, nb),
                                                bool(scn.get("presentation")))
    return rows, fig, layouts, note, {"a": sa, "b": sb, "names": [na, nb]}


@callback(Output("scenarios-compare-table", "rowData"),
          Output({"type": "graph", "name": "scenarios-compare"}, "figure"),
          Output("scenarios-layouts", "children"),
          Output("scenarios-compare-message", "children"),
          Output({"type": "export-context", "name": "scenarios-compare"}, "data"),
          Input("scenario", "data"), Input("scenarios-a", "value"),
          Input("scenarios-b", "value"), Input("scenarios-saved", "data"))
@page_callback(0, lambda message: (no_update, no_update, "", message, None))
def update_compare(scn: dict[str, Any], a: Any, b: Any, data: Any) -> tuple:
    return compare_outputs(scn, a, b, data)


def _compare_export(scn: dict[str, Any], context: Any) -> dict[str, Any]:
    """The compare figure from its context: both scenarios validated again."""
    if not isinstance(context, dict):
        raise ModelError("pick two scenarios first")
    pair = []
    for key in ("a", "b"):
        clean, message = checked_scenario(context.get(key))
        if clean is None:
            raise ModelError(message)
        pair.append(clean)
    names = context.get("names")
    names = tuple(str(n)[:saved.MAX_NAME] for n in names) if isinstance(names, list) and len(
        names) == 2 else ("A", "B")
    _, fig, _ = scenarios_view.compare(pair[0], pair[1], names, bool(scn.get("presentation")))
    return {"scenarios-compare": fig}


register_exports(["scenarios-compare"], _compare_export)


# --------------------------------------------------------------------------- sensitivity


def parse_change(value: Any) -> float | None:
    """The change (a fraction) from the page's percent box, None unless 0 < it ≤ 90 %."""
    try:
        pct = float(value)
    except (TypeError, ValueError):
        return None
    return pct / 100 if 0 < pct <= 100 * MAX_FRACTION else None


@callback(Output({"type": "graph", "name": "scenarios-sensitivity"}, "figure"),
          Output("scenarios-sensitivity-text", "children"),
          Output("scenarios-change-error", "children"),
          Output({"type": "export-context", "name": "scenarios-sensitivity"}, "data"),
          Input("scenario", "data"), Input("scenarios-change", "value"))
@page_callback(0, lambda message: (no_update, message, "", None))
def update_sensitivity(scn: dict[str, Any], change: Any) -> tuple:
    fraction = parse_change(change)
    if fraction is None:
        return (no_update, no_update, f"the change must be a number above 0 and at most "
                f"{100 * MAX_FRACTION:g} (%); the chart keeps the last valid one", no_update)
    fig, text = scenarios_view.sensitivity_outputs(scn, fraction)
    return fig, text, "", fraction


def _sensitivity_export(scn: dict[str, Any], context: Any) -> dict[str, Any]:
    fraction = parse_change(100 * context) if isinstance(context, (int, float)) else None
    fig, _ = scenarios_view.sensitivity_outputs(scn, fraction or DEFAULT_CHANGE_PCT / 100)
    return {"scenarios-sensitivity": fig}


register_exports(["scenarios-sensitivity"], _sensitivity_export)
