"""Mixture-of-experts and attention controls of the dashboard (issue 14, item 5): the MoE presets
through the control table and back, the values hidden controls keep (round-tripped) and those the
estimator receives instead, the sections that open for a MoE model, the EP all-to-all of the
per-op view and the EP axis of the design-space heatmap. Without a browser (see
tests/browser/test_moe.py for the same in one)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from typing import Any

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-dashboard-moe-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import app  # noqa: E402, F401 - creates the Dash app (use_pages), registers the callbacks
from dashboard import figures, state  # noqa: E402
from dashboard.controls import panel as controls  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls import scenario_link as L  # noqa: E402
from dashboard.controls.control_moe import SECTIONS  # noqa: E402
from dashboard.controls.control_table import BY_KEY, CONTROLS  # noqa: E402
from dashboard.figures import ops as ops_figures  # noqa: E402
from dashboard.jobs import compute  # noqa: E402
from dashboard.pages import design  # noqa: E402
from model import list_models, load_model  # noqa: E402
from model.engine.design import AXES  # noqa: E402

pytestmark = pytest.mark.usefixtures("tmp_cache")
MOE_PRESETS = ("deepseek-v3", "kimi-k2", "qwen3-235b-a22b", "qwen3-30b-a3b", "gpt-oss-120b",
               "mixtral-8x7b", "mixtral-8x22b", "llama4-scout", "llama4-maverick")
MOE_KEYS = ("experts", "top_k", "expert_ffn", "shared_experts", "dense_layers")
MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
EXECUTION_KEYS = ("ep_dispatcher", "ep_overlap", "moe_capacity_factor", "moe_imbalance",
                  "offload_layers")


def _valid(raw: dict[str, Any]) -> dict[str, Any]:
    scn, errors = S.validate_scenario(raw)
    assert errors == {} and scn is not None, errors
    return scn


def _preset(name: str, **over: Any) -> dict[str, Any]:
    return _valid({**S.with_presets({"model": name}), **over})


def _errors(name: str, **over: Any) -> dict[str, str]:
    scn, errors = S.validate_scenario({**S.with_presets({"model": name}), **over})
    assert scn is None
    return errors


# --------------------------------------------------------------------------- the table


def test_every_moe_preset_is_a_choice_of_the_model_dropdown():
    assert set(MOE_PRESETS) <= set(BY_KEY["model"].choices) == set(list_models())
    for c in (*[BY_KEY[k] for k in (*MOE_KEYS, *MLA_KEYS, "attention")],
              *[BY_KEY[k] for k in EXECUTION_KEYS]):
        assert c.tip and (c.spec or c.read), c.key
    assert BY_KEY["moe_imbalance"].unit == BY_KEY["moe_capacity_factor"].unit == "× mean"
    assert {"ep", "etp"} <= set(AXES) == set(BY_KEY["x_axis"].choices)


@pytest.mark.parametrize("name", list_models())
def test_a_preset_through_the_controls_is_the_preset(name):
    """Every field the controls carry, read from the preset and given back to the estimator,
    rebuilds exactly the preset's model (MoE sizes, MLA ranks and KV heads included)."""
    scn = _preset(name)
    model, _ = S.build_inputs(scn)
    assert model == load_model(name)
    m = load_model(name)
    assert scn["attention"] == ("mla" if m.mla else "mha" if m.kv_heads == m.heads else "gqa")
    assert [scn[k] for k in MOE_KEYS] == [m.experts, m.top_k, m.expert_ffn, m.shared_experts,
                                          m.dense_layers]


def test_deepseek_v3_controls_show_its_published_values():
    scn = _preset("deepseek-v3")
    assert {k: scn[k] for k in ("attention", *MOE_KEYS, *MLA_KEYS)} == {
        "attention": "mla", "experts": 256, "top_k": 8, "expert_ffn": 2048, "shared_experts": 1,
        "dense_layers": 3, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128}


