"""Uploads that answer every file.

dcc.Upload drops a file over its ``max_size``, or of a type outside its ``accept``, in the
browser and says nothing (dash's ``Upload.react.js`` hands only accepted files to its
``onDrop``). Every upload of the dashboard therefore has neither: a file over the server's
limit is refused in the browser, in one line naming it and the limit, by ``assets/upload_guard.js``
(before it is read or sent; the wrapper built here tells that script the limit and where to
answer), and every other file is sent and refused on the server in words (its type by
:func:`checked_json_name`, its size again, its schema).
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from dash import dcc, html

from model import ModelError


def guarded_upload(ident: str, children: Any, limit_bytes: int, message_id: str,
                   refused: str, then: str = "",
                   clear: dict[str, dict[str, Any]] | None = None) -> html.Div:
    """A dcc.Upload that filters nothing in the browser, wrapped for ``upload_guard.js``:
    a file over ``limit_bytes`` is answered in ``message_id`` ("<refused> — name: 700.0 kB,
    over the 320 kB limit. <then>") and the components of ``clear`` are set to their values."""
    return html.Div(className="upload-guard", children=[
        dcc.Upload(id=ident, children=children),  # max_size -1: unlimited; no accept
    ], **{"data-upload-limit-bytes": str(int(limit_bytes)),
          "data-upload-message": message_id, "data-upload-refused": refused,
          "data-upload-then": then, "data-upload-clear": json.dumps(clear or {})})


def checked_json_name(filename: Any) -> str:
    """The upload's file name, refused (ModelError, in the user's words) unless it names a
    JSON file; "" when the browser sent none."""
    name = filename if isinstance(filename, str) else ""
    if name and PurePath(name).suffix.lower() != ".json":
        kind = PurePath(name).suffix or "no extension"
        raise ModelError(f"not a JSON file ({kind}): upload a .json file")
    return name


def size_refusal(size_bytes: int, limit_bytes: int) -> str:
    """The size refusal's reason, as the browser's guard writes it: '700.0 kB, over the 320 kB
    limit'."""
    return f"{size_bytes / 1024:,.1f} kB, over the {limit_bytes // 1024} kB limit"
