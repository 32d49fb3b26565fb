"""The dashboard's controls declared once (dashboard/controls/control_table.py) and honest inputs,
without a browser: every record becomes a schema field, a URL key and a widget, and a new control is
one record; every message names its control and the real reason; typed values are kept; partial
links fill from their preset; the batch in tokens and the critical-batch warning; the software
stack reaches the estimator and the headline carries its error bar."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-controls-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from dash import no_update  # noqa: E402

import app  # noqa: E402, F401 - creates the Dash app (use_pages), registers the callbacks
from dashboard import state  # noqa: E402
from dashboard.controls import panel as controls  # noqa: E402
from dashboard.controls import presets as PR  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls import scenario_link as L  # noqa: E402
from dashboard.controls.control_record import WIDGETS  # noqa: E402
from dashboard.controls.control_table import BY_KEY, CONTROLS, GROUPS  # noqa: E402
from dashboard.controls.inputs import batch_from_tokens, check_value  # noqa: E402
from dashboard.figures import theme  # noqa: E402
from dashboard.jobs import compute  # noqa: E402
from dashboard.views import notes  # noqa: E402
from model import load_model, load_system, search  # noqa: E402
from model.physics.strategies import SHORT_LABELS, STRATEGIES  # noqa: E402
from model.specs.precision import NAMES as PRECISIONS  # noqa: E402
from model.specs.stack import default_stack_name, list_stacks  # noqa: E402
from model.validation.error_bars import error_bar  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _ids(component: Any) -> set[str]:
    """Every component id in a Dash layout tree."""
    found: set[str] = set()
    stack = [component]
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)):
            stack.extend(node)
            continue
        if isinstance(getattr(node, "id", None), str):  # not the pattern-matching ids
            found.add(node.id)
        children = getattr(node, "children", None)
        if children is not None and not isinstance(children, str):
            stack.append(children)
    return found


def _boxes(component: Any) -> list[Any]:
    """Every number box (dcc.Input) in a Dash layout tree."""
    found, stack = [], [component]
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)):
            stack.extend(node)
            continue
        if type(node).__name__ == "Input":
            found.append(node)
        children = getattr(node, "children", None)
        if children is not None and not isinstance(children, str):
            stack.append(children)
    return found


def _valid(**over: Any) -> dict[str, Any]:
    scn, errors = S.validate_scenario({**S.default_scenario(), **over})
    assert errors == {} and scn is not None, errors
    return scn


def _error(**over: Any) -> dict[str, str]:
    scn, errors = S.validate_scenario({**S.default_scenario(), **over})
    assert scn is None
    return errors


# --------------------------------------------------------------------------- the table


def test_every_record_is_a_field_a_url_key_and_a_widget():
    scn = S.default_scenario()
    query = L.from_query(L.to_query(scn))
    panel_ids = _ids(controls.panel(scn))
    header_ids = _ids(app.app.layout())
    for c in CONTROLS:
        assert c.group in GROUPS and c.widget in WIDGETS, c.key
        assert c.key in S.KEYS and S.BY_KEY[c.key].name == c.key
        assert c.key in scn and check_value(c, scn[c.key]) == (scn[c.key], "")
        assert query[c.key] == scn[c.key], c.key  # the URL carries it
        assert f"ctl-{c.key}" in (header_ids if c.group == "header" else panel_ids), c.key
        if c.group != "header":
            assert {f"err-{c.key}", f"note-{c.key}"} <= panel_ids
            assert c.key in state.ERROR_KEYS
        assert c.tip and c.label[0].isupper()
    assert len(S.KEYS) == len(set(S.KEYS)) == len(CONTROLS)
    assert {f"reset-{g}" for g in PR.PRESET_OF} <= panel_ids
    # what the estimator's cache key holds: every preset group, and the mode
    assert set(S.estimator_inputs(scn)) == {c.key for c in CONTROLS
                                         if c.group in PR.PRESET_OF} | {"mode"}


def test_choices_come_from_the_model_tables():
    assert BY_KEY["strategy"].choices == ("all", *STRATEGIES)
    assert BY_KEY["design_strategy"].choices == STRATEGIES
    assert BY_KEY["strategy"].names[1:] == tuple(SHORT_LABELS[s] for s in STRATEGIES)
    assert BY_KEY["precision"].choices == PRECISIONS
    assert BY_KEY["stack"].choices == (*list_stacks(), "none")
    assert S.default_scenario()["stack"] == default_stack_name()
    assert theme.STRATEGY_ORDER == STRATEGIES and set(theme.STRATEGY_LABELS) == set(STRATEGIES)
    assert compute.strategies_of(_valid(strategy="all")) == STRATEGIES


NEW_CONTROL = """
import json, os, sys
os.environ["PERF_CACHE_DIR"] = sys.argv[1]
import dashboard.controls.control_table as table
new = table.Control("dropout", "Dropout", "model", "switch", names=("on", "off"), spec="dropout")
table.CONTROLS = (*table.CONTROLS, new)
table.BY_KEY["dropout"] = new
import app
from dashboard.jobs import compute
from dashboard.controls import panel as controls, presets as PR, scenario as S, scenario_link as L
from dashboard import state
scn = S.default_scenario()
off, errors = S.validate_scenario({**scn, "dropout": False})
model, _ = S.build_inputs(off)
back, _ = S.validate_scenario(L.from_query(L.to_query(off)))
ids = str(controls.panel(scn))
print(json.dumps({
    "default": scn["dropout"], "llama": PR.model_values("llama3-8b")["dropout"],
    "errors": errors, "estimator": model.dropout, "url": back["dropout"],
    "bad": S.validate_scenario({**scn, "dropout": "maybe"})[1],
    "widget": "'ctl-dropout'" in ids and "'err-dropout'" in ids,
    "collect": "dropout" in state.ERROR_KEYS and "dropout" in controls.CONTROL_KEYS,
    "cache": "dropout" in S.estimator_inputs(scn),
}))
"""


def test_a_new_control_is_one_record(tmp_path):
    """Append one record to the table (in a fresh process) and nothing else: it is a scenario
    field with its default from the model preset, reaches the estimator's spec, survives the
    URL, is checked with its label, has its widget and error slot, is collected by the
    callbacks and is part of the results' cache key."""
    out = subprocess.run([sys.executable, "-c", NEW_CONTROL, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"default": True, "llama": False, "errors": {}, "estimator": False,
                   "url": False, "bad": {"dropout": "Dropout must be one of on, off"},
                   "widget": True, "collect": True, "cache": True}


def test_the_panel_builds_from_any_table():
    extra = controls.PANEL + (BY_KEY["presentation"].__class__(
        "label_smoothing", "Label smoothing", "run", "number", float, "A future control.",
        lo=0, hi=1, suggest=(0.0, 0.1)),)
    ids = _ids(controls.panel({**S.default_scenario(), "label_smoothing": 0.1}, extra))
    assert {"ctl-label_smoothing", "err-label_smoothing", "list-label_smoothing"} <= ids


# --------------------------------------------------------------------------- honest inputs


@pytest.mark.parametrize("over, key, message", [
    ({"layers": 0}, "layers", "Layers must be at least 1"),
    ({"layers": -3}, "layers", "Layers must be at least 1"),
    ({"nvlink_gb_per_s": -100}, "nvlink_gb_per_s", "NVLink bandwidth must be positive"),
    ({"gpus_max": 1e9}, "gpus_max", "GPUs (to) must be at most 10,000,000"),
    ({"hbm_tb_per_s": -1}, "hbm_tb_per_s", "HBM bandwidth must be positive"),
    # the spec's floor, 1 GB/s (the control's own 0.01 TB/s differed from it before issue 33)
    ({"hbm_tb_per_s": 0.0005}, "hbm_tb_per_s", "HBM bandwidth must be at least 0.001 TB/s"),
    ({"layers": None}, "layers", "Layers needs a value: a whole number from 1 to 10,000"),
    ({"zero": True}, "zero", "ZeRO stage must be one of 0, 1, 2, 3"),
    ({"precision": "fp9"}, "precision", "Precision must be one of BF16, FP16, "
     "FP8 (current scaling), FP8 (delayed scaling), FP8 (128-element blocks), "
     "MXFP8 (32-element blocks), "
     "NVFP4 (16-element blocks)"),
    ({"attention": "gqa", "kv_heads": 320}, "kv_heads",
     "KV heads (320) must divide the heads (160)"),
    ({"system": "a100", "precision": "fp8"}, "precision",
     "A100 SXM4 80GB (ampere) has no FP8 (current scaling) tensor cores: fp8 runs on "
     "hopper, blackwell, blackwell-ultra, cdna3 GPUs only; choose bf16 or fp16"),
    ({"system": "h100", "precision": "mxfp8"}, "precision",
     "H100 SXM5 80GB (hopper) has no MXFP8 (32-element blocks) tensor cores: mxfp8 runs on "
     "blackwell, blackwell-ultra GPUs only; choose bf16, fp16, fp8, fp8-delayed or "
     "fp8-blockwise"),
])
def test_messages_name_the_control_and_the_reason(over, key, message):
    errors = _error(**over)
    assert errors == {key: message}
    assert "empty" not in message and "'" not in message  # no internal key names


def test_typed_values_are_kept_never_rounded_or_clamped():
    assert _valid(hbm_tb_per_s=3.35)["hbm_tb_per_s"] == 3.35
    assert _valid(hbm_gb=8)["hbm_gb"] == 8.0  # below the slider's 16 GB: kept
    scn = _valid(hbm_tb_per_s=3.35, hbm_gb=8)
    _, system = S.build_inputs(scn)
    assert system.hbm_bandwidth_gb_per_s == pytest.approx(3350.0, abs=1e-9)
    assert system.hbm_capacity_gb == 8.0
    assert L.from_query(L.to_query(scn))["hbm_tb_per_s"] == 3.35


def test_the_slider_follows_the_box_and_only_a_real_move_sets_it():
    c = BY_KEY["hbm_tb_per_s"]
    # typed 3.35: the box keeps it, the slider goes there (it may show 3.3 or 3.4)
    assert state.slider_sync(c, False, 3.35, 4.8) == (no_update, 3.35)
    # typed -1 or 100: the slider stops at its end; the box (and its error) stay as typed
    assert state.slider_sync(c, False, -1, 4.8) == (no_update, 0.5)
    assert state.slider_sync(c, False, 100, 4.8) == (no_update, 32)
    assert state.slider_sync(c, False, None, 4.8) == (no_update, no_update)
    # the slider's echo of 3.35 (snapped to 3.4) does not overwrite the box; a move does
    assert state.slider_sync(c, True, 3.35, 3.4) == (no_update, no_update)
    assert state.slider_sync(c, True, 3.35, 5.0) == (5.0, no_update)
    assert state.slider_sync(BY_KEY["hbm_gb"], True, 8.0, 16) == (no_update, no_update)


def test_number_boxes_apply_on_enter_and_keep_out_of_range_values():
    """Debounced boxes send on Enter or blur; no min/max/step on the element (the browser would
    report 0 layers as an empty box)."""
    for c in controls.PANEL:
        if c.widget in ("number", "slider"):
            box = controls.widget(c, S.default_scenario()[c.key])
            box = box.children[0] if c.widget == "slider" else box
            assert box.debounce is True and box.step == "any", c.key
            assert getattr(box, "min", None) is None and getattr(box, "max", None) is None


# --------------------------------------------------------------------------- presets and links


def test_a_partial_link_fills_the_rest_from_the_preset_it_names():
    h100 = load_system("h100")
    n = len(controls.CONTROL_KEYS)
    out = state.hydrate("#system=h100", False, S.default_scenario())
    values = dict(zip(controls.CONTROL_KEYS, out[:n]))
    assert values["hbm_gb"] == h100.hbm_capacity_gb == 85.52
    assert values["hbm_tb_per_s"] == 3.35 and values["system"] == "h100"
    assert values["model"] == "gpt3-1t"  # groups the link does not name: the defaults
    # what the link gives wins over its preset
    raw = S.with_presets(L.from_query("#system=h100&hbm_gb=100&model=llama3-405b"))
    assert raw["hbm_gb"] == 100 and raw["hbm_tb_per_s"] == 3.35
    assert raw["global_batch"] == 2048 and raw["seq_len"] == 8192  # Llama 3 405B's published
    raw = S.with_presets(L.from_query("#stack=megatron-lm-2021"))
    assert (raw["sequence_parallel"], raw["zero"], raw["tp_overlap"]) == (False, 0, False)
    assert S.with_presets(L.from_query("#system=nope"))["system"] == "nope"  # the validator says


def test_a_stack_fills_its_kernel_fsdp_and_moe_execution_controls():
    """Every execution field is a control the stack preset fills (issue 22); the FSDP rows show
    and their section opens with ZeRO-3 only, the MoE execution rows with experts only."""
    fsdp = S.with_presets(L.from_query("#stack=pytorch-fsdp-2023"))
    assert (fsdp["zero"], fsdp["fsdp_version"], fsdp["fsdp_prefetch"]) == (3, 1, 0)
    assert (fsdp["attention_kernel"], fsdp["elementwise"]) == ("fa2", "eager")
    assert S.execution_of(S.validate_scenario(fsdp)[0])["fsdp_gather_dtype"] == "bf16"
    deepseek = S.with_presets(L.from_query("#stack=deepseek-v3-2024"))
    assert (deepseek["pipeline_schedule"], deepseek["ep_max_domains"]) == ("dualpipe", 4)
    assert deepseek["expert_gemm"] == "grouped" and deepseek["swiglu_fp8_cache"]
    assert deepseek["recompute_norm_up_proj"] and deepseek["optimizer_bf16_moments"]
    shown = dict.fromkeys(c.key for c in controls.CONDITIONAL)

    def visible(values):
        styles, opened = state.visibility(values)
        rows = {k for k, style in zip(shown, styles) if style.get("display") != "none"}
        return rows, dict(zip(controls.OPENING, opened))

    rows, opened = visible({"zero": 1, "experts": 0})
    assert not {"fsdp_version", "expert_gemm"} & rows
    assert not opened["fsdp"] and not opened["moe_execution"]
    rows, opened = visible({"zero": 3, "experts": 256})
    assert {"fsdp_version", "fsdp_shard_group", "expert_gemm", "ep_max_domains"} <= rows
    assert opened["fsdp"] and opened["moe_execution"]


def test_model_presets_set_their_published_global_batch():
    assert PR.model_values("llama3-405b")["global_batch"] == 2048
    assert PR.model_values("gpt3-175b")["global_batch"] == 1536
    assert PR.model_values("llama3-8b")["global_batch"] == 4096  # none published: the default
    assert load_model("llama3-8b").global_batch is None


# --------------------------------------------------------------------------- batch in tokens


def test_global_batch_in_tokens():
    assert batch_from_tokens(16 * 2**20, 8192) == (2048, "")
    sequences, message = batch_from_tokens(16_000_000, 8192)
    assert sequences is None and message == (
        "Global batch of 16,000,000 tokens is not a whole number of 8,192-token sequences: use "
        "a multiple of 8,192 (e.g. 15,998,976 or 16,007,168)")
    assert batch_from_tokens(-5, 8192)[1] == "Global batch (tokens) must be positive"
    assert batch_from_tokens(8192 * 10**9, 8192)[1] == (
        "Global batch must be at most 100,000,000 sequences")
    assert "sequence length" in batch_from_tokens(8192, None)[1]
    c = BY_KEY["global_batch"]
    assert state.tokens_sync(c, True, 16 * 2**20, 4096, 8192) == (no_update, 2048, "")
    assert state.tokens_sync(c, True, 16_000_000, 4096, 8192)[:2] == (no_update, no_update)
    assert state.tokens_sync(c, False, 1, 4096, 8192) == (4096 * 8192, no_update, no_update)
    assert state.tokens_sync(c, False, 1, None, 8192) == (no_update,) * 3


def test_critical_batch_warning():
    llama8 = _valid(**PR.model_values("llama3-8b"))
    warning = notes.critical_batch_warning(llama8)  # 4096 × 8192 = 33.6M tokens
    assert "exceeds the critical batch" in warning and "Kaplan et al. 2020" in warning
    assert "7.36M tokens" in warning and "898 sequences" in warning
    assert notes.critical_batch_warning({**llama8, "global_batch": 512}) == ""
    assert notes.critical_batch_warning(_valid(**PR.model_values("llama3-405b"))) == ""
    assert notes.critical_batch_warning(_valid(**PR.model_values("vit-era5"))) == ""
    text = str(notes.batch_note(llama8))
    assert "33.6M tokens" in text and "publishes no global batch" in text
    assert "published with" in str(notes.batch_note(_valid(**PR.model_values("llama3-405b"))))


# --------------------------------------------------------------------------- stack, error bar


def test_the_stack_reaches_the_estimator(tmp_cache):
    base = _valid(**PR.model_values("llama3-8b"), strategy="1d", design_strategy="1d", gpus=64)
    # choosing a stack loads its execution group (as the panel and a partial link do)
    old = _valid(**{**base, **PR.preset_values("execution", "megatron-lm-2021")})
    default, chosen = compute.top(base), compute.top(old)
    assert not np.allclose(default["iteration_time_s"].iloc[:5],
                           chosen["iteration_time_s"].iloc[:5])
    m, s = S.build_inputs(old)
    direct = search(m, s, 64, old["global_batch"], "1d", execution=S.execution_of(old),
                    stack="megatron-lm-2021", top_k=compute.TOP_K).top
    assert len(direct) == len(chosen)
    np.testing.assert_allclose(chosen["iteration_time_s"], direct["iteration_time_s"],
                               rtol=1e-12)
    assert (chosen["flash_attention"] == direct["flash_attention"]).all()
    assert not chosen["flash_attention"].any()  # the 2021 stack's default, not the control's
    # the scaling sweep and the design space take it too
    assert not compute.scaling(base).equals(compute.scaling(old))
    assert compute.design(base)["best_time_s"].min() != compute.design(old)["best_time_s"].min()


def test_the_headline_carries_the_error_bar():
    """The interval of the scenario's population (its stack's family, dense, its GPU generation:
    issue 32); the default system, H200, is a Hopper GPU: the Hopper runs' interval; MI300X
    was never scored: 'not validated' (tests/test_error_bars.py)."""
    assert "dense training on hopper GPUs" in notes.days_text(_valid(), 182.0)
    mi = _valid(**{**PR.system_values("mi300x"), "system": "mi300x"})
    assert "not validated: no published dense run on a cdna3 GPU" in notes.days_text(mi, 182.0)
    scn = _valid(**{**PR.system_values("gb200-nvl72"), "system": "gb200-nvl72"})
    bar = error_bar(scn["stack"], False, "gb200-nvl72")
    low, high = bar.time_range(182.0)
    assert notes.days_text(scn, 182.0) == f"182.0 days ({low:.1f}–{high:.1f}, {bar.text})"
    assert "split-conformal over" in notes.days_text(scn, 182.0)
    low, high = bar.rate_range(12.0)
    assert notes.rate_text(scn, 12.0) == f"12.0 samples/s ({low:.1f}–{high:.1f})"
    assert notes.days_text(_valid(stack="none"), 182.0) == "182.0 days"
    assert notes.days_text(_valid(mode="paper"), 182.0) == "182.0 days"
    assert notes.rate_text(_valid(mode="paper"), 12.0) == "12.0 samples/s"


# --------------------------------------------------------------------------- one grid helper


def test_one_grid_column_helper():
    """Column definitions are written only by dashboard/views/grid.py; both tables use it."""
    from dashboard.pages import design, validation

    writers = [p for p in (ROOT / "dashboard").rglob("*.py")
               if '"headerName"' in p.read_text(encoding="utf-8")]
    assert writers == [ROOT / "dashboard" / "views" / "grid.py"]
    for col in [*design.TOP_COLUMNS, *design.OPS_COLUMNS, *validation.RECORD_COLUMNS]:
        assert col["sortable"] in (True, False) and col["headerTooltip"] == col["headerName"]


def test_hbm_sweep_form_keeps_what_was_typed():
    """The sweep's boxes carry no min/max/step (a value outside them reached the page as
    empty); the grid says why a value is refused and never truncates one."""
    from dashboard.pages import hbm

    boxes = [b for b in _boxes(hbm.layout) if b.id in (
        "hbm-cap-min", "hbm-cap-max", "hbm-bw-min", "hbm-bw-max", "hbm-steps")]
    assert len(boxes) == 5
    assert all(b.step == "any" and getattr(b, "min", None) is None
               and getattr(b, "max", None) is None for b in boxes)
    with pytest.raises(ValueError, match="0 < from < to"):
        hbm.grid(0, 400, 1, 16, 8)
    with pytest.raises(ValueError, match="whole number between 2 and 20"):
        hbm.grid(40, 400, 1, 16, 2.5)
    assert len(hbm.grid(40, 400, 1, 16, 3.0)[0]) == 3


def test_a_scenario_validated_again_is_answered_alike():
    """validate_scenario remembers the scenarios it validated lately (every callback validates
    its store again): the same answers in new dicts, and values that compare equal but are
    not the same input (True and 1, 0.0 and -0.0) still validated each as itself."""
    import math

    base = S.default_scenario()
    first, _ = S.validate_scenario({**base, "tdp_w": 0.0})
    first["hbm_gb"] = -1.0  # the caller's dict: the next answer is a new one
    again, errors = S.validate_scenario({**base, "tdp_w": 0.0})
    assert errors == {} and again == {**base, "tdp_w": 0.0} and again is not first
    negative, _ = S.validate_scenario({**base, "tdp_w": -0.0})
    assert math.copysign(1.0, negative["tdp_w"]) == -1.0
    assert S.validate_scenario({**base, "presentation": True})[0]["presentation"] is True
    scn, errors = S.validate_scenario({**base, "presentation": 1})
    assert scn is None and "presentation" in errors
    scn, errors = S.validate_scenario({**base, "presentation": 1})  # remembered: the same
    assert scn is None and "presentation" in errors
