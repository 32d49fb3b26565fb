"""The co-design section of the Plan & cost page: which system design, bought for a budget,
trains each model fastest (:mod:`dashboard.jobs.codesign`), as a background job with progress and
cancel (like the HBM sweep), drawn as a designs × models map with each model's best marked, and
as a table. The study's rows go to a store; the map and the table are drawn from it, so the
metric switch never re-runs the study."""

from __future__ import annotations

import math
from typing import Any

import dash
import dash_ag_grid as dag
import pandas as pd
from dash import ALL, Input, Output, State, callback, dcc, html

from dashboard import figures
from dashboard.figures.codesign import METRICS, codesign_figure, config_text, design_label
from dashboard.jobs import codesign
from dashboard.jobs.background import job_callback
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import page_callback
from dashboard.views.grid import SIGNIFICANT, number_column, text_column
from model import ModelError, list_models, list_systems
from model.cli.numbers import money
from model.specs.prices import VARIABLE

MAX_STORED_ROWS = codesign.MAX_ROWS  # what the render callback accepts from the browser
ROW_COLUMNS = ("model", "price_per_gpu_usd", "max_gpus", "gpus", "samples_per_s",
               "samples_per_s_per_musd", "best", "tp1", "pp", "dp", "microbatch", "recompute",
               "offload")
PLACEHOLDER = ("Set the study above and press Run co-design: the map of designs × models "
               "appears here.")


def _field_row(i: int, row: dict[str, Any]) -> html.Div:
    # Not debounced: the boxes are read only when Run is pressed, and Dash 4.4's debounced text
    # input puts the caret back where it was one render earlier (a setTimeout after each
    # change, dcc/src/components/Input.tsx), so fast typing on a busy page reorders the
    # characters ("40, 80" became "4 800,").
    return html.Div(className="codesign-field", children=[
        dcc.Dropdown(id={"type": "cd-field", "i": i}, options=codesign.FIELD_OPTIONS,
                     value=row["field"], placeholder="system field", clearable=True),
        dcc.Input(id={"type": "cd-values", "i": i}, type="text", value=row["values"],
                  placeholder="values, e.g. 40, 80"),
        dcc.Input(id={"type": "cd-prices", "i": i}, type="text", value=row["prices"],
                  placeholder="USD added per GPU, e.g. 5000, 10000"),
    ])


def _box(key: str, label: str, value: Any, kind: str = "number",
         note: Any = None) -> html.Label:
    return html.Label([label, dcc.Input(id=f"cd-{key}", type=kind, value=value,
                                        **({"step": "any"} if kind == "number" else {})),
                       note])