def _edited_moe() -> dict[str, Any]:
    """Every new control away from the DeepSeek-V3 preset and from the defaults."""
    return _preset("deepseek-v3", experts=128, top_k=6, expert_ffn=1536, shared_experts=2,
                   dense_layers=1, q_lora_rank=1024, kv_lora_rank=256, qk_nope_head_dim=64,
                   qk_rope_head_dim=32, v_head_dim=64, ep_dispatcher="alltoall",
                   ep_overlap=True, moe_capacity_factor=1.25, moe_imbalance=1.4,
                   offload_layers=2, system="gb200-nvl72")


def test_moe_fields_round_trip_through_the_url_and_json():
    scn = _edited_moe()
    assert S.validate_scenario(S.with_presets(L.from_query(L.to_query(scn)))) == (scn, {})
    text = S.to_json(scn)
    assert json.loads(text) == scn and S.from_json(text) == (scn, {})
    model, _ = S.build_inputs(scn)
    assert (model.experts, model.top_k, model.expert_ffn, model.shared_experts,
            model.dense_layers, model.kv_lora_rank, model.q_lora_rank) == (
        128, 6, 1536, 2, 1, 256, 1024)
    assert {k: S.execution_of(scn)[k] for k in EXECUTION_KEYS} == {
        "ep_dispatcher": "alltoall", "ep_overlap": True, "moe_capacity_factor": 1.25,
        "moe_imbalance": 1.4, "offload_layers": 2}


def test_hidden_values_round_trip_but_do_not_apply():
    """A MoE preset made dense keeps its (hidden) MoE sizes in the link and the file, while the
    estimator gets a dense model; MHA ignores the (hidden) KV heads."""
    scn = _preset("deepseek-v3", experts=0, attention="mha", kv_heads=8)
    assert (scn["top_k"], scn["shared_experts"], scn["dense_layers"], scn["kv_heads"]) == (
        8, 1, 3, 8)
    assert S.validate_scenario(L.from_query(L.to_query(scn))) == (scn, {})
    assert S.from_json(S.to_json(scn)) == (scn, {})
    model, _ = S.build_inputs(scn)
    assert not model.moe and not model.mla
    assert (model.top_k, model.expert_ffn, model.shared_experts, model.dense_layers) == (0,) * 4
    assert model.kv_heads == model.heads == 128
    assert model.params < load_model("deepseek-v3").params / 10  # 256 experts gone


def test_the_attention_type_decides_the_attention():
    gqa = S.build_inputs(_preset("llama3-70b"))[0]
    mha = S.build_inputs(_preset("llama3-70b", attention="mha"))[0]
    mla = S.build_inputs(_preset("llama3-70b", attention="mla", kv_lora_rank=512,
                                 qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128))[0]
    assert (gqa.kv_heads, mha.kv_heads, mla.kv_heads) == (8, 64, 64)
    assert not gqa.mla and not mha.mla and mla.mla and mla.kv_lora_rank == 512
    assert mha.params > gqa.params  # 64 K/V heads instead of 8


@pytest.mark.parametrize("name, over, key, message", [
    ("llama3-70b", {"attention": "mla"}, "kv_lora_rank",
     "KV compression rank must be at least 1 with MLA attention"),
    ("gpt3-1t", {"experts": 8}, "top_k",
     "Experts per token (top-k) must be at least 1 in a mixture of experts"),
    ("gpt3-1t", {"experts": 8, "top_k": 2}, "expert_ffn",
     "Expert FFN size must be at least 1 in a mixture of experts"),
    ("mixtral-8x7b", {"top_k": 9}, "top_k",
     "Experts per token (9) must not exceed the routed experts (8)"),
    ("deepseek-v3", {"dense_layers": 61}, "dense_layers",
     "Dense layers must be fewer than the layers (61): a mixture of experts needs at least one "
     "MoE layer"),
    ("deepseek-v3", {"moe_imbalance": 0.9}, "moe_imbalance",
     "Load imbalance must be at least 1 × mean"),
    ("deepseek-v3", {"moe_capacity_factor": -1}, "moe_capacity_factor",
     "Capacity factor must be at least 0 × mean"),
    ("deepseek-v3", {"ep_dispatcher": "nccl"}, "ep_dispatcher",
     "EP dispatcher must be one of alltoall, flex"),
    ("gpt3-1t", {"offload": "activations", "offload_layers": 2, "system": "a100"},
     "offload_layers", "Offloaded layers per stage must be 0 with activation offload "
     "('activations' moves every layer's already)"),
    ("gpt3-1t", {"offload_layers": 2, "system": "paper-h200"}, "offload_layers",
     "paper-h200 has no host memory tier; offload needs one"),
])
def test_moe_messages_name_the_control_and_the_reason(name, over, key, message):
    assert _errors(name, **over) == {key: message}


