"""Mixture-of-experts physics in closed form: the two-tier all-to-all and its lower bound, the
dispatch volume and all-to-all time of an evaluation, expert memory sharded over ep and the
expert-data-parallel group, the EP group's placement, grouped-GEMM wave quantisation, the
experts' per-expert kernel launches, load imbalance and capacity, the all-to-all overlap, MLA and
windowed attention."""

from __future__ import annotations

import numpy as np
import pytest

from model import evaluate, load_model, load_system, search
from model.engine.space import expert_placement
from model.errors import ModelError
from model.physics.collectives import Collective, collective_lower_bound_s, collective_time_s
from model.physics.moe import expert_launches, grouped_wave_efficiency

A2A = Collective.ALLTOALL


@pytest.fixture(scope="module")
def h100():
    return load_system("h100")


def test_alltoall_inside_one_domain(h100):
    v, n = 1e8, 8
    expected = v * (n - 1) / n / h100.fast_bytes_per_s + h100.nvlink_latency_s
    assert float(collective_time_s(A2A, v, n, n, h100)) == pytest.approx(expected)


def test_alltoall_across_domains_runs_both_tiers_at_once(h100):
    v, n = 1e8, 64
    for tau in (1, 2, 8):
        fast = v * (tau - 1) / n / h100.fast_bytes_per_s
        slow = v * (n - tau) / n / (h100.nics_per_gpu * h100.slow_bytes_per_s)
        expected = max(fast, slow) + h100.network_latency_s
        assert float(collective_time_s(A2A, v, n, tau, h100)) == pytest.approx(expected)
    assert float(collective_time_s(A2A, v, 1, 1, h100)) == 0.0
    assert float(collective_time_s(A2A, 0.0, 8, 8, h100)) == 0.0


@pytest.mark.parametrize("nics,half", [(1.0, 0.0), (2.0, 1e6), (0.5, 4e5)])
def test_alltoall_lower_bound_below_every_placement(h100, nics, half):
    system = h100.with_overrides(nics_per_gpu=nics, network_half_message_bytes=half,
                                 nvlink_domain_size=72)
    v = np.array([1e3, 1e6, 3e8])
    for n in (2, 8, 64, 256):
        bound = collective_lower_bound_s(A2A, v, n, system)
        taus = [t for t in range(1, n + 1) if n % t == 0]
        exact = np.min([collective_time_s(A2A, v, n, t, system) for t in taus], axis=0)
        assert np.all(bound <= exact + 1e-15)
        assert np.all(bound > 0)


def test_flex_dispatch_crosses_each_remote_domain_once(h100):
    """DeepEP / HybridEP: a token goes once to each other domain holding one of its k experts
    (3 of 4 domains, each with probability 1 − (3/4)^8), then over NVLink to its GPUs."""
    v, n, k = 1e8, 32, 8
    nic = v / k * 3 * (1 - 0.75 ** k) / (h100.nics_per_gpu * h100.slow_bytes_per_s)
    nvl = v * 7 / 8 / h100.fast_bytes_per_s
    flex = float(collective_time_s(Collective.DISPATCH, v, n, 8, h100, fanout=k))
    assert flex == pytest.approx(max(nic, nvl) + h100.network_latency_s)
    plain = float(collective_time_s(A2A, v, n, 8, h100))
    assert flex < plain / 2
    inside = collective_time_s(Collective.DISPATCH, v, 8, 8, h100, fanout=k)
    assert float(inside) == pytest.approx(float(collective_time_s(A2A, v, 8, 8, h100)))
    for size in (2, 16, 64):
        bound = collective_lower_bound_s(Collective.DISPATCH, v, size, h100, fanout=k)
        exact = [collective_time_s(Collective.DISPATCH, v, size, t, h100, fanout=k)
                 for t in range(1, size + 1)]
        assert float(bound) <= float(np.min(exact)) + 1e-15


def _qwen30b():
    return load_model("qwen3-30b-a3b").with_overrides(vocab=0, tied_embeddings=False)


def test_dispatch_volume_and_alltoall_time_of_an_evaluation(h100):
    """Per MoE layer and microbatch each GPU sends its T·k routed copies (bf16) four times
    (dispatch and combine, forward and backward) over ep: 8 GPUs of one NVLink domain."""
    m = _qwen30b()
    ev = evaluate(m, h100, 64, 512, "1d", tp1=1, pp=1, dp=64, ep=8, microbatch=1,
                  stack="none")
    ops = ev.ops.set_index("op")
    tokens = m.seq_len  # microbatch 1, tp1 = 1: the whole sequence on each GPU
    volume = 2.0 * tokens * m.top_k * m.hidden
    for name in ("moe/dispatch", "moe/combine"):
        assert ops.loc[name, "comm_bytes_fwd"] == pytest.approx(volume)
        assert ops.loc[name, "comm_bytes_bwd"] == pytest.approx(volume)
    one = volume * 7 / 8 / h100.fast_bytes_per_s + h100.nvlink_latency_s
    n_mb = 512 // 64
    assert ev.row["t_ep_comm_s"] == pytest.approx(4 * one * m.layers * n_mb, rel=1e-9)


