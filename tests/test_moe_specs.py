"""Mixture-of-experts and MLA model inputs: config.json parsing for every MoE type
(model.specs.hf_moe), parameter counts against the published ones, model FLOPs per token in
closed form, and the presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model.errors import ModelError
from model.specs.hf_moe import model_from_hf, moe_fields
from model.specs.models import load_model
from model.specs.transformer import transformer_from_dict

DATA = Path(__file__).resolve().parent / "data" / "hf_moe_configs.json"
CONFIGS = {e["repo"]: e for e in json.loads(DATA.read_text())["entries"]}

# (repo, total B, active B, whether the publisher's active count leaves out the input
# embedding, tolerance); published figures from the configs' sources (tests/data)
PUBLISHED = [
    ("deepseek-ai/DeepSeek-V3", 671, 37, False, 0.02),
    ("moonshotai/Kimi-K2-Instruct", 1040, 32, True, 0.02),  # K2 report: 1.04T
    ("Qwen/Qwen3-235B-A22B", 235, 22, False, 0.02),
    ("Qwen/Qwen3-30B-A3B", 30.5, 3.3, False, 0.02),
    ("openai/gpt-oss-120b", 116.8, 5.1, True, 0.02),  # card: active counts the unembedding
    ("openai/gpt-oss-20b", 20.9, 3.6, True, 0.02),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7, 12.9, False, 0.02),
    ("mistralai/Mixtral-8x22B-v0.1", 141, 39, False, 0.02),
    ("meta-llama/Llama-4-Scout-17B-16E", 109, 17, False, 0.02),
    ("meta-llama/Llama-4-Maverick-17B-128E", 400, 17, False, 0.02),
]


@pytest.mark.parametrize("repo,total,active,no_embedding,tol", PUBLISHED)
def test_parameter_counts_match_the_published_ones(repo, total, active, no_embedding, tol):
    m = model_from_hf(CONFIGS[repo]["config"], 4096)
    assert m.params / 1e9 == pytest.approx(total, rel=tol)
    used = m.active_params - (m.vocab * m.hidden if no_embedding else 0)
    assert used / 1e9 == pytest.approx(active, rel=tol)


def test_deepseek_v3_fields():
    f = moe_fields(CONFIGS["deepseek-ai/DeepSeek-V3"]["config"])
    assert f == {"experts": 256, "top_k": 8, "expert_ffn": 2048, "shared_experts": 1,
                 "shared_ffn": 2048, "dense_layers": 3, "q_lora_rank": 1536,
                 "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                 "v_head_dim": 128, "mtp_layers": 1, "attention_bias": False}


def test_kimi_k2_parses_as_deepseek_v3():
    f = moe_fields(CONFIGS["moonshotai/Kimi-K2-Instruct"]["config"])
    assert (f["experts"], f["dense_layers"], f["mtp_layers"]) == (384, 1, 0)


def test_qwen3_moe_layers_and_head_dim():
    c = dict(CONFIGS["Qwen/Qwen3-235B-A22B"]["config"])
    f = moe_fields(c)
    assert (f["experts"], f["top_k"], f["expert_ffn"], f["dense_layers"], f["head_dim"]) == (
        128, 8, 1536, 0, 128)
    # every second layer sparse, and two named dense-only layers
    c.update(decoder_sparse_step=2, mlp_only_layers=[1, 2])
    assert moe_fields(c)["dense_layers"] == 94 - (47 - 1)


def test_mixtral_and_gpt_oss_fields():
    f = moe_fields(CONFIGS["mistralai/Mixtral-8x7B-v0.1"]["config"])
    assert (f["experts"], f["top_k"], f["expert_ffn"]) == (8, 2, 14336)
    assert "sliding_window" not in f  # sliding_window null in the config
    g = moe_fields(CONFIGS["openai/gpt-oss-120b"]["config"])
    assert (g["experts"], g["top_k"], g["sliding_window"], g["window_layers"]) == (
        128, 4, 128, 18)
    assert g["attention_bias"] and g["mlp_bias"] and g["head_dim"] == 64


def test_llama4_text_config():
    m = moe_fields(CONFIGS["meta-llama/Llama-4-Maverick-17B-128E"]["config"])
    assert (m["experts"], m["shared_ffn"], m["dense_layers"]) == (128, 8192, 24)
    assert (m["sliding_window"], m["window_layers"], m["window_kind"]) == (8192, 36, "chunked")
    model = model_from_hf(CONFIGS["meta-llama/Llama-4-Maverick-17B-128E"]["config"], 8192)
    assert model.ffn == 16384  # the dense layers' intermediate_size_mlp
    s = moe_fields(CONFIGS["meta-llama/Llama-4-Scout-17B-16E"]["config"])
    assert (s["experts"], s["dense_layers"]) == (16, 0)


@pytest.mark.parametrize("config,message", [
    ({"model_type": "llama"}, "not a mixture-of-experts type"),
    ([], "expected a JSON object"),
    ({"model_type": "mixtral", "num_hidden_layers": 2}, "missing 'num_local_experts'"),
    ({"model_type": "qwen3_moe", "num_hidden_layers": -1}, "non-negative integer"),
])
def test_bad_configs_are_refused_clearly(config, message):
    with pytest.raises(ModelError, match=message):
        moe_fields(config)


DENSE = {"name": "x", "layers": 4, "hidden": 512, "heads": 8, "seq_len": 1024, "tokens": 1e9}


@pytest.mark.parametrize("extra,message", [
    ({"experts": 4, "top_k": 8}, "exceeds 'experts'"),
    ({"experts": 4, "dense_layers": 4}, "leaves no MoE layer"),
    ({"shared_experts": 1}, "needs routed 'experts'"),
    ({"kv_lora_rank": 64}, "needs 'qk_nope_head_dim'"),
    ({"q_lora_rank": 64}, "needs MLA"),
    ({"hidden": 500}, "must divide 'hidden'"),
    ({"sliding_window": 16, "window_layers": 5}, "exceeds 'layers'"),
])
def test_bad_specs_are_refused_clearly(extra, message):
    with pytest.raises(ModelError, match=message):
        transformer_from_dict({**DENSE, **extra})


def test_head_dim_given_frees_hidden_from_heads():
    m = transformer_from_dict({**DENSE, "hidden": 500, "head_dim": 64})
    assert m.head_dim == 64 and m.params > 0


def _megatron_flops_per_token(m, mtp: int) -> float:
    """Megatron-LM's num_floating_point_operations per token (the convention Megatron-Bridge's
    model TFLOP/s use): 12·layers·e·(MLP sizes) + attention + MTP projection + logits; the
    router is not counted there (it is here: e·E per MoE layer)."""
    e, n = m.hidden, m.layers + mtp
    g = 1.5 if m.mlp == "swiglu" else 1.0
    moe = m.moe_layers + mtp
    mlp = 12 * n * e * (m.ffn * g * (n - moe) / n + (m.expert_ffn * m.top_k + m.shared_ffn)
                        * g * moe / n)
    if m.mla:
        q = m.q_lora_rank * (e + m.heads * m.qk_head_dim + 1)
        kv = m.kv_lora_rank * (e + m.heads * (m.qk_nope_head_dim + m.v_head_dim) + 1)
        core = m.seq_len * m.heads * (m.qk_head_dim + m.v_head_dim) / 2
        attn = 6 * n * (q + kv + e * m.qk_rope_head_dim + m.heads * m.v_head_dim * e + core)
    else:
        ratio = m.heads * m.head_dim / e
        attn = 12 * n * e * e * (1 + m.kv_heads / m.heads + m.seq_len / e / 2) * ratio
    return mlp + attn + 6 * mtp * (3 * e + 2 * e * e) + 6 * e * m.vocab * (mtp + 1)


@pytest.mark.parametrize("name", ["deepseek-v3", "qwen3-235b-a22b", "mixtral-8x7b",
                                  "gpt3-175b"])
def test_model_flops_per_token_closed_form(name):
    """6 × active matmul parameters + attention, against Megatron-LM's formula written out;
    they differ by the router GEMM (counted here) and MLA's norm FLOPs (counted there)."""
    m = load_model(name)
    router = 6 * m.moe_layers * m.hidden * m.experts + 6 * m.mtp_layers * m.hidden * m.experts
    expected = _megatron_flops_per_token(m, m.mtp_layers) + router
    assert m.model_flops_per_token == pytest.approx(expected, rel=2e-4)


