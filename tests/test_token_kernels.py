"""The MoE token kernels in closed form (model.physics.token_kernels): the router's score,
top-k and aux-loss kernels and the token permutation as memory-bound passes plus launches, per
path (Transformer Engine's fused kernels or Megatron-Core's PyTorch ops), the all-to-all
dispatcher's chunk sort, and the recipes' settings the MoE validation reads."""

from __future__ import annotations

import pytest

from model import evaluate, load_model, load_system
from model.physics import token_kernels as tk
from model.validation.moe import moe_execution, moe_records

S = 2.0  # bf16 bytes


def test_fused_permutation_is_four_kernels_forward_one_backward():
    """TE's moe_permute_with_probs: make_row_id_map's three passes and _permute_kernel; its
    backward one _unpermute_kernel. Forward bytes: the tokens read once, their copies written
    once, and 1.25 + 2 + 2 + 2 = 7.25 fp32 [T, E] passes of maps and probabilities."""
    assert tk.passes("permute", True, "fwd") == (4.0, 7.25, 1.0, 1.0)
    assert tk.passes("permute", True, "bwd") == (1.0, 2.0, 1.0, 1.0)
    assert tk.passes("router", True, "fwd")[0] == 3.0  # top-k, aux scores, aux loss


def test_pass_bytes_by_hand():
    """T = 10 tokens, e = 8, k = 2, E = 4: c = (1, 1, 1) moves 4·10·4 + 2·10·8 + 2·10·2·8
    = 160 + 160 + 320 bytes."""
    assert tk.pass_bytes((1.0, 1.0, 1.0), 10, 8, 2, 4, S) == pytest.approx(640.0)
    assert tk.pass_bytes((0.0, 0.0, 2.0), 10, 8, 2, 4, S) == pytest.approx(640.0)


@pytest.mark.parametrize("op", ["router", "permute", "unpermute"])
def test_unfused_path_launches_more_kernels(op):
    assert tk.passes(op, False, "fwd")[0] + tk.passes(op, False, "bwd")[0] > (
        tk.passes(op, True, "fwd")[0] + tk.passes(op, True, "bwd")[0])


def _qwen30b():
    return load_model("qwen3-30b-a3b").with_overrides(vocab=0, tied_embeddings=False)


def _ops(ep: int, **execution):
    ev = evaluate(_qwen30b(), load_system("h100"), 64, 512, "1d", tp1=1, pp=1, dp=64, ep=ep,
                  microbatch=1, stack="none", execution=execution)
    return ev.ops.set_index("op")


def _expected(op: str, fused: bool, way: str, m, sort: bool) -> tuple[float, float]:
    """(bytes, launches) of one MoE layer's op for one sequence (microbatch 1, tp 1)."""
    t, e, k, experts = m.seq_len, m.hidden, m.top_k, m.experts
    n, *coeffs = tk.passes(op, fused, way)
    moved = t * (coeffs[0] * 4 * experts + S * e * (coeffs[1] + coeffs[2] * k))
    if sort:
        n_s, *c_s = tk.passes("sort_chunks", fused, way)
        n, moved = n + n_s, moved + t * S * e * k * c_s[2]
    return moved * m.moe_share, n


@pytest.mark.parametrize("fused", [True, False])
def test_dispatch_and_combine_bytes_of_an_evaluation(fused):
    """Qwen3-30B-A3B (128 experts, top 8, hidden 2048) over ep 8: 16 local experts, so the
    all-to-all dispatcher sorts the received chunks; the op's HBM bytes are the table's."""
    m = _qwen30b()
    ops = _ops(8, moe_permute_fusion=fused)
    for name, op in (("moe/dispatch", "permute"), ("moe/combine", "unpermute")):
        for way in ("fwd", "bwd"):
            moved, _ = _expected(op, fused, way, m, sort=True)
            assert ops.loc[name, f"hbm_bytes_{way}"] == pytest.approx(moved, rel=1e-9)