def test_moe_token_efficiency_slows_only_the_token_kernels(h100):
    """``moe_token_efficiency`` η_t divides the HBM bandwidth of the router, permutation and
    unpermutation kernels: the memory-bound dispatch and combine take exactly 1/η_t as long
    (their bytes unchanged), the experts' GEMMs not at all."""
    m = _qwen30b()
    cfg = dict(tp1=1, pp=1, dp=64, ep=8, microbatch=1, stack="none")
    evs = {eta: evaluate(m, h100.with_overrides(moe_token_efficiency=eta), 64, 512, "1d",
                         **cfg) for eta in (1.0, 0.25)}
    ops = {eta: ev.ops.set_index("op") for eta, ev in evs.items()}
    for name in ("moe/dispatch", "moe/combine"):
        # its kernels' HBM time; their launches (in t_compute_s) do not scale
        mem = {eta: o.loc[name, "t_memory_exposed_s"] for eta, o in ops.items()}
        assert ops[1.0].loc[name, "bound"] == "communication"
        assert mem[0.25] == pytest.approx(4 * mem[1.0], rel=1e-9)
        assert ops[0.25].loc[name, "hbm_bytes_fwd"] == ops[1.0].loc[name, "hbm_bytes_fwd"]
    for name in ("moe/fc1", "moe/fc2", "attn/qkv"):
        assert ops[0.25].loc[name, "t_iteration_s"] == ops[1.0].loc[name, "t_iteration_s"]
    assert evs[0.25].row["iteration_time_s"] > evs[1.0].row["iteration_time_s"]


