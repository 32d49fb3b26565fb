"""The user's fitted stack in the session's scenario (issue 23, item 3: dashboard/controls/
fitted.py): validated each time it comes back from the browser, in the cache key, the link and
the scenario file, its own error bar, applied from the Validation page and chosen back from the
stack control."""

from __future__ import annotations

import base64
import contextvars
import copy
import json
import math
import random
import zlib
from typing import Any

import pytest
from dash import no_update
from dash._callback_context import context_value
from dash._utils import AttributeDict

from dashboard import state
from dashboard.controls import presets as PR
from dashboard.controls import saved
from dashboard.controls import scenario as S
from dashboard.controls import scenario_link as L
from dashboard.controls.fitted import (
    FITTED,
    FITTED_KEY,
    MAX_FITTED_BYTES,
    check_fitted,
    fit_error_bar,
    fit_summary,
    stack_note,
    to_link,
)
from dashboard.controls.panel import CONTROL_KEYS
from dashboard.jobs import compute
from dashboard.views import notes, runs_upload
from model.specs.stack import Stack, load_stack
from model.validation.user_runs import fitted_stack

LOO = {"h100": {"runs": 3, "loo_mean_pct": 2.5, "loo_max_pct": 4.0,
                "loo_scores": [0.01, 0.02, 0.04]}}


def _fit(eta: float = 0.5, name: str = "my-stack", fit: dict | None = None) -> dict[str, Any]:
    """A fit as the Validation page stores it: the stack calibrate --out writes, and its errors."""
    stack = fitted_stack(load_stack("torchtitan-2025"), name, {"h100": eta})
    return {"stack": stack.to_dict(), "fit": copy.deepcopy(LOO if fit is None else fit)}


