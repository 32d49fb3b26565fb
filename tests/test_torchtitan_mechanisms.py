"""torchtitan's mechanisms (issue 23): PyTorch's context-parallel ring attention
(model/physics/ring_attention.py) by hand, DTensor tensor parallelism's gathers and the
500 W H100's clock-scaled peaks."""

from __future__ import annotations

import numpy as np
import pytest

import model
from model.physics import ring_attention as ra
from model.physics.block import evaluate_op, op_counts
from model.physics.collectives import Collective
from model.physics.context import Ctx
from model.physics.optable import Shards
from model.physics.strategies import build_strategy
from model.specs.transformer import transformer_from_dict

LLAMA = {"name": "l", "layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 2, "ffn": 3584,
         "mlp": "swiglu", "seq_len": 8192, "vocab": 32000, "bias": False, "dropout": False,
         "norm": "rmsnorm"}


def test_merge_bytes_by_hand():
    """b = 1, 2 heads, r = 4 rows, q = v = 8, n = 3: output 64 elements, K/V 128.
    Forward: 2 later steps × (38·64 + 4·128) + the final cast 6·64 = 6272.
    Backward: 3 × 10·64 (dQ) + 2 × 30·128 (dK/dV, K/V cat) + 18·128 (step 0) + 10·192 = 13824."""
    fwd, bwd = ra.merge_bytes(1, 2, 4, 8, 8, 3)
    assert float(fwd) == 6272.0
    assert float(bwd) == 13824.0
    assert ra.merge_bytes(1, 2, 4, 8, 8, 1) == (0.0, 0.0)  # no context parallelism


def test_exposed_times_by_hand():
    """T_ag = 5, C = 12, n = 4 (3 per step): forward 5 − 3 = 2; backward with T_p = 4:
    (5 − 3) + 3 × (4 − 3) + 4 = 9; a fast link hides all but the last hop."""
    assert float(ra.exposed_fwd_s(5.0, 12.0, 4)) == 2.0
    assert float(ra.exposed_bwd_s(5.0, 4.0, 12.0, 4)) == 9.0
    assert float(ra.exposed_bwd_s(1.0, 0.5, 12.0, 4)) == 0.5
    assert float(ra.exposed_bwd_s(0.0, 0.0, 12.0, 1)) == 0.0


def _flash(ex: dict, cp: int):
    m = transformer_from_dict(LLAMA)
    ctx = Ctx.make(m, model.load_system("h100"), "default", ex)
    strategy = build_strategy("context", m, ctx.mode, ctx.execution)
    spec = next(s for s in strategy.block if s.name == "attn/flash")
    one = np.ones(1, dtype=int)
    sh = Shards(b=one, tp1=one, tp2=one * cp, nb=one, nv_tp1=one, nv_tp2=one * cp)
    return spec, sh, ctx


def test_pytorch_context_attention_in_the_op():
    """The op's collectives: K/V repeated to all 8 query heads (4× the 2 KV heads' volume),
    all-gathered; its exposed time is the closed form on the pricing's collective times; the
    merges are extra HBM bytes of the op."""
    cp, ex = 4, {"attention_kernel": "fa2", "context_attention": "pytorch"}
    spec, sh, ctx = _flash(ex, cp)
    q = 1024 // 8
    kv_rep = 2.0 * 8 * 8192 * 2 * q  # s·b·h·L·(q + v)
    assert float(ra.volume_bytes("kv_rep", spec, sh, ctx)[0]) == kv_rep
    assert float(ra.volume_bytes("dkv_hop", spec, sh, ctx)[0]) == 4.0 * 8 * 2048 * 2 * q
    res = evaluate_op(spec, sh, ctx)
    t_ag = ctx.pricing.collective(Collective.ALLGATHER, kv_rep, sh.tp2, sh.nv_tp2)
    t_hop = ctx.pricing.collective(Collective.P2P, 4.0 * 8 * 2048 * 2 * q, sh.tp2, sh.nv_tp2)
    for phase, want in ((res.fwd, lambda c: ra.exposed_fwd_s(t_ag, c, cp)),
                        (res.bwd, lambda c: ra.exposed_bwd_s(t_ag, t_hop, c, cp))):
        compute = phase.t - phase.t_comm
        assert phase.t_comm == pytest.approx(want(compute))
    plain = op_counts(spec, sh, _flash({"attention_kernel": "fa2"}, cp)[2])
    fwd, bwd = ra.merge_bytes(1, 8, 2048, q, q, cp)
    counts = op_counts(spec, sh, ctx)
    assert float((counts.extra_bytes_fwd - plain.extra_bytes_fwd)[0]) == pytest.approx(fwd)
    assert float((counts.extra_bytes_bwd - plain.extra_bytes_bwd)[0]) == pytest.approx(bwd)


