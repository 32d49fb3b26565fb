"""Callback requests as the browser's renderer sends them, for tests that attack the server.

:class:`Callbacks` reads ``/_dash-dependencies`` of a Flask test client (or of a server over
HTTP) and builds the body of ``POST /_dash-update-component`` for any callback: its real output
spec, its outputs, inputs and state with the values given by component id — pattern-matching ids
filled in (``MATCH`` with one name, ``ALL`` with several) — and, for background callbacks, polls
the job as the renderer does until it answers.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

Values = dict[str, Any]


def parse_id(text: str) -> Any:
    return json.loads(text) if text.startswith("{") else text


def id_text(cid: Any) -> str:
    """A component id as the renderer writes it in ``changedPropIds``."""
    return json.dumps(cid, sort_keys=True, separators=(",", ":")) if isinstance(cid, dict) \
        else cid


def _key(cid: Any) -> str:
    """The key of ``values`` for an id: the id itself, or a pattern id's ``type``."""
    return cid["type"] if isinstance(cid, dict) else cid


def _concrete(cid: Any, match: Values, every: dict[str, list]) -> Any:
    """A pattern id with ``MATCH`` replaced by ``match``'s value; ``ALL`` gives a list of ids."""
    if not isinstance(cid, dict):
        return cid
    fixed = {k: (match[k] if v == ["MATCH"] else v) for k, v in cid.items()}
    wild = [k for k, v in fixed.items() if v == ["ALL"]]
    if not wild:
        return fixed
    (name,) = wild
    return [{**fixed, name: value} for value in every[name]]


class Callbacks:
    """The app's callbacks; ``post(body)`` is given (test client or HTTP)."""

    def __init__(self, deps: list[dict], post: Callable[[bytes, str], tuple[int, str]],
                 end_id: str | None = None):
        self.deps = [d for d in deps if not d.get("clientside_function")]
        self._post = post
        self.end_id = end_id

    @classmethod
    def of_client(cls, client) -> Callbacks:
        page = client.get("/").get_data(as_text=True)
        config = re.search(r'<script id="_dash-config" type="application/json">(.*?)</script>',
                           page, re.S)
        end_id = json.loads(config.group(1)).get("end_id") if config else None

        def post(data: bytes, query: str) -> tuple[int, str]:
            res = client.post("/_dash-update-component" + query, data=data,
                              content_type="application/json")
            return res.status_code, res.get_data(as_text=True)
        return cls(client.get("/_dash-dependencies").get_json(), post, end_id)

    def find(self, output_part: str) -> dict:
        (dep,) = [d for d in self.deps if output_part in d["output"]]
        return dep

    def taking(self, component: str) -> list[dict]:
        """Every callback with ``component`` among its inputs or state."""
        return [d for d in self.deps
                if any(parse_id(x["id"]) == component for x in d["inputs"] + d["state"])]

    def body(self, dep: dict, values: Values, match: Values | None = None,
             every: dict[str, list] | None = None, changed: int = 0) -> dict:
        """The request for ``dep`` with ``values[id]`` (pattern ids: ``values[type]``, a list
        for ``ALL``); ``changed``: the index of the input that triggered it."""
        match, every = match or {}, every or {}
        spec = dep["output"]
        outputs = []
        for part in (spec[2:-2].split("...") if spec.startswith("..") else [spec]):
            cid, prop = part.rsplit(".", 1)
            outputs.append({"id": _concrete(parse_id(cid), match, every), "property": prop})

        def filled(item: dict) -> Any:
            cid = _concrete(parse_id(item["id"]), match, every)
            value = values.get(_key(parse_id(item["id"])))
            if isinstance(cid, list):  # ALL: one value per id (a list of the right length)
                vals = value if isinstance(value, list) and len(value) == len(cid) else \
                    [value] * len(cid)
                return [{"id": c, "property": item["property"], "value": v}
                        for c, v in zip(cid, vals)]
            return {"id": cid, "property": item["property"], "value": value}

        inputs = [filled(i) for i in dep["inputs"]]
        trigger = inputs[changed]
        first = trigger[0] if isinstance(trigger, list) else trigger
        return {"output": spec, "outputs": outputs if spec.startswith("..") else outputs[0],
                "inputs": inputs, "state": [filled(s) for s in dep["state"]],
                "changedPropIds": [f"{id_text(first['id'])}.{first['property']}"]}

    def post(self, body: dict | bytes, timeout_s: float = 30.0) -> tuple[int, str]:
        """(status, text) of the request; a background job is polled until it answers."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        query = f"?endId={self.end_id}" if self.end_id else ""
        status, text = self._post(data, query)
        if status != 200 or not text.startswith("{") or '"cacheKey"' not in text[:200]:
            return status, text
        handle = json.loads(text)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(0.1)
            status, text = self._post(data, f"{query or '?'}&cacheKey={handle['cacheKey']}"
                                            f"&job={handle['job']}")
            if status != 200 or '"response"' in text:
                return status, text
        raise AssertionError(f"background job still running after {timeout_s:g} s")
