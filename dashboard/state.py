"""Callbacks that turn the controls into the validated scenario store, and back; all generated
from the control table (:mod:`dashboard.controls.control_table`).

* controls → scenario: validate every value; show each error next to its control; a bad value
  leaves the store (and so every view) as it was, and nothing the user typed is reset.
* URL ↔ scenario: the fragment (#…) is read once at page load and rewritten on every valid
  change, so a copied link reproduces the view; a partial link takes what it does not say from
  the presets it names.
* presets, reset buttons, scenario upload → controls; scenario download.
* a slider control's number box and slider, and a batch's sequences and tokens, kept in step.
* conditional rows and sections shown, hidden, opened or collapsed as the values they depend on
  change (as typed, so a value being fixed never hides its own box).
"""

from __future__ import annotations

import base64
from typing import Any

from dash import Input, Output, State, callback, ctx, dcc, no_update

from dashboard.controls.control_moe import SECTIONS
from dashboard.controls.control_record import Control
from dashboard.controls.control_table import CONTROLS
from dashboard.controls.fitted import FITTED, FITTED_KEY, check_fitted, stack_note, stack_options
from dashboard.controls.hf_upload import hf_config_of, scenario_from_hf
from dashboard.controls.inputs import batch_from_tokens
from dashboard.controls.panel import (
    CONDITIONAL,
    CONTROL_KEYS,
    HEADER,
    OPENING,
    PANEL,
    from_widget,
    row_style,
    section_open,
    slider_position,
    to_widget,
)
from dashboard.controls.presets import PRESET_OF, fitted_values, preset_values
from dashboard.controls.scenario import (
    default_scenario,
    from_json,
    to_json,
    validate_scenario,
    with_presets,
)
from dashboard.controls.scenario_link import from_query, to_query
from dashboard.controls.strategy_choice import (
    stack_record,
    strategy_options,
    with_run_strategies,
    with_supported_strategies,
)
from dashboard.controls.uploads import checked_json_name
from dashboard.server.guard import page_callback
from dashboard.views import notes
from model import ModelError

ERROR_KEYS = (*CONTROL_KEYS, "_")
CONTROLS_OUT = [Output(f"ctl-{c.key}", "value", allow_duplicate=True) for c in PANEL]
HEADER_OUT = [Output(f"ctl-{c.key}", "value", allow_duplicate=True) for c in HEADER]
PRESETS = tuple(PRESET_OF.values())  # the preset controls, in table order
KEEP_CONTROLS = (no_update,) * len(PANEL)
KEEP_HEADER = (no_update,) * len(HEADER)
# the session's fitted stack (dashboard/controls/fitted.py) and the stack control's options
FITTED_OUT = [Output("fitted-stack", "data", allow_duplicate=True),
              Output("ctl-stack", "options", allow_duplicate=True)]
KEEP_FITTED = (no_update, no_update)


def _fitted_out(scn: dict[str, Any]) -> tuple:
    """The fitted-stack store and the stack control's options for a scenario that holds a
    fitted stack (else both kept: a link or file without one leaves the session's fit)."""
    fitted = scn.get(FITTED_KEY)
    return (fitted, stack_options(fitted)) if fitted else KEEP_FITTED


def _control_values(scn: dict[str, Any]) -> list[Any]:
    return [scn[c.key] for c in PANEL]


def _header_values(scn: dict[str, Any]) -> list[Any]:
    return [to_widget(c, scn[c.key]) for c in HEADER]


def _applied(scn: dict[str, Any]) -> dict[str, Any]:
    """The presets a scenario's values come from (a preset's control applies a newly chosen
    preset only: not the one already applied)."""
    return {p.key: scn[p.key] for p in PRESETS}


def _raw(values: tuple[Any, ...], current: Any, fitted: Any = None) -> dict:
    """The controls' values and the session's fitted stack over the current store (whatever
    the client sent: the result is validated as a whole)."""
    widgets = (*PANEL, *HEADER)
    raw = {**_current(current), **{c.key: from_widget(c, v) for c, v in zip(widgets, values)}}
    raw.pop(FITTED_KEY, None)
    return {**raw, FITTED_KEY: fitted} if fitted is not None else raw


def _current(scn: Any) -> dict[str, Any]:
    """The store as a valid scenario: the client's own if it validates, else the defaults."""
    clean, _ = validate_scenario(scn)
    return clean if clean is not None else default_scenario()


