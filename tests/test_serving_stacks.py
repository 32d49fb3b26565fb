"""Serving stacks as data (model/data/serving_stacks): TensorRT-LLM (fitted, validated), vLLM and
SGLang (cited defaults, not validated end to end), their KV blocks and memory rules, and the
closed-loop scheduler as the concurrency mode prices it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from model import load_model, load_system, serve
from model.specs.serving_stack import SERVING_STACKS_DIR, list_serving_stacks, load_serving_stack

H100 = ("llama3-8b", "h100")


def _serve(users: int, stack: str = "trtllm-1.0", **wl):
    workload = {"input_tokens": 1000, "output_tokens": 1000, "mode": "concurrency",
                "concurrency": users, "weight_precision": "fp8", **wl}
    return serve(load_model(H100[0]), load_system(H100[1]), 1, workload, {"tp": 1},
                 stack=stack).best


def test_three_engines_with_sources_at_commits():
    names = set(list_serving_stacks())
    assert {"trtllm-1.0", "vllm-0.x", "sglang-0.5"} <= names
    for name, validated in (("trtllm-1.0", True), ("vllm-0.x", False), ("sglang-0.5", False)):
        st = load_serving_stack(name)
        assert st.validated is validated
        assert "commit" in st.source and st.max_num_tokens >= 0
        raw = json.loads((SERVING_STACKS_DIR / f"{name}.json").read_text(encoding="utf-8"))
        assert raw["name"] == name
        if not validated:
            assert "Not validated end to end" in st.source and st.efficiency == {}
    vllm = load_serving_stack("vllm-0.x")
    assert (vllm.max_num_tokens, vllm.max_batch, vllm.kv_block_tokens,
            vllm.hbm_utilization) == (8192, 1024, 16, 0.9)
    assert load_serving_stack("sglang-0.5").max_num_tokens == 8192


def test_hbm_utilisation_sizes_the_kv_cache_from_the_whole_hbm():
    """vLLM and SGLang: weights + activations + KV take their share of the whole HBM (0.9,
    0.835), not a share of what is left (TensorRT-LLM's 0.95)."""
    hbm = load_system("h100").hbm_capacity_gb
    for stack, share in (("vllm-0.x", 0.9), ("sglang-0.5", 0.835)):
        best = _serve(8, stack)
        used = best["kv_cache_gb"] + best["weights_gb"] + best["activations_gb"]
        assert used == pytest.approx(share * hbm, rel=1e-9), stack
    trt = _serve(8)
    assert trt["kv_cache_gb"] == pytest.approx(0.95 * (trt["kv_cache_gb"] + trt["free_gb"]))


def test_kv_blocks_round_each_sequence_up():
    """A 1,000 + 1,000-token sequence holds 63 blocks of 32 tokens (2,016) under TensorRT-LLM:
    the largest batch is that of 2,016-token sequences, not 2,000."""
    from model.physics import serving_ops as so
    from model.physics.serving_step import Engine
    from model.serving.modes import max_batch
    from model.specs.serving import ServingWorkload

    m, s = load_model("llama3-8b"), load_system("h100")
    wl = ServingWorkload(1000, 1000, weight_precision="fp8")
    lay = so.layout(np.array([1.0]), np.array([1.0]), np.array([1.0]), np.array([False]))
    kv = np.array([60e9])
    block32 = max_batch(Engine.make(m, s, wl, load_serving_stack("trtllm-1.0")), lay, kv)
    per = so.kv_bytes_per_sequence(m, wl, lay, 2016)
    assert block32[0] == min(np.floor(60e9 / per)[0], 4096)


def test_closed_loop_users_queue_behind_each_others_prefill():
    """Well inside the KV cache (8 or 64 of ~500 sequences), with vLLM's 8,192-token step
    budget, 8 users' prompts share one step (8,000 prompt tokens) and 64 users' come in clumps
    of that size: TTFT several times one user's (before, only users beyond the cache waited)."""
    one, eight, many = (_serve(u, "vllm-0.x") for u in (1, 8, 64))
    assert many["batch"] < many["max_batch"] / 4
    assert eight["ttft_s"] > 5 * one["ttft_s"] and many["ttft_s"] > 5 * one["ttft_s"]
    assert many["tpot_s"] > eight["tpot_s"] > one["tpot_s"]
    assert many["ttft_p90_s"] is None  # no tail in the deterministic closed loop


def test_trtllm_serve_shares_the_fit_with_online_limits():
    """trtllm-1.0-serve: trtllm-serve's defaults (2048 requests, 8192 tokens per step, 0.9 of
    the free memory) on the fitted engine; its fitted values are trtllm-1.0's, kept equal."""
    bench, online = load_serving_stack("trtllm-1.0"), load_serving_stack("trtllm-1.0-serve")
    assert online.efficiency == bench.efficiency and online.fit == bench.fit
    assert (online.max_batch, online.max_num_tokens, online.kv_cache_memory_fraction) == (
        2048, 8192, 0.9)
    one, many = _serve(1, "trtllm-1.0-serve"), _serve(64, "trtllm-1.0-serve")
    assert many["ttft_s"] > 5 * one["ttft_s"]
