"""Prefix caching and KV offload to host memory in closed form (model/serving/modes.py,
model/physics/serving_ops.py), and the serving questions refused in words."""

from __future__ import annotations

import numpy as np
import pytest

from model import ModelError, load_model, load_system, serve
from model.physics import serving_ops as so
from model.physics.serving_step import Engine
from model.serving import modes
from model.specs.serving import ServingWorkload
from model.specs.serving_stack import load_serving_stack

STACK = "trtllm-1.0-serve"  # a fixed 8,192-token step budget: the prompt alone changes


def _engine(model: str = "llama3-70b", system: str = "h100", **kw) -> Engine:
    wl = ServingWorkload(**{"input_tokens": 2048, "output_tokens": 128,
                            "weight_precision": "fp8", **kw})
    return Engine.make(load_model(model), load_system(system), wl, load_serving_stack(STACK))


def _flops(ops: list) -> tuple[float, float]:
    """(matmul FLOPs of the linear ops, attention scores' matmul FLOPs) of one layer."""
    lin = sum(float(np.sum(o.counts.flop_mat_fwd)) for o in ops if o.spec.name != "attn/core")
    att = sum(float(np.sum(o.counts.flop_mat_fwd)) for o in ops if o.spec.name == "attn/core")
    return lin, att


def test_prefix_hit_half_halves_the_linear_prefill_flops():
    """h = 0.5 of a 2,048-token prompt: the 1,024 uncached tokens go through every matmul
    (half the linear FLOPs, exactly), and attend to the cached 1,024 as well: their scores are
    1,024·(1,024 + 1,024/2) against 2,048²/2 for the whole prompt, 3/4 (no windows in Llama 3)."""
    m, lay = load_model("llama3-70b"), so.layout(8, 1, 1, False)
    full = _engine()
    half = _engine(prefix_hit=0.5)
    assert (half.workload.cached_prompt_tokens, half.workload.computed_prompt_tokens) == (
        1024, 1024)
    lin0, att0 = _flops(so.layer_ops(m, full.workload, lay, np.array([2048.0]), np.array([1.0]),
                                     0.0, False, 2048.0))
    lin1, att1 = _flops(so.layer_ops(m, half.workload, lay, np.array([1024.0]), np.array([1.0]),
                                     1024.0, False, 1024.0))
    assert lin1 / lin0 == pytest.approx(0.5, rel=1e-12)
    assert att1 / att0 == pytest.approx(0.75, rel=2e-3)  # 2q_k − 1 and 2L − 1 terms: not exact


def test_prefix_hit_halves_a_compute_bound_prefill_and_the_ttft_of_one_user():
    lay = so.layout(8, 1, 1, False)
    t0, alone0 = modes.prefill_s(_engine(), lay, np.array([8192.0]))
    t1, alone1 = modes.prefill_s(_engine(prefix_hit=0.5), lay, np.array([8192.0]))
    assert 0.5 <= float(t1[0] / t0[0]) < 0.52  # attention is ~3 % of a 2K prompt's FLOPs
    assert float(alone1[0]) < 0.6 * float(alone0[0])  # less the fixed step overhead
    m, s = load_model("llama3-70b"), load_system("h100")
    wl = {"input_tokens": 4000, "output_tokens": 500, "mode": "concurrency", "concurrency": 1,
          "weight_precision": "fp8"}
    pins = {"tp": 8, "pp": 1, "replicas": 1}
    plain = serve(m, s, 8, wl, pins, stack=STACK).best
    cached = serve(m, s, 8, {**wl, "prefix_hit": 0.9}, pins, stack=STACK).best
    assert cached["ttft_s"] < 0.25 * plain["ttft_s"]
    assert cached["tpot_s"] == pytest.approx(plain["tpot_s"], rel=1e-6)  # decode unchanged


