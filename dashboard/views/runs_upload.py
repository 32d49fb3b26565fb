"""The Validation page's "your runs" card: upload measured runs, see the stack fitted to them.

The upload (RUNS.json, docs/stacks.md: at most :data:`MAX_RUNS` runs and :data:`MAX_BYTES`) is
read on the server, schema-checked by :func:`model.validation.user_runs.runs_from_text` and
fitted from the scenario's software stack (:func:`~model.validation.user_runs.calibrate_runs`):
the card shows each fitted GEMM efficiency and the in-sample and leave-one-out errors, and
offers the fitted stack as a JSON file that ``--stack`` and ``stack=`` take. A bad file changes
nothing and says why, inline. "Apply to this session" puts the fit (the stack and its
leave-one-out errors, :mod:`dashboard.controls.fitted`) in the session's scenario: the stack
control then reads "fitted: <name>", and every page computes with it.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from pathlib import PurePath
from typing import Any

import numpy as np
from dash import Input, Output, State, callback, dcc, html, no_update

from dashboard.controls.fitted import (
    FITTED,
    FITTED_KEY,
    check_fitted,
    fit_summary,
    fitted_record,
    stack_options,
)
from dashboard.controls.panel import PANEL
from dashboard.controls.presets import PRESET_OF, fitted_values
from dashboard.controls.strategy_choice import with_supported_strategies
from dashboard.controls.uploads import guarded_upload, size_refusal
from dashboard.server.guard import page_callback
from model import ModelError
from model.cli.numbers import count, number
from model.specs.stack import Stack, load_stack
from model.validation.user_runs import calibrate_runs, fitted_stack, runs_from_text

MAX_RUNS = 12  # each run is priced on 14 efficiencies: about a second per run at most
MAX_BYTES = 64 * 1024
CLEARED = "The previous fit is cleared."


def runs_card() -> html.Div:
    return html.Div(className="card wide", children=[
        html.H3("Your runs: a stack fitted to them"),
        html.P(f"Upload measured runs (RUNS.json, at most {MAX_RUNS} runs, "
               f"{MAX_BYTES // 1024} kB; the schema is in docs/stacks.md). The scenario's "
               "software stack is the base; its GEMM efficiency is fitted per system of the "
               "runs."),
        # no type filter and no size limit in dcc.Upload (a file it drops is dropped without
        # a word): a file over MAX_BYTES is refused in the browser, in one line, by the guard
        # (dashboard/controls/uploads.py), any other is sent and refused here in words
        guarded_upload("validation-runs-upload", html.Button("Upload runs (JSON)"), MAX_BYTES,
                       "validation-runs-result", "Runs refused", CLEARED, clear={
                           "validation-runs-stack": {"data": None},
                           "validation-runs-apply": {"disabled": True}}),
        html.Div(id="validation-runs-result", role="status"),
        dcc.Store(id="validation-runs-stack"),
        html.Button("Download the fitted stack (JSON)", id="validation-runs-download-btn"),
        dcc.Download(id="validation-runs-download"),
        html.Button("Apply to this session", id="validation-runs-apply", disabled=True,
                    title="Every page computes with the fitted stack; the software stack "
                          "control gets it as 'fitted: <the runs file's name>' beside the "
                          "presets."),
        html.Div(id="validation-runs-applied", role="status"),
    ])


def _pct(measured: float, predicted: float) -> float:
    return 100.0 * (1.0 - predicted / measured)


def fit_name(filename: Any) -> str:
    """The fitted stack's name: the runs file's (``calibrate --out`` names it after its file),
    letters, digits, '.', '_', '-' and at most 40 of them; "my-stack" without one."""
    stem = PurePath(filename).stem if isinstance(filename, str) else ""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:40]
    return name or "my-stack"


def checked_file(filename: Any) -> str:
    """The upload's file name, refused (ModelError) unless it names a JSON file."""
    name = filename if isinstance(filename, str) else ""
    if name and PurePath(name).suffix.lower() != ".json":
        kind = PurePath(name).suffix or "no extension"
        raise ModelError(f"not a JSON file ({kind}): upload RUNS.json, a .json file")
    return name


def run_label(case: Any) -> str:
    """A fitted run as the table names it: its model, GPU count and system ('llama3-8b · 8 ×
    h100'), then the id the file gave it, if any."""
    label = f"{case.model.name} · {case.gpus:,} × {case.system.name}"
    return label if case.id == case.source else f"{label} ({case.id})"