def test_chunk_sort_only_with_several_local_experts_and_alltoall():
    """One local expert (ep = E) or the flex dispatcher: no chunk sort."""
    m = _qwen30b()
    sorted_ = _ops(8, moe_permute_fusion=True)
    flex = _ops(8, moe_permute_fusion=True, ep_dispatcher="flex")
    plain, _ = _expected("permute", True, "fwd", m, sort=False)
    assert flex.loc["moe/dispatch", "hbm_bytes_fwd"] == pytest.approx(plain, rel=1e-9)
    assert sorted_.loc["moe/dispatch", "hbm_bytes_fwd"] > plain
    one = evaluate(m, load_system("h100"), 128, 512, "1d", tp1=1, pp=1, dp=128, ep=128,
                   microbatch=1, stack="none",
                   execution={"moe_permute_fusion": True}).ops.set_index("op")
    assert one.loc["moe/dispatch", "hbm_bytes_fwd"] == pytest.approx(plain, rel=1e-9)


def test_router_fusion_saves_launches_and_time():
    """The router's fixed cost: 1 GEMM + its kernels, each a launch of kernel_overhead_s."""
    h100 = load_system("h100")
    ops = {f: _ops(8, moe_router_fusion=f) for f in (True, False)}
    for f, o in ops.items():
        n = sum(1.0 + tk.passes("router", f, way)[0] for way in ("fwd", "bwd"))
        assert o.loc["moe/router", "t_compute_s"] >= n * h100.kernel_overhead_s * (
            _qwen30b().moe_share) * (1 - 1e-9)
    assert ops[True].loc["moe/router", "t_iteration_s"] < ops[False].loc[
        "moe/router", "t_iteration_s"]


def test_recipes_deepseek_bf16_moments_and_fused_router():
    """Megatron-Bridge's DeepSeek-V3 recipe: BF16 Adam moments and the fused router; Qwen3's
    keeps fp32 moments and takes its stack's router setting."""
    records = moe_records()
    deepseek = next(r for r in records if r["model"] == "DeepSeekV3")
    qwen = next(r for r in records if r["model"] != "DeepSeekV3")
    ex = moe_execution(deepseek)
    assert ex["optimizer_bf16_moments"] and ex["moe_router_fusion"]
    assert "optimizer_bf16_moments" not in moe_execution(qwen)


def test_blackwell_depth_series_fits_hoppers_depth_constant():
    """The B200 BF16 depth series (gemm_kernels.json "blackwell", Liger-Kernel #1380's cuBLAS
    column) fits k0 = Hopper's BF16 value (DeepGEMM H800 FP8 fit / 2): the model keeps one
    k0 on both generations; every row within 5 %."""
    import numpy as np

    from model.physics.gemm import depth_overhead
    from model.validation import gemm_kernels as kernels
    a, k0 = kernels.fit_blackwell()
    assert abs(k0 - depth_overhead("matrix_tflops_fp16")) <= 10.0
    rows = kernels.blackwell_rows()
    assert np.all(np.abs(kernels.blackwell_tflops(rows, a, k0) / rows[:, 3] - 1) < 0.05)


def test_expert_launches_issued_ahead_of_the_gpu():
    """max(n·τ, τ + t_work): launch-bound only when the GEMMs are shorter than their
    launches."""
    import numpy as np

    from model.physics.moe import issued_ahead_s
    tau = 20e-6
    got = issued_ahead_s(np.array([1e-3, 10e-6]), np.array([8 * tau, 8 * tau]), tau)
    assert got == pytest.approx([1e-3 + tau, 8 * tau])


def test_grouped_kernel_launches_once_for_all_local_experts():
    """The grouped path (one kernel over the local experts) launches what one expert's
    multi-stream GEMMs do: 2 forward and 3 backward kernels under per-expert FP8 casts."""
    ops = {g: _ops(8, precision="fp8", expert_gemm=g) for g in ("multi-stream", "grouped")}
    m, tau = _qwen30b(), load_system("h100").kernel_overhead_s
    fc1 = {g: o.loc["moe/fc1", "t_compute_s"] for g, o in ops.items()}
    # 16 local experts: 16·(2 + 3) launches against 2 + 3, each τ in a moe_share of the layers
    assert fc1["multi-stream"] >= 16 * 5 * tau * m.moe_share * (1 - 1e-9)
    assert fc1["grouped"] < fc1["multi-stream"]
