"""The Post-training page without a browser: its views answer as the API, its form refuses bad
input in words, its link round-trips, and its figures carry axis titles as title objects."""

from __future__ import annotations

import pytest

from dashboard.controls.presets import preset_values
from dashboard.controls.scenario import default_scenario
from dashboard.views.post_training_view import (
    DEFAULT_FORM,
    build,
    checked_form,
    form_from_query,
    form_query,
)
from model import FineTune, ModelError, Request, finetune, load_model, load_system


def llama8b() -> dict:
    return {**default_scenario(), **preset_values("model", "llama3-8b"), "model": "llama3-8b"}


def test_finetune_memory_is_each_methods_answer():
    figs, text = build(llama8b(), {**DEFAULT_FORM, "gpus": 16})
    bars = {t["name"]: t for t in figs["post-memory"].to_dict()["data"]}
    assert list(bars["gradients"]["x"]) == ["full", "lora", "qlora"]
    model = load_model("llama3-8b").with_overrides(seq_len=DEFAULT_FORM["seq_len"])
    request = Request.build(model, load_system("h200"), global_batch=128, gpus=16,
                            strategy="1d")
    lora = finetune(request, FineTune("lora", 2e9)).summary()
    assert bars["gradients"]["y"][1] == pytest.approx(lora["memory_breakdown_gb"]["gradients"])
    assert "lora:" in text and "trainable parameters" in text


def test_rl_timeline_has_each_pools_phases():
    figs, text = build(llama8b(), {**DEFAULT_FORM, "question": "rl", "gpus": 16})
    data = figs["post-timeline"].to_dict()["data"]
    names = {t["name"] for t in data}
    assert {"generation", "update", "weight sync"} <= names
    pools = {y for t in data for y in t["y"]}
    assert any(p.startswith("generation (") for p in pools)
    assert "per step" in text
    # the default split on-policy step: no such published run was scored
    assert ("Accuracy: not validated: no published GRPO step time split, on-policy on hopper "
            "was scored.") in text
    split = figs["post-split"].to_dict()["data"]
    assert len(split[0]["x"]) >= 1


def test_rl_headline_carries_its_populations_accuracy_and_no_other():
    """Colocated GRPO on the default H200 (a Hopper GPU) takes the colocated Hopper runs'
    error; PPO there borrows no bar."""
    from model.validation.rl import accuracy

    form = {**DEFAULT_FORM, "question": "rl", "gpus": 16, "placement": "colocated"}
    _, text = build(llama8b(), form)
    assert f"Accuracy: {accuracy('hopper', 'colocated', False)}." in text
    assert "NeMo-RL v0.5 step times" in text and "not validated" not in text
    _, ppo = build(llama8b(), {**form, "algorithm": "ppo"})
    assert "Accuracy: not validated: no published PPO step time was scored." in ppo


def test_axis_titles_are_title_objects():
    figs, _ = build(llama8b(), {**DEFAULT_FORM, "gpus": 16})
    for name in ("post-memory", "post-days"):
        layout = figs[name].to_dict()["layout"]
        assert layout["yaxis"]["title"]["text"], name


@pytest.mark.parametrize("change, words", [
    ({"gpus": 0}, "GPUs must be a whole number"),
    ({"tokens": float("nan")}, "training tokens"),
    ({"lora_targets": "ffn"}, "LoRA targets"),
    ({"question": "rl", "placement": "mixed"}, "placement"),
    ({"question": "rl", "max_output_tokens": 10}, "shorter than the mean"),
    ({"question": "rl", "generation_gpus": 16, "gpus": 16}, "leave GPUs to train"),
])
def test_bad_form_input_is_refused_in_words(change, words):
    with pytest.raises(ModelError, match=words):
        build(llama8b(), {**DEFAULT_FORM, **change})


def test_the_link_round_trips():
    form = {**DEFAULT_FORM, "question": "rl", "gpus": 32, "placement": "colocated"}
    back = form_from_query(form_query(form))
    assert checked_form({**DEFAULT_FORM, **back}) == checked_form(form)


@pytest.mark.parametrize("question", ["finetune", "rl"])
def test_a_gpu_without_a_price_reads_cost_unknown(question):
    scn = {**llama8b(), "usd_per_gpu_hour": 0.0}
    _, text = build(scn, {**DEFAULT_FORM, "question": question, "gpus": 16})
    assert "cost unknown" in text and "$nan" not in text
