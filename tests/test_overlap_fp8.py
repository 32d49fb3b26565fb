"""FP8 quantisation kernels, where TP overlap puts the gathers, and the overlap slowdown."""

from __future__ import annotations

import numpy as np
import pytest

from model import load_model, load_system
from model.physics.collectives import overlapped_s
from model.specs.precision import PRECISIONS
from tests.unstacked import evaluate

FP8_QUANTISE_BYTES_PER_ELEMENT = PRECISIONS["fp8"].quantise_bytes_per_element


def _ops(model, system, gpus, execution, **cfg):
    return evaluate(model, system, gpus, 64, "1d", execution=execution, **cfg).ops.set_index("op")


def test_overlapped_time_is_the_excess_plus_the_slowdown_of_the_hidden_part():
    assert overlapped_s(3.0, 5.0, 0.0) == 0.0
    assert overlapped_s(5.0, 3.0, 0.0) == pytest.approx(2.0)
    assert overlapped_s(3.0, 5.0, 0.2) == pytest.approx(0.6)  # hidden 3 s, 20 % still paid
    assert overlapped_s(5.0, 3.0, 0.2) == pytest.approx(2.0 + 0.6)
    np.testing.assert_allclose(overlapped_s(np.array([1.0, 4.0]), 2.0, 0.5), [0.5, 3.0])


def test_fp8_quantisation_is_a_separate_memory_bound_cost():
    """A compute-bound FP8 GEMM still pays its input casts: 6 B per element of X (forward)
    and of dY (backward) at HBM speed, on top of the GEMM."""
    m, s = load_model("llama3-8b"), load_system("h100")
    cfg = dict(tp1=1, pp=1, dp=8, microbatch=1)
    fp8 = _ops(m, s, 8, {"precision": "fp8"}, **cfg)
    bf16 = _ops(m, s, 8, {"precision": "bf16"}, **cfg)
    fc1 = fp8.loc["mlp/fc1"]
    assert fc1["bound"] == "compute"
    rows, k, n = m.seq_len, m.hidden, 2 * m.ffn  # SwiGLU fc1: gate and up
    cast_s = FP8_QUANTISE_BYTES_PER_ELEMENT * rows * (k + n) / s.hbm_bytes_per_s
    assert fc1["t_memory_exposed_s"] == pytest.approx(cast_s, rel=1e-9)
    assert bf16.loc["mlp/fc1", "t_memory_exposed_s"] == 0.0
    gemm_s = fc1["t_compute_s"]
    assert fc1["t_fwd_s"] + fc1["t_bwd_s"] == pytest.approx(gemm_s + cast_s, rel=1e-9)


def test_blockwise_fp8_gemms_run_at_the_block_scaled_speed_ratio():
    """FP8 with 128-element blocks: its GEMMs at 1.75/1.92 of the per-tensor FP8 efficiency
    (cuBLAS 12.9 on Hopper: 1.75× BF16 against 1.92× for per-tensor FP8), its casts moving
    2 + 2·(1 + 4/128) B per element (both FP8 copies with an FP32 scale per 128), and the
    compute-bound fc1's GEMM time longer by exactly 1.92/1.75."""
    blockwise = PRECISIONS["fp8-blockwise"]
    assert blockwise.quantise_bytes_per_element == pytest.approx(2 + 2 * (1 + 4 / 128))
    assert blockwise.kept_bytes_per_element == pytest.approx(1 + 4 / 128)
    m = load_model("llama3-8b")
    s = load_system("h100").with_overrides(sm_count=0, kernel_overhead_s=0.0)
    cfg = dict(tp1=1, pp=1, dp=8, microbatch=1)
    ops = {p: _ops(m, s, 8, {"precision": p}, **cfg).loc["mlp/fc1"]
           for p in ("fp8", "fp8-blockwise")}
    gemm = {p: ops[p]["t_compute_s"] for p in ops}
    assert gemm["fp8-blockwise"] == pytest.approx(gemm["fp8"] * 1.92 / 1.75, rel=1e-9)
    rows, k, n = m.seq_len, m.hidden, 2 * m.ffn
    cast_s = blockwise.quantise_bytes_per_element * rows * (k + n) / s.hbm_bytes_per_s
    assert ops["fp8-blockwise"]["t_memory_exposed_s"] == pytest.approx(cast_s, rel=1e-9)