@callback(
    Output("scenario", "data"), Output("url", "hash"),
    *[Output(f"err-{k}", "children") for k in ERROR_KEYS],
    *[Input(f"ctl-{c.key}", "value") for c in (*PANEL, *HEADER)],
    State("scenario", "data"), State("hydrated", "data"), State("applied-presets", "data"),
    Input("fitted-stack", "data"), prevent_initial_call=True,
)
def collect(*args: Any) -> tuple:
    """Validate the controls; store the scenario only when every value is valid.

    Arguments: the panel's values (CONTROL_KEYS), the header's (presentation), the stored
    scenario, whether the URL was read, the presets applied, the session's fitted stack."""
    *values, current, hydrated, applied, fitted = args
    raw = _raw(tuple(values), current, fitted)
    if _preset_pending(raw, applied):
        return (no_update, no_update, *([no_update] * len(ERROR_KEYS)))
    scn, errors = _validated(raw)
    messages = [errors.get(k, "") for k in ERROR_KEYS]
    if scn is None:
        return (no_update, no_update, *messages)
    return (scn, "#" + to_query(scn) if hydrated else no_update, *messages)


def _validated(raw: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """:func:`validate_scenario`, except that a refused fitted stack (a store changed in the
    browser) the scenario does not use leaves the scenario computing without it: its refusal
    stays under the stack control, and the presets keep working."""
    scn, errors = validate_scenario(raw)
    if scn is not None or set(errors) != {"stack"} or raw.get("stack") == FITTED or \
            raw.get(FITTED_KEY) is None:
        return scn, errors
    scn, _ = validate_scenario({k: v for k, v in raw.items() if k != FITTED_KEY})
    return scn, {"stack": f"{errors['stack']} (not used)"}


def _preset_pending(raw: dict[str, Any], applied: dict[str, Any] | None) -> bool:
    """Whether a newly chosen preset is all that changed: its values are on their way
    (:func:`apply_preset`), and its name with the previous preset's values is no scenario to
    compute (a B200 named with H200's figures, DeepSeek-V3 with GPT-3's sizes)."""
    triggered = {str(t["prop_id"]).split(".")[0] for t in ctx.triggered or []}
    applied = applied if isinstance(applied, dict) else {}  # a store comes from the browser
    chosen = {f"ctl-{p.key}" for p in PRESETS if raw.get(p.key) != applied.get(p.key)}
    return bool(triggered) and triggered <= chosen


@callback(
    *CONTROLS_OUT, *HEADER_OUT, Output("hydrated", "data"),
    Output("applied-presets", "data", allow_duplicate=True), *FITTED_OUT,
    Output("err-_", "children", allow_duplicate=True),
    Input("url", "hash"), State("hydrated", "data"), State("scenario", "data"),
    prevent_initial_call="initial_duplicate",
)
def hydrate(fragment: str, hydrated: bool, current: dict[str, Any]) -> tuple:
    """At page load, and whenever the URL's fragment changes to another scenario (a shared
    link pasted into a tab already showing the app: the browser only fires ``popstate``), fill
    the controls from the URL; the app's own URL writes (the store's scenario) change nothing.
    Fields the link does not give come from the presets it names (``#system=h100``: H100's
    HBM), the others from the defaults."""
    raw = from_query(fragment)
    if raw and FITTED_KEY not in raw and _current(current).get(FITTED_KEY):
        raw[FITTED_KEY] = _current(current)[FITTED_KEY]  # a link too short to carry it
    if hydrated and (not raw or validate_scenario(with_presets(raw))[0] == _current(current)):
        return (*KEEP_CONTROLS, *KEEP_HEADER, no_update, no_update, *KEEP_FITTED, no_update)
    scn, errors = validate_scenario(with_presets(raw)) if raw else (_current(current), {})
    if scn is None:  # a broken link: keep the defaults and say why
        key, message = next(iter(errors.items()))
        where = "" if key == "_" else f"{key}: "
        return (*KEEP_CONTROLS, *KEEP_HEADER, True, no_update, *KEEP_FITTED,
                f"The link's scenario is invalid ({where}{message}); showing defaults.")
    scn, note = with_run_strategies(scn)
    return (*_control_values(scn), *_header_values(scn), True, _applied(scn),
            *_fitted_out(scn), f"From the link: {note}" if note else "")


@callback(
    *CONTROLS_OUT, Output("applied-presets", "data"),
    Output("err-_", "children", allow_duplicate=True),
    *[Input(f"ctl-{p.key}", "value") for p in PRESETS],
    *[Input(f"reset-{p.group}", "n_clicks") for p in PRESETS],
    State("applied-presets", "data"), State("scenario", "data"), State("fitted-stack", "data"),
    prevent_initial_call=True,
)
def apply_preset(*args: Any) -> tuple:
    """A newly chosen preset (or a reset) loads its values into its group of controls. Only a
    preset name loads anything (never a file a request names); the stack control's "fitted"
    loads the session's fitted stack's, checked again.

    Arguments: each preset control's value, each reset button's clicks, the presets applied,
    the stored scenario, the session's fitted stack."""
    names = dict(zip((p.key for p in PRESETS), args[:len(PRESETS)]))
    applied, scn, fitted = args[-3], args[-2], args[-1]
    applied = applied if isinstance(applied, dict) else {}
    trigger = str(ctx.triggered_id or "")
    preset = next((p for p in PRESETS if trigger in (f"ctl-{p.key}", f"reset-{p.group}")), None)
    if preset is None or not names[preset.key]:
        return (*KEEP_CONTROLS, no_update, no_update)
    name = names[preset.key]
    if trigger == f"ctl-{preset.key}" and name == applied.get(preset.key):
        return (*KEEP_CONTROLS, no_update, no_update)
    try:
        new = with_supported_strategies({**_current(scn), **_preset_or_fitted(
            preset.group, name, fitted)})
    except ModelError as exc:
        return (*KEEP_CONTROLS, no_update, f"Preset refused: {exc}.")
    return (*_control_values(new), _applied(new), "")


def _preset_or_fitted(group: str, name: str, fitted: Any) -> dict[str, Any]:
    """The values a preset, or the session's fitted stack (the stack control's "fitted"),
    gives its group; ModelError when the fitted stack is missing or refused."""
    if group != "execution" or name != FITTED:
        return preset_values(group, name)
    clean, message = check_fitted(fitted)
    if clean is None:
        raise ModelError(message or "no fitted stack in this session: fit your runs on the "
                                    "Validation page and apply it")
    return fitted_values(clean)


@callback(
    *CONTROLS_OUT, *HEADER_OUT, Output("applied-presets", "data", allow_duplicate=True),
    *FITTED_OUT, Output("err-_", "children", allow_duplicate=True),
    Input("scenario-upload", "contents"), State("scenario", "data"),
    State("scenario-upload", "filename"), prevent_initial_call=True,
)
def upload(contents: str | None, current: Any = None, filename: Any = None) -> tuple:
    """Load an uploaded scenario JSON, or a Hugging Face config.json into the model controls
    (:mod:`dashboard.controls.hf_upload`); validated: a bad file changes nothing and says why
    (a file not named .json too: the browser no longer filters it out without a word)."""
    keep = (*KEEP_CONTROLS, *KEEP_HEADER, no_update, *KEEP_FITTED)
    if not contents:
        return (*keep, no_update)
    try:
        checked_json_name(filename)
    except ModelError as exc:
        return (*keep, f"Upload rejected — {str(filename)[:80]}: {exc}. The controls are as "
                       "before.")
    try:
        data = base64.b64decode(contents.split(",", 1)[1], validate=False)
    except (IndexError, ValueError):
        return (*keep, "The upload could not be read.")
    config = hf_config_of(data)
    if config is not None:
        scn, note = scenario_from_hf(config, _current(current))
        if scn is None:
            return (*keep, note)
        return (*_control_values(scn), *_header_values(scn), _applied(scn), *KEEP_FITTED, note)
    scn, errors = from_json(data)
    if scn is None:
        key, message = next(iter(errors.items()))
        where = "" if key == "_" else f"{key}: "
        return (*keep, f"Upload rejected — {where}{message}")
    scn, note = with_run_strategies(scn)
    return (*_control_values(scn), *_header_values(scn), _applied(scn), *_fitted_out(scn),
            f"From the file: {note}" if note else "")


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


# --------------------------------------------------------------------------- linked widgets


def slider_sync(c: Control, from_slider: bool, box: Any, slider: Any) -> tuple[Any, Any]:
    """(box, slider) after one of them changed. The box holds the value: a typed value is kept
    as typed and the slider moves to it (clamped to its range: only the slider is); a slider
    move sets the box, unless it is the slider's echo of the box (within half a step)."""
    position = slider_position(c, box)
    if not from_slider:
        return no_update, (position if position is not None else no_update)
    if slider is None or (position is not None and abs(slider - position) <= c.slider[2] / 2):
        return no_update, no_update
    return slider, no_update


def tokens_sync(c: Control, from_tokens: bool, tokens: Any, value: Any, per: Any
                ) -> tuple[Any, Any, Any]:
    """(tokens box, control value, control message) after the tokens box, the control or the
    key it is multiplied by changed: tokens typed set the control when they are a whole number
    of sequences, else say why; a changed control (or sequence length) updates the tokens."""
    if from_tokens:
        sequences, message = batch_from_tokens(tokens, per)
        if message:
            return no_update, no_update, message
        return no_update, sequences, ""
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (value, per))
    return (value * per if numbers else no_update), no_update, no_update