def _session(fit: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
    """A valid scenario on H100 with the fitted stack applied."""
    fit = fit or _fit()
    raw = {**S.with_presets({"system": "h100"}), **PR.fitted_values(check_fitted(fit)[0]),
           FITTED_KEY: fit, **over}
    scn, errors = S.validate_scenario(raw)
    assert errors == {}
    return scn


def test_a_fitted_stack_enters_the_request_like_a_preset():
    scn = _session()
    assert scn["stack"] == FITTED and scn[FITTED_KEY]["stack"]["name"] == "my-stack"
    stack = S.stack_of(scn)
    assert isinstance(stack, Stack) and stack.gemm_efficiency["h100"]["bf16"] == 0.5
    request = S.request_of(scn, gpus=(64,))
    assert request.stack is stack
    assert stack.execution == load_stack("torchtitan-2025").execution  # its base's defaults
    # back to a preset: the fit stays in the session, the preset computes
    preset = S.validate_scenario({**scn, "stack": "torchtitan-2025"})[0]
    assert preset[FITTED_KEY] == scn[FITTED_KEY] and S.stack_of(preset) == "torchtitan-2025"


def test_cache_key_holds_the_fit_content():
    one, other = _session(_fit(0.5)), _session(_fit(0.6))
    key = lambda scn: compute.cache_key("scaling", compute.page_payload(scn))  # noqa: E731
    assert key(one) != key(other)  # two fits never share a result
    assert key(one) == key(_session(_fit(0.5)))
    # the same efficiencies under another leave-one-out summary: another key too
    assert key(one) != key(_session(_fit(0.5, fit={"h100": {"runs": 1, "loo_mean_pct": None,
                                                            "loo_max_pct": None}})))
    # a preset in use: the session's fit (unused) does not change its key
    preset = {**one, "stack": "torchtitan-2025"}
    bare = {k: v for k, v in preset.items() if k != FITTED_KEY}
    assert key(preset) == key(bare)


def test_link_and_file_carry_it():
    scn = _session()
    query = L.to_query(scn)
    assert f"&{FITTED_KEY}=" in query and len(query) < 6000
    assert S.validate_scenario(L.from_query("#" + query)) == (scn, {})
    assert S.from_json(S.to_json(scn)) == (scn, {})
    assert "the page's link carries it" in stack_note(scn)
    # a fit too long for a link: the file only, and the note says so
    long = _fit(name="long")
    noise = random.Random(0).randbytes(3600)  # incompressible: 4,800 characters in a link
    long["stack"]["description"] = base64.b64encode(noise).decode()
    big = _session(long)
    assert to_link(big[FITTED_KEY]) is None and FITTED_KEY not in L.to_query(big)
    assert "download the scenario" in stack_note(big)
    assert S.from_json(S.to_json(big)) == (big, {})


def _refusal(value: Any, **over: Any) -> str:
    scn, errors = S.validate_scenario({**_session(), FITTED_KEY: value, **over})
    assert scn is None and set(errors) == {"stack"}
    return errors["stack"]


@pytest.mark.parametrize("change,needle", [
    (lambda f: f["stack"]["gemm_efficiency"]["h100"].update(bf16=3.0), "[0.05, 1.0]"),
    (lambda f: f["stack"]["gemm_efficiency"]["h100"].update(bf16="fast"), "must be a number"),
    (lambda f: f["stack"]["attention_efficiency"].update(h100=-1), "attention_efficiency"),
    (lambda f: f["stack"].update(base="../../etc/passwd"), "must name a stack preset"),
    (lambda f: f["stack"].update(pickle="gASV"), "unknown key 'pickle'"),
    (lambda f: f["stack"].update(name="<script>"), "its name must be"),
    (lambda f: f.update(extra=1), "unknown key 'extra'"),
    (lambda f: f["fit"]["h100"].update(loo_mean_pct=9.0), "largest no smaller"),
    (lambda f: f["fit"]["h100"].update(runs=True), "whole number"),
    (lambda f: f["stack"].update(description="x" * MAX_FITTED_BYTES), "larger than 8 kB"),
])
def test_a_tampered_fit_is_refused_in_the_users_words(change, needle):
    fit = _fit()
    change(fit)
    message = _refusal(fit)
    assert message.startswith("Your fitted stack is refused") and needle in message, message


def test_other_bad_forms_never_raise():
    assert "JSON object" in _refusal([1, 2])
    assert "damaged" in _refusal("not-a-link")
    bomb = base64.urlsafe_b64encode(zlib.compress(b"[" * 10**6)).decode()
    assert "larger than 8 kB" in _refusal(bomb)
    assert "No fitted stack" in _refusal(None)  # the stack control says fitted, none is held
    deep: Any = {}
    for _ in range(5000):
        deep = {"stack": deep}
    assert "plain JSON" in _refusal(deep)
    assert check_fitted(None) == (None, "")


def test_its_own_error_bar_never_a_presets():
    scn = _session()
    text = notes.days_text(scn, 100.0)
    # its leave-one-out scores 0.01, 0.02, 0.04: 50 % → the ⌈4·0.5⌉ = 2nd smallest
    assert "3 leave-one-out runs of your runs on h100 (fitted stack 'my-stack')" in text
    assert "80 % interval not stated: 3 runs: an 80 % interval needs ≥ 4" in text
    half = fit_error_bar(scn[FITTED_KEY], "h100", 0.5)
    assert half.time_range(100.0) == pytest.approx((100 * math.exp(-0.02),
                                                    100 * math.exp(0.02)))
    one = _session(_fit(fit={"h100": {"runs": 1, "loo_mean_pct": None, "loo_max_pct": None}}))
    assert "not validated: your fitted stack 'my-stack' has one run on h100" in \
        notes.days_text(one, 100.0)
    other = fit_error_bar(scn[FITTED_KEY], "h200")
    assert not other.validated and "no run on h200" in other.text
    summa = notes.error_bar_of(scn, "summa")  # no user's run can have used SUMMA
    assert not summa.validated and "none ships the idealised 2D SUMMA" in summa.text
    assert notes.error_bar_of(scn, "1d").to_dict() == notes.error_bar_of(scn).to_dict()
    rows = [{"system": "h100", "measured_s": 1.0, "leave_one_out_s": v} for v in (1.02, 0.95)]
    assert fit_summary(rows) == {"h100": {"runs": 2, "loo_mean_pct": 3.5, "loo_max_pct": 5.0,
                                          "loo_scores": [round(math.log(1.02), 6),
                                                         round(-math.log(0.95), 6)]}}


def _triggered(prop_id: str, func, *args):
    def run():
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": prop_id, "value": None}]))
        return func(*args)
    return contextvars.copy_context().run(run)


def test_apply_puts_it_in_the_session_and_the_stack_control_gets_it_back():
    scn = S.with_presets({"system": "h100", "stack": "megatron-bridge-26.08"})
    out = runs_upload.apply_fit(1, _fit(), scn)
    n = len(CONTROL_KEYS)
    values = dict(zip(CONTROL_KEYS, out[:n]))
    applied, stored, options, message = out[n:]
    assert values["stack"] == FITTED and applied["stack"] == FITTED
    assert values["elementwise"] == PR.fitted_values(check_fitted(_fit())[0])["elementwise"]
    assert stored == check_fitted(_fit())[0] and "every page now computes" in str(message)
    assert options[-1] == {"label": "fitted: my-stack", "value": FITTED}
    # the controls then validate into the scenario with the fit
    raw = {**scn, **values, FITTED_KEY: stored}
    assert S.validate_scenario(raw)[0]["stack"] == FITTED
    # a tampered fit from the browser: nothing changes, the card says why
    bad = _fit()
    bad["stack"]["gemm_efficiency"]["h100"]["bf16"] = 7
    refused = runs_upload.apply_fit(1, bad, scn)
    assert all(v is no_update for v in refused[:-1]) and "Not applied" in str(refused[-1])
    # choosing "fitted: my-stack" again after a preset loads its defaults; with none: a message
    chosen = state.apply_preset.__wrapped__ if hasattr(state.apply_preset, "__wrapped__") \
        else state.apply_preset
    presets = [FITTED if p.key == "stack" else scn[p.key] for p in state.PRESETS]
    clicks = [None] * len(state.PRESETS)
    back = _triggered("ctl-stack.value", chosen, *presets, *clicks, state._applied(scn), scn,
                      stored)
    assert back[n]["stack"] == FITTED and back[-1] == ""
    none = _triggered("ctl-stack.value", chosen, *presets, *clicks, state._applied(scn), scn,
                      None)
    assert all(v is no_update for v in none[:-1]) and "no fitted stack" in none[-1]


def _collect(scn: dict[str, Any], fitted: Any) -> tuple:
    """The panel's collect as Dash calls it after a control changed, with the fitted store."""
    return _triggered("ctl-layers.value", state.collect, *(scn[k] for k in CONTROL_KEYS), [],
                      scn, True, state._applied(scn), fitted)


def test_a_tampered_store_is_refused_and_nothing_entered_is_lost():
    scn = _session()
    bad = _fit()
    bad["stack"]["memory_reserve_gb"] = {"h100": "lots"}
    stack_error = 2 + state.ERROR_KEYS.index("stack")
    out = _collect({**scn, "layers": 40}, bad)  # the fitted stack in use: nothing stored
    assert out[0] is no_update and "Your fitted stack is refused" in out[stack_error]
    preset = {**scn, "stack": "torchtitan-2025", "layers": 40}
    out = _collect(preset, bad)  # a preset in use: computed without the refused fit, said so
    assert out[0]["layers"] == 40 and FITTED_KEY not in out[0]
    assert out[stack_error].endswith("(not used)")
    good = _collect({**scn, "layers": 40}, _fit())
    assert good[0][FITTED_KEY] == scn[FITTED_KEY] and good[0]["layers"] == 40
    assert good[stack_error] == ""


def test_a_saved_scenario_keeps_the_fit_it_uses():
    """The Scenarios page's named scenarios (browser storage, their file) compare with it."""
    fitted, preset = _session(), {**_session(), "stack": "torchtitan-2025"}
    stored = saved.save(saved.save([], "fit", fitted), "preset", preset)
    assert stored[0]["scenario"][FITTED_KEY] == fitted[FITTED_KEY]
    assert FITTED_KEY not in stored[1]["scenario"]  # a preset in use: the fit is not needed
    back = saved.from_file(saved.to_file(saved.entries(stored)).encode())
    assert saved.find(back, "fit") == fitted


def test_the_download_is_the_calibrate_out_object_named_after_the_runs():
    sent = runs_upload.download_stack(1, _fit(name="a100-runs"))
    assert json.loads(sent["content"]) == check_fitted(_fit(name="a100-runs"))[0]["stack"]
    assert sent["filename"] == "a100-runs.json"
    assert runs_upload.download_stack(1, {"stack": 3}) is no_update
    assert runs_upload.fit_name("my runs (v2).json") == "my-runs-v2"
    assert runs_upload.fit_name("../../x.json") == "x" and runs_upload.fit_name(None) == \
        "my-stack"
    assert runs_upload.fit_name("€€.json") == "my-stack"  # nothing left: the default
