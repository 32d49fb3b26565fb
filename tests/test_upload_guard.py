"""Issue 29, item 7: every upload answers every file. dcc.Upload dropped a file over its
``max_size`` or outside its ``accept`` in the browser without a word (the scenario uploads
still did); now no upload filters in dcc.Upload, each sits in a guard that refuses a file over
the server's limit in one line (assets/upload_guard.js), and the server refuses the type, the
size and the schema in words naming the file."""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import sys
import tempfile
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-upload-guard-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.jobs.compute" not in sys.modules:  # app.py creates CACHE_DIR/background at import
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

from pathlib import Path  # noqa: E402

from dash import dcc  # noqa: E402

import app  # noqa: E402, F401 - registers the pages and their callbacks
from dashboard import state  # noqa: E402
from dashboard.controls import saved  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls.panel import panel  # noqa: E402
from dashboard.controls.uploads import size_refusal  # noqa: E402
from dashboard.pages import scenarios as page  # noqa: E402
from dashboard.views import runs_upload  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _walk(node: Any, parent: Any = None):
    yield node, parent
    children = getattr(node, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if hasattr(child, "to_plotly_json"):
            yield from _walk(child, node)


def _uploads() -> dict[str, tuple[dcc.Upload, Any]]:
    trees = (panel(S.default_scenario()), page.layout, runs_upload.runs_card())
    return {n.id: (n, p) for tree in trees for n, p in _walk(tree) if isinstance(n, dcc.Upload)}


def _url(raw: bytes) -> str:
    return "data:application/json;base64," + base64.b64encode(raw).decode()


def test_no_upload_filters_files_in_the_browser_and_each_is_guarded() -> None:
    uploads = _uploads()
    limits = {"scenario-upload": S.MAX_SCENARIO_BYTES, "scenarios-upload": saved.MAX_FILE_BYTES,
              "validation-runs-upload": runs_upload.MAX_BYTES}
    assert set(uploads) == set(limits)
    for ident, (upload, guard) in uploads.items():
        props = upload.to_plotly_json()["props"]
        assert props.get("accept") is None, ident  # a wrong type reaches the server's words
        assert props.get("max_size", -1) == -1, ident  # nothing over a size dropped silently
        attrs = guard.to_plotly_json()["props"]
        assert attrs["data-upload-limit-bytes"] == str(limits[ident]), ident
        assert attrs["data-upload-message"], ident
        json.loads(attrs["data-upload-clear"])
    script = (ROOT / "assets" / "upload_guard.js").read_text()
    assert "data-upload-limit-bytes" in script and "set_props" in script


def test_scenarios_upload_answers_type_size_and_schema_naming_the_file() -> None:
    kept = saved.save([], "mine", S.default_scenario())
    good = saved.to_file(saved.save([], "B200", S.default_scenario())).encode()
    for contents, name, why in (
            (_url(good), "scenarios.txt", "not a JSON file (.txt)"),
            (_url(b" " * (saved.MAX_FILE_BYTES + 1024)), "big.json",
             size_refusal(saved.MAX_FILE_BYTES + 1024, saved.MAX_FILE_BYTES)),
            (_url(b"[1, 2]"), "list.json", "expected {\"scenarios\""),
            ("no comma", "x.json", "could not be read")):
        entries, message = page.upload(contents, name, kept)
        assert entries is page.no_update
        assert message.startswith(f"Upload rejected — {name}: ") and why in message, message
        assert message.endswith("Nothing from it was added; the saved scenarios are as before.")
    assert size_refusal(saved.MAX_FILE_BYTES + 1024, saved.MAX_FILE_BYTES) == \
        "321.0 kB, over the 320 kB limit"
    entries, message = page.upload(_url(good), "scenarios.json", kept)
    assert saved.names(entries) == ["mine", "B200"]
    assert message.children == "Added 1 scenario from scenarios.json."


def test_panel_upload_refuses_a_file_not_named_json() -> None:
    raw = json.dumps({"layers": 64}).encode()
    out = state.upload(_url(raw), None, "notes.txt")
    assert all(v is state.no_update for v in out[:-1])
    assert out[-1] == ("Upload rejected — notes.txt: not a JSON file (.txt): upload a .json "
                       "file. The controls are as before.")
    assert state.upload(_url(raw), None, "config.json")[-1] == ""  # a .json is read as before
