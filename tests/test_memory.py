"""Memory per GPU against closed forms (model/physics/memory.py and the ops' kept bytes).

Activations per transformer layer, Korthikanti et al. 2022 (arXiv 2205.05198) with s the
sequence, b the microbatch, h the hidden size, a the heads and t the tensor-parallel size
(2-byte values, 1-byte dropout masks, GELU MLP of 4h, biases, dropout):

* no recompute, no sequence parallelism (Table 2 with TP): s·b·h·(10 + 24/t + 5·a·s/(h·t));
* sequence parallelism + selective recompute (§5): s·b·h·34/t; a fused (flash) attention kernel
  keeps one fp32 log-sum-exp per row and head besides (FlashAttention-2, §3.1): + 4·a·s·b/t;
* full recompute: each layer keeps its input, 2·s·b·h (/t with sequence parallelism).

Plus hand-computed stage memory: in-flight microbatches of 1F1B and interleaving, ZeRO
sharding, FSDP's two gathered blocks, and what offload leaves in HBM.
"""

from __future__ import annotations

import pytest

from model import load_system, transformer_from_dict
from model.errors import ModelError
from model.physics.memory import in_flight_microbatches
from model.specs.execution import Execution
from tests.unstacked import evaluate

S, H, A, LAYERS = 2048, 1024, 16, 8
GPT = dict(name="closed-form", layers=LAYERS, hidden=H, heads=A, seq_len=S, vocab=0,
           mlp="gelu", bias=True, dropout=True, tokens=1e9)
KORTHIKANTI = dict(recompute="none", sequence_parallel=False, flash_attention=False, zero=0)
SELECTIVE = dict(recompute="selective", sequence_parallel=True, zero=0)


def row(execution, tp=1, pp=1, dp=1, microbatch=1, global_batch=8, layers=LAYERS, **model):
    """The search row of one configuration of the closed-form model on A100s."""
    m = transformer_from_dict({**GPT, "layers": layers, **model})
    return evaluate(m, load_system("a100"), tp * pp * dp, global_batch, "1d", tp1=tp, pp=pp,
                    dp=dp, microbatch=microbatch, execution=execution).row


def per_layer(r, layers=LAYERS) -> float:
    """Activation bytes per layer of a single-stage (pp = 1) row."""
    return r["activations_gb"] * 1e9 / layers