def _register_slider(c: Control) -> None:
    @callback(Output(f"ctl-{c.key}", "value", allow_duplicate=True),
              Output(f"sld-{c.key}", "value"),
              Input(f"ctl-{c.key}", "value"), Input(f"sld-{c.key}", "value"),
              prevent_initial_call=True)
    def sync(box: Any, slider: Any) -> tuple[Any, Any]:
        return slider_sync(c, ctx.triggered_id == f"sld-{c.key}", box, slider)


def _register_tokens(c: Control) -> None:
    @callback(Output(f"tok-{c.key}", "value"),
              Output(f"ctl-{c.key}", "value", allow_duplicate=True),
              Output(f"err-{c.key}", "children", allow_duplicate=True),
              Input(f"tok-{c.key}", "value"), Input(f"ctl-{c.key}", "value"),
              Input(f"ctl-{c.per_token}", "value"), prevent_initial_call=True)
    def sync(tokens: Any, value: Any, per: Any) -> tuple[Any, Any, Any]:
        return tokens_sync(c, ctx.triggered_id == f"tok-{c.key}", tokens, value, per)


for _control in CONTROLS:
    if _control.widget == "slider":
        _register_slider(_control)
    if _control.per_token:
        _register_tokens(_control)


# the controls whose values decide which rows show and which sections open
DEPENDS = tuple(dict.fromkeys(
    [c.when.key for c in CONDITIONAL]
    + [w.key for name, (_, w) in SECTIONS.items() if name in OPENING and w is not None]))


