"""Named scenarios: the list kept in the browser (a ``dcc.Store`` in local storage) and its file.

The list is ``[{"name": str, "scenario": {...}}, …]``, at most :data:`MAX_SAVED` entries, names
of at most :data:`MAX_NAME` printable characters. Everything that comes back from the browser or
from a file is checked here: each scenario with the control panel's own schema
(:func:`dashboard.controls.scenario.validate_scenario`, what an older file does not say taken from
its presets, :func:`~dashboard.controls.scenario.with_presets`), the file size-limited before it is
parsed, JSON only. The file is ``{"scenarios": [...]}`` (what :func:`to_file` writes); a single
scenario (the panel's "Download scenario") is taken too, named after its file. Nothing names a
server path: the file's name only suggests a scenario's name.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePath
from typing import Any

from dashboard.controls.fitted import FITTED, FITTED_KEY
from dashboard.controls.scenario import MAX_SCENARIO_BYTES, validate_scenario, with_presets
from dashboard.controls.scenario_link import KEYS
from model import ModelError
from model.specs import strict_json

MAX_SAVED = 20
MAX_NAME = 60
MAX_FILE_BYTES = MAX_SAVED * MAX_SCENARIO_BYTES  # 320 KB: twenty scenarios of the largest kind
CURRENT = "__current__"  # the compare pickers' value for the control panel's scenario
_NAME = re.compile(r"^[^\x00-\x1f\x7f]+$")


def clean_name(name: Any) -> str:
    """A scenario's name, stripped; ModelError (in the user's words) when it is unusable."""
    if not isinstance(name, str) or not name.strip():
        raise ModelError("give the scenario a name")
    name = name.strip()
    if len(name) > MAX_NAME:
        raise ModelError(f"a scenario's name is at most {MAX_NAME} characters")
    if not _NAME.match(name) or name == CURRENT:
        raise ModelError("a scenario's name must be printable text")
    return name


def _checked(raw: Any) -> dict[str, Any] | None:
    """A stored scenario validated again (None when it no longer is one)."""
    if not isinstance(raw, dict):
        return None
    scn, _ = validate_scenario(with_presets(raw))
    return scn


def entries(raw: Any) -> list[dict[str, Any]]:
    """The store's list as the server may use it: entries that are still valid scenarios with
    a usable name, the first :data:`MAX_SAVED`, each name once (the first wins)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    # at most MAX_SAVED items are looked at, each name once, before any is validated (17,500
    # copies of one entry were each validated: 15–33 s of a worker, issue 29 finding 3)
    for item in raw[:MAX_SAVED] if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            name = clean_name(item.get("name"))
        except ModelError:
            continue
        if name in seen:
            continue
        scn = _checked(item.get("scenario"))
        if scn is not None:
            seen.add(name)
            out.append({"name": name, "scenario": scn})
    return out


def names(saved: list[dict[str, Any]]) -> list[str]:
    return [e["name"] for e in saved]


def find(saved: list[dict[str, Any]], name: Any) -> dict[str, Any]:
    """The scenario saved under ``name`` (ModelError when there is none)."""
    for e in saved:
        if e["name"] == name:
            return e["scenario"]
    raise ModelError(f"no scenario named '{str(name)[:MAX_NAME]}' is saved in this browser")


def save(saved: list[dict[str, Any]], name: Any, scn: dict[str, Any]) -> list[dict[str, Any]]:
    """The list with ``scn`` under ``name`` (replacing one of the same name, else last)."""
    name = clean_name(name)
    rest = [e for e in saved if e["name"] != name]
    if len(rest) >= MAX_SAVED:
        raise ModelError(f"at most {MAX_SAVED} scenarios are kept: delete one first")
    kept = {k: scn[k] for k in KEYS}
    if scn.get("stack") == FITTED:  # the session's fitted stack travels with a scenario using it
        kept[FITTED_KEY] = scn[FITTED_KEY]
    if len(rest) < len(saved):  # same place as the one replaced
        return [({"name": name, "scenario": kept} if e["name"] == name else e) for e in saved]
    return [*saved, {"name": name, "scenario": kept}]


def delete(saved: list[dict[str, Any]], name: Any) -> list[dict[str, Any]]:
    find(saved, name)
    return [e for e in saved if e["name"] != name]


def to_file(saved: list[dict[str, Any]]) -> str:
    """The list as the JSON file the page downloads."""
    return json.dumps({"scenarios": saved}, indent=1)


def _stem(filename: Any) -> str:
    stem = PurePath(str(filename or "scenario")).stem[:MAX_NAME].strip()
    try:
        return clean_name(stem)
    except ModelError:
        return "uploaded scenario"


def from_file(data: bytes, filename: Any = None) -> list[dict[str, Any]]:
    """The named scenarios of an uploaded file (ModelError naming the first problem)."""
    if len(data) > MAX_FILE_BYTES:
        raise ModelError(f"the file is larger than {MAX_FILE_BYTES // 1024} KB")
    # numbers checked as parsed: NaN, Infinity, 1e308, 5,000 digits refused in words
    doc = strict_json.loads(data, "the file")
    if isinstance(doc, dict) and "scenarios" not in doc:
        doc = {"scenarios": [{"name": _stem(filename), "scenario": doc}]}
    items = doc.get("scenarios") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise ModelError('expected {"scenarios": [{"name": …, "scenario": {…}}, …]} or one '
                         "scenario")
    if len(items) > MAX_SAVED:
        raise ModelError(f"the file holds {len(items)} scenarios; at most {MAX_SAVED} are kept")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise ModelError(f"scenario {i} is not an object with a name and a scenario")
        name = clean_name(item.get("name"))
        raw = item.get("scenario")
        scn, errors = validate_scenario(with_presets(raw) if isinstance(raw, dict) else raw)
        if scn is None:
            key, message = next(iter(errors.items()))
            where = "" if key == "_" else f"{key}: "
            raise ModelError(f"scenario '{name}': {where}{message}")
        out = [e for e in out if e["name"] != name] + [{"name": name, "scenario": scn}]
    return out


def merged(saved: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``saved`` with ``new`` added (a name already saved is replaced in place)."""
    out = list(saved)
    for e in new:
        out = save(out, e["name"], e["scenario"])
    return out