def test_500w_h100_clock_scaled_peak():
    """The 500 W H100's clock-bound rates are the 700 W SXM5's × (500/700)^(1/3); HBM not."""
    capped, full = model.load_system("h100-96gb-500w"), model.load_system("h100")
    ratio = (500 / 700) ** (1 / 3)
    assert capped.matrix_tflops_fp16 == pytest.approx(989.4 * ratio, abs=0.1)
    assert capped.matrix_tflops_fp8 == pytest.approx(1978.9 * ratio, abs=0.1)
    assert capped.hbm_bandwidth_gb_per_s == 2400 and full.matrix_tflops_fp16 == 989.4


def _tp_block(ex: dict):
    m = transformer_from_dict(LLAMA)
    ctx = Ctx.make(m, model.load_system("h100"), "default", ex)
    return {s.name: s for s in build_strategy("1d", m, ctx.mode, ctx.execution).block}, ctx


def test_dtensor_tp_keeps_the_gathered_input_and_gathers_fp8():
    """Megatron SP re-gathers fc1's input in the backward and keeps l/tp rows; DTensor TP keeps
    the gathered input (no backward gather); with FP8 torchao gathers the input (the norm's
    forward AG) and the output gradient (priced as the norm's backward RS) at 1 byte per
    element instead of 2; the reduce-scatters stay BF16."""
    from model.physics.volumes import comm_volume_bytes
    one = np.ones(1, dtype=int)
    sh = Shards(b=one, tp1=one * 4, tp2=one, nb=one, nv_tp1=one * 4, nv_tp2=one)
    mega, _ = _tp_block({"precision": "fp8"})
    dt, ctx = _tp_block({"precision": "fp8", "tp_style": "dtensor"})
    assert [c.volume for c in mega["mlp/fc1"].bwd] == ["in", "in"]  # RS + re-gather
    assert [c.volume for c in dt["mlp/fc1"].bwd] == ["in"]  # RS only
    assert mega["mlp/fc1"].act_rows is not None and dt["mlp/fc1"].act_rows is None
    assert [c.volume for c in dt["mlp/norm"].fwd + dt["mlp/norm"].bwd] == ["in_q", "in_q"]
    full = 2.0 * 8192 * 1024  # s·b·l·e, BF16
    norm = dt["mlp/norm"]
    assert float(comm_volume_bytes("in_q", norm, norm.fwd[0].axes, sh, ctx)[0]) == full / 2
    assert float(comm_volume_bytes("in", norm, norm.fwd[0].axes, sh, ctx)[0]) == full
    assert [c.volume for c in dt["mlp/fc2"].fwd] == ["out"]  # the RS in BF16
    bf16, _ = _tp_block({"tp_style": "dtensor"})
    assert [c.volume for c in bf16["mlp/norm"].fwd] == ["in"]  # no FP8 without FP8 linears
    moved, _ = _tp_block({"precision": "fp8", "tp_style": "dtensor", "tp_overlap": True})
    assert [c.volume for c in moved["mlp/fc1"].fwd] == ["in_q"]
    assert [c.volume for c in moved["mlp/fc2"].bwd] == ["out_q"]
