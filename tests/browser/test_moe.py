"""Mixture-of-experts controls and views in a browser (issue 14, item 5): a MoE preset opens the
MoE controls with its values and a dense one folds them away; more experts per token show more
EP all-to-all time in the breakdown; the design space's EP axis has cells for ep > 1 and the
per-op view shows the dispatch and combine all-to-alls."""

from __future__ import annotations

import math

import pytest

# mixtral-8x7b (8 experts, top-2) with the 1D strategy on 64…512 GPUs: a small, fast MoE case
MIXTRAL = "model=mixtral-8x7b&strategy=1d&gpus_min=64&gpus_max=512&global_batch=256"
A2A = "EP all-to-all"


def _open(ui, path: str, fragment: str) -> None:
    """A fresh page at ``path`` with the scenario ``fragment`` (as a shared link)."""
    ui.driver.get("about:blank")
    ui.driver.get(f"{ui.duo.server_url}{path}#{fragment}")


def _value(ui, key: str) -> str:
    return ui.duo.find_element(f"#ctl-{key}").get_attribute("value")


def _shown(ui, key: str) -> bool:
    return "none" not in (ui.duo.find_element(f"#row-{key}").get_attribute("style") or "")


def _open_section(ui, name: str) -> bool:
    return ui.duo.find_element(f"#section-{name}").get_attribute("open") is not None


def _checked(ui, key: str) -> str:
    """The value of the checked option of radio items ``ctl-<key>``."""
    return next(i.get_attribute("value") for i in ui.driver.find_elements(
        "css selector", f"#ctl-{key} input") if i.is_selected())


def test_a_moe_preset_shows_its_moe_controls_and_a_dense_one_folds_them(ui) -> None:
    assert not _open_section(ui, "moe") and not _shown(ui, "top_k")  # gpt3-1t: dense
    ui.choose("model", "deepseek-v3")
    ui.until(lambda: _value(ui, "experts") == "256", "DeepSeek-V3's 256 experts")
    ui.until(lambda: _open_section(ui, "moe") and _open_section(ui, "moe_execution"),
             "the MoE sections open")
    assert {k: _value(ui, k) for k in ("top_k", "expert_ffn", "shared_experts",
                                       "dense_layers", "kv_lora_rank", "q_lora_rank")} == {
        "top_k": "8", "expert_ffn": "2048", "shared_experts": "1", "dense_layers": "3",
        "kv_lora_rank": "512", "q_lora_rank": "1536"}
    assert _checked(ui, "attention") == "mla"
    assert _shown(ui, "top_k") and _shown(ui, "kv_lora_rank") and _shown(ui, "moe_imbalance")
    assert not _shown(ui, "kv_heads")  # MLA: one key/value head per head
    ui.until(lambda: ui.fragment().get("experts") == "256", "the MoE scenario in the URL")
    assert ui.fragment()["attention"] == "mla" and ui.fragment()["top_k"] == "8"
    ui.choose("model", "llama3-8b")
    ui.until(lambda: not _open_section(ui, "moe"), "the MoE section collapsed")
    assert not _shown(ui, "top_k") and not _shown(ui, "kv_lora_rank")
    assert _shown(ui, "kv_heads") and _checked(ui, "attention") == "gqa"
    assert _value(ui, "experts") == "0" and _value(ui, "kv_heads") == "8"
    assert ui.severe_logs() == []


def _a2a(traces: list[dict]) -> list[float]:
    return next((t["y"] for t in traces if t["name"] == A2A and t["y"]), [])


@pytest.mark.own_page  # it opens a link first
def test_more_experts_per_token_more_all_to_all_time(ui) -> None:
    _open(ui, "/", MIXTRAL)
    ui.until(lambda: _value(ui, "top_k") == "2", "Mixtral's top-2")
    before = _a2a(ui.wait_figure("scaling-breakdown", lambda t: len(_a2a(t)) == 4,
                                 "the all-to-all at 4 GPU counts"))
    assert all(v > 0 for v in before)
    ui.set_input("top_k", 4)
    after = _a2a(ui.wait_figure("scaling-breakdown", lambda t: _a2a(t) and _a2a(t) != before,
                                "the all-to-all after top-4"))
    assert len(after) == len(before)
    assert all(a > b for a, b in zip(after, before)), (before, after)  # twice the copies
    assert ui.fragment()["top_k"] == "4"
    assert ui.severe_logs() == []


def _finite(values) -> list[float]:
    return [v for v in values or [] if isinstance(v, (int, float)) and math.isfinite(v)]


@pytest.mark.own_page  # it opens a link first
def test_ep_axis_of_the_design_space_and_the_all_to_all_per_op(ui) -> None:
    _open(ui, "/design", MIXTRAL + "&gpus=64&design_strategy=1d&x_axis=ep&y_axis=tp1")
    traces = ui.wait_figure("design-heatmap", lambda t: any(
        x["type"] == "heatmap" and x["x"] and "8" in x["x"] for x in t), "an ep axis to 8")
    heat = [t for t in traces if t["type"] == "heatmap"][-1]  # the feasible cells
    assert heat["x"] == ["1", "2", "4", "8"]
    for j, ep in enumerate(heat["x"]):  # every ep has a configuration that fits
        assert _finite([row[j] for row in heat["z"]]), (ep, heat["z"])
    ops = ui.wait_figure("design-ops", lambda t: any(x["name"] == A2A for x in t),
                         "the EP all-to-all in the per-op view")
    a2a = next(t for t in ops if t["name"] == A2A)
    seconds = dict(zip(a2a["y"], a2a["x"]))
    assert seconds["moe/dispatch"] > 0 and seconds["moe/combine"] > 0
    assert seconds["attn/qkv"] == 0  # tensor-parallel collectives stay "communication"
    assert ui.severe_logs() == []
    ui.screenshot("moe-design")
