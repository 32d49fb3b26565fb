"""Issue 29, item 3: "the Serving page caches nothing (a repeat costs as much as a new
request)". Its callback's outputs are now cached like the Scaling and Plan pages' (JSON in the
results cache, keyed by the scenario's estimator inputs and the form): a repeat is read, not
computed, and is the same answer; a changed form or what-if is computed; a refused form is a
message and is not cached. The Post-training page's outputs are cached the same way."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-serve-cached-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pytest  # noqa: E402

import app  # noqa: E402, F401 - registers the pages and their callbacks
from dashboard.controls import presets as PR  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.pages import serve_page as page  # noqa: E402
from dashboard.views import serve_view  # noqa: E402
from dashboard.views.serve_view import CARDS, DEFAULT_FORM  # noqa: E402

SCN = {**S.default_scenario(), **PR.model_values("llama3-8b"), "model": "llama3-8b",
       **PR.system_values("h100"), "system": "h100"}
FORM = {**DEFAULT_FORM, "gpus": 1, "mode": "concurrency", "load": 8}


@pytest.fixture
def computed(monkeypatch, tmp_cache):
    """The serving answers computed (not read from the cache), by GPU count; a fresh results
    cache."""
    calls = []
    real = serve_view.serving
    monkeypatch.setattr(serve_view, "serving",
                        lambda scn, gpus, *rest: calls.append(gpus) or real(scn, gpus, *rest))
    return calls


def _update(scn: dict, form: dict) -> tuple:
    return page.update(scn, *(form[k] for k in page.FORM_KEYS))


def _json(out: tuple) -> str:
    return json.dumps([o.to_plotly_json() if hasattr(o, "to_plotly_json") else o for o in out],
                      sort_keys=True, default=str)


def test_a_repeat_is_read_from_the_cache_with_the_same_answer(computed):
    scn = SCN
    first = _update(scn, FORM)
    assert computed == [1] and first[len(CARDS) + 1] == ""  # no error
    again = _update(scn, FORM)
    assert computed == [1]  # read, not computed
    assert _json(again) == _json(first)
    assert again[len(CARDS)] == first[len(CARDS)]  # the headline


def test_a_changed_form_or_what_if_is_computed(computed):
    scn = SCN
    _update(scn, FORM)
    _update(scn, {**FORM, "load": 16})
    _update({**scn, "hbm_gb": 40.0}, FORM)
    _update({**scn, "presentation": True}, FORM)
    assert computed == [1, 1, 1, 1]


def test_a_refused_form_is_a_message_and_not_cached(computed):
    bad = {**FORM, "gpus": 0}
    out = _update(SCN, bad)
    message = out[len(CARDS) + 1]
    assert message and "GPU" in message
    assert _update(SCN, bad)[len(CARDS) + 1] == message


def test_the_post_training_page_reads_a_repeat_from_the_cache(monkeypatch, tmp_cache):
    """The Post-training page likewise: the same scenario and form are answered once."""
    from dashboard.jobs import post_training as jobs
    from dashboard.pages import post_training as post_page
    from dashboard.views.post_training_view import DEFAULT_FORM as POST_FORM

    calls: list[int] = []
    real = jobs.finetune_answers
    monkeypatch.setattr(jobs, "finetune_answers",
                        lambda scn, form: calls.append(form["gpus"]) or real(scn, form))
    form = {**POST_FORM, "tokens": 1e8, "global_batch": 8}
    values = [form[k] for k in post_page.FORM_KEYS]
    first = post_page.update(SCN, 1, *values)
    again = post_page.update(SCN, 2, *values)
    assert calls == [8] and _json(again) == _json(first)
    post_page.update(SCN, 3, *[{**form, "gpus": 16}[k] for k in post_page.FORM_KEYS])
    assert calls == [8, 16]
