"""Same layout, same price, whatever the strategy's name (issue 21): SUMMA without tensor
parallelism (tp1 = tp2 = nb = 1) and context parallelism with cp = 1 run exactly the GEMMs and
kernels of 1D at tp1 = 1, so every time and byte must be equal. SUMMA's matmuls once skipped
the GEMM wave quantisation and the FP8/FP4 quantisation kernels the 1D ones pay (and counted
2K FLOPs per output against 2K − 1), which made the "idealised" line 1.4–3 % faster than 1D
even where it *was* 1D (model/physics/block.py: _gemm, shared by both)."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model import load_model, load_system
from tests.unstacked import evaluate

COLUMNS = ("iteration_time_s", "t_compute_s", "t_memory_s", "t_pp_comm_s", "t_dp_comm_s",
           "t_bubble_s", "memory_gb", "mfu", "hfu")
SYSTEMS = {"h100": ("bf16", "fp8", "fp8-blockwise"), "b200": ("bf16", "mxfp8", "nvfp4"),
           "gb200-nvl72": ("bf16", "fp8"), "mi300x": ("bf16", "fp8-delayed")}



@cache
def _model(name: str):
    return load_model(name).with_overrides(layers=8)


def _row(strategy: str, name: str, system: str, layout: dict, precision: str, extra: dict):
    ev = evaluate(_model(name), load_system(system), layout["pp"] * layout["dp"], 256,
                  strategy, tp1=1, **layout, **extra,
                  execution={"precision": precision, "interleave": 1, "recompute_layers": 0})
    return ev.row


@settings(max_examples=8, deadline=None)
@given(name=st.sampled_from(["gpt3-175b", "llama3-8b", "llama3-70b"]),
       system=st.sampled_from(sorted(SYSTEMS)), pick=st.integers(0, 2),
       pp=st.sampled_from([1, 2, 4, 8]), dp=st.sampled_from([1, 2, 8, 32]),
       microbatch=st.sampled_from([1, 2, 4]))
def test_1d_summa_and_context_price_a_shared_layout_identically(name, system, pick, pp, dp,
                                                                microbatch):
    precision = SYSTEMS[system][pick % len(SYSTEMS[system])]
    layout = {"pp": pp, "dp": dp, "microbatch": microbatch}
    one = _row("1d", name, system, layout, precision, {})
    summa = _row("summa", name, system, layout, precision, {"tp2": 1, "nb": 1})
    context = _row("context", name, system, layout, precision, {"tp2": 1})
    for other in (summa, context):
        for col in COLUMNS:
            assert other[col] == pytest.approx(one[col], rel=1e-12, abs=1e-15), col


def test_the_summa_forward_flops_are_the_1d_gemms():
    """2K − 1 FLOPs per output in both (the paper mode keeps its code's 2K for SUMMA)."""
    from model.physics import ops
    a = ops.linear(1.0, 64.0, 512.0, 256.0, 2.0)
    b = ops.linear_summa(1.0, 64.0, 512.0, 512.0, 512.0, 256.0, 1.0, 2.0)
    assert (b.flop_mat_fwd, b.flop_mat_bwd) == (a.flop_mat_fwd, a.flop_mat_bwd)
    assert ops.linear_summa(1.0, 64.0, 512.0, 512.0, 512.0, 256.0, 1.0, 2.0,
                            two_k=True).flop_mat_fwd == 2 * 64 * 256 * 512