def test_expert_memory_is_sharded_over_ep_and_edp(h100):
    """Weights: each layer's dense part (attention, norms, router) whole and E/ep experts;
    optimizer state (6 × the 2-byte weights, ZeRO-1): dense over dp, experts over
    edp = tp1·dp/(ep·etp)."""
    m = _qwen30b()
    for ep, etp in ((8, 1), (16, 2), (64, 1)):
        row = evaluate(m, h100, 64, 512, "1d", tp1=1, pp=1, dp=64, ep=ep, etp=etp,
                       microbatch=1, stack="none").row
        e, q = m.hidden, m.head_dim
        dense = e * (m.heads + 2 * m.kv_heads) * q + m.heads * q * e + 4 * e + e * m.experts
        expert = (m.experts // ep) * 3 * e * m.expert_ffn // etp
        weights = 2.0 * m.layers * (dense + expert)
        assert row["weights_gb"] * 1e9 == pytest.approx(weights)
        assert row["gradients_gb"] * 1e9 == pytest.approx(weights)
        optimizer = 6 * 2.0 * m.layers * (dense / 64 + expert / (64 // (ep * etp)))
        assert row["optimizer_gb"] * 1e9 == pytest.approx(optimizer)


def test_ep_placement_follows_the_nvlink_placement():
    """Megatron's rank order (tp1, tp2, dp; experts: etp, ep, edp): the EP group's members
    per domain follow from how many of the stage's tp1·tp2·dp GPUs a domain holds."""
    cols = {k: np.array(v) for k, v in dict(
        tp1=[1, 1, 2, 2, 2], tp2=[1, 1, 1, 1, 1], dp=[64, 64, 16, 16, 16],
        ep=[64, 64, 32, 8, 2], etp=[1, 1, 1, 2, 1], nv_tp1=[1, 1, 2, 2, 1],
        nv_tp2=[1, 1, 1, 1, 1], nv_dp=[64, 16, 4, 4, 8]).items()}
    out = expert_placement(cols)
    # NVL72 (64 of 256 GPUs): pp outside keeps EP64 in one rack, pp inside splits it 4 ways;
    # tp1 = 2 of which the domain holds one: EP2 = ranks 0 and 1 (t = 0, 1): one inside, and
    # the expert-data-parallel group (stride 2: t = 0, every d) has all 8 of the domain
    assert list(out["nv_ep"]) == [64, 16, 8, 4, 1]
    assert list(out["nv_etp"]) == [1, 1, 1, 2, 1]
    assert list(out["nv_edp"]) == [1, 1, 1, 1, 8]


def test_deepseek_v3_search_keeps_ep64_inside_an_nvl72_rack():
    m, s = load_model("deepseek-v3"), load_system("gb200-nvl72")
    best = search(m, s, 256, 4096, "1d", pins={"tp1": 1, "pp": 4, "ep": 64, "microbatch": 1},
                  execution={"precision": "mxfp8", "interleave": 4}, top_k=1).best
    assert (best["nv_dp"], best["nv_pp"]) == (64, 1)  # the EP group in one domain
    split = search(m, s, 256, 4096, "1d", pins={"tp1": 1, "pp": 4, "ep": 64, "microbatch": 1,
                                                "nv_pp": 4},
                   execution={"precision": "mxfp8", "interleave": 4}, top_k=1).best
    assert split["t_ep_comm_s"] > 3 * best["t_ep_comm_s"]  # 4 racks: over the NICs


def test_grouped_wave_efficiency_pads_each_expert_to_whole_tiles():
    # 4 experts of 64 rows on 128-row tiles: half of each tile is padding; 4·1·8 = 32 tiles on
    # 132 SMs: one partly empty wave
    eff = grouped_wave_efficiency(256.0, 4.0, 1024.0, 128, 132)
    assert float(eff) == pytest.approx(0.5 * 32 / 132)
    assert float(grouped_wave_efficiency(4 * 8192.0, 4.0, 4096.0, 128, 132)) == pytest.approx(
        4 * 64 * 32 / (np.ceil(4 * 64 * 32 / 132) * 132))


def test_expert_launches_per_local_expert():
    """n_fwd = E_l·(1 + q), n_bwd = E_l·(2 + q): a GEMM per expert (forward; dgrad and wgrad),
    plus one quantisation kernel per expert and direction where TE loops over the experts."""
    assert expert_launches(32.0, False) == (32.0, 64.0)
    assert expert_launches(32.0, True) == (64.0, 96.0)
    fwd, bwd = expert_launches(np.array([1.0, 16.0]), True)
    assert fwd.tolist() == [2.0, 32.0] and bwd.tolist() == [3.0, 48.0]


@pytest.mark.parametrize(("precision", "per_expert"), [("bf16", 3), ("fp8", 5),
                                                       ("mxfp8", 5), ("fp8-delayed", 3)])
def test_fewer_experts_per_gpu_fewer_launches_same_flops(precision, per_expert,
                                                         without_gemm_depth):
    """Qwen3-30B-A3B (128 experts) at EP 8 (16 local experts) and EP 64 (2): the same routed
    tokens and FLOPs per GPU; without wave quantisation (sm_count 0) and without the GEMMs'
    depth effect (k0 = 0: fewer tokens per expert make a shallower weight gradient,
    tests/test_moe_kernels.py) the experts' compute time differs by exactly the 14 extra
    experts' launches, forward and backward, each at the system's kernel_overhead_s — 3 per
    expert in BF16 and delayed-scaling FP8 (its per-expert inputs quantised by one fused
    kernel), 5 where each expert is quantised on its own. The launch cost is set to 1 ms, far
    above the GEMMs' work, so both layouts are launch-bound: the experts' GEMMs are issued
    ahead of the GPU and take max(n·τ, τ + t_work) (model.physics.moe.issued_ahead_s)."""
    system = load_system("b200").with_overrides(sm_count=0, kernel_overhead_s=1e-3)
    m = _qwen30b()
    ops = [evaluate(m, system, 64, 512, "1d", tp1=1, pp=1, dp=64, ep=ep, microbatch=1,
                    stack="none", execution={"precision": precision}).ops.set_index("op")
           for ep in (8, 64)]
    for name in ("moe/fc1", "moe/fc2"):
        assert ops[0].loc[name, "flop_fwd"] == pytest.approx(ops[1].loc[name, "flop_fwd"])
        extra = ops[0].loc[name, "t_compute_s"] - ops[1].loc[name, "t_compute_s"]
        assert extra == pytest.approx(per_expert * (16 - 2) * system.kernel_overhead_s,
                                      rel=1e-9)


def test_more_experts_per_token_more_alltoall(h100):
    base = _qwen30b()
    times = [evaluate(base.with_overrides(top_k=k), h100, 64, 512, "1d", tp1=1, pp=1, dp=64,
                      ep=8, microbatch=1, stack="none").row["t_ep_comm_s"] for k in (2, 4, 8)]
    assert times[0] < times[1] < times[2]
    # the volume grows with k, the latency does not
    assert times[2] - times[1] == pytest.approx(2 * (times[1] - times[0]))


def test_imbalance_and_capacity_slow_the_step_not_the_model_flops(h100):
    m = _qwen30b()

    def row(**ex):
        return evaluate(m, h100, 64, 512, "1d", tp1=1, pp=1, dp=64, ep=8, microbatch=1,
                        stack="none", execution=ex).row

    even, skewed, capped = row(), row(moe_imbalance=1.5), row(moe_capacity_factor=1.25)
    assert skewed["iteration_time_s"] > capped["iteration_time_s"] > even["iteration_time_s"]
    assert skewed["t_ep_comm_s"] == pytest.approx(1.5 * even["t_ep_comm_s"], rel=0.01)
    for r in (skewed, capped):  # padding and imbalance are hardware work, not model FLOPs
        assert r["model_tflops_per_gpu"] * r["iteration_time_s"] == pytest.approx(
            even["model_tflops_per_gpu"] * even["iteration_time_s"])
        assert r["hfu"] * r["iteration_time_s"] > even["hfu"] * even["iteration_time_s"]


def test_alltoall_overlap_hides_behind_compute(h100):
    m = _qwen30b()

    def row(overlap):
        return evaluate(m, h100, 64, 512, "1d", tp1=1, pp=1, dp=64, ep=8, microbatch=1,
                        stack="none", execution={"ep_overlap": overlap}).row

    plain, hidden = row(False), row(True)
    # the all-to-all is shorter than the compute beside it: only the overlap slowdown γ stays
    assert hidden["t_ep_comm_s"] == pytest.approx(h100.overlap_slowdown * plain["t_ep_comm_s"])
    # the step gains that, less the data-parallel collectives that a shorter block no longer
    # hides
    saved = plain["iteration_time_s"] - hidden["iteration_time_s"]
    assert 0 < saved <= plain["t_ep_comm_s"] - hidden["t_ep_comm_s"]
    assert hidden["t_dp_comm_s"] >= plain["t_dp_comm_s"]


def test_mla_attention_uses_its_own_head_dims(h100):
    m = load_model("deepseek-v3").with_overrides(layers=4, dense_layers=1, mtp_layers=0,
                                                 experts=16, vocab=0, tied_embeddings=False)
    ops = evaluate(m, h100, 64, 512, "1d", tp1=1, pp=1, dp=64, ep=8, microbatch=1,
                   stack="none").ops.set_index("op")
    l, h = m.seq_len, m.heads
    qk, pv = l * l * h * (2 * 192 - 1), l * h * 128 * (2 * l - 1)  # QKᵀ and PV per sample
    assert ops.loc["attn/flash", "flop_fwd"] > 0.5 * (qk + pv)  # causal: half, plus softmax
    assert ops.loc["attn/flash", "flop_fwd"] < 0.5 * (qk + pv) * 1.02
    down = l * m.hidden * (1536 + 512 + 64) * 2
    assert ops.loc["attn/down", "flop_fwd"] == pytest.approx(down, rel=1e-3)


def test_sliding_window_attention_flops(h100):
    m = load_model("gpt-oss-120b").with_overrides(layers=4, window_layers=2, experts=16,
                                                  vocab=0, tied_embeddings=False)
    full = m.with_overrides(sliding_window=0, window_layers=0)

    def flash(model):
        return evaluate(model, h100, 8, 64, "1d", tp1=1, pp=1, dp=8, ep=8, microbatch=1,
                        stack="none").ops.set_index("op").loc["attn/flash", "flop_fwd"]

    l, w = m.seq_len, m.sliding_window
    share = 0.5 + 0.5 * (w - w * w / (2 * l)) / (l / 2)  # half the layers windowed
    assert flash(m) == pytest.approx(share * flash(full), rel=1e-9)


@pytest.mark.parametrize("pins,message", [
    ({"ep": 3}, "does not divide experts"),
    ({"ep": 64, "etp": 2}, "does not divide the stage"),
    ({"etp": 16}, "expert FFN"),
])
def test_bad_expert_pins_are_explained(h100, pins, message):
    with pytest.raises(ModelError, match=message):
        evaluate(_qwen30b(), h100, 64, 512, "1d", tp1=1, pp=1, dp=64, microbatch=1,
                 stack="none", **pins)


def test_dense_models_have_no_experts(h100):
    with pytest.raises(ModelError, match="has no experts"):
        evaluate(load_model("llama3-8b"), h100, 8, 64, "1d", tp1=1, pp=1, dp=8,
                 microbatch=1, ep=2, stack="none")
    row = search(load_model("llama3-8b"), h100, 8, 64, "1d", top_k=1, stack="none").best
    assert (row["ep"], row["etp"], row["t_ep_comm_s"]) == (1, 1, 0.0)
