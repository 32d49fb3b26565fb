"""The dashboard without a browser: scenario schema, callbacks, cached computations, pages,
exports and the app itself.

Every test runs against a fresh results cache under ``tmp_path`` (autouse fixture), and the
module points ``PERF_CACHE_DIR`` at a temporary directory before importing the app, so the
repository's ``cache/`` is never touched. PNG export needs kaleido's browser (Debian's chromium):
if it cannot start, the PNG test fails (it is never skipped).
"""

from __future__ import annotations

import atexit
import base64
import contextvars
import io
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-dashboard-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.jobs.compute" not in sys.modules:  # app.py creates CACHE_DIR/background at import
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
from dash import no_update  # noqa: E402
from dash._callback_context import context_value  # noqa: E402
from dash._utils import AttributeDict  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import app as dash_app  # noqa: E402 - creates the Dash app (use_pages), registers callbacks
from dashboard import state  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls.panel import CONTROL_KEYS  # noqa: E402
from dashboard.jobs import compute, studies  # noqa: E402
from dashboard.pages import design, hbm, scaling  # noqa: E402
from dashboard.server import export  # noqa: E402

NO_UPDATE = type(no_update)
PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


pytestmark = pytest.mark.usefixtures("tmp_cache")  # a private results cache per test (conftest)


def default() -> dict[str, Any]:
    return S.default_scenario()


def valid(**over: Any) -> dict[str, Any]:
    scn, errors = S.validate_scenario({**default(), **over})
    assert errors == {} and scn is not None, errors
    return scn


def errors_of(**over: Any) -> dict[str, str]:
    scn, errors = S.validate_scenario({**default(), **over})
    assert scn is None
    assert errors and all(isinstance(m, str) and m for m in errors.values())
    return errors


def is_no_update(value: Any) -> bool:
    return isinstance(value, NO_UPDATE)


# --------------------------------------------------------------------------- scenario schema


def test_default_scenario_validates():
    scn = default()
    assert set(scn) == set(S.KEYS)
    assert S.validate_scenario(scn) == (scn, {})
    model, system = S.build_inputs(scn)
    assert model.layers == scn["layers"] and system.hbm_capacity_gb == scn["hbm_gb"]


def test_query_round_trips_every_key():
    scn = valid(presentation=True, hbm_tb_per_s=4.83, nics_per_gpu=0.5, matrix_tflops=1234.567,
                nic_gb_per_s=12.345678901234, budget=3.3e17, strategy="summa", compat="paper",
                design_strategy="context", x_axis="dp", y_axis="microbatch", nvs=72,
                gpus_min=72, gpus_max=9216, hbm_gb=141.0)
    text = S.to_query(scn)
    assert [k for k, _ in (p.split("=", 1) for p in text.split("&"))] == list(S.KEYS)
    raw = S.from_query("#" + text)
    assert set(raw) == set(S.KEYS)
    assert raw["presentation"] is True and isinstance(raw["hbm_tb_per_s"], float)
    assert S.validate_scenario(raw) == (scn, {})
    for flag in (False, True):
        back, _ = S.validate_scenario(S.from_query(S.to_query({**scn, "presentation": flag})))
        assert back["presentation"] is flag


def test_query_ignores_unknown_and_keeps_bad_text_for_the_validator():
    raw = S.from_query("?layers=abc&nope=1&hbm_gb=96.5")
    assert raw == {"layers": "abc", "hbm_gb": 96.5}
    assert "layers" in S.validate_scenario({**default(), **raw})[1]


def test_json_round_trip():
    scn = valid(presentation=True, hbm_tb_per_s=3.35, layers=96, budget_kind="samples",
                budget=1.5e9)
    text = S.to_json(scn)
    assert json.loads(text) == scn
    assert S.from_json(text) == (scn, {})
    assert S.from_json(text.encode()) == (scn, {})


