"""Callbacks that turn the controls into the validated scenario store, and back.

* controls → scenario: validate every value; show each error next to its control; a bad value
  leaves the store (and so every view) as it was, and nothing the user typed is reset.
* URL ↔ scenario: the fragment (#…) is read once at page load and rewritten on every valid
  change, so a copied link reproduces the view.
* presets, reset buttons, scenario upload → controls; scenario download.
"""

from __future__ import annotations

import base64
from typing import Any

from dash import Input, Output, State, callback, ctx, dcc, no_update

from model import ModelError

from .controls import CONTROL_KEYS
from .guard import page_callback
from .scenario import (
    default_scenario,
    from_json,
    from_query,
    model_values,
    system_values,
    to_json,
    to_query,
    validate_scenario,
)

ERROR_KEYS = (*CONTROL_KEYS, "_")
CONTROLS = [Output(f"ctl-{k}", "value", allow_duplicate=True) for k in CONTROL_KEYS]
PRESENTATION = Output("ctl-presentation", "value", allow_duplicate=True)


def _control_values(scn: dict[str, Any]) -> list[Any]:
    return [scn[k] for k in CONTROL_KEYS]


def _raw(values: tuple[Any, ...], presentation: Any, current: Any) -> dict:
    """The controls' values over the current store (whatever the client sent: the result is
    validated as a whole)."""
    raw = {**(current if isinstance(current, dict) else {}), **dict(zip(CONTROL_KEYS, values))}
    raw["presentation"] = isinstance(presentation, list) and "on" in presentation
    return raw


def _current(scn: Any) -> dict[str, Any]:
    """The store as a valid scenario: the client's own if it validates, else the defaults."""
    clean, _ = validate_scenario(scn)
    return clean if clean is not None else default_scenario()


@callback(
    Output("scenario", "data"), Output("url", "hash"),
    *[Output(f"err-{k}", "children") for k in ERROR_KEYS],
    *[Input(f"ctl-{k}", "value") for k in CONTROL_KEYS], Input("ctl-presentation", "value"),
    State("scenario", "data"), State("hydrated", "data"),
    prevent_initial_call=True,
)
def collect(*args: Any) -> tuple:
    """Validate the controls; store the scenario only when every value is valid."""
    *values, presentation, current, hydrated = args
    scn, errors = validate_scenario(_raw(tuple(values), presentation, current))
    messages = [errors.get(k, "") for k in ERROR_KEYS]
    if scn is None:
        return (no_update, no_update, *messages)
    return (scn, "#" + to_query(scn) if hydrated else no_update, *messages)


@callback(
    *CONTROLS, PRESENTATION, Output("hydrated", "data"),
    Output("applied-presets", "data", allow_duplicate=True), Output("err-_", "children",
                                                                    allow_duplicate=True),
    Input("url", "hash"), State("hydrated", "data"), State("scenario", "data"),
    prevent_initial_call="initial_duplicate",
)
def hydrate(fragment: str, hydrated: bool, current: dict[str, Any]) -> tuple:
    """At page load, fill the controls from the URL (a shared link); ignore later URL writes."""
    if hydrated:
        return (*[no_update] * len(CONTROL_KEYS), no_update, no_update, no_update, no_update)
    raw = from_query(fragment)
    scn, errors = validate_scenario({**_current(current), **raw})
    if scn is None:  # a broken link: keep the defaults and say why
        first = next(iter(errors.items()))
        return (*[no_update] * len(CONTROL_KEYS), no_update, True, no_update,
                f"The link's scenario is invalid ({first[0]}: {first[1]}); showing defaults.")
    presets = {"model": scn["model"], "system": scn["system"]}
    return (*_control_values(scn), ["on"] if scn["presentation"] else [], True, presets, "")


@callback(
    *CONTROLS, Output("applied-presets", "data"),
    Output("err-_", "children", allow_duplicate=True),
    Input("ctl-model", "value"), Input("ctl-system", "value"), Input("reset-model", "n_clicks"),
    Input("reset-system", "n_clicks"), State("applied-presets", "data"),
    State("scenario", "data"), prevent_initial_call=True,
)
def apply_preset(model: Any, system: Any, _m: Any, _s: Any, applied: Any, scn: Any) -> tuple:
    """A newly chosen preset (or a reset) loads its values into its group of controls. Only a
    preset name loads anything (never a file a request names)."""
    trigger = ctx.triggered_id
    applied = applied if isinstance(applied, dict) else {}
    new = _current(scn)
    nothing = (*[no_update] * len(CONTROL_KEYS), no_update, no_update)
    try:
        if trigger in ("ctl-model", "reset-model") and model:
            if trigger == "ctl-model" and model == applied.get("model"):
                return nothing
            new.update(model_values(model))
        elif trigger in ("ctl-system", "reset-system") and system:
            if trigger == "ctl-system" and system == applied.get("system"):
                return nothing
            new.update(system_values(system))
        else:
            return nothing
    except ModelError as exc:
        return (*[no_update] * len(CONTROL_KEYS), no_update, f"Preset refused: {exc}.")
    return (*_control_values(new), {"model": new["model"], "system": new["system"]}, "")


@callback(
    *CONTROLS, PRESENTATION, Output("applied-presets", "data", allow_duplicate=True),
    Output("err-_", "children", allow_duplicate=True),
    Input("scenario-upload", "contents"), prevent_initial_call=True,
)
def upload(contents: str | None) -> tuple:
    """Load an uploaded scenario JSON (validated; a bad file changes nothing and says why)."""
    keep = (*[no_update] * len(CONTROL_KEYS), no_update, no_update)
    if not contents:
        return (*keep, no_update)
    try:
        data = base64.b64decode(contents.split(",", 1)[1], validate=False)
    except (IndexError, ValueError):
        return (*keep, "The upload could not be read.")
    scn, errors = from_json(data)
    if scn is None:
        key, message = next(iter(errors.items()))
        where = "" if key == "_" else f"{key}: "
        return (*keep, f"Upload rejected — {where}{message}")
    presets = {"model": scn["model"], "system": scn["system"]}
    return (*_control_values(scn), ["on"] if scn["presentation"] else [], presets, "")


@callback(Output("scenario-download", "data"),
          Output("err-_", "children", allow_duplicate=True),
          Input("scenario-download-btn", "n_clicks"),
          State("scenario", "data"), prevent_initial_call=True)
@page_callback(1, lambda message: (no_update, message))
def download(_: int, scn: dict[str, Any]) -> tuple:
    """The current scenario (validated again) as a JSON file."""
    return dcc.send_string(to_json(scn), "scenario.json"), ""


@callback(Output("root", "className"), Input("scenario", "data"))
def presentation_class(scn: Any) -> str:
    clean, _ = validate_scenario(scn)
    return "root presentation" if clean and clean["presentation"] else "root"


@callback(Output("url", "hash", allow_duplicate=True), Input("url", "pathname"),
          State("scenario", "data"), State("hydrated", "data"), prevent_initial_call=True)
def keep_fragment(_path: str, scn: Any, hydrated: Any) -> str:
    """Navigation links drop the fragment: put the (valid) scenario back so the link stays
    shareable."""
    clean, _ = validate_scenario(scn)
    return "#" + to_query(clean) if hydrated is True and clean else no_update