@pytest.mark.parametrize("t", [1, 2, 4, 8])
@pytest.mark.parametrize("b", [1, 2])
def test_no_recompute_matches_korthikanti_table_2(t, b):
    expected = S * b * H * (10 + 24 / t + 5 * A * S / (H * t))
    assert per_layer(row(KORTHIKANTI, tp=t, microbatch=b)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_sequence_parallel_selective_recompute_is_34_sbh_over_t(t):
    unfused = row({**SELECTIVE, "flash_attention": False}, tp=t)
    assert per_layer(unfused) == pytest.approx(S * H * 34 / t, rel=1e-12)
    fused = row({**SELECTIVE, "flash_attention": True}, tp=t)
    assert per_layer(fused) == pytest.approx(S * H * 34 / t + 4 * A * S / t, rel=1e-12)


@pytest.mark.parametrize("sp,t", [(True, 4), (False, 4), (True, 1)])
def test_full_recompute_keeps_each_layer_input(sp, t):
    r = row({"recompute": "full", "sequence_parallel": sp, "zero": 0}, tp=t)
    assert per_layer(r) == pytest.approx(2 * S * H / (t if sp else 1), rel=1e-12)


def test_partial_recompute_interpolates_per_layer():
    """recompute_layers = 3 of 8: 3 layers keep their input, 5 keep everything."""
    full = per_layer(row({**SELECTIVE, "recompute": "full"}, tp=2))
    sel = per_layer(row(SELECTIVE, tp=2))
    part = per_layer(row({**SELECTIVE, "recompute_layers": 3}, tp=2))
    assert part == pytest.approx((3 * full + 5 * sel) / 8, rel=1e-12)


@pytest.mark.parametrize("pp,n_mb,v,expected", [
    (4, 16, 1, 4.0), (4, 2, 1, 2.0), (1, 8, 1, 1.0), (4, 16, 2, 4 * (1 + 3 / 8)),
    (8, 32, 4, 8 * (1 + 7 / 32))])
def test_in_flight_microbatches(pp, n_mb, v, expected):
    """1F1B: min(pp, n_mb); interleaved: × (1 + (pp − 1)/(pp·V)) (Korthikanti §4.2.3)."""
    assert float(in_flight_microbatches(pp, n_mb, v)) == pytest.approx(expected)


def test_first_stage_holds_pp_microbatches_of_its_layers():
    """pp = 4 stages of 2 layers, 8 microbatches: the first stage keeps 4 in flight."""
    one = per_layer(row(SELECTIVE, tp=2))
    staged = row(SELECTIVE, tp=2, pp=4, global_batch=8)
    assert staged["activations_gb"] * 1e9 == pytest.approx(2 * one * 4, rel=1e-12)
    inter = row({**SELECTIVE, "interleave": 2}, tp=2, pp=4, global_batch=8)
    assert inter["activations_gb"] * 1e9 == pytest.approx(2 * one * 4 * (1 + 3 / 8), rel=1e-12)


def test_weights_gradients_optimizer_by_zero_stage():
    """Per GPU with t = 2, d = 4: a layer holds 12h² weights and the 4h fc1 bias split over t,
    plus 2h row-parallel biases and 4h norm parameters replicated (the blocks have no QKV
    bias); bf16 weights
    2 B/param, gradients 2 B (fp32: 4 B), optimizer state 12 B, sharded over the 4 replicas from
    ZeRO 1 (state), 2 (gradients), 3 (weights, plus two gathered layers)."""
    per_layer_params = (12 * H * H + 4 * H) / 2 + 2 * H + 4 * H
    assert transformer_from_dict(GPT).params_per_block == 12 * H * H + 10 * H
    p = LAYERS * per_layer_params  # parameters per GPU
    w1 = 2 * per_layer_params  # bytes of one layer's weights per GPU
    for zero, (w, g, o) in {0: (2 * p, 2 * p, 12 * p), 1: (2 * p, 2 * p, 3 * p),
                            2: (2 * p, p / 2, 3 * p), 3: (p / 2 + 2 * w1, p / 2, 3 * p)}.items():
        r = row({**SELECTIVE, "zero": zero}, tp=2, dp=4)
        got = (r["weights_gb"] * 1e9, r["gradients_gb"] * 1e9, r["optimizer_gb"] * 1e9)
        assert got == pytest.approx((w, g, o), rel=1e-12), zero
    r = row({**SELECTIVE, "zero": 1, "fp32_gradients": True}, tp=2, dp=4)
    assert r["gradients_gb"] * 1e9 == pytest.approx(4 * p, rel=1e-12)


@pytest.mark.parametrize("what", ["activations", "weights", "optimizer", "all"])
def test_offload_keeps_two_blocks_in_hbm(what):
    """HBM keeps two layers' worth of what is offloaded (the one computing, the one moving);
    the rest is in host memory."""
    ex = {**SELECTIVE, "zero": 0, "offload": what}
    base = row({**SELECTIVE, "zero": 0}, tp=2)
    r = row(ex, tp=2)
    a1, w1 = per_layer(base), base["weights_gb"] * 1e9 / LAYERS
    keep = {"activations": base["activations_gb"] * 1e9, "weights": base["weights_gb"] * 1e9,
            "gradients": base["gradients_gb"] * 1e9, "optimizer": base["optimizer_gb"] * 1e9}
    if what in ("activations", "all"):
        keep["activations"] = 2 * a1
    if what in ("weights", "all"):
        keep["weights"], keep["gradients"] = 2 * w1, 2 * w1
    if what in ("optimizer", "all"):
        keep["optimizer"] = 0.0
    got = {k: r[f"{k}_gb"] * 1e9 for k in keep}
    assert got == pytest.approx(keep, rel=1e-12)
    host = sum(base[f"{k}_gb"] * 1e9 for k in keep) - sum(keep.values())
    assert r["host_memory_gb"] * 1e9 == pytest.approx(host, rel=1e-12)


@pytest.mark.parametrize(("layers_off", "pp", "microbatches"), [(3, 1, 1), (8, 1, 1),
                                                                  (20, 1, 1), (2, 2, 4)])
def test_partial_activation_offload_moves_n_layers(layers_off, pp, microbatches):
    """offload_layers N (Megatron's cpu_offloading_num_layers): min(N, D)·f layers'
    activations of the binding stage (D layers, f microbatches in flight) go to host memory,
    HBM keeping two of them (the one computing, the one moving); nothing else moves."""
    kw = dict(tp=2, pp=pp, global_batch=8 * microbatches)
    base = row({**SELECTIVE, "zero": 0}, **kw)
    r = row({**SELECTIVE, "zero": 0, "offload_layers": layers_off}, **kw)
    d = LAYERS // pp
    in_flight = min(pp, base["n_microbatches"])
    a1 = base["activations_gb"] * 1e9 / (d * in_flight)  # no embedding (vocab 0)
    moved = min(layers_off, d) * in_flight * a1
    kept_back = min(moved, 2 * a1)
    assert r["host_memory_gb"] * 1e9 == pytest.approx(moved - kept_back, rel=1e-12)
    assert r["activations_gb"] * 1e9 == pytest.approx(
        base["activations_gb"] * 1e9 - moved + kept_back, rel=1e-12)
    for k in ("weights_gb", "gradients_gb", "optimizer_gb"):
        assert r[k] == base[k]
    assert r["offload_layers"] == layers_off


def test_partial_offload_exposes_only_what_its_layers_cannot_hide():
    """With a host link so slow that no transfer hides, each offloaded layer exposes
    (A₁/B − T_f) + (A₁/B − T_b) per microbatch, and only min(N, D) layers do."""
    slow = load_system("a100").with_overrides(host_bandwidth_gb_per_s=0.01)
    m = transformer_from_dict(GPT)

    def offload_s(n):
        ev = evaluate(m, slow, 2, 8, "1d", tp1=2, pp=1, dp=1, microbatch=1,
                      execution={**SELECTIVE, "zero": 0, "offload_layers": n})
        return ev.row["t_offload_s"]

    assert offload_s(0) == 0.0
    assert offload_s(2) > 0.0
    assert offload_s(4) == pytest.approx(2 * offload_s(2), rel=1e-12)
    assert offload_s(LAYERS + 5) == pytest.approx(offload_s(LAYERS), rel=1e-12)


def test_offload_layers_is_validated():
    with pytest.raises(ModelError, match="offload_layers must be an integer"):
        Execution(offload_layers=-1)
    with pytest.raises(ModelError, match="moves every layer's activations already"):
        Execution(offload="activations", offload_layers=4)
    no_host = load_system("a100").with_overrides(host_memory_gb=0.0)
    with pytest.raises(ModelError, match="no host memory tier"):
        evaluate(transformer_from_dict(GPT), no_host, 2, 8, "1d", tp1=2, pp=1, dp=1,
                 microbatch=1, execution={"offload_layers": 2})


def test_fsdp_exposes_the_first_gather():
    """ZeRO-3 with compute far longer than communication and no overlap slowdown: every gather
    and reduce-scatter hides behind a layer's compute but the first layer's gather, T_AG =
    λ_f·(n − 1) + (n − 1)/n·W₁/b_f on one NVLink domain of n = 8 replicas."""
    system = load_system("a100").with_overrides(overlap_slowdown=0.0)
    m = transformer_from_dict({**GPT, "seq_len": 8192})
    ev = evaluate(m, system, 8, 64, "1d", tp1=1, pp=1, dp=8, microbatch=1,
                  execution={**SELECTIVE, "zero": 3})
    w1 = 2.0 * m.params_per_block
    t_ag = 7 * system.nvlink_latency_s + 7 / 8 * w1 / system.fast_bytes_per_s
    assert ev.row["t_dp_comm_s"] == pytest.approx(t_ag, rel=1e-9)


def test_execution_defaults_are_what_the_closed_forms_assume():
    """The closed forms above pin these options explicitly; the default differs only where the
    tests say so (flash attention, ZeRO-1)."""
    ex = Execution()
    assert (ex.recompute, ex.sequence_parallel, ex.flash_attention, ex.zero) == (
        "selective", True, True, 1)


@pytest.mark.parametrize("pp,v,rank,expected", [
    (4, 1, 0, 4), (4, 1, 1, 3), (4, 1, 3, 1), (4, 2, 0, 4 + 3 / 2), (4, 2, 1, 4 + 1 / 2),
    (4, 2, 3, 4 - 3 / 2), (8, 4, 7, 8 - 7 / 4)])
def test_in_flight_microbatches_by_stage(pp, v, rank, expected):
    """Stage r of 1F1B runs pp − r forwards before its first backward; interleaved with V chunks,
    (pp − r − 1)·2 + (V − 1)·pp warm-up chunks plus one: pp + (pp − 1 − 2r)/V microbatches."""
    assert float(in_flight_microbatches(pp, 64, v, rank)) == pytest.approx(expected)
    assert float(in_flight_microbatches(pp, 2, v, rank)) <= 2  # never more than exist


LLAMA_LIKE = dict(name="ends", layers=14, hidden=1024, heads=16, seq_len=2048, vocab=32000,
                  mlp="swiglu", bias=False, dropout=False, tokens=1e9)


def test_lighter_ends_hold_one_layer_fewer():
    """14 layers on 4 stages with the embedding and loss counted as layers: (14 + 2)/4 = 4 per
    middle stage and 3 on each end. The pace is the slower of a middle stage (4 blocks) and an
    end stage (3 blocks and its embedding or head): never slower than 4 blocks plus the head,
    as without; and the first stage's memory is its 3 blocks and the embedding."""
    m = transformer_from_dict(LLAMA_LIKE)
    base = {**SELECTIVE, "zero": 1}
    args = dict(tp1=1, pp=4, dp=1, microbatch=1)
    even = evaluate(m, load_system("h100"), 4, 16, "1d", execution=base, **args)
    ends = evaluate(m, load_system("h100"), 4, 16, "1d",
                    execution={**base, "ends_count_as_layers": True}, **args)
    assert int(even.row["layers_per_stage"]) == 4 and int(ends.row["layers_per_stage"]) == 4
    assert ends.row["iteration_time_s"] < even.row["iteration_time_s"]
    blocks = even.ops[even.ops["where"] == "block"]
    t_block = float((blocks["t_fwd_s"] + blocks["t_bwd_s"]).sum())
    edges = even.ops[even.ops["where"] != "block"].groupby("where")[["t_fwd_s", "t_bwd_s"]].sum()
    t_edge = float((edges["t_fwd_s"] + edges["t_bwd_s"]).max())
    n_mb = 16
    pace = n_mb * max(4 * t_block, 3 * t_block + t_edge)
    assert ends.row["t_compute_s"] <= even.row["t_compute_s"]
    local = ends.row["iteration_time_s"] - ends.row[["t_pp_comm_s", "t_dp_comm_s",
                                                     "t_bubble_s", "t_optimizer_s"]].sum()
    assert local == pytest.approx(pace, rel=1e-9)
    one = per_layer(row(base, layers=14, vocab=0, mlp="swiglu", bias=False, dropout=False,
                        heads=16, seq_len=2048), layers=14)
    first = ends.row["activations_gb"] * 1e9  # the embedding keeps no activation
    assert first == pytest.approx(3 * one * 4, rel=1e-9)  # 4 microbatches in flight
    assert even.row["activations_gb"] * 1e9 == pytest.approx(4 * one * 4, rel=1e-9)
