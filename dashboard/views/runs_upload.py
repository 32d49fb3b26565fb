"""The Validation page's "your runs" card: upload measured runs, see the stack fitted to them.

The upload (RUNS.json, docs/stacks.md: at most :data:`MAX_RUNS` runs and :data:`MAX_BYTES`) is
read on the server, schema-checked by :func:`model.validation.user_runs.runs_from_text` and
fitted from the scenario's software stack (:func:`~model.validation.user_runs.calibrate_runs`):
the card shows each fitted GEMM efficiency and the in-sample and leave-one-out errors, and
offers the fitted stack as a JSON file that ``--stack`` and ``stack=`` take. A bad file changes
nothing and says why, inline. Applying the fitted stack to the session's own predictions is not
offered (the scenario's stack is a preset name).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
from dash import Input, Output, State, callback, dcc, html, no_update

from dashboard.server.guard import page_callback
from model import ModelError
from model.specs.stack import load_stack
from model.validation.user_runs import calibrate_runs, fitted_stack, runs_from_text

MAX_RUNS = 12  # each run is priced on 14 efficiencies: about a second per run at most
MAX_BYTES = 64 * 1024


def runs_card() -> html.Div:
    return html.Div(className="card wide", children=[
        html.H3("Your runs: a stack fitted to them"),
        html.P(f"Upload measured runs (RUNS.json, at most {MAX_RUNS} runs, "
               f"{MAX_BYTES // 1024} kB; the schema is in docs/stacks.md). The scenario's "
               "software stack is the base; its GEMM efficiency is fitted per system of the "
               "runs."),
        dcc.Upload(id="validation-runs-upload", max_size=MAX_BYTES,
                   accept=".json,application/json",
                   children=html.Button("Upload runs (JSON)")),
        html.Div(id="validation-runs-result", role="status"),
        dcc.Store(id="validation-runs-stack"),
        html.Button("Download the fitted stack (JSON)", id="validation-runs-download-btn"),
        dcc.Download(id="validation-runs-download"),
    ])


def _pct(measured: float, predicted: float) -> float:
    return 100.0 * (1.0 - predicted / measured)


def fit_upload(contents: str, base: str) -> tuple[html.Div, dict[str, Any]]:
    """(the result shown, the fitted stack as a dict) of an upload; ModelError when refused."""
    try:
        raw = base64.b64decode(contents.split(",", 1)[1], validate=False)
    except (IndexError, ValueError):
        raise ModelError("the upload could not be read") from None
    if len(raw) > MAX_BYTES:
        raise ModelError(f"the upload is over {MAX_BYTES // 1024} kB")
    stack = load_stack(base)
    cases = runs_from_text(raw, stack.name, MAX_RUNS)
    result = calibrate_runs(cases)
    fitted = fitted_stack(stack, "my-stack", result["efficiency"])
    rows = [html.Tr([html.Th(h) for h in ("run", "system", "measured s", "in sample %",
                                         "leave-one-out %")])]
    for r in result["runs"]:
        loo = r["leave_one_out_s"]
        rows.append(html.Tr([html.Td(r["id"]), html.Td(r["system"]),
                             html.Td(f"{r['measured_s']:.3g}"),
                             html.Td(f"{_pct(r['measured_s'], r['in_sample_s']):+.1f}"),
                             html.Td("—" if np.isnan(loo) else
                                     f"{_pct(r['measured_s'], loo):+.1f}")]))
    fitted_text = ", ".join(f"{s}: {eta:.3f}" for s, eta in result["efficiency"].items())
    shown = html.Div([html.P(f"Fitted from {stack.name} on {len(cases)} runs — GEMM "
                             f"efficiency of the BF16 peak: {fitted_text}."),
                      html.Table(rows, className="runs-fit")])
    return shown, fitted.to_dict()


@callback(Output("validation-runs-result", "children"), Output("validation-runs-stack", "data"),
          Input("validation-runs-upload", "contents"), State("scenario", "data"),
          prevent_initial_call=True)
@page_callback(1, lambda message: (html.P(message, className="alert"), no_update))
def upload_runs(contents: str | None, scn: dict[str, Any]) -> tuple:
    """Fit the uploaded runs from the scenario's stack (a refusal is shown, nothing kept)."""
    if not contents:
        return no_update, no_update
    base = scn.get("stack") or None
    if base in (None, "none"):
        base = None  # the newest preset
    try:
        return fit_upload(contents, base)
    except ModelError as exc:
        return html.P(f"Runs refused — {exc}", className="alert"), None


@callback(Output("validation-runs-download", "data"),
          Input("validation-runs-download-btn", "n_clicks"),
          State("validation-runs-stack", "data"), prevent_initial_call=True)
def download_stack(_: int | None, stack: Any) -> Any:
    """The fitted stack, validated again, as a JSON file (nothing before a fit)."""
    if not isinstance(stack, dict):
        return no_update
    from model.specs.stack import stack_from_dict
    try:
        clean = stack_from_dict(stack)
    except ModelError:
        return no_update
    return dcc.send_string(json.dumps(clean.to_dict(), indent=2) + "\n", "my-stack.json")