@pytest.mark.parametrize("over,key", [
    ({"heads": 159}, "heads"),  # does not divide hidden = 25600
    ({"attention": "gqa", "kv_heads": 7}, "kv_heads"),  # does not divide heads = 160
    ({"attention": "gqa", "kv_heads": 320}, "kv_heads"),
    ({"layers": 0}, "layers"),
    ({"layers": -3}, "layers"),
    ({"hbm_gb": -5}, "hbm_gb"),
    ({"hbm_gb": 0}, "hbm_gb"),
    ({"gpus_max": 10**9}, "gpus_max"),
    ({"hidden": 10**12}, "hidden"),
    ({"nics_per_gpu": 1e9}, "nics_per_gpu"),
    ({"budget": float("nan")}, "budget"),
    ({"budget": float("inf")}, "budget"),
    ({"layers": 2.5}, "layers"),
    ({"layers": "abc"}, "layers"),
    ({"hbm_gb": "lots"}, "hbm_gb"),
    ({"hbm_gb": True}, "hbm_gb"),
    ({"seq_len": [2048]}, "seq_len"),
    ({"layers": None}, "layers"),
    ({"layers": ""}, "layers"),
    ({"model": "no-such-model"}, "model"),
    ({"strategy": "3d"}, "strategy"),
    ({"presentation": "yes"}, "presentation"),
    ({"gpus_min": 64, "gpus_max": 32}, "gpus_min"),
    ({"x_axis": "pp", "y_axis": "pp"}, "y_axis"),
])
def test_bad_value_is_reported_on_its_control(over, key):
    errors = errors_of(**over)
    assert list(errors) == [key]


def test_error_messages_are_clear():
    """Each message names the control by its label and says what is wrong (issue 12: never
    an internal key, never "is empty" for a value that is there)."""
    assert errors_of(heads=159)["heads"] == "Heads (159) must divide the hidden size (25,600)"
    assert errors_of(attention="gqa", kv_heads=7)["kv_heads"] == (
        "KV heads (7) must divide the heads (160)")
    assert errors_of(layers=0)["layers"] == "Layers must be at least 1"
    assert errors_of(hbm_gb=-5)["hbm_gb"] == "HBM capacity must be positive"
    assert errors_of(hbm_gb=0.5)["hbm_gb"] == "HBM capacity must be at least 1 GB"
    assert errors_of(gpus_max=10**9)["gpus_max"] == "GPUs (to) must be at most 10,000,000"
    assert errors_of(layers="abc")["layers"] == "Layers must be a number"
    assert errors_of(layers=2.5)["layers"] == "Layers must be a whole number"
    assert "finite" in errors_of(budget=float("nan"))["budget"]
    assert "larger than the largest" in errors_of(gpus_min=64, gpus_max=32)["gpus_min"]
    assert "different axes" in errors_of(x_axis="pp", y_axis="pp")["y_axis"]


def test_bad_json_is_refused_under_underscore():
    scn, errors = S.from_json(json.dumps({**default(), "not_a_key": 1}))
    assert scn is None and "not_a_key" in errors["_"]
    for text in ('{"layers": 1', "", b"\xff\xfe\x00", "nan nan"):
        scn, errors = S.from_json(text)
        assert scn is None and "not valid JSON" in errors["_"]
    scn, errors = S.from_json("[1, 2]")
    assert scn is None and "JSON object" in errors["_"]
    big = json.dumps({"layers": 96, "pad": "x" * 20_000})
    assert len(big) > 20_000
    scn, errors = S.from_json(big)
    assert scn is None and list(errors) == ["_"] and "16 KB" in errors["_"]


def test_json_value_errors_are_keyed():
    scn, errors = S.from_json(json.dumps({"heads": 7}))
    assert scn is None and list(errors) == ["heads"]


# random dicts: keys from the schema or anything; values of any JSON-ish type
ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-10, 100_000),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.lists(st.integers(0, 100), max_size=3), st.dictionaries(st.text(max_size=3), st.none()),
    st.sampled_from([c for f in S.FIELDS for c in (f.choices or ())]),
)
ANY_KEY = st.one_of(st.sampled_from(S.KEYS), st.text(max_size=12))


def _near(field) -> st.SearchStrategy:
    """Values around a field's valid range (most valid, some not)."""
    if field.choices:
        return st.one_of(st.sampled_from(field.choices), st.text(max_size=5))
    if field.kind is bool:
        return st.one_of(st.booleans(), st.sampled_from([0, 1, "on"]))
    lo, hi = field.lo, field.hi
    if field.kind is int:
        return st.one_of(st.integers(int(lo), int(min(hi, 2**20))),
                         st.sampled_from([1, 2, 4, 8, 16, 64, 128, 1024]),
                         st.integers(int(lo) - 5, int(lo)), st.integers(int(hi), int(hi) * 10))
    return st.one_of(st.floats(lo, min(hi, 1e6)), st.floats(lo, hi),
                     st.floats(allow_nan=True, allow_infinity=True))


NEAR_DEFAULT = st.dictionaries(st.sampled_from(S.KEYS), st.none(), min_size=1, max_size=5).flatmap(
    lambda keys: st.fixed_dictionaries({k: _near(S.BY_KEY[k]) for k in keys}))


