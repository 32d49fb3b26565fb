"""Serving: closed-form checks of the KV cache, the decode roofline, the Poisson knee, the
workload record, the vectorized evaluation against a loop, and the Pareto front."""

from __future__ import annotations

import numpy as np
import pytest

from model import ModelError, load_model, load_system
from model.api import serve
from model.engine.dominance import pareto_mask
from model.physics import serving_ops as so
from model.physics.serving_step import Engine, step_times
from model.serving.evaluate import candidates, evaluate_candidates
from model.serving.modes import md1_wait_s
from model.specs.serving import ServingLayout, ServingWorkload
from model.specs.serving_stack import load_serving_stack


def _wl(**kw) -> ServingWorkload:
    return ServingWorkload(**{"input_tokens": 128, "output_tokens": 128, **kw})


@pytest.mark.parametrize("name, precision, expected", [
    # GQA: layers · 2 (K, V) · kv_heads · head_dim · bytes
    ("llama3-70b", "bf16", 80 * 2 * 8 * 128 * 2.0),
    ("llama3-70b", "fp8", 80 * 2 * 8 * 128 * 1.0),
    ("llama3-70b", "nvfp4", 80 * 2 * 8 * 128 * (0.5 + 1 / 16)),
    # MHA: every head cached
    ("gpt3-175b", "bf16", 96 * 2 * 96 * 128 * 2.0),
    # MLA: the 512-wide latent and the 64-wide rotary key per layer, whatever the heads
    ("deepseek-v3", "bf16", 61 * (512 + 64) * 2.0),
])
def test_kv_bytes_per_token(name, precision, expected):
    m = load_model(name)
    got = so.kv_bytes_per_token(m, _wl(weight_precision="bf16", kv_precision=precision))
    assert float(got) == pytest.approx(expected)


def test_kv_heads_split_and_replicated_over_tp():
    m = load_model("llama3-70b")  # 8 KV heads
    wl = _wl()
    per_gpu = so.kv_bytes_per_token(m, wl, np.array([1.0, 8.0, 16.0]))
    assert per_gpu.tolist() == pytest.approx([80 * 2 * 8 * 128 * 2, 80 * 2 * 128 * 2,
                                              80 * 2 * 128 * 2])  # tp 16: one head each


def test_mla_latent_is_not_split():
    m = load_model("deepseek-v3")
    per_gpu = so.kv_bytes_per_token(m, _wl(), np.array([1.0, 8.0]))
    assert per_gpu[0] == per_gpu[1]


def test_window_layers_cache_at_most_the_window():
    m = load_model("llama4-scout")  # 36 of 48 layers chunked at 8,192 tokens
    wl = _wl()
    full = float(so.kv_bytes_per_token(m, wl))
    at_16k = float(so.kv_bytes_per_token(m, wl, context=16384.0))
    assert at_16k == pytest.approx(full * (12 / 48 + 36 / 48 * 8192 / 16384))
    assert float(so.kv_bytes_per_token(m, wl, context=4096.0)) == pytest.approx(full)


def _engine(model: str, system, **kw) -> Engine:
    return Engine.make(load_model(model), system, _wl(**kw), load_serving_stack("none"))


@pytest.mark.parametrize("model, tp", [("llama3-8b", 1), ("llama3-70b", 4)])
def test_decode_at_batch_one_reads_the_weights_once(model, tp):
    """Without launch overhead, one decode step at batch 1 and a short context is the time to
    read one GPU's weights from HBM, within 3 % (activations, a 1-token KV, the collectives):
    every weight but the embedding table, of which a step reads one row per token."""
    system = load_system("h100").with_overrides(kernel_overhead_s=0.0)
    engine = _engine(model, system, input_tokens=1, output_tokens=1)
    lay = so.layout(tp, 1, 1, False)
    one = np.ones(1)
    t = step_times(engine, lay, one, one, 1.0, True)
    m = engine.model
    embedding = m.vocab * m.hidden * engine.workload.weight_bytes / tp
    weights = so.weight_bytes_per_gpu(m, engine.workload, lay) - embedding
    floor = weights / system.hbm_bytes_per_s
    comm = t.by_op_s["comm/layers"]
    assert floor[0] <= t.total_s[0] - comm[0] <= 1.03 * floor[0]


def test_md1_wait_closed_form():
    mu = 4.0
    rho = np.array([0.5, 2 / 3, 0.99, 1.0])
    wait = md1_wait_s(rho * mu, np.full(4, mu))
    assert wait[0] == pytest.approx(1 / (2 * mu))
    assert wait[1] == pytest.approx(1 / mu)  # the knee: waiting equals one service time
    assert wait[2] == pytest.approx(0.99 / (2 * mu * 0.01))
    assert np.isinf(wait[3])


def test_request_rate_knee_and_saturation():
    """TTFT grows slowly at low load and without bound near the saturated rate μ."""
    m, s = load_model("llama3-8b"), load_system("h100")
    offline = serve(m, s, 1, _wl(weight_precision="fp8"), {"tp": 1, "pp": 1, "replicas": 1})
    mu = offline.best["requests_per_s"]
    ttft = {}
    for rho in (0.1, 0.5, 0.95, 1.05):
        r = serve(m, s, 1, _wl(weight_precision="fp8", mode="request-rate",
                               request_rate_per_s=rho * mu), {"tp": 1, "pp": 1, "replicas": 1})
        ttft[rho] = r.best["ttft_s"]
    assert ttft[0.1] < ttft[0.5] < ttft[0.95]
    wait = 0.95 / (2 * mu * 0.05)  # the M/D/1 wait at ρ = 0.95
    assert ttft[0.95] > wait and ttft[0.95] - ttft[0.5] > 0.5 * wait
    assert ttft[0.95] > 3 * ttft[0.5]
    assert np.isinf(ttft[1.05])