def visibility(values: dict[str, Any]) -> tuple[list[dict[str, str]], list[bool]]:
    """(style of each conditional row, whether each opening section is open) for the values."""
    return ([row_style(c, values) for c in CONDITIONAL],
            [section_open(name, values) for name in OPENING])


@callback(*[Output(f"row-{c.key}", "style") for c in CONDITIONAL],
          *[Output(f"section-{name}", "open") for name in OPENING],
          *[Input(f"ctl-{key}", "value") for key in DEPENDS])
def show_relevant(*values: Any) -> tuple:
    """A dense model hides its MoE sizes and collapses the MoE sections; the attention type
    shows the KV heads (GQA) or the MLA ranks; ZeRO-3 shows and opens the FSDP options."""
    styles, opened = visibility(dict(zip(DEPENDS, values)))
    return (*styles, *opened)


@callback(Output("note-stack", "children"), Input("scenario", "data"))
def fitted_note(scn: Any) -> str:
    """Under the stack control: the session's fitted stack, and whether the link carries it."""
    return stack_note(_current(scn))


@callback(Output("note-global_batch", "children"), Input("scenario", "data"))
def batch_note(scn: Any) -> Any:
    """The global batch in both units, where the preset's comes from, and a warning past the
    critical batch (of the store validated again)."""
    return notes.batch_note(_current(scn))


@callback(Output("ctl-strategy", "options"), Output("ctl-design_strategy", "options"),
          Input("ctl-stack", "value"), Input("ctl-mode", "value"),
          Input("fitted-stack", "data"))
def strategies_offered(stack: Any, mode: Any, fitted: Any) -> tuple[list, list]:
    """The Strategy and Design strategy controls offer only what the software stack runs
    (:mod:`model.engine.layouts`: llm-foundry on FSDP, data parallelism only, gets 1D alone);
    the scenario's value follows when a preset is applied (:func:`with_supported_strategies`)."""
    return strategy_options(stack_record(stack, mode, fitted))