def test_prefix_blocks_are_held_once_and_each_sequence_only_its_own_tokens():
    """KV: the cached prefix (h·I tokens) is counted once per attention rank, each sequence
    holds its own I − h·I + O tokens in whole blocks: B_max = ⌊(KV − prefix)/own⌋."""
    e, lay = _engine(input_tokens=8192, output_tokens=1024, prefix_hit=0.75), so.layout(
        2, 1, 1, False)
    per_token = float(so.kv_bytes_per_sequence(e.model, e.workload, lay, 1.0)[0])
    assert float(modes.prefix_bytes(e, lay)[0]) == pytest.approx(6144 * per_token)
    block = e.stack.kv_block_tokens
    own = -(-(2048 + 1024) // block) * block
    assert float(modes.sequence_kv_bytes(e, lay)[0]) == pytest.approx(own * per_token)
    kv = modes.memory(e, lay)["kv"]
    expected = np.floor((kv[0] - 6144 * per_token) / (own * per_token))
    assert float(modes.max_batch(e, lay, kv)[0]) == min(expected, e.stack.max_batch)
    plain = _engine(input_tokens=8192, output_tokens=1024)
    assert modes.max_batch(plain, lay, kv)[0] < 0.5 * modes.max_batch(e, lay, kv)[0]


def test_offload_lets_a_concurrency_that_did_not_fit_run_at_its_reload_cost():
    """32K prompts of Llama 3 70B BF16 on tp 4 H100s: 15 sequences fit in HBM; a 200 GB host
    pool per GPU holds 88. Forty users then all run, and every decode step reloads the KV bytes
    beyond the HBM pool over the 50 GB/s PCIe link: (40·S − KV_hbm)/50 GB/s."""
    kw = {"input_tokens": 32000, "output_tokens": 1000, "weight_precision": "bf16"}
    lay = so.layout(4, 1, 1, False)
    plain, off = _engine(**kw), _engine(**kw, kv_offload_gb=200)
    kv = modes.memory(plain, lay)["kv"]
    seq = float(modes.sequence_kv_bytes(plain, lay)[0])
    assert modes.max_batch(plain, lay, kv)[0] == np.floor(kv[0] / seq) < 40
    assert modes.max_batch(off, lay, kv)[0] == np.floor((kv[0] + 200e9) / seq) >= 40
    keys, b = modes.decode_keys(plain), np.array([40.0])
    reload = (40 * seq - kv[0]) / (load_system("h100").host_bandwidth_gb_per_s * 1e9)
    assert float(modes.decode_step_s(off, lay, b, keys)[0] - modes.decode_step_s(
        plain, lay, b, keys)[0]) == pytest.approx(reload, rel=1e-9)
    assert float(modes.offload_reload_s(off, lay, np.array([10.0]))[0]) == 0.0  # fits in HBM
    m, s = load_model("llama3-70b"), load_system("h100")
    wl = {**kw, "mode": "concurrency", "concurrency": 40}
    pins = {"tp": 4, "pp": 1, "replicas": 1}
    without = serve(m, s, 4, wl, pins, stack=STACK).best
    with_pool = serve(m, s, 4, {**wl, "kv_offload_gb": 200}, pins, stack=STACK).best
    assert without["batch"] < 40 and with_pool["batch"] == pytest.approx(40, rel=0.02)


@pytest.mark.parametrize("kw, words", [
    ({"prefix_hit": 1.0}, "'prefix_hit' 1 must be below 1"),
    ({"prefix_hit": -0.1}, "prefix_hit"),
    ({"kv_offload_gb": 300.0}, "more than h100's host memory per GPU (256 GB)"),
    ({"mtp_depth": 2, "mtp_acceptance": 0.8}, "llama3-70b has no MTP head"),
])
def test_questions_outside_their_ranges_are_refused_in_words(kw, words):
    wl = {"input_tokens": 1000, "output_tokens": 100, "weight_precision": "fp8", **kw}
    with pytest.raises(ModelError) as err:
        serve(load_model("llama3-70b"), load_system("h100"), 8, wl, {"tp": 8, "pp": 1})
    assert words in str(err.value) and "\n" not in str(err.value)


def test_an_answer_using_an_unmeasured_mechanism_is_not_validated():
    """The fit data's runs use no prefix caching, offload or MTP: an answer that does carries
    "not validated" for every metric, naming the mechanism; without them, the population bar."""
    m, s = load_model("llama3-70b"), load_system("h100")
    wl = {"input_tokens": 1000, "output_tokens": 100, "weight_precision": "fp8"}
    pins = {"tp": 8, "pp": 1}
    plain = serve(m, s, 8, wl, pins).best["error_bars"]
    assert plain["output_tokens_per_s"].startswith("80 % interval")
    bars = serve(m, s, 8, {**wl, "prefix_hit": 0.5, "kv_offload_gb": 10}, pins).best
    assert set(bars["error_bars"].values()) == {
        "not validated (prefix caching, KV offload: not in the fit data)"}