def _check_outcome(scn: dict | None, errors: dict[str, str]) -> None:
    if scn is None:
        assert errors, "an invalid scenario needs at least one message"
        assert set(errors) <= set(S.KEYS) | {"_"}
        assert all(isinstance(m, str) and m for m in errors.values())
        return
    assert errors == {}
    assert set(scn) == set(S.KEYS)
    assert S.validate_scenario(scn) == (scn, {})  # idempotent
    S.build_inputs(scn)  # a valid scenario always builds
    counts = S.gpu_counts(scn)
    assert len(counts) <= 24
    assert all(isinstance(n, int) and math.isfinite(n) and n >= 1 for n in counts)
    assert all(scn["gpus_min"] <= n <= scn["gpus_max"] for n in counts)
    # and survives the URL and the JSON file unchanged
    assert S.validate_scenario(S.from_query(S.to_query(scn))) == (scn, {})
    assert S.from_json(S.to_json(scn)) == (scn, {})


@PROPERTY
@given(st.dictionaries(ANY_KEY, ANY_VALUE, max_size=12))
def test_random_dicts_never_raise(raw):
    _check_outcome(*S.validate_scenario(raw))


@PROPERTY
@given(NEAR_DEFAULT)
def test_random_overrides_of_the_default_never_raise(over):
    _check_outcome(*S.validate_scenario({**default(), **over}))


@PROPERTY
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300)))
def test_random_text_never_raises(text):
    scn, errors = S.from_json(text)
    assert (scn is None) != (errors == {})
    if isinstance(text, str):
        raw = S.from_query(text)
        assert set(raw) <= set(S.KEYS)
        _check_outcome(*S.validate_scenario({**default(), **raw}))


# --------------------------------------------------------------------------- GPU counts


def test_gpu_counts_are_powers_of_two_in_range():
    assert S.gpu_counts(default()) == [2**k for k in range(2, 15)]
    counts = S.gpu_counts(valid(gpus_min=5, gpus_max=1000))
    assert counts == [8, 16, 32, 64, 128, 256, 512]


def test_gpu_counts_are_the_same_powers_of_two_for_every_domain():
    """NVL72 and NVL8 compare at equal counts (partly filled domains); the paper mode, which
    cannot fill a domain partly, keeps multiples of a domain that is not a power of two
    (changed deliberately: 72·2^k made NVL72 look slower than NVL8, issue 12)."""
    counts = S.gpu_counts(valid(nvs=72, gpus_min=1, gpus_max=20_000))
    assert counts == S.gpu_counts(valid(nvs=8, gpus_min=1, gpus_max=20_000))
    assert counts == [2**k for k in range(15)] and {1024, 16384} <= set(counts)
    paper = S.gpu_counts(valid(nvs=72, gpus_min=1, gpus_max=20_000, compat="paper"))
    assert paper == [72 * 2**k for k in range(9)]


def test_gpu_counts_at_most_24():
    assert len(S.gpu_counts(valid(gpus_min=1, gpus_max=10_000_000))) == 24
    assert len(S.gpu_counts(valid(nvs=3, gpus_min=1, gpus_max=10_000_000))) <= 24


# --------------------------------------------------------------------------- state callbacks


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
    loaded = {**current, **S.system_values("b200")}
    out = _collect(loaded, current, True, trigger="ctl-hbm_gb.value")
    assert out[0]["system"] == "b200" and out[0]["hbm_gb"] == S.system_values("b200")["hbm_gb"]


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
    assert fragment.startswith("#") and S.from_query(fragment)["layers"] == 96
    assert S.validate_scenario(S.from_query(fragment)) == (scn, {})
    assert all(m == "" for m in out[2:])
    out = _collect({**current, "layers": 96}, current, False)  # before hydration: no URL write
    assert out[0]["layers"] == 96 and is_no_update(out[1])