def test_deepseek_v3_flops_per_token_number():
    """DeepSeek-V3 at 4K with one MTP module: 260.6 GFLOP per token (Megatron-Bridge's
    published 1635 TFLOP/s at 6288 tokens/s per GPU is 260.0)."""
    assert load_model("deepseek-v3").model_flops_per_token / 1e9 == pytest.approx(260.64,
                                                                                 abs=0.01)


def test_sliding_and_chunked_windows_cut_attention_flops():
    m = load_model("gpt-oss-120b")
    full = m.with_overrides(sliding_window=0, window_layers=0)
    per_layer = 6 * m.heads * 2 * m.head_dim  # per key of every query
    saved = (m.seq_len / 2 - (128 - 128 * 128 / (2 * m.seq_len))) * per_layer * 18
    assert full.model_flops_per_token - m.model_flops_per_token == pytest.approx(saved)
    scout = load_model("llama4-scout").with_overrides(seq_len=32768)
    no_chunk = scout.with_overrides(sliding_window=0, window_layers=0)
    saved = (32768 / 2 - 8192 / 2) * 6 * 40 * 256 * 36
    assert no_chunk.model_flops_per_token - scout.model_flops_per_token == pytest.approx(saved)


@pytest.mark.parametrize("name", ["deepseek-v3", "kimi-k2", "qwen3-235b-a22b",
                                  "qwen3-30b-a3b", "gpt-oss-120b", "mixtral-8x7b",
                                  "mixtral-8x22b", "llama4-scout", "llama4-maverick"])
def test_moe_presets_have_sources_and_round_trip(name):
    m = load_model(name)
    assert m.moe and len(m.source) > 100 and m.tokens
    assert transformer_from_dict(m.to_dict()) == m
    assert m.with_overrides(seq_len=2048).active_params == m.active_params
