"""The control panel, built from the control table (:mod:`dashboard.controls.control_table`): every
scenario input, grouped, with its label, unit, a tooltip and a slot for its error message.

Component ids: ``ctl-<key>`` (the control's value), ``err-<key>`` (its message), ``sld-<key>``
(the slider beside a slider control's number box), ``tok-<key>`` (the box that shows and sets a
``per_token`` control in tokens), ``note-<key>`` (a line under the control), ``row-<key>`` (the
whole row, hidden while the control's condition does not hold), ``section-<name>`` (a
collapsible section of a group), ``reset-<group>`` (reload a group's preset), so callbacks
address them by key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dash import dcc, html

from dashboard.controls.control_moe import SECTIONS
from dashboard.controls.control_record import Control
from dashboard.controls.control_table import CONTROLS, GROUPS
from dashboard.controls.scenario import MAX_SCENARIO_BYTES
from dashboard.controls.uploads import guarded_upload

# the controls of the panel, in order (the header's are built by dashboard.layout)
PANEL: tuple[Control, ...] = tuple(c for c in CONTROLS if c.group != "header")
CONTROL_KEYS = tuple(c.key for c in PANEL)
HEADER: tuple[Control, ...] = tuple(c for c in CONTROLS if c.group == "header")
CONDITIONAL: tuple[Control, ...] = tuple(c for c in PANEL if c.when is not None)
OPENING = tuple(name for name, (_, when) in SECTIONS.items() if when is not None)
HIDDEN = {"display": "none"}


def _number(c: Control, value: Any) -> Any:
    # no min, max or step on the element: the browser would report a value outside them as
    # empty (Dash sends None), and the validator must say what is wrong with it instead
    return dcc.Input(id=f"ctl-{c.key}", type="number", value=value, step="any", debounce=True,
                     list=f"list-{c.key}" if c.suggest else None, className="ctl-input",
                     inputMode="decimal")


def slider_position(c: Control, value: Any) -> Any:
    """Where a slider control's slider sits for ``value``: the value, clamped to the slider's
    range (the value itself is never clamped); None for a value that is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    low, high = c.slider[0], c.slider[1]
    return min(max(value, low), high)


def _slider(c: Control, value: Any) -> Any:
    low, high, step, marks = c.slider
    return html.Div(className="ctl-slider", children=[
        _number(c, value),
        dcc.Slider(id=f"sld-{c.key}", min=low, max=high, step=step,
                   value=slider_position(c, value), marks={m: str(m) for m in marks},
                   allow_direct_input=False, updatemode="mouseup", tooltip=None,
                   className="ctl-slider-track"),
    ])


def _dropdown(c: Control, value: Any) -> Any:
    return dcc.Dropdown(id=f"ctl-{c.key}", options=c.options(), value=value, clearable=False)


def _radio(c: Control, value: Any) -> Any:
    return dcc.RadioItems(id=f"ctl-{c.key}", options=c.options(), value=value, inline=True)


def _checkbox(c: Control, value: Any) -> Any:
    return dcc.Checklist(id=f"ctl-{c.key}", className=f"{c.key}-toggle", value=to_widget(c, value),
                         options=[{"label": f" {c.label.lower()}", "value": "on"}])


BUILDERS: dict[str, Callable[[Control, Any], Any]] = {
    "number": _number, "slider": _slider, "dropdown": _dropdown, "radio": _radio,
    "switch": _radio, "checkbox": _checkbox,
}


def to_widget(c: Control, value: Any) -> Any:
    """A scenario value as its widget holds it (a checkbox holds a list)."""
    return (["on"] if value else []) if c.widget == "checkbox" else value


def from_widget(c: Control, value: Any) -> Any:
    """A widget's value as the scenario holds it (a checkbox's list as a bool; anything else a
    client sends for it is passed on as it is, for the scenario's validation to refuse)."""
    if c.widget != "checkbox":
        return value
    if value is None or isinstance(value, list):
        return "on" in (value or [])
    return value