def test_tp_overlap_moves_the_sequence_parallel_gathers_onto_the_matmuls():
    m, s = load_model("llama3-70b"), load_system("h100")
    cfg = dict(tp1=8, pp=1, dp=1, microbatch=1)
    plain = _ops(m, s, 8, {"sequence_parallel": True}, **cfg)
    over = _ops(m, s, 8, {"sequence_parallel": True, "tp_overlap": True}, **cfg)
    assert "allgather" in plain.loc["attn/norm", "collectives"]
    assert over.loc["attn/norm", "collectives"] == ""
    assert "fwd allgather" in over.loc["attn/qkv", "collectives"]
    assert "bwd allgather" in over.loc["attn/proj", "collectives"]
    volume = ["comm_bytes_fwd", "comm_bytes_bwd"]  # per block the same traffic, moved
    block = plain["where"] == "block"
    assert over.loc[block, volume].to_numpy().sum() == pytest.approx(
        plain.loc[block, volume].to_numpy().sum())
    # hidden behind the GEMMs now (perfect overlap here): far less exposed tensor-parallel time
    s = s.with_overrides(overlap_slowdown=0.0)
    t = [evaluate(m, s, 8, 64, "1d", execution={"sequence_parallel": True, "tp_overlap": o},
                  **cfg).row["t_tp_comm_s"] for o in (False, True)]
    assert t[1] < 0.2 * t[0]


@pytest.mark.parametrize("zero", [1, 3])
def test_overlap_slowdown_charges_hidden_data_parallel_traffic(zero):
    m = load_model("llama3-8b")
    cfg = dict(tp1=1, pp=1, dp=8, microbatch=1)
    ex = {"precision": "fp8", "zero": zero}
    rows = [evaluate(m, load_system("h100").with_overrides(overlap_slowdown=g), 8, 64, "1d",
                     execution=ex, **cfg).row for g in (0.0, 0.2, 0.4)]
    dp = [r["t_dp_comm_s"] for r in rows]
    assert dp[0] < dp[1] < dp[2]
    assert dp[2] - dp[1] == pytest.approx(dp[1] - dp[0], rel=1e-6)  # linear in γ when hidden


def test_fsdp_reduces_gradients_every_microbatch():
    """Each extra microbatch adds its gathers and its gradient reduce-scatter, so the fp32
    gradient buffer (twice the bf16 one) makes every microbatch cost more, not just the last."""
    m, s = load_model("llama3-8b"), load_system("h100").with_overrides(overlap_slowdown=0.2)
    cfg = dict(tp1=1, pp=1, dp=8, microbatch=1)

    def per_microbatch(fp32: bool) -> float:
        t = [evaluate(m, s, 8, gbs, "1d", execution={"zero": 3, "fp32_gradients": fp32},
                      **cfg).row["t_dp_comm_s"] for gbs in (16, 32, 48)]
        assert t[2] - t[1] == pytest.approx(t[1] - t[0], rel=1e-9)  # linear in microbatches
        return (t[1] - t[0]) / 2

    assert per_microbatch(True) > 1.2 * per_microbatch(False)


def test_a_partly_filled_nvl72_rack_keeps_its_largest_even_share():
    """128 GPUs on NVL72 racks: 2 × 64 per NVLink domain (not gcd(128, 72) = 8)."""
    from model.engine.space import filled_domain
    assert filled_domain(128, 72) == 64 and filled_domain(256, 72) == 64
    assert filled_domain(144, 72) == 72 and filled_domain(96, 8) == 8
    assert filled_domain(12, 8) == 6
    m, s = load_model("llama3-70b"), load_system("gb200-nvl72")
    row = evaluate(m, s, 128, 128, "1d", tp1=2, pp=1, dp=64, microbatch=1,
                   execution={"zero": 3}).row
    assert row["nv_tp1"] * row["nv_dp"] == 64
