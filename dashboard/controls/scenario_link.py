"""The scenario as a link: every control's value in a URL query ("layers=128&…", keys in the
control table's order) and back, typed where the text parses (the validator,
:func:`dashboard.controls.scenario.validate_scenario`, reports the rest). A fitted stack travels
compressed under its own key (:func:`dashboard.controls.fitted.to_link`)."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import parse_qsl, urlencode

from dashboard.controls.control_record import Control
from dashboard.controls.control_table import BY_KEY as CONTROL
from dashboard.controls.control_table import CONTROLS
from dashboard.controls.fitted import FITTED_KEY, to_link

KEYS = tuple(c.key for c in CONTROLS)
# keys renamed since links and files were saved, old name → new: still read, deprecated
RENAMED = {"compat": "mode"}


def renamed(raw: dict[str, Any]) -> dict[str, Any]:
    """A saved scenario's keys under their present names (an old file's ``compat`` is
    ``mode``); a key given under both names keeps the present one's value."""
    if not any(old in raw for old in RENAMED):
        return raw
    out = {RENAMED.get(k, k): v for k, v in raw.items() if k not in RENAMED}
    return {**{RENAMED[k]: v for k, v in raw.items() if k in RENAMED}, **out}


def to_query(scn: dict[str, Any]) -> str:
    """The scenario as a URL query ("layers=128&..."), keys in table order. The app puts it in
    the URL's fragment (after #), which Dash's page router does not listen to."""
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return str(v)
    link = to_link(scn[FITTED_KEY]) if scn.get(FITTED_KEY) else None
    return urlencode([(k, text(scn[k])) for k in KEYS]
                     + ([(FITTED_KEY, link)] if link else []))


def from_query(search: str) -> dict[str, Any]:
    """Raw scenario values from a URL query or fragment (typed where the text parses; the
    validator reports the rest). Unknown keys are ignored and renamed keys read under their
    present names (:data:`RENAMED`): old links keep working."""
    raw: dict[str, Any] = {}
    for given, value in parse_qsl((search or "").lstrip("?#"), keep_blank_values=True)[:200]:
        key = RENAMED.get(given, given)
        if key == FITTED_KEY:
            raw[key] = value  # compressed: the validator inflates it, bounded
            continue
        if key not in CONTROL or len(value) > 200:
            continue
        raw[key] = _parse(CONTROL[key], value)
    return raw


def _parse(c: Control, value: str) -> Any:
    if c.kind is bool:
        return value.lower() in ("1", "true", "yes", "on")
    if c.kind in (int, float):
        try:
            number = float(value)
        except ValueError:
            return value  # the validator says it is not a number
        if c.kind is int and math.isfinite(number) and number.is_integer():
            return int(number)
        return number
    return value