def test_mtp_tokens_per_step():
    assert _wl(mtp_depth=3, mtp_acceptance=0.5).tokens_per_step == pytest.approx(1.875)
    assert _wl(mtp_depth=2, mtp_acceptance=1.0).tokens_per_step == 3.0
    assert _wl().tokens_per_step == 1.0


@pytest.mark.parametrize("kw, words", [
    ({"mode": "concurrency"}, "needs 'concurrency'"),
    ({"mode": "request-rate"}, "needs 'request_rate_per_s'"),
    ({"concurrency": 4}, "applies to mode 'concurrency'"),
    ({"weight_precision": "int3"}, "'weight_precision' must be one of"),
    ({"input_tokens": 0}, "'input_tokens' = 0 is out of range"),
    ({"mtp_depth": 2}, "'mtp_acceptance' must be above 0"),
])
def test_workload_errors(kw, words):
    with pytest.raises(ModelError, match=words):
        _wl(**kw)


def test_layout_errors():
    with pytest.raises(ModelError, match="ep 3 must divide tp 4"):
        ServingLayout(tp=4, ep=3)
    with pytest.raises(ModelError, match="needs both"):
        ServingLayout(prefill_instances=1)


def test_vectorized_equals_one_at_a_time():
    engine = Engine.make(load_model("qwen3-30b-a3b"), load_system("h200"),
                         _wl(weight_precision="fp8", mode="concurrency", concurrency=64),
                         load_serving_stack("trtllm-1.0"))
    c = candidates(tp=[1, 2, 2, 4], pp=[1, 1, 2, 1], ep=[1, 2, 1, 4], adp=[False, True, False,
                                                                          True],
                   instances=[4, 2, 1, 1], prefill=[0, 0, 1, 0], batch_cap=np.inf)
    together = evaluate_candidates(engine, c)
    for i in range(len(c)):
        alone = evaluate_candidates(engine, c.take(np.array([i])))
        for key in ("ttft_s", "tpot_s", "output_tokens_per_s", "kv_cache_gb", "batch"):
            assert alone[key][0] == pytest.approx(together[key][i], rel=1e-9), key


def test_pareto_mask_by_hand():
    per_gpu = np.array([10.0, 8.0, 6.0, 9.0, 1.0])
    per_user = np.array([1.0, 3.0, 2.0, 0.5, 10.0])
    # faster is better on both: the front of the negated rates
    assert pareto_mask(-per_gpu, -per_user).tolist() == [True, True, False, False, True]


def test_more_batch_more_throughput_less_speed_per_user():
    m, s = load_model("llama3-70b"), load_system("h200")
    r = serve(m, s, 8, _wl(weight_precision="fp8"), {"tp": 8, "pp": 1, "replicas": 1})
    front = r.pareto
    assert len(front) >= 3
    assert np.all(np.diff(front["output_tokens_per_s_per_gpu"]) > 0)
    assert np.all(np.diff(front["tokens_per_s_per_user"]) < 0)


def test_disaggregated_pays_the_kv_transfer_and_spares_decode_the_prefills():
    m, s = load_model("llama3-70b"), load_system("h200")
    wl = _wl(input_tokens=4000, output_tokens=500, weight_precision="fp8", mode="concurrency",
             concurrency=64)
    agg = serve(m, s, 8, wl, {"tp": 4, "pp": 1, "replicas": 2}).best
    split = serve(m, s, 8, wl, {"tp": 4, "pp": 1, "prefill_instances": 1,
                                "decode_instances": 1}).best
    assert split["gpus"] == agg["gpus"] == 8
    assert (split["prefill_instances"], split["decode_instances"]) == (1, 1)
    assert split["tpot_s"] < agg["tpot_s"]  # no prompt chunks inside the decode steps
    engine = Engine.make(m, s, wl, load_serving_stack("trtllm-1.0"))
    kv = so.kv_bytes_per_sequence(m, wl, so.layout(4, 1, 1, False), 4000.0)[0]
    assert kv == pytest.approx(80 * 2 * 2 * 128 * 1.0 * 4000)  # 8 KV heads over tp 4, FP8
    # the KV cache crosses NVLink (all 8 GPUs in one domain): at least its bytes / bandwidth
    assert split["ttft_s"] > kv / engine.system.fast_bytes_per_s


def test_mtp_speeds_up_memory_bound_decode():
    m, s = load_model("deepseek-v3"), load_system("b200")
    pins = {"tp": 8, "pp": 1, "attention_dp": True, "replicas": 1}
    base = _wl(weight_precision="nvfp4", mode="concurrency", concurrency=8)
    plain = serve(m, s, 8, base, pins).best
    mtp = serve(m, s, 8, base.with_overrides(mtp_depth=2, mtp_acceptance=0.85), pins).best
    assert mtp["tpot_s"] < 0.75 * plain["tpot_s"]
    assert mtp["itl_s"] == pytest.approx(mtp["tpot_s"] * (1 + 0.85 + 0.85**2))