def test_hydrate_fills_controls_from_fragment_and_from_a_link_pasted_later():
    current = default()
    out = state.hydrate("#" + S.to_query(valid(layers=96, hbm_gb=80.0, presentation=True)),
                        False, current)
    n = len(CONTROL_KEYS)
    values = dict(zip(CONTROL_KEYS, out[:n]))
    assert values["layers"] == 96 and values["hbm_gb"] == 80.0
    assert out[n] == ["on"] and out[n + 1] is True and out[-1] == ""
    assert out[n + 2] == {"model": current["model"], "system": current["system"],
                          "stack": current["stack"]}
    assert all(is_no_update(v) for v in out[n + 3:-1])  # no fitted stack in the link: kept
    own = state.hydrate("#" + S.to_query(current), True, current)  # the app's own URL write
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
        k: v for k, v in S.model_values("llama3-8b").items() if k in S.MODEL_KEYS}
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
        k: v for k, v in S.system_values("b200").items() if k in S.SYSTEM_KEYS}
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
        assert S.validate_scenario({**default(), **S.model_values(name)})[1] == {}
    for name in ("a100", "b200", "gb200-nvl72"):
        assert S.validate_scenario({**default(), **S.system_values(name)})[1] == {}


# --------------------------------------------------------------------------- compute


def _payload(scn: dict[str, Any]) -> dict[str, Any]:
    return {**compute._inputs(scn), "counts": S.gpu_counts(scn)}


def test_cache_key_changes_with_every_input_and_the_version(monkeypatch):
    scn = default()
    base = compute.cache_key("scaling", _payload(scn))
    assert base == compute.cache_key("scaling", _payload(dict(scn)))
    assert base != compute.cache_key("design", _payload(scn))
    changed = {"model": "gpt3-175b", "layers": 96, "hidden": 12800, "heads": 80,
               "kv_heads": 80, "ffn": 51200, "mlp": "swiglu", "seq_len": 4096, "vocab": 0,
               "budget_kind": "samples", "budget": 1.5e12, "global_batch": 2048,
               "system": "b200", "nvs": 64, "hbm_gb": 141.01, "hbm_tb_per_s": 4.81,
               "matrix_tflops": 990.0, "matrix_tflops_fp4": 5000.0, "nvlink_gb_per_s": 900.0,
               "nic_gb_per_s": 25.0,
               "nics_per_gpu": 2.0, "node_gpus": 4, "tdp_w": 1000.0, "node_power_factor": 1.5,
               "usd_per_gpu_hour": 3.0, "purchase_usd_per_gpu": 40000.0,
               "compat": "paper", "gpus_max": 8192,
               "stack": "megatron-lm-2021",
               "recompute": "full", "sequence_parallel": False, "interleave": 2, "zero": 3,
               "precision": "fp8", "tp_overlap": False, "fp8_param_gather": False,
               "context_attention": "ring",
               "offload": "optimizer", "recompute_layers": 2, "offload_layers": 2,
               "flash_attention": False, "fp32_gradients": False,
               "ends_count_as_layers": False, "dp_overlap": False, "dp_bucket_mb": 25.0,
               "attention": "gqa", "q_lora_rank": 1536, "kv_lora_rank": 512,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
               "experts": 64, "top_k": 8, "expert_ffn": 2048, "shared_experts": 1,
               "dense_layers": 3, "ep_dispatcher": "alltoall", "ep_overlap": True,
               "moe_capacity_factor": 1.25, "moe_imbalance": 1.3, "production_layout": False,
               "expert_gemm": "grouped", "moe_router_padding": False, "ep_max_domains": 4,
               "swiglu_fp8_cache": True, "attention_kernel": "fa3", "elementwise": "eager",
               "pipeline_schedule": "dualpipe", "optimizer_bf16_moments": True,
               "recompute_norm_up_proj": True, "fsdp_version": 2,
               "fsdp_reshard_after_forward": False, "fsdp_gather_dtype": "fp32",
               "fsdp_prefetch": 0, "fsdp_shard_group": 8, "tp_style": "dtensor",
               "moe_router_fusion": False, "moe_permute_fusion": False}
    assert set(compute._inputs(scn)) <= set(changed)
    for key, value in changed.items():
        assert scn[key] != value
        assert compute.cache_key("scaling", _payload({**scn, key: value})) != base, key
    monkeypatch.setattr(compute, "ESTIMATOR_VERSION", compute.ESTIMATOR_VERSION + "-next")
    assert compute.cache_key("scaling", _payload(scn)) != base


@pytest.fixture
def sweep_calls(monkeypatch) -> list[int]:
    from dashboard.jobs import sweep_parts  # the scaling views sweep through it

    calls: list[int] = []
    real = sweep_parts.sweep

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(sweep_parts, "sweep", counting)
    return calls


def test_scaling_cached_equals_uncached(sweep_calls, tmp_cache):
    scn = default()
    fresh = compute.scaling(scn)
    assert len(sweep_calls) == 1 and not fresh.empty
    assert (tmp_cache / "results").is_dir()
    again = compute.scaling(scn)
    assert len(sweep_calls) == 1, "the second call must be served from the cache"
    pd.testing.assert_frame_equal(fresh, again, check_dtype=False)
    compute.scaling(valid(hbm_gb=140.5))
    assert len(sweep_calls) == 2