def budget_text(value: Any) -> str:
    """A dollar box's value as money, beside it: 125000000 → '= $125.00M' (a bare 125000000
    is easily read as $125k); '' when it is no number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value):
        return ""
    return f"= {money(value)}"


@callback(Output("cd-budget-text", "children"), Output("cd-base-text", "children"),
          Input("cd-budget", "value"), Input("cd-base", "value"))
def dollars(budget: Any, base: Any) -> tuple[str, str]:
    """The budget and the base price written as money while they are typed."""
    return budget_text(budget), budget_text(base)


def section() -> html.Div:
    """The co-design form, progress, map and table (Calculon's Study 5 by default)."""
    d = codesign.DEFAULTS
    return html.Div(className="card wide", id="card-codesign", children=[
        html.H3("Co-design under a budget"),
        html.P(className="card-note", children=(
            "For every combination of the varied system fields (a design), the price per GPU is "
            "the base price plus each value's price; the budget buys whole nodes; the best "
            "cluster size up to that is searched (offload too where the design has host "
            "memory). Defaults: Calculon's Study 5 (Isaev et al., SC23), H100 with HBM and "
            "DDR5 at 100 GB/s, $125M.")),
        html.Div(className="sweep-form", children=[
            html.Label(["Models", dcc.Dropdown(id="cd-models", options=list_models(),
                                               value=d["models"], multi=True,
                                               style={"minWidth": "360px"})]),
            _box("batches", "Global batch (one, or one per model)", d["batches"], "text"),
            html.Label(["Base system", dcc.Dropdown(id="cd-system", options=list_systems(),
                                                    value=d["system"], clearable=False)]),
            _box("host", "Host memory bandwidth (GB/s per GPU)", d["host_gb_per_s"]),
            _box("budget", "Budget (USD)", d["budget_usd"],
                 note=html.Span(budget_text(d["budget_usd"]), id="cd-budget-text",
                                className="card-note")),
            _box("base", "Base price per GPU (USD)", d["base_usd"],
                 note=html.Span(budget_text(d["base_usd"]), id="cd-base-text",
                                className="card-note")),
        ]),
        html.Div(className="codesign-fields", children=[
            *[html.Span(text, className="codesign-head") for text in (
                "Varied system field", "Its values", "USD each value adds per GPU")],
            *[_field_row(i, row) for i, row in enumerate(d["rows"])]]),
        html.Div(className="sweep-form", children=[
            html.Button("Run co-design", id="cd-run", className="btn-primary"),
            html.Button("Cancel", id="cd-cancel", disabled=True),
            html.Progress(id="cd-progress", value="0", max="100"),
            html.Span(id="cd-progress-text", className="progress-text"),
        ]),
        html.Div(id="cd-error", className="ctl-error", role="alert"),
        dcc.Store(id="cd-rows"),
        html.Div(className="grid", children=[
            graph_card("plan-codesign", "Designs × models", height=560, placeholder=PLACEHOLDER,
                       extra=dcc.RadioItems(id="cd-metric", value="samples_per_s_per_musd",
                                            inline=True, options=[
                                                {"label": label, "value": key}
                                                for key, label in METRICS.items()]),
                       note=("Colour: the value relative to the model's best design; text: "
                             "the value; ★ and outline: the model's fastest design.")),
            html.Div(className="card", children=[
                html.H3("Co-design rows"),
                dag.AgGrid(id="cd-table", columnDefs=[], rowData=[],
                           defaultColDef={"resizable": True}, style={"height": "560px"},
                           dashGridOptions={"animateRows": False},
                           className="ag-theme-alpine"),
            ]),
        ]),
    ])


def columns(varied: list[str]) -> list[dict[str, Any]]:
    """The table's columns: model, the varied fields, then the results."""
    return [text_column("model", "Model", pinned="left"),
            *[number_column(k, k, SIGNIFICANT, width=130) for k in varied],
            number_column("price_per_gpu_usd", "$ per GPU", ",.0f"),
            number_column("max_gpus", "GPUs bought", ",d"),
            number_column("gpus", "GPUs used", ",d"),
            number_column("samples_per_s", "samples/s", SIGNIFICANT),
            number_column("samples_per_s_per_musd", "samples/s per $M", SIGNIFICANT, width=140),
            text_column("best_mark", "Best", width=80),
            text_column("config", "Configuration", width=320)]


def rendered(stored: Any, metric: Any, presentation: bool = False) -> tuple:
    """(figure, table columns, table rows) of the stored study; the store comes back from the
    browser, so it is checked (shape, size) before use."""
    if not stored:
        return figures.empty_figure(PLACEHOLDER, presentation), [], []
    try:
        varied = [k for k in stored["varied"] if k in VARIABLE][:codesign.MAX_FIELDS]
        frame = pd.DataFrame.from_records(stored["rows"][:MAX_STORED_ROWS])
    except (KeyError, TypeError, ValueError):
        return figures.empty_figure("The stored study is unreadable: run it again.",
                                    presentation), [], []
    metric = metric if isinstance(metric, str) and metric in METRICS else "samples_per_s_per_musd"
    fig = codesign_figure(frame, varied, metric, presentation)
    if isinstance(stored.get("caption"), str):  # the export's caption (dashboard.server.export)
        fig.update_layout(meta={"caption": stored["caption"][:300]})
    if frame.empty or any(c not in frame for c in (*ROW_COLUMNS[:7], *varied)):
        return fig, [], []
    table = frame.assign(config=config_text(frame),
                         best_mark=["★" if b else "" for b in frame["best"].astype(bool)],
                         design=[design_label(r, varied) for _, r in frame.iterrows()])
    return fig, columns(varied), table.to_dict("records")


def failed(exc: Exception) -> tuple:
    """The job raised or its worker died (``dashboard.jobs.background``): say why, keep the map."""
    reason = str(exc).removeprefix("An error occurred inside a background callback: ").strip()
    return dash.no_update, f"The co-design failed: {reason.splitlines()[0] if reason else exc!r}"


def form(models, batches, system, host, budget, base, fields, values, prices) -> dict[str, Any]:
    """The form's values as :func:`dashboard.jobs.codesign.study` takes them."""
    rows = [{"field": f, "values": v, "prices": p} for f, v, p in zip(fields, values, prices)]
    return {"models": models, "batches": batches, "system": system, "host_gb_per_s": host,
            "budget_usd": budget, "base_usd": base, "rows": rows}


@callback(
    Output("cd-rows", "data"), Output("cd-error", "children"),
    Input("cd-run", "n_clicks"),
    State("cd-models", "value"), State("cd-batches", "value"), State("cd-system", "value"),
    State("cd-host", "value"), State("cd-budget", "value"), State("cd-base", "value"),
    State({"type": "cd-field", "i": ALL}, "value"),
    State({"type": "cd-values", "i": ALL}, "value"),
    State({"type": "cd-prices", "i": ALL}, "value"),
    **job_callback("cd", failed),
)
def run_study(set_progress, _n: int, *values: Any) -> tuple:
    """The callback: the form validated on the server, the study run with progress."""
    try:
        spec = codesign.study(form(*values))
    except ValueError as exc:
        return dash.no_update, str(exc)

    def progress(done: int, total: int) -> None:
        set_progress((str(done), str(total), f"{done} / {total} rows"))

    try:
        frame = codesign.run(spec, progress)
    except ModelError as exc:  # over its time budget: say so, keep the map
        return dash.no_update, str(exc)
    total = str(len(frame))
    set_progress((total, total, f"{total} / {total} rows"))  # a cached study reports too
    keep = frame[[c for c in (*ROW_COLUMNS, *spec["vary"]) if c in frame]]
    rows = keep.astype(object).where(keep.notna(), None).to_dict("records")  # NaN → null
    return {"varied": list(spec["vary"]), "rows": rows, "caption": caption(spec)}, ""


def caption(spec: dict[str, Any]) -> str:
    """What an exported map shows: the system, the budget, the models and their batches."""
    models = ", ".join(f"{m} (batch {b})" for m, b in zip(spec["models"], spec["batches"]))
    return (f"co-design of {spec['system']} designs (host memory at {spec['host_gb_per_s']:g} "
            f"GB/s) under ${spec['budget_usd']:,.0f} · {models}")


@callback(
    Output({"type": "graph", "name": "plan-codesign"}, "figure"),
    Output("cd-table", "columnDefs"), Output("cd-table", "rowData"),
    Output({"type": "export-context", "name": "plan-codesign"}, "data"),
    Input("cd-rows", "data"), Input("cd-metric", "value"), State("scenario", "data"),
    prevent_initial_call=True,
)
@page_callback(2, lambda message: (figures.empty_figure(message), [], [], None))
def draw(stored: Any, metric: Any, scn: dict[str, Any]) -> tuple:
    """The map and the table; the export's context: the stored study and the metric (checked
    again by :func:`exported`), only when it is plain JSON of a study's size (a store sent back
    by the browser is never echoed otherwise: an integer past 2**53 cannot even be encoded)."""
    context = [stored, metric] if plain_json(stored) and isinstance(metric, str) \
        and metric in METRICS else None
    return (*rendered(stored, metric, bool(scn.get("presentation"))), context)


def plain_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON a study's store holds: numbers within ±2**53 and finite,
    short strings, lists and objects at most 4 deep and of at most MAX_STORED_ROWS items."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 2**53
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return len(value) <= 4000  # a caption names up to MAX_MODELS models
    if depth >= 4 or not isinstance(value, (list, dict)) or len(value) > MAX_STORED_ROWS:
        return False
    items = value.items() if isinstance(value, dict) else enumerate(value)
    return all((isinstance(k, (str, int)) and plain_json(v, depth + 1)) for k, v in items)


def exported(scn: dict[str, Any], context: Any) -> dict[str, Any]:
    """The map as the page draws it, from the study the page holds (its shape and size checked
    by :func:`rendered`); none before a study ran."""
    stored, metric = context if isinstance(context, list) and len(context) == 2 else (None, None)
    if not stored:
        raise ModelError("run the co-design study first")
    figure = rendered(stored, metric, bool(scn.get("presentation")))[0]
    return {"plan-codesign": figure}


register_exports(["plan-codesign"], exported)
