"""System comparison: the scenario's model on the systems picked here — presets and the system as
edited in the control panel — at their own NVLink domains or any others, best strategy per
point (the paper's 9-system figure, for any systems). A background job (a child process or a
Celery worker), sized and time-limited like every study (:mod:`dashboard.jobs.studies`); the systems
and domains picked are checked against the page's options on the server."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, callback, dcc, html, no_update

from dashboard import figures
from dashboard.controls.fitted import FITTED_KEY
from dashboard.controls.strategy_choice import runnable, stack_record
from dashboard.jobs import studies
from dashboard.server.export import graph_card, register_exports
from dashboard.server.guard import page_callback
from dashboard.views import notes
from model import ModelError, list_systems
from model.engine.layouts import runs_words
from model.physics.strategies import MEGATRON_STACKS, PRODUCTION, SHORT_LABELS

dash.register_page(__name__, path="/systems", name="Compare systems", order=2,
                   title="Compare systems — transformer training what-if")

DOMAINS = (4, 8, 16, 32, 64, 72)
MAX_CURVES = 24  # systems × domains: each is a sweep of every strategy and GPU count
OWN = 0  # the system's own NVLink domain


def _options() -> list[dict[str, str]]:
    presets = [{"label": name.upper(), "value": name} for name in list_systems()]
    return [{"label": "edited system (the control panel's)", "value": studies.EDITED}, *presets]


def summary_text(scn: dict[str, Any]) -> str:
    """What the page draws, in the scenario's stack's own words: the strategies it runs (an
    FSDP stack: 1D at tp 1 alone, :mod:`model.engine.layouts`) and its lineage, not
    Megatron's (Megatron-LM, NeMo, Megatron-Bridge without a stack)."""
    stack = stack_record(scn.get("stack"), scn.get("mode"), scn.get(FITTED_KEY))
    runs = runnable(stack)
    names = " or ".join(SHORT_LABELS[s] for s in PRODUCTION if s in runs)
    lineage = notes.stack_lineage(scn) if scn else ""
    who = f"as {lineage} runs them" if lineage else f"as {', '.join(MEGATRON_STACKS)} ship them"
    only = f"; {runs_words(stack)}" if stack is not None and stack.layout_pins() else ""
    summa = (" the idealised 2D SUMMA only when chosen as the Strategy, and then labelled "
             "idealised." if "summa" in runs else " no idealised strategy: the stack runs none.")
    return ("The model and run settings on the left, on the systems picked here: presets, and "
            "the system as edited in the control panel, each at its own NVLink domain or at "
            f"the domain sizes ticked. Each point is the fastest production strategy ({names}, "
            f"{who}{only}) and configuration that fits;{summa}")


layout = html.Div(className="page-body", children=[
    html.Div(id="systems-compare-busy", className="busy"),
    html.P(id="systems-summary", className="summary", children=summary_text({})),
    html.Div(className="card compare-form", children=[
        html.Label(className="compare-systems", htmlFor="systems-pick", children=[
            "Systems",
            dcc.Dropdown(id="systems-pick", multi=True, options=_options(),
                         value=[*studies.COMPARE_SYSTEMS, studies.EDITED], clearable=False)]),
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


def picked(names: Any, domains: Any) -> tuple[list[str], list[int]]:
    """The systems and domains picked, as the page's options allow them: anything else (a
    value the options do not offer, a wrong type) is dropped."""
    valid = set(list_systems()) | {studies.EDITED}
    names = [n for n in names if isinstance(n, str) and n in valid] \
        if isinstance(names, list) else []
    domains = sorted({n for n in domains if type(n) is int and (n == OWN or n in DOMAINS)}) \
        if isinstance(domains, list) else []
    return names, domains


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
          domains: list[int] | None = None, time_budget_s: float | None = None) -> tuple:
    """(figure, error, skipped systems) for the picked systems and domains."""
    names = list(studies.COMPARE_SYSTEMS) if names is None else list(names)
    domains = list(studies.COMPARE_NVS) if domains is None else list(domains)
    pres = bool(scn.get("presentation"))
    names, domains = picked(names, domains)
    error = choice_error(names, domains)
    if error:
        return dash.no_update, error, dash.no_update
    frame = studies.systems(scn, tuple(names), tuple(domains), time_budget_s)
    skipped = ""
    if "skipped" in frame.columns:
        rows = frame[frame["skipped"].notna()]
        skipped = "Not compared: " + "; ".join(
            f"{r['system']} — {r['skipped']}" for r in rows.to_dict("records")) if len(rows) else ""
    if frame.empty or frame.get("train_days") is None:
        return (figures.empty_figure("No system fits this model in the GPU range.", pres), "",
                skipped)
    return figures.systems_figure(frame, presentation=pres,
                                  unvalidated=unvalidated_systems(scn, names)), "", skipped


def unvalidated_systems(scn: dict[str, Any], names: list[str]) -> dict[str, str]:
    """System label (the part before '·') → why predictions on it are not validated, for the
    systems picked whose predictions have no cross-validated error bar (MI300X: no published
    run on it was ever scored)."""
    out = {}
    for name in names:
        system = scn["system"] if name == studies.EDITED else name
        reason = notes.not_validated(scn, system)
        if reason:
            out[studies.system_label(name, 0, scn).split("·")[0].strip()] = reason
    return out


def failed(exc: Exception) -> tuple:
    """The job raised or its process died: say why, keep the figure."""
    reason = str(exc).removeprefix("An error occurred inside a background callback: ").strip()
    return (no_update, f"The comparison failed: {reason.splitlines()[0] if reason else exc!r}",
            no_update, no_update)


@callback(Output({"type": "graph", "name": "systems-compare"}, "figure"),
          Output("systems-error", "children"), Output("systems-skipped", "children"),
          Output({"type": "export-context", "name": "systems-compare"}, "data"),
          Input("scenario", "data"), Input("systems-pick", "value"),
          Input("systems-domains", "value"), background=True, on_error=failed,
          running=[(Output("systems-compare-busy", "children"), "Computing the systems…", "")])
@page_callback(0, lambda message: (no_update, message, no_update, no_update))
def update(scn: dict[str, Any], names: Any, domains: Any):
    names, domains = picked(names, domains)
    return (*build(scn, names, domains, time_budget_s=studies.SWEEP_TIME_BUDGET_S),
            [names, domains])


def _exported(scn: dict[str, Any], context: Any) -> dict[str, Any]:
    """The comparison as the page shows it (its systems and domains, checked again; from the
    results cache, or recomputed within the request's time budget)."""
    names, domains = context if isinstance(context, list) and len(context) == 2 else ([], [])
    figure, error, _ = build(scn, *picked(names, domains))
    if error:
        raise ModelError(error)
    return {"systems-compare": figure}


register_exports(["systems-compare"], _exported)


@callback(Output("systems-summary", "children"), Input("scenario", "data"))
@page_callback(0, lambda message: no_update)
def update_summary(scn: dict[str, Any]) -> str:
    """The page's summary in the words of the scenario's stack."""
    return summary_text(scn)
