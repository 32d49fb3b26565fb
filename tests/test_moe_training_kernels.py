"""MoE training through the kernel layer (``Execution.kernel_tables``,
model/physics/kernels/moe_training.py): the routed experts' forward, dX and dW grouped GEMMs are
the fitted MoE kernel model's times for exactly the touched experts' tiles, by hand; a weight
gradient over 3 tokens per expert costs more per FLOP than over 3,000; the router's GEMM runs
the measured BF16 GEMM kernel; with the switch off every expert op is priced as before."""

from __future__ import annotations

import numpy as np
import pytest

from model import load_model, load_system
from model.engine.report import op_table
from model.physics import gemm, routing
from model.physics.block import evaluate_op
from model.physics.context import Ctx
from model.physics.kernels import moe_kernel, moe_training
from model.physics.kernels import training as kt
from model.physics.optable import Shards
from model.physics.strategies import build_strategy

H100 = load_system("h100")


def _model():
    return load_model("qwen3-30b-a3b").with_overrides(vocab=0, tied_embeddings=False)


def _ctx(model, precision: str = "bf16", on: bool = True) -> Ctx:
    return Ctx.make(model, H100, "default", {"kernel_tables": on, "precision": precision})


def _spec(ctx: Ctx, name: str):
    block = build_strategy("1d", ctx.model, ctx.mode, ctx.execution).block
    return next(s for s in block if s.name == name)


def _shards(b, ep) -> Shards:
    b, ep = np.asarray(b), np.asarray(ep)
    one = np.ones(len(b), dtype=int)
    return Shards(b=b, tp1=one, tp2=one, nb=one, nv_tp1=one, nv_tp2=one, ep=ep, etp=one,
                  nv_ep=np.minimum(ep, 8), nv_etp=one)


def _by_hand(tiles, cols, depth_pad, depth, hbm, flops, dtype="bfloat16"):
    """One grouped GEMM of the fitted model (moe_kernel's docstring) written out: tiles × ⌈cols/
    128⌉ CTAs in waves of 132 SMs at the depth efficiency, every tile whole, against the HBM
    bytes at min(η_m·B, CTAs·β)."""
    fit = moe_kernel.fitted("h100_sxm", dtype, "trtllm/cutlass")
    _, _, eta_m, beta = fit.theta
    k0 = gemm.depth_overhead(moe_kernel.MOE_DTYPES[dtype][1])
    ctas = tiles * np.ceil(cols / 128.0)
    waves = np.maximum(np.ceil(ctas / 132.0), 1.0) * 132.0
    busy = ctas / waves * depth / (depth + k0)
    compute = 2.0 * tiles * fit.tile * depth_pad * np.ceil(cols / 128.0) * 128.0 / (busy * flops)
    return np.maximum(compute, hbm / np.minimum(eta_m * H100.hbm_bytes_per_s, ctas * beta))


@pytest.mark.parametrize("op", ["moe/fc1", "moe/fc2"])
def test_expert_gemms_are_the_kernel_model_of_the_touched_experts_tiles(op):
    """Microbatch 1 and 2 of 4,096 tokens and one token, EP 1 and 16: the forward is the fitted
    model's grouped GEMM over the touched experts' row tiles; the backward is dX (reduction n)
    plus dW (output [k, n] per touched expert, reduction its tokens padded to K blocks)."""
    model = _model()
    one_token = model.with_overrides(seq_len=1)
    for m, b, ep in ((model, [1, 2, 2], [1, 1, 16]), (one_token, [1], [1])):
        ctx = _ctx(m)
        spec = _spec(ctx, op)
        r = evaluate_op(spec, _shards(b, ep), ctx)
        c = r.counts
        flops = ctx.expert_efficiency * ctx.matrix_flop_per_s  # η·P: BF16, relative 1
        e, fe = float(m.hidden), float(m.expert_ffn)
        k, n = (e, 2.0 * fe) if op == "moe/fc1" else (fe, e)
        routed = np.asarray(b, float) * m.seq_len * m.top_k
        local = m.experts / np.asarray(ep, float)
        tokens = np.asarray(b, float) * m.seq_len * np.asarray(ep, float)  # N per expert
        touched = local * routing.touched_share(tokens, m.top_k, m.experts)
        tiles = local * routing.row_tiles_per_expert(tokens, m.top_k, m.experts, 64.0)
        blocks = local * routing.row_tiles_per_expert(tokens, m.top_k, m.experts, 64.0)
        acts = 2.0 * routed * (k + n)
        fwd = _by_hand(tiles, n, np.ceil(k / 64) * 64, k, touched * k * n * 2 + acts, flops)
        dx = _by_hand(tiles, k, np.ceil(n / 64) * 64, n, touched * k * n * 2 + acts, flops)
        dw = _by_hand(touched * np.ceil(k / 64), n, 64.0 * blocks / touched, routed / touched,
                      acts + 8.0 * touched * k * n, flops)
        work_fwd = c.flop_mat_fwd / (ctx.expert_efficiency * c.wave_fwd * ctx.matrix_flop_per_s)
        work_bwd = c.flop_mat_bwd / (ctx.expert_efficiency * c.wave_bwd * ctx.matrix_flop_per_s)
        assert np.allclose(work_fwd, fwd, rtol=1e-12)
        assert np.allclose(work_bwd, dx + dw, rtol=1e-12)
        if m.seq_len == 1:  # one token, top-k of E: exactly k experts, one row tile each
            assert touched == pytest.approx(m.top_k) and tiles == pytest.approx(m.top_k)
        # the op's time: its per-expert launches issued ahead of the kernel's work
        tau = H100.kernel_overhead_s * ctx.share(spec)
        assert np.allclose(r.fwd.t_comp, np.maximum(c.launches_fwd * tau, tau + fwd))


