"""The dashboard without a browser, continued: the state callbacks
(:mod:`dashboard.state`) — controls → scenario and URL, the URL → controls, uploads and
downloads of the scenario JSON, presets. Split from tests/test_dashboard.py, whose helpers and
temporary cache these use."""

from __future__ import annotations

import base64
import contextvars
import json
from typing import Any

import pytest
from dash._callback_context import context_value
from dash._utils import AttributeDict
from test_dashboard import default, is_no_update, valid

from dashboard import state
from dashboard.controls import presets as PR
from dashboard.controls import scenario as S
from dashboard.controls import scenario_link as L
from dashboard.controls.panel import CONTROL_KEYS

pytestmark = pytest.mark.usefixtures("tmp_cache")  # a private results cache per test (conftest)


def _controls(scn: dict[str, Any]) -> list[Any]:
    return [scn[k] for k in CONTROL_KEYS]


def _collect(scn: dict[str, Any], current: dict[str, Any], hydrated: bool,
             presentation: list[str] | None = None, trigger: str = "ctl-layers.value") -> tuple:
    out = _triggered(trigger, state.collect, *_controls(scn), presentation or [], current,
                     hydrated, state._applied(current), None)  # no fitted stack
    assert len(out) == 2 + len(state.ERROR_KEYS)
    return out


def test_collect_waits_for_a_newly_chosen_presets_values():
    """Choosing a preset changes its name first; its values follow (apply_preset). The name
    with the previous preset's values is never stored nor computed (a B200 with H200's HBM)."""
    current = default()
    out = _collect({**current, "system": "b200"}, current, True, trigger="ctl-system.value")
    assert all(is_no_update(v) for v in out)
    # the preset's values arrive (with its name, as apply_preset sets them): stored
    loaded = {**current, **PR.system_values("b200")}
    out = _collect(loaded, current, True, trigger="ctl-hbm_gb.value")
    assert out[0]["system"] == "b200" and out[0]["hbm_gb"] == PR.system_values("b200")["hbm_gb"]


def test_collect_invalid_value_keeps_store_and_reports_on_control():
    current = default()
    out = _collect({**current, "hbm_gb": -5}, current, True)
    assert is_no_update(out[0]) and is_no_update(out[1])
    messages = dict(zip(state.ERROR_KEYS, out[2:]))
    assert messages["hbm_gb"] == "HBM capacity must be positive"
    assert all(m == "" for k, m in messages.items() if k != "hbm_gb")
    out = _collect({**current, "heads": 7}, current, True)
    assert is_no_update(out[0]) and dict(zip(state.ERROR_KEYS, out[2:]))["heads"]


def test_collect_valid_value_stores_scenario_and_fragment():
    current = default()
    out = _collect({**current, "layers": 96}, current, True, ["on"])
    scn, fragment = out[0], out[1]
    assert scn == valid(layers=96, presentation=True)
    assert fragment.startswith("#") and L.from_query(fragment)["layers"] == 96
    assert S.validate_scenario(L.from_query(fragment)) == (scn, {})
    assert all(m == "" for m in out[2:])
    out = _collect({**current, "layers": 96}, current, False)  # before hydration: no URL write
    assert out[0]["layers"] == 96 and is_no_update(out[1])


def test_hydrate_fills_controls_from_fragment_and_from_a_link_pasted_later():
    current = default()
    out = state.hydrate("#" + L.to_query(valid(layers=96, hbm_gb=80.0, presentation=True)),
                        False, current)
    n = len(CONTROL_KEYS)
    values = dict(zip(CONTROL_KEYS, out[:n]))
    assert values["layers"] == 96 and values["hbm_gb"] == 80.0
    assert out[n] == ["on"] and out[n + 1] is True and out[-1] == ""
    assert out[n + 2] == {"model": current["model"], "system": current["system"],
                          "stack": current["stack"]}
    assert all(is_no_update(v) for v in out[n + 3:-1])  # no fitted stack in the link: kept
    own = state.hydrate("#" + L.to_query(current), True, current)  # the app's own URL write
    assert len(own) == n + 6 and all(is_no_update(v) for v in own)
    # a link pasted into the tab already showing the app (issue 21: it was ignored)
    later = state.hydrate("#layers=12", True, current)
    assert dict(zip(CONTROL_KEYS, later[:n]))["layers"] == 12 and later[-1] == ""


def test_hydrate_broken_link_keeps_defaults_and_says_why():
    out = state.hydrate("#heads=7", False, default())
    n = len(CONTROL_KEYS)
    assert all(is_no_update(v) for v in out[:n + 1])
    assert out[n + 1] is True
    assert "invalid" in out[-1] and "heads" in out[-1]


def _data_url(payload: bytes) -> str:
    return "data:application/json;base64," + base64.b64encode(payload).decode()