def test_deleted_cache_directory_recomputes(sweep_calls, tmp_cache):
    scn = default()
    first = compute.scaling(scn)
    shutil.rmtree(tmp_cache)
    again = compute.scaling(scn)
    assert len(sweep_calls) == 2
    pd.testing.assert_frame_equal(first, again, check_dtype=False)
    compute.scaling(scn)
    assert len(sweep_calls) == 2  # and the re-created cache serves it again


@pytest.mark.parametrize("garbage", ["this is not JSON {", b"\x00\x01binary", 12345])
def test_corrupt_cache_entry_recomputes(sweep_calls, garbage):
    scn = default()
    first = compute.scaling(scn)
    store = compute.cache()
    keys = list(store.iterkeys())
    assert keys
    for key in keys:
        store.set(key, garbage)
    again = compute.scaling(scn)
    assert len(sweep_calls) == 2
    pd.testing.assert_frame_equal(first, again, check_dtype=False)
    compute.scaling(scn)
    assert len(sweep_calls) == 2  # the recomputed value replaced the garbage


def test_unusable_cache_directory_still_computes(sweep_calls, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(compute, "CACHE_DIR", blocker / "cache")
    assert compute.cache() is None
    assert not compute.scaling(default()).empty
    assert not compute.scaling(default()).empty
    assert len(sweep_calls) == 2


INFEASIBLE = {**S.model_values("vit-era5"), **S.system_values("a100"), "gpus_min": 4,
              "gpus_max": 32, "strategy": "1d"}


def test_memory_floor_names_dominant_part_and_a_count_that_fits():
    scn = valid(**INFEASIBLE)
    assert compute.scaling(scn).empty
    floor = studies.memory_floor(scn)
    assert floor["gpus"] == 32 and floor["strategy"] == "1d"
    assert floor["capacity_gb"] == scn["hbm_gb"]
    assert floor["min_memory_gb"] > floor["capacity_gb"]
    parts = floor["parts"]
    assert set(parts) == {"weights_gb", "gradients_gb", "optimizer_gb", "activations_gb"}
    assert floor["dominant"] == max(parts, key=parts.get) == "activations_gb"
    assert math.isclose(sum(parts.values()), floor["min_memory_gb"], rel_tol=0.05)
    if "fits_at_gpus" in floor:
        n = floor["fits_at_gpus"]
        assert n > 32 and n & (n - 1) == 0
        assert not compute.scaling(valid(**{**INFEASIBLE, "gpus_min": n, "gpus_max": n})).empty


def test_other_frames_cached_equal_uncached():
    scn = default()
    for fn in (compute.design, compute.top):
        pd.testing.assert_frame_equal(fn(scn), fn(scn), check_dtype=False)
    row = compute.top(scn).iloc[0].to_dict()
    pd.testing.assert_frame_equal(compute.ops(scn, row), compute.ops(scn, row),
                                  check_dtype=False)


# --------------------------------------------------------------------------- pages


def _numbers(values: Any) -> list[float]:
    if values is None:
        return []
    return pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").tolist()


def _ys(figs) -> list[list[float]]:
    """Every trace's y values, rounded (NaN for gaps), for all figures."""
    return [[round(v, 9) if math.isfinite(v) else None for v in _numbers(tr.y)]
            for fig in figs for tr in fig.data]


TEXTS = len(scaling.TEXTS)  # summary, idealised, knee, infeasible; then the figures


def _scaling(**over: Any) -> tuple:
    out = scaling.build(valid(**over))
    assert len(out) == TEXTS + len(scaling.GRAPHS)
    assert all(isinstance(f, go.Figure) for f in out[TEXTS:])
    return out


def test_scaling_page_builds_default():
    out = _scaling()
    summary, idealised, knee, infeasible, figs = *out[:TEXTS], out[TEXTS:]
    assert summary.startswith("Fastest (production strategies") and "days" in summary
    assert "2D SUMMA" not in summary and "2D SUMMA (idealised)" in idealised
    assert "of the 989.4 TFLOP/s bf16 peak" in summary  # MFU with its peak
    assert knee.startswith("Recommended size:") and "at or above 50%" in knee
    assert infeasible == ""
    assert all(len(f.data) > 0 for f in figs)
    assert any(v is not None for ys in _ys(figs) for v in ys)


@pytest.mark.parametrize("over", [
    S.system_values("b200"), S.system_values("a100"),  # GPU generation
    {"nvs": 64}, {"nvs": 4},
    {"hbm_gb": 80.0}, {"hbm_gb": 400.0},
], ids=["b200", "a100", "nvs64", "nvs4", "hbm80", "hbm400"])
def test_scaling_figures_follow_the_inputs(over):
    base, other = _scaling()[TEXTS:], _scaling(**over)[TEXTS:]
    time_fig, mem_fig = 0, 2
    assert _ys(other) != _ys(base)
    if "hbm_gb" in over:  # the memory figure draws the capacity
        assert _ys([other[mem_fig]]) != _ys([base[mem_fig]])
    else:  # a different system or domain changes the training time itself
        assert _ys([other[time_fig]]) != _ys([base[time_fig]])


@pytest.mark.parametrize("over", [{}, {"presentation": True}, INFEASIBLE],
                         ids=["default", "presentation", "infeasible"])
def test_scaling_callback_sends_the_figures_json(over):
    """The callback builds plain dicts (no plotly Figure): the same JSON as the Figures."""
    from plotly.io.json import to_json_plotly

    from dashboard.figures.common import plain

    scn = valid(**over)
    scaling.build(scn)  # both below read the sweep's frame from the results cache
    figs = [plain(f) if isinstance(f, go.Figure) else f for f in scaling.build(scn)]
    sent = scaling.update(scn)
    shown = len(scaling.TEXTS) + len(scaling.GRAPHS)
    assert json.loads(to_json_plotly(figs)) == sent[:shown]
    # then what each figure's export rebuilds it with (the threshold and the breakdown scale)
    assert sent[shown:] == [[50.0, "log"]] * len(scaling.GRAPHS)


def test_scaling_page_infeasible_explains():
    # with the production rules relaxed, tp1 16 over two 8-GPU domains fits at 64 GPUs
    # (model/engine/production.py); with them, no count up to 64x does
    assert "64" in scaling.build(valid(**INFEASIBLE, production_layout=False))[3]
    out = scaling.build(valid(**INFEASIBLE))
    assert out[:3] == ("", "", "")
    text = out[3]
    assert text and "GB" in text and "activations" in text
    for fig in out[TEXTS:]:
        assert len(fig.data) == 0
        assert any("No configuration fits" in (a.text or "") for a in fig.layout.annotations)


def test_scaling_page_with_no_gpu_count_in_range_does_not_crash():
    # valid scenario whose range holds no count of the grid (powers of two): 65…100
    scn, errors = S.validate_scenario({**default(), "nvs": 72, "gpus_min": 65, "gpus_max": 100})
    if scn is None:
        assert set(errors) & {"gpus_min", "gpus_max", "nvs"}
        return
    assert S.gpu_counts(scn) == []
    out = scaling.build(scn)
    assert out[0] == "" and "65" in out[3] and "100" in out[3]
    assert all(len(fig.data) == 0 for fig in out[TEXTS:])


def test_design_page_space_and_ops():
    scn = default()
    heat, rows, selected, why = design.build_space(scn)
    assert why == ""
    assert isinstance(heat, go.Figure)
    assert "heatmap" in [t.type for t in heat.data]
    assert sum(_points(go.Figure(data=[t])) for t in heat.data if t.type == "heatmap") > 0
    assert 0 < len(rows) <= compute.TOP_K
    assert selected == [rows[0]]
    assert {"samples_per_s", "train_days", "placement", "tp1", "pp"} <= set(rows[0])
    days = [r["train_days"] for r in rows]
    assert min(days) == days[0]
    ops_fig, roof, op_rows = design.build_ops(scn, [rows[0]])
    assert isinstance(ops_fig, go.Figure) and isinstance(roof, go.Figure)
    assert len(ops_fig.data) > 0 and len(roof.data) > 0
    assert op_rows and {"op", "t_iteration_s"} <= set(op_rows[0])
    empty_ops, empty_roof, none = design.build_ops(scn, [])
    assert none == [] and len(empty_ops.data) == 0 and len(empty_roof.data) == 0


def test_hbm_grid_validates():
    caps, bws = hbm.grid(40, 400, 1, 16, 8)
    assert len(caps) == len(bws) == 8
    assert caps[0] == 40 and caps[-1] == 400 and bws[0] == 1 and bws[-1] == 16
    for args, needle in [((None, 400, 1, 16, 8), "fill in every field"),
                         ((40, None, 1, 16, 8), "fill in every field"),
                         ((400, 40, 1, 16, 8), "0 < from < to"),
                         ((0, 40, 1, 16, 8), "0 < from < to"),
                         ((40, 400, -1, 16, 8), "0 < from < to"),
                         ((40, 400, 16, 16, 8), "0 < from < to"),
                         ((40, 400, 1, 16, 1), "between 2 and 20"),
                         ((40, 400, 1, 16, 21), "between 2 and 20")]:
        with pytest.raises(ValueError, match=needle):
            hbm.grid(*args)


# --------------------------------------------------------------------------- export


def _points(fig: go.Figure) -> int:
    """Plotted points of a figure: finite cells of 2-D traces, (x, y) pairs of the others
    (legend-only placeholders excluded)."""
    total = 0
    for tr in fig.data:
        z = getattr(tr, "z", None)
        if z is not None:
            cells = pd.DataFrame(list(z)).apply(pd.to_numeric, errors="coerce").to_numpy(float)
            total += int(np.isfinite(cells).sum())
            continue
        xs = list(tr.x) if tr.x is not None else []
        ys = list(tr.y) if tr.y is not None else []
        for i in range(max(len(xs), len(ys))):
            x = xs[i] if i < len(xs) else None
            y = ys[i] if i < len(ys) else None
            total += not (x is None and y is None)
    return total


EXPORTED = (*scaling.GRAPHS, "design-heatmap", "design-ops", "design-roofline")


@pytest.fixture(scope="module")
def figures_by_name() -> dict[str, go.Figure]:
    """The figures of the scaling and design pages for the default scenario."""
    scn = default()
    figs = dict(zip(scaling.GRAPHS, scaling.build(scn)[TEXTS:]))
    heat, _, selected, _ = design.build_space(scn)
    ops_fig, roof, _ = design.build_ops(scn, selected)
    figs.update({"design-heatmap": heat, "design-ops": ops_fig, "design-roofline": roof})
    assert set(figs) == set(EXPORTED)
    return figs


@pytest.fixture(scope="module")
def time_figure(figures_by_name) -> go.Figure:
    return figures_by_name["scaling-time"]


def test_export_html_is_standalone(time_figure):
    html, ext = export.render(time_figure.to_dict(), "html")
    assert ext == "html" and isinstance(html, str)
    assert "plotly" in html and "<html" in html
    assert len(html) > 1_000_000  # plotly.js inline
    assert 'src="https://cdn.plot.ly' not in html


@pytest.mark.parametrize("name", EXPORTED)
def test_export_csv_has_one_row_per_point(figures_by_name, name):
    fig = figures_by_name[name]
    points = _points(fig)
    assert points > 0
    text, ext = export.render(fig.to_dict(), "csv")  # a dict, as the browser sends it back
    assert ext == "csv"
    lines = text.strip().splitlines()
    assert lines[0].startswith("trace,type,group,x,y")
    assert len(lines) - 1 == points
    table = pd.read_csv(io.StringIO(text))
    assert len(table) == points and table["trace"].notna().all()


def test_export_png(time_figure):
    data, ext = export.render(time_figure.to_dict(), "png")  # fails (no skip) without chromium
    assert ext == "png" and isinstance(data, bytes)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000


# --------------------------------------------------------------------------- app


def test_app_serves_index_and_layout():
    client = dash_app.server.test_client()
    assert client.get("/").status_code == 200
    layout = client.get("/_dash-layout")
    assert layout.status_code == 200
    assert "ctl-hbm_gb" in layout.get_data(as_text=True)
    assert isinstance(layout.get_json(), dict)


def test_app_main_parses_arguments(monkeypatch):
    calls: list[dict] = []
    monkeypatch.setattr(dash_app.app, "run", lambda **kw: calls.append(kw))
    monkeypatch.delenv("HOST", raising=False)
    monkeypatch.delenv("PORT", raising=False)
    dash_app.main([])
    assert calls[-1] == {"host": "127.0.0.1", "port": 8050, "debug": False}
    dash_app.main(["--host", "0.0.0.0", "--port", "9001", "--debug"])
    assert calls[-1] == {"host": "0.0.0.0", "port": 9001, "debug": True}
    with pytest.raises(SystemExit):
        dash_app.main(["--port", "not-a-number"])


def test_tests_do_not_use_the_repository_cache():
    repo_cache = Path(dash_app.HERE) / "cache"
    assert Path(compute.CACHE_DIR).resolve() != repo_cache.resolve()
    assert not str(Path(compute.CACHE_DIR).resolve()).startswith(str(repo_cache.resolve()))


def test_no_configuration_at_all_is_explained_by_the_rule_it_breaks():
    """An 8-layer model on NVL72 racks in the paper mode (whose counts are 72·2^k): each count
    has a factor 9 that neither the global batch (4096) nor the heads (160) can take, and 8
    layers cannot make 9 pipeline stages. Changed deliberately (issue 12): the default model's
    counts are powers of two for every domain now, and the explanation names the closest
    factorisation and the rule it breaks (model.engine.rules.why_no_candidates)."""
    from dashboard.controls.scenario import system_values
    scn = valid(**system_values("gb200-nvl72"), gpus_min=72, gpus_max=4608, layers=8,
                compat="paper")
    text = scaling.build(scn)[3]
    assert text.startswith("No context configuration exists on 4608 GPUs")
    assert "tp1·tp2·dp = 1·1·512" in text and "pp = 9" in text
    assert "pp=9 does not divide layers=8" in text
    assert not compute.scaling(valid(**system_values("gb200-nvl72"), gpus_min=72,
                                     gpus_max=4608)).empty


def test_design_page_explains_a_count_that_cannot_be_factored():
    heat, rows, selected, why = design.build_space(valid(gpus=1023))
    assert rows == [] and selected == []
    assert why.startswith("No summa configuration exists on 1023 GPUs")
    assert "pp = 1023" in why and "more stages than layers=128" in why
    assert len(heat.data) == 0 and "1023" in heat.layout.annotations[0].text


def test_execution_controls_change_the_scaling_data():
    """Full recompute costs time; fp8 on a GPU without an FP8 rate is an inline error."""
    base = compute.scaling(valid(strategy="1d"))
    full = compute.scaling(valid(strategy="1d", recompute="full"))
    common = sorted(set(base["gpus"]) & set(full["gpus"]))
    assert common and not base.set_index("gpus").loc[common, "iteration_time_s"].equals(
        full.set_index("gpus").loc[common, "iteration_time_s"])
    assert (full["recompute"] == "full").all()
    scn, errors = S.validate_scenario({**valid(), **S.system_values("a100"), "precision": "fp8"})
    assert scn is None and "FP8" in errors["precision"]
    assert S.execution_of(valid(compat="paper", recompute="full")) is None


def test_hbm_sweep_stops_at_its_time_budget_with_a_clear_message():
    from model import ModelError
    scn = valid(strategy="1d", gpus=64)
    with pytest.raises(ModelError, match="time budget"):
        studies.hbm_sweep(scn, [80.0, 141.0, 192.0], [2.0, 4.8], time_budget_s=0.0)
    frame = studies.hbm_sweep(scn, [80.0, 141.0], [4.8], time_budget_s=60.0)
    assert len(frame) == 2


def test_a_cached_hbm_sweep_reports_its_progress_done():
    """A sweep the results cache already holds still reports n / n (the page waited for it:
    the Celery test's second sweep of the same grid)."""
    from dashboard.jobs import studies

    scn = valid(strategy="1d", gpus=64)
    studies.hbm_sweep(scn, [80.0, 141.0], [4.8])
    seen: list[tuple[int, int]] = []
    studies.hbm_sweep(scn, [80.0, 141.0], [4.8], progress=lambda d, t: seen.append((d, t)))
    assert seen == [(2, 2)]


def _components(node: Any):
    """Every Dash component under ``node`` (a layout, a list, or a component)."""
    if isinstance(node, (list, tuple)):
        for child in node:
            yield from _components(child)
    elif hasattr(node, "to_plotly_json"):
        yield node
        yield from _components(getattr(node, "children", None))


def test_no_text_box_is_debounced():
    """Dash 4.4's debounced text input puts the caret back where it was one render earlier (a
    setTimeout after each change, dcc/src/components/Input.tsx): fast typing on a busy page
    reorders the characters. Number boxes have no caret to restore; text boxes must not be
    debounced (the co-design form read "40, 80" as "4 800,")."""
    import dash
    from dash import dcc

    layouts = [dash_app.app.layout] + [
        page["layout"]() if callable(page["layout"]) else page["layout"]
        for page in dash.page_registry.values()]
    boxes = [c for c in _components(layouts) if isinstance(c, dcc.Input)]
    assert len(boxes) > 20
    debounced_text = [c.id for c in boxes
                      if getattr(c, "type", "text") != "number" and getattr(c, "debounce", False)]
    assert debounced_text == []