def test_an_older_link_or_file_keeps_its_meaning():
    """Saved before these controls: KV heads other than the heads meant GQA; a MoE preset
    named without its MoE sizes keeps the preset's."""
    assert S.with_presets({"model": "gpt3-1t", "kv_heads": 8})["attention"] == "gqa"
    assert S.with_presets({"model": "gpt3-1t", "kv_heads": 160})["attention"] == "mha"
    old = {k: v for k, v in _preset("deepseek-v3").items()
           if k not in (*MOE_KEYS, *MLA_KEYS, *EXECUTION_KEYS, "attention")}
    scn, errors = S.from_json(json.dumps(old))
    assert errors == {} and S.build_inputs(scn)[0] == load_model("deepseek-v3")


# --------------------------------------------------------------------------- shown when relevant


def test_a_dense_model_collapses_the_moe_sections_and_hides_their_sizes():
    dense, moe = _preset("llama3-70b"), _preset("deepseek-v3")
    rows = {c.key: i for i, c in enumerate(controls.CONDITIONAL)}
    sections = {name: i for i, name in enumerate(controls.OPENING)}
    styles, opened = state.visibility(dense)
    assert set(sections) == {"moe", "moe_execution", "fsdp"}  # fsdp: opened by ZeRO-3
    assert dense["zero"] != 3 and not any(opened)
    for key in ("top_k", "expert_ffn", *EXECUTION_KEYS[:4], *MLA_KEYS):
        assert styles[rows[key]] == controls.HIDDEN, key
    assert styles[rows["kv_heads"]] == {}  # llama3-70b: GQA
    styles, opened = state.visibility(moe)
    assert opened[sections["moe"]] and opened[sections["moe_execution"]]
    assert all(styles[rows[k]] == {} for k in ("top_k", *EXECUTION_KEYS[:4], *MLA_KEYS))
    assert styles[rows["kv_heads"]] == controls.HIDDEN  # MLA: one K/V head per head
    # a value being typed (None, text) never hides the rows that depend on it
    styles, opened = state.visibility({**moe, "experts": None})
    assert opened[sections["moe"]] and opened[sections["moe_execution"]]
    assert styles[rows["top_k"]] == {}


def test_the_panel_draws_sections_collapsed_for_a_dense_model():
    def details(component: Any, found: dict) -> dict:
        if type(component).__name__ == "Details" and str(getattr(component, "id", "")
                                                          ).startswith("section-"):
            found[component.id] = component.open
        children = getattr(component, "children", None)
        for child in children if isinstance(children, (list, tuple)) else [children]:
            if child is not None and not isinstance(child, str):
                details(child, found)
        return found
    assert details(controls.panel(_preset("llama3-8b")), {}) == {
        "section-attention": True, "section-moe": False, "section-moe_execution": False,
        "section-kernels": True, "section-fsdp": False}
    kimi = details(controls.panel(_preset("kimi-k2")), {})
    assert kimi.pop("section-fsdp") is False  # ZeRO-1: the FSDP options folded
    assert set(kimi.values()) == {True}
    assert {c.section for c in CONTROLS if c.section} == set(SECTIONS)
    assert state.DEPENDS == ("attention", "experts", "trainable", "zero")