def test_upload_valid_json_fills_controls():
    scn = valid(layers=96, nvs=64, presentation=True)
    out = state.upload(_data_url(S.to_json(scn).encode()))
    n = len(CONTROL_KEYS)
    assert dict(zip(CONTROL_KEYS, out[:n])) == {k: scn[k] for k in CONTROL_KEYS}
    assert out[n] == ["on"]
    assert out[n + 1] == {"model": scn["model"], "system": scn["system"], "stack": scn["stack"]}
    assert out[-1] == ""


@pytest.mark.parametrize("contents,needle", [
    (_data_url(json.dumps({**S.default_scenario(), "heads": 7}).encode()), "heads"),
    (_data_url(b'{"layers": '), "not valid JSON"),
    (_data_url(json.dumps({"bogus": 1}).encode()), "unknown key"),
    (_data_url(json.dumps({"pad": "x" * 20_000}).encode()), "16 KB"),
    ("no comma at all", "could not be read"),
])
def test_upload_invalid_json_changes_nothing(contents, needle):
    out = state.upload(contents)
    assert all(is_no_update(v) for v in out[:-1])
    assert out[-1].startswith(("Upload rejected", "The upload")) and needle in out[-1]


def test_upload_nothing():
    assert all(is_no_update(v) for v in state.upload(None))


def test_download_is_the_scenario_json():
    scn = valid(layers=96)
    sent, message = state.download(1, scn)  # (the file, the inline error slot)
    assert sent["filename"] == "scenario.json" and message == ""
    assert S.from_json(sent["content"]) == (scn, {})
    sent, message = state.download(1, {**scn, "nvs": -1})  # never an unvalidated store
    assert is_no_update(sent) and "nvs" in message


def _triggered(prop_id: str, func, *args):
    """Call a callback as Dash would, with ``ctx.triggered_id`` set from ``prop_id``."""
    def run():
        context_value.set(AttributeDict(triggered_inputs=[{"prop_id": prop_id, "value": None}]))
        return func(*args)
    return contextvars.copy_context().run(run)


def _apply(trigger: str, scn: dict[str, Any], applied: dict[str, Any], fitted: Any = None,
           **names: Any) -> tuple:
    """apply_preset as Dash calls it: each preset's value, each reset's clicks, the presets
    applied, the stored scenario and the session's fitted stack, with ``trigger`` (a prop id)
    as the triggering input."""
    presets = [names.get(p.key, scn[p.key]) for p in state.PRESETS]
    clicks = [1 if trigger == f"reset-{p.group}.n_clicks" else None for p in state.PRESETS]
    return _triggered(trigger, state.apply_preset, *presets, *clicks, applied, scn, fitted)


def test_apply_preset():
    scn = default()
    applied = state._applied(scn)
    n = len(CONTROL_KEYS)
    out = _apply("ctl-model.value", scn, applied, model="llama3-8b")
    values = dict(zip(CONTROL_KEYS, out[:n]))
    assert {k: values[k] for k in S.MODEL_KEYS} == {
        k: v for k, v in PR.model_values("llama3-8b").items() if k in S.MODEL_KEYS}
    assert values["hbm_gb"] == scn["hbm_gb"]  # the system group is untouched
    assert out[n] == {**applied, "model": "llama3-8b"}
    # the preset already applied (e.g. set by hydrate): nothing changes
    same = _apply("ctl-model.value", {**scn, "layers": 12}, applied)
    assert all(is_no_update(v) for v in same)
    # reset reloads the preset over edited values
    reset = _apply("reset-model.n_clicks", {**scn, "layers": 12}, applied)
    assert dict(zip(CONTROL_KEYS, reset[:n]))["layers"] == scn["layers"]
    out = _apply("ctl-system.value", scn, applied, system="b200")
    values = dict(zip(CONTROL_KEYS, out[:n]))
    assert {k: values[k] for k in S.SYSTEM_KEYS} == {
        k: v for k, v in PR.system_values("b200").items() if k in S.SYSTEM_KEYS}
    assert values["layers"] == scn["layers"]
    # a software stack loads its execution defaults (2021 Megatron-LM: no SP, replicated
    # optimizer, no TP overlap); "none" the Execution defaults
    out = _apply("ctl-stack.value", scn, applied, stack="megatron-lm-2021")
    values = dict(zip(CONTROL_KEYS, out[:n]))
    assert (values["sequence_parallel"], values["zero"], values["tp_overlap"]) == (
        False, 0, False)
    assert values["layers"] == scn["layers"] and values["hbm_gb"] == scn["hbm_gb"]
    assert out[n]["stack"] == "megatron-lm-2021"
    out = _apply("ctl-stack.value", scn, applied, stack="none")
    values = dict(zip(CONTROL_KEYS, out[:n]))
    assert (values["sequence_parallel"], values["zero"], values["tp_overlap"]) == (True, 1, False)


def test_preset_values_validate():
    for name in ("gpt3-175b", "llama3-70b", "vit-era5"):
        assert S.validate_scenario({**default(), **PR.model_values(name)})[1] == {}
    for name in ("a100", "b200", "gb200-nvl72"):
        assert S.validate_scenario({**default(), **PR.system_values(name)})[1] == {}
