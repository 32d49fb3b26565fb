"""The banner at the top of every page with the control panel: a change the panel refused
(a value out of range, a precision the GPU lacks, a preset or upload refused) leaves the store,
and so every figure, on the last valid scenario; the banner says so, which scenario the figures
still show and why, in view however far the page is scrolled (issue 29, item 4: the only hint
was a note under a control, out of view). Every refusal writes its reason next to its control
(``err-<key>``, :mod:`dashboard.state`) or under the panel (``err-_``); the banner reads them
all, so no refusal can skip it."""

from __future__ import annotations

from typing import Any

from dash import Input, Output, State, callback, html

from dashboard.controls.control_table import BY_KEY
from dashboard.controls.panel import CONTROL_KEYS
from dashboard.controls.scenario import default_scenario, validate_scenario

ERROR_KEYS = (*CONTROL_KEYS, "_")


def banner() -> html.Div:
    """The (empty) banner: the shell puts it above the page."""
    return html.Div(id="refused-banner", className="banner", role="alert")


def shown(scn: dict[str, Any]) -> str:
    """The scenario the figures show, in a few words: 'gpt3-1t on B200 in NVFP4'."""
    return f"{scn['model']} on {str(scn['system']).upper()} in {str(scn['precision']).upper()}"


def banner_text(errors: dict[str, str], scn: Any) -> str:
    """'' without a refusal; else which scenario the figures still show and the first reason
    (with its control's label), and how many more there are."""
    refused = [(key, str(text)) for key, text in errors.items() if text]
    if not refused:
        return ""
    clean, _ = validate_scenario(scn)
    key, reason = refused[0]
    label = f"{BY_KEY[key].label}: " if key in BY_KEY else ""
    more = f" (and {len(refused) - 1} more, marked in the panel)" if len(refused) > 1 else ""
    return (f"Change not applied: the figures still show {shown(clean or default_scenario())}. "
            f"{label}{reason}{more}")


@callback(Output("refused-banner", "children"),
          *[Input(f"err-{key}", "children") for key in ERROR_KEYS],
          State("scenario", "data"))
def refused(*args: Any) -> str:
    """The banner after any control's message changed (arguments: every ``err-<key>``'s
    text, then the stored scenario)."""
    *texts, scn = args
    return banner_text(dict(zip(ERROR_KEYS, (t if isinstance(t, str) else "" for t in texts),
                                strict=True)), scn)