def test_weight_gradient_with_3_tokens_per_expert_costs_more_per_flop_than_with_3000():
    """dW reduces over an expert's tokens: 3 rows are one K block of 64 mostly padding, far
    below the depth overhead k₀, so its FLOPs run far slower than over 3,000 rows."""
    kern = moe_training.expert_kernel_of(H100, "bf16")
    rate = 0.7 * H100.matrix_flop_per_s
    local, top_k, experts, k, n = 16.0, 8.0, 128.0, 2048.0, 1536.0
    per_flop = []
    for per_expert in (3.0, 3000.0):
        routed = per_expert * local
        _, _, t_dw, _, _ = moe_training.expert_gemm_times(kern, rate, routed, local, top_k,
                                                          experts, k, n)
        per_flop.append(float(t_dw) / (2.0 * routed * k * n))
    assert per_flop[0] > 20.0 * per_flop[1]


def test_fp8_experts_run_the_cublas_fp8_asymptote_over_bf16():
    """Per-tensor FP8 experts' compute rate is the stack's η times the measured GEMM kernel's
    FP8/BF16 asymptote on the GPU (what Transformer Engine's per-expert cuBLASLt GEMMs reach);
    B300, with MoE tables but no GEMM fit, takes B200's; FP8 with block scales on Blackwell runs
    DeepGEMM's fit (CUTLASS has none); A100 has no CUTLASS MoE fit: no expert kernel."""
    dense = kt.gemm_kernel_of(H100, "fp8")
    assert moe_training.expert_kernel_of(H100, "fp8").relative == pytest.approx(
        dense.eta / dense.reference_eta)
    b200 = kt.gemm_kernel_of(load_system("b200"), "mxfp8")
    b300 = moe_training.expert_kernel_of(load_system("b300"), "mxfp8")
    assert b300.relative == pytest.approx(b200.eta / b200.reference_eta)
    assert b300.cta_bytes_per_s == moe_kernel.fitted("b300_sxm", "fp8", "trtllm/cutlass").theta[3]
    block = moe_training.expert_kernel_of(load_system("b200"), "fp8-blockwise")
    assert block.cta_bytes_per_s == moe_kernel.fitted("b200_sxm", "fp8_block",
                                                      "trtllm/deepgemm").theta[3]
    assert moe_training.expert_kernel_of(load_system("a100"), "bf16") is None


def test_router_runs_the_measured_bf16_gemm_kernel():
    """The router's logits GEMM [T, e]·[e, E] takes the measured BF16 kernel's forward and
    backward efficiencies, also under an FP8 recipe (Megatron keeps the router in BF16)."""
    model = _model()
    ctx = _ctx(model, "fp8")
    spec = _spec(ctx, "moe/router")
    sh = _shards([1, 2], [1, 8])
    c = evaluate_op(spec, sh, ctx).counts
    t = np.array([1.0, 2.0]) * model.seq_len
    fwd, bwd = kt.linear_efficiencies(kt.gemm_kernel_of(H100, "bf16"), t, float(model.hidden),
                                      float(model.experts), float(model.hidden))
    assert np.allclose(c.wave_fwd, fwd) and np.allclose(c.wave_bwd, bwd)


def test_switch_off_prices_the_experts_as_before():
    """With kernel_tables off no expert kernel is built and the expert ops keep the old shape
    terms; on, the times move."""
    model = _model()
    off, on = _ctx(model, on=False), _ctx(model)
    assert off.expert_kernel is None and on.expert_kernel is not None
    sh = _shards([1, 2], [1, 8])
    for name in ("moe/fc1", "moe/fc2", "moe/router"):
        a = evaluate_op(_spec(off, name), sh, off)
        plain = Ctx.make(model, H100, "default", {"precision": "bf16"})
        b = evaluate_op(_spec(plain, name), sh, plain)
        assert np.array_equal(a.fwd.t, b.fwd.t) and np.array_equal(a.bwd.t, b.bwd.t)
        assert not np.allclose(evaluate_op(_spec(on, name), sh, on).bwd.t, a.bwd.t)


def test_explain_reads_back_the_expert_kernel_times():
    """``evaluate --explain``'s op table (model/engine/kernel_report.py), launches free: the
    expert GEMM's kernel time forward is the kernel model's forward time, backward t_dX + t_dW."""
    model = _model()
    system = H100.with_overrides(kernel_overhead_s=0.0)
    ctx = Ctx.make(model, system, "default", {"kernel_tables": True, "precision": "bf16"})
    sh = _shards([1], [8])
    r = evaluate_op(_spec(ctx, "moe/fc2"), sh, ctx)
    row = op_table([("block", r)], 1, 1, sh, ctx).iloc[0]
    rate = ctx.expert_efficiency * ctx.matrix_flop_per_s
    t_fwd, t_dx, t_dw, _, _ = moe_training.expert_gemm_times(
        ctx.expert_kernel, rate, float(model.seq_len * model.top_k), model.experts / 8.0,
        float(model.top_k), float(model.experts), float(model.expert_ffn), float(model.hidden))
    assert row["kernel_time_fwd_s"] == pytest.approx(float(t_fwd), rel=1e-12)
    assert row["kernel_time_bwd_s"] == pytest.approx(float(t_dx + t_dw), rel=1e-12)