def widget(c: Control, value: Any) -> Any:
    """The component that edits control ``c``, showing scenario value ``value``."""
    return BUILDERS[c.widget](c, value)


def tokens_box(c: Control, scn: dict[str, Any]) -> Any:
    """The number box of a ``per_token`` control in tokens (value × the other key)."""
    value = scn[c.key] * scn[c.per_token]
    return html.Label(className="ctl-alt", children=[
        f"{c.label} (tokens)",
        dcc.Input(id=f"tok-{c.key}", type="number", value=value, step="any", debounce=True,
                  className="ctl-input", inputMode="numeric"),
    ])


def _row(c: Control, scn: dict[str, Any]) -> html.Div:
    parts = [
        html.Label([c.title, html.Span(" ?", className="tip", title=c.tip)],
                   htmlFor=f"ctl-{c.key}", title=c.tip),
        widget(c, scn[c.key]),
    ]
    if c.per_token:
        parts.append(tokens_box(c, scn))
    parts += [html.Div(id=f"err-{c.key}", className="ctl-error", role="alert"),
              html.Div(id=f"note-{c.key}", className="ctl-note")]
    return html.Div(id=f"row-{c.key}", className="ctl-row", children=parts,
                    style=row_style(c, scn))


def row_style(c: Control, values: dict[str, Any]) -> dict[str, str]:
    """A row's style: hidden while its control's condition does not hold."""
    return {} if c.applies(values) else HIDDEN


def section_open(name: str, values: dict[str, Any]) -> bool:
    """Whether section ``name`` is drawn open (a dense model's MoE sections: collapsed)."""
    when = SECTIONS[name][1]
    return when is None or when.holds(values)


def _rows(group: str, controls: Sequence[Control], scn: dict[str, Any]) -> list[Any]:
    """The group's rows, those of a section together in a collapsible block where the
    section's first control is."""
    rows: list[Any] = []
    done: set[str] = set()
    for c in controls:
        if c.group != group or c.section in done:
            continue
        if not c.section:
            rows.append(_row(c, scn))
            continue
        done.add(c.section)
        members = [m for m in controls if m.group == group and m.section == c.section]
        rows.append(html.Details(
            id=f"section-{c.section}", open=section_open(c.section, scn),
            className="ctl-section",
            children=[html.Summary(SECTIONS[c.section][0]), *[_row(m, scn) for m in members]]))
    return rows


def _group(group: str, controls: Sequence[Control], scn: dict[str, Any]) -> Any:
    rows = _rows(group, controls, scn)
    if any(c.preset for c in controls if c.group == group):
        rows.append(html.Button(f"Reset {GROUPS[group].lower()} to preset",
                                id=f"reset-{group}", className="btn-link"))
    return html.Details(open=True, className="ctl-group", children=[
        html.Summary(GROUPS[group]), *rows])


def panel(scn: dict[str, Any], controls: Sequence[Control] = PANEL) -> html.Div:
    """The whole control panel, filled with scenario ``scn`` (``controls``: the table's panel
    controls; any table of records builds)."""
    groups = list(dict.fromkeys(c.group for c in controls))
    return html.Div(id="controls", className="controls", children=[
        *[html.Datalist(id=f"list-{c.key}", children=[html.Option(value=v) for v in c.suggest])
          for c in controls if c.suggest],
        *[_group(g, controls, scn) for g in groups],
        html.Div(id="err-_", className="ctl-error", role="alert"),
        html.Div(className="scenario-io", children=[
            html.Button("Download scenario (JSON)", id="scenario-download-btn"),
            dcc.Download(id="scenario-download"),
            guarded_upload("scenario-upload", html.Button(
                "Upload scenario or config.json", title="A scenario JSON saved here, or a "
                "Hugging Face config.json (fills the model)"), MAX_SCENARIO_BYTES, "err-_",
                "Upload rejected", "The controls are as before."),
        ]),
    ])
