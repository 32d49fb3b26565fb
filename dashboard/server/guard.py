"""The trust boundary: everything a callback receives from the browser is checked here, on the
server, before anything is computed from it.

* :func:`install` checks every ``POST /_dash-update-component`` before Dash reads it: a JSON
  object naming a registered callback, with that callback's outputs, inputs and state (same
  ids, same properties, values of the kind each property holds). Anything else is a 400 and one
  log line — never a 500 and a traceback.
* :func:`page_callback` wraps every callback that reads the ``scenario`` store: the store is
  validated again with the form's own schema
  (:func:`~dashboard.controls.scenario.validate_scenario`); an invalid one, any
  :class:`~model.errors.ModelError` the computation raises (a budget, a search limit) and running
  out of memory become an inline message in the page's status element.
* :func:`bad_request` is what a callback raises for an input of the wrong kind (a 400).
* Every list or store the browser sends back is bounded in items and bytes (:data:`BOUNDS`)
  before anything validates it item by item: a saved-scenarios list of 17,500 copies of one
  entry (960 kB) cost 15–33 s of a worker each, because each copy was validated (issue 29,
  finding 3). Past a bound: 400.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from dash.exceptions import DashException
from flask import Response, request
from werkzeug.exceptions import BadRequest, HTTPException

from dashboard.controls.scenario import validate_scenario
from model import ModelError

log = logging.getLogger(__name__)
MEMORY_MESSAGE = ("This request needs more memory than the server allows a worker: choose fewer "
                  "GPUs, a smaller model or one strategy.")
# what a property can hold as the renderer sends it; every other property: any JSON value
KINDS: dict[str, tuple[type, ...]] = {
    "n_clicks": (int, type(None)), "pathname": (str, type(None)),
    "search": (str, type(None)), "hash": (str, type(None)), "contents": (str, type(None)),
    "selectedRows": (list, type(None)), "rowData": (list, type(None)),
    "figure": (dict, type(None)),
}


# (component id, property) → (most items, most bytes as JSON) of what the browser may send back:
# each store holds at most what the server put there (the page never adds to it itself)
BOUNDS: dict[tuple[str, str], tuple[int, int]] = {
    ("scenarios-saved", "data"): (20, 20 * 16 * 1024),  # controls.saved: MAX_SAVED × a scenario
    ("scenario", "data"): (200, 2 * 16 * 1024),  # its keys; a scenario and its fitted stack
    ("fitted-stack", "data"): (50, 8 * 1024),  # controls.fitted.MAX_FITTED_BYTES
    ("validation-runs-stack", "data"): (50, 8 * 1024),
    ("applied-presets", "data"): (50, 4 * 1024),
    ("design-top", "selectedRows"): (1, 16 * 1024),  # a single-row selection
    ("cd-rows", "data"): (2_000, 512 * 1024),  # a co-design study (its rows bounded again)
    ("scenarios-b", "options"): (21, 8 * 1024),  # the saved names and the panel's
}


def out_of_bounds(cid: Any, prop: str, value: Any) -> str | None:
    """Why ``value`` (what the browser sent for ``cid.prop``) is over its bound, or None."""
    bound = BOUNDS.get((cid, prop)) if isinstance(cid, str) else None
    if bound is None or not isinstance(value, (list, dict, str)):
        return None
    items, size = bound
    if len(value) > items:
        return f"{cid}.{prop} holds {len(value)} items (at most {items})"
    if len(json.dumps(value)) > size:
        return f"{cid}.{prop} is over {size // 1024} kB"
    return None


class InvalidRequest(BadRequest):
    """A request no page of this app sends (400)."""


def bad_request(what: str) -> InvalidRequest:
    """A 400 for ``what``, logged once (one line, no traceback)."""
    log.warning("bad callback request: %s", what)
    return InvalidRequest(what)


# --------------------------------------------------------------------------- scenario


def checked_scenario(raw: Any) -> tuple[dict[str, Any] | None, str]:
    """(the validated scenario, "") or (None, a message naming the first invalid key)."""
    scn, errors = validate_scenario(raw)
    if scn is not None:
        return scn, ""
    key, message = next(iter(errors.items()))
    where = "" if key == "_" else f"{key}: "
    return None, f"The scenario is invalid ({where}{message}); nothing was computed from it."


def page_callback(scenario: int, error: Callable[[str], Any]) -> Callable:
    """Decorator for a callback whose argument ``scenario`` (an index) is the scenario store:
    the function gets the validated scenario; an invalid store, a ModelError or a MemoryError
    returns ``error(message)`` (the callback's outputs with the message shown)."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*args: Any) -> Any:
            scn, message = checked_scenario(args[scenario])
            if scn is None:
                return error(message)
            args = (*args[:scenario], scn, *args[scenario + 1:])
            try:
                return fn(*args)
            except ModelError as exc:
                return error(str(exc))
            except MemoryError:
                log.warning("a request ran out of memory (%s)", fn.__name__)
                return error(MEMORY_MESSAGE)
            except (HTTPException, DashException):
                raise  # a 400 for a request no page sends; PreventUpdate: Dash's own
            except Exception as exc:  # noqa: BLE001 - a bug: an inline message, never a 500
                return error(internal_error(fn.__name__, exc))
        return inner
    return wrap


INTERNAL = ("The server could not compute this view ({what}); it has been logged. Change an "
            "input and try again.")
_logged: set[tuple[str, str]] = set()  # (callback, exception type) with a traceback logged


def internal_error(where: str, exc: Exception) -> str:
    """The inline message for an unexpected exception in callback ``where``: logged in one
    line each time, with its traceback the first time per (callback, kind) and process."""
    key = (where, type(exc).__name__)
    log.error("callback %s failed: %s: %.300s", where, type(exc).__name__, exc,
              exc_info=key not in _logged)
    _logged.add(key)
    return INTERNAL.format(what=type(exc).__name__)


def job_error(error: Callable[[str], Any], what: str) -> Callable[[Exception], Any]:
    """A background callback's ``on_error``: the job was refused (the host's job limit), its
    process died or ran past its deadline: ``error(message)`` in the page, never a 500."""
    def on_error(exc: Exception) -> Any:
        reason = str(exc).removeprefix("An error occurred inside a background callback: ")
        reason = reason.strip().splitlines()[0] if reason.strip() else type(exc).__name__
        return error(f"{what} failed: {reason}")
    return on_error


# --------------------------------------------------------------------------- requests


def install(app) -> None:
    """Check every callback request of ``app`` before Dash dispatches it."""
    @app.server.before_request
    def check_callback_request() -> Response | None:
        if request.method != "POST" or not request.path.endswith("/_dash-update-component"):
            return None
        try:
            body = request.get_json(silent=True)
        except RecursionError:  # json's C scanner refuses to nest past the recursion limit
            body = DEEP
        problem = "the body is nested too deeply" if body is DEEP or too_deep(body) else \
            malformed(body, app.callback_map)
        if problem is None:
            return None
        log.warning("bad callback request: %s", problem)
        return Response(f"Bad request: {problem}\n", status=400, mimetype="text/plain")


DEEP = object()  # a body too deeply nested to parse
MAX_DEPTH = 64  # JSON nesting of a request (a figure sent for export nests about 8 deep)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists/objects deeper than ``limit`` (an iterative walk: a
    recursive one is what such a body attacks)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def malformed(body: Any, callbacks: dict[str, dict]) -> str | None:
    """What is wrong with a callback request body, or None."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    spec = body.get("output")
    if not isinstance(spec, str) or "callback" not in callbacks.get(spec, {}):
        return "no such callback"  # nor a clientside one (it has no server function)
    known = callbacks[spec]
    problem = _outputs(body.get("outputs"), spec)
    for part in ("inputs", "state"):
        if problem is None:
            problem = _items(body.get(part, [] if part == "state" else None),
                             known.get(part, []), part)
    changed = body.get("changedPropIds", [])
    if problem is None and not (isinstance(changed, list)
                                and all(isinstance(c, str) for c in changed)):
        problem = "changedPropIds is not a list of strings"
    return problem


def _outputs(outputs: Any, spec: str) -> str | None:
    count = len(spec[2:-2].split("...")) if spec.startswith("..") else 1
    items = outputs if spec.startswith("..") else [outputs]
    if not isinstance(items, list) or len(items) != count:
        return "the outputs do not match the callback"
    for item in items:
        for one in (item if isinstance(item, list) else [item]):
            if not (isinstance(one, dict) and isinstance(one.get("property"), str)
                    and isinstance(one.get("id"), (str, dict))):
                return "an output is not an {id, property} object"
    return None


def _items(items: Any, known: list[dict], part: str) -> str | None:
    """The request's inputs or state against the callback's registered ones."""
    if not isinstance(items, list) or len(items) != len(known):
        return f"the {part} do not match the callback"
    for item, registered in zip(items, known):
        rid = json.loads(registered["id"]) if registered["id"].startswith("{") else \
            registered["id"]
        wildcard_all = isinstance(rid, dict) and ["ALL"] in rid.values()
        group = item if wildcard_all and isinstance(item, list) else [item]
        if isinstance(item, list) and not wildcard_all:
            return f"{part}: a list where one value is expected"
        for one in group:
            problem = _item(one, rid, registered["property"], part)
            if problem:
                return problem
    return None


def _item(item: Any, rid: Any, prop: str, part: str) -> str | None:
    if not isinstance(item, dict) or item.get("property") != prop:
        return f"{part}: not the callback's {prop}"
    cid = item.get("id")
    if isinstance(rid, dict):
        if not (isinstance(cid, dict) and set(cid) == set(rid) and all(
                cid[k] == v for k, v in rid.items() if not isinstance(v, list))):
            return f"{part}: not the callback's component"
    elif cid != rid:
        return f"{part}: not the callback's component"
    value = item.get("value")
    kinds = KINDS.get(prop)
    if kinds and (not isinstance(value, kinds) or isinstance(value, bool)):
        return f"{part}: {prop} of the wrong kind ({type(value).__name__})"
    if prop == "pathname" and isinstance(value, str) and not value.startswith("/"):
        return f"{part}: a pathname that is not absolute"  # what a browser's location holds
    return out_of_bounds(cid, prop, value)