def fit_upload(contents: str, base: str | Stack | None, name: str = "my-stack",
               filename: str = "") -> tuple[html.Div, dict[str, Any]]:
    """(the result shown, the fit: ``{"stack": the fitted stack as calibrate --out writes it,
    "fit": its leave-one-out errors per system}``) of an upload; ModelError when refused."""
    try:
        raw = base64.b64decode(contents.split(",", 1)[1], validate=False)
    except (IndexError, ValueError):
        raise ModelError("the upload could not be read") from None
    if len(raw) > MAX_BYTES:
        raise ModelError(size_refusal(len(raw), MAX_BYTES))
    stack = load_stack(base)  # a preset's name, or the session's fitted stack as a record
    cases = [replace(c, stack=stack) for c in runs_from_text(raw, stack.name, MAX_RUNS)]
    result = calibrate_runs(cases)
    fitted = fitted_stack(stack, name, result["efficiency"])
    rows = [html.Tr([html.Th(h) for h in ("run", "system", "measured s", "in sample %",
                                         "leave-one-out %")])]
    labels = {c.id: run_label(c) for c in cases}
    for r in result["runs"]:
        loo = r["leave_one_out_s"]
        rows.append(html.Tr([html.Td(labels.get(r["id"], r["id"])), html.Td(r["system"]),
                             html.Td(number(r["measured_s"])),
                             html.Td(f"{_pct(r['measured_s'], r['in_sample_s']):+.1f}"),
                             html.Td("—" if np.isnan(loo) else
                                     f"{_pct(r['measured_s'], loo):+.1f}")]))
    fitted_text = ", ".join(f"{s}: {eta:.3f}" for s, eta in result["efficiency"].items())
    source = f" ({filename})" if filename else ""
    shown = html.Div([html.P(f"Fitted stack '{name}' from {stack.name} on "
                             f"{count(len(cases), 'run')}{source} — GEMM "
                             f"efficiency of the BF16 peak: {fitted_text}."),
                      html.Table(rows, className="runs-fit")])
    return shown, {"stack": fitted.to_dict(), "fit": fit_summary(result["runs"])}


def _base(scn: dict[str, Any]) -> str | Stack | None:
    """The stack a fit starts from: the (validated) scenario's — its fitted stack as a
    record — or the newest preset for none."""
    if scn["stack"] == "none":
        return None
    return fitted_record(scn[FITTED_KEY]) if scn["stack"] == FITTED else scn["stack"]


@callback(Output("validation-runs-result", "children"), Output("validation-runs-stack", "data"),
          Output("validation-runs-apply", "disabled"),
          Input("validation-runs-upload", "contents"), State("scenario", "data"),
          State("validation-runs-upload", "filename"), prevent_initial_call=True)
@page_callback(1, lambda message: (html.P(message, className="alert"), None, True))
def upload_runs(contents: str | None, scn: dict[str, Any], filename: Any = None) -> tuple:
    """Fit the uploaded runs from the scenario's stack. A refusal says in one line which file
    and why (its size, its type, its schema), and clears the previous file's fit: nothing on
    screen or in the store describes a file that was not fitted."""
    if not contents:
        return no_update, no_update, no_update
    shown_name = filename[:80] if isinstance(filename, str) and filename else "the file"
    try:
        name = checked_file(filename)
        shown, fit = fit_upload(contents, _base(scn), fit_name(filename), name[:80])
    except ModelError as exc:
        return (html.P(f"Runs refused — {shown_name}: {exc}. {CLEARED}", className="alert"),
                None, True)
    return shown, fit, False


PRESETS = tuple(PRESET_OF.values())
KEEP_PANEL = (no_update,) * (len(PANEL) + 3)


@callback(*[Output(f"ctl-{c.key}", "value", allow_duplicate=True) for c in PANEL],
          Output("applied-presets", "data", allow_duplicate=True),
          Output("fitted-stack", "data", allow_duplicate=True),
          Output("ctl-stack", "options", allow_duplicate=True),
          Output("validation-runs-applied", "children"),
          Input("validation-runs-apply", "n_clicks"), State("validation-runs-stack", "data"),
          State("scenario", "data"), prevent_initial_call=True)
@page_callback(2, lambda message: (*KEEP_PANEL, html.P(message, className="alert")))
def apply_fit(_: int | None, fit: Any, scn: Any) -> tuple:
    """Put the fit (checked again: it comes back from the browser) in the session: its stack
    control's value "fitted", its execution defaults in the controls, the fitted-stack store
    the panel validates the scenario with (dashboard/state.py). Nothing changes when refused."""
    clean, message = check_fitted(fit)
    if clean is None:
        why = message or "upload runs and fit them first"
        return (*KEEP_PANEL, html.P(f"Not applied — {why}", className="alert"))
    new = with_supported_strategies({**scn, **fitted_values(clean)})
    name = clean["stack"]["name"]
    return (*(new[c.key] for c in PANEL), {p.key: new[p.key] for p in PRESETS}, clean,
            stack_options(clean), html.P(f"Applied: every page now computes with your fitted "
                                         f"stack (software stack: fitted: {name})."))


@callback(Output("validation-runs-download", "data"),
          Input("validation-runs-download-btn", "n_clicks"),
          State("validation-runs-stack", "data"), prevent_initial_call=True)
def download_stack(_: int | None, stack: Any) -> Any:
    """The fitted stack, validated again, as a JSON file (nothing before a fit)."""
    clean, _ = check_fitted(stack)
    if clean is None:
        return no_update
    return dcc.send_string(json.dumps(clean["stack"], indent=2) + "\n",
                           f"{clean['stack']['name']}.json")