# --------------------------------------------------------------------------- views


def _ops(kind_comm: list[tuple[str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"op": op, "where": "block", "kind": kind, "t_compute_s": 1e-3,
                          "t_memory_exposed_s": 0.0, "t_comm_s": comm, "t_fwd_s": 1e-3 + comm,
                          "t_bwd_s": 0.0, "t_iteration_s": 10 * (1e-3 + comm)}
                         for op, kind, comm in kind_comm])


def test_the_per_op_view_shows_dispatch_and_combine_as_the_ep_all_to_all():
    ops = _ops([("attn/qkv", "linear", 2e-4), ("moe/dispatch", "permute", 5e-4),
                ("moe/combine", "unpermute", 3e-4)])
    parts = ops_figures.op_components(ops)
    np.testing.assert_allclose(parts["t_ep_comm_s"], [0.0, 5e-4, 3e-4])
    np.testing.assert_allclose(parts["t_comm_s"], [2e-4, 0.0, 0.0])
    fig = ops_figures.ops_breakdown_figure(ops)
    a2a = next(t for t in fig.data if t.name == "EP all-to-all")
    seconds = dict(zip(a2a.y, a2a.x))
    assert seconds["moe/dispatch"] == pytest.approx(10 * 5e-4)
    assert seconds["moe/combine"] == pytest.approx(10 * 3e-4) and seconds["attn/qkv"] == 0
    dense = ops_figures.ops_breakdown_figure(_ops([("attn/qkv", "linear", 2e-4)]))
    assert "EP all-to-all" not in [t.name for t in dense.data]


def test_the_design_page_of_a_moe_model_has_an_ep_axis_and_the_all_to_all():
    scn = _preset("mixtral-8x7b", gpus=64, global_batch=256, design_strategy="1d", x_axis="ep",
                  y_axis="tp1")
    cells = compute.design(scn)
    feasible = cells[cells["feasible"] > 0]
    assert {1, 2, 4, 8} <= set(feasible["ep"]) and np.isfinite(
        feasible.loc[feasible["ep"] > 1, "best_time_s"]).all()
    heat, rows, selected, why = design.build_space(scn)
    assert why == "" and [str(v) for v in heat.data[1].x] == ["1", "2", "4", "8"]
    best = rows[0]
    assert best["ep"] > 1 and best["t_ep_comm_s"] > 0
    assert f"ep {int(best['ep'])}" in design.selected_text(scn, [best])
    ops_fig, _, op_rows = design.build_ops(scn, [best])
    a2a = next(t for t in ops_fig.data if t.name == "EP all-to-all")
    seconds = dict(zip(a2a.y, a2a.x))
    assert seconds["moe/dispatch"] > 0 and seconds["moe/combine"] > 0
    assert {r["kind"] for r in op_rows} >= {"permute", "unpermute"}


def test_the_scaling_views_of_a_moe_model_show_ep_and_the_all_to_all():
    scn = _preset("mixtral-8x7b", strategy="1d", gpus_min=64, gpus_max=512, global_batch=256)
    frame = compute.scaling(scn)
    assert (frame["ep"] > 1).all() and (frame["t_ep_comm_s"] > 0).all()
    config = figures.optimal_config_figure(frame)
    ep = next(t for t in config.data if t.name == "ep")
    np.testing.assert_array_equal(ep.y, frame.sort_values("gpus")["ep"])
    breakdown = figures.time_breakdown_figure(frame)
    a2a = next(t for t in breakdown.data if t.name == "EP all-to-all")
    np.testing.assert_allclose(a2a.y, frame.sort_values("gpus")["t_ep_comm_s"])
    dense = figures.optimal_config_figure(compute.scaling(_preset("llama3-8b", strategy="1d")))
    assert {t.name for t in dense.data}.isdisjoint({"ep", "etp"})
