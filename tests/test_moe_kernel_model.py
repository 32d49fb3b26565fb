"""The fused MoE kernel model fitted on AIConfigurator's measured tables
(model/physics/kernels/moe_kernel.py, model/data/reference/kernels/moe_kernels.json)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from model import ServingWorkload, load_model, load_system
from model.physics.kernels import moe_kernel as mk
from model.physics.serving_ops import layer_ops, layout
from model.physics.serving_step import Engine, step_times
from model.specs.serving_stack import load_serving_stack


def test_one_token_reads_k_experts_and_computes_k_tiles():
    """The kernel's closed form on one token routed top-k of E (all experts on the GPU): with
    the compute and per-CTA limits out of the way the time is k experts' weights and the
    GEMMs' activations over the bandwidth, plus the permute and un-permute of the token's k
    copies (their own kernels, never hidden under a tile); with the bandwidth out of the way,
    k row tiles' padded matmuls over the peak, plus the same copies."""
    m = load_model("deepseek-v3")
    e, f, k = m.hidden, m.expert_ffn, m.top_k
    copies = 2.0 * 2.0 * (1 + k) * e  # read the token, write k copies; read them, write one
    fit = mk.KernelFit("h200_sxm", "fp8", "test", (0.0, 1e9, 1.0, 1e30), 128.0)
    t = mk.grouped_moe_s(fit, m, np.array([1.0]), float(m.experts), 1.0)
    weights = k * 3 * e * f * 1.0
    acts = 2.0 * k * (e + 2 * f) + 2.0 * k * (f + e)
    assert float(t[0]) == pytest.approx((weights + acts + copies) / 4.8e12, rel=1e-9)
    fit = mk.KernelFit("h200_sxm", "fp8", "test", (0.0, 1.0, 1e9, 1e30), 128.0)
    t = mk.grouped_moe_s(fit, m, np.array([1.0]), float(m.experts), 1.0) - copies / 4.8e21
    # k row tiles of 128 × fc1's 2f/128 and fc2's e/128 column tiles, reductions e and f
    depth = [e / (e + 380.0), f / (f + 380.0)]
    flops = [2 * k * 128 * e * 2 * f, 2 * k * 128 * f * e]
    ctas = [k * 2 * f / 128, k * e / 128]
    waves = [np.ceil(c / 132) * 132 for c in ctas]
    expected = sum(fl / (d * c / w) / 1978.9e12
                   for fl, d, c, w in zip(flops, depth, ctas, waves))
    assert float(t[0]) == pytest.approx(expected, rel=1e-9)


def test_formats_are_refused_where_the_tensor_cores_lack_them():
    assert mk.unsupported("b200_sxm", "nvfp4") == ""
    assert mk.unsupported("b200_sxm", "w4a8_mxfp4_mxfp8") == ""
    assert mk.unsupported("h200_sxm", "w4a16_mxfp4") == ""  # weight-only: BF16 MMAs
    assert "no tensor cores for nvfp4" in mk.unsupported("h100_sxm", "nvfp4")
    assert "w4a8_mxfp4_mxfp8" in mk.unsupported("h200_sxm", "w4a8_mxfp4_mxfp8")
    assert "fp8" in mk.unsupported("a100_sxm", "fp8")
    assert "unknown MoE weight format" in mk.unsupported("h100_sxm", "int3")
    with pytest.raises(mk.MoEKernelError, match="h100 .hopper. has no tensor cores for nvfp4"):
        mk.require("h100", "nvfp4")
    with pytest.raises(mk.MoEKernelError, match="no measured table"):
        mk.require("h800", "fp8")
    assert mk.require("h200", "fp8").gpu == "h200_sxm"


def test_shipped_fits_reproduce_their_subset_and_report_held_out_errors():
    """Every shipped fit is a physical one (efficiencies in (0, 1.5], a floor under 0.5 ms) and
    reproduces its validation subset about as well as its held-out error says."""
    rows = mk.validation_rows()
    assert {r["class"] for r in rows} == {"moe"}
    assert {"h100_sxm", "h200_sxm", "b200_sxm"} <= {r["gpu"] for r in rows}
    for r in rows:
        assert r["n"] >= 30 and r["subset_n"] > 0
        assert 0 < r["median_pct"] <= r["p90_pct"]
        assert r["subset_median_pct"] < 2.0 * r["median_pct"] + 10.0
        fit = mk.fitted(r["gpu"], r["dtype"], r["engine"])
        assert 0 <= fit.theta[0] < 5e-4 and 0 < fit.theta[1] <= 1.5 and 0 < fit.theta[2] <= 1.5


def test_serving_prices_the_experts_with_the_measured_kernel():
    """DeepSeek-V3 FP8 on 8 H200 (trtllm-1.0 with ``moe_kernel`` 'measured'): the step's
    routed experts are the kernel model's time on the expected touched experts, the
    permutation inside it; at concurrency 4 they take a few ms of the step, not the 46 ms of
    tiling every local expert. The preset itself keeps the roofline (docs/serving.md)."""
    m, s = load_model("deepseek-v3"), load_system("h200")
    wl = ServingWorkload(1000, 1000, weight_precision="fp8")
    preset = load_serving_stack("trtllm-1.0")
    assert Engine.make(m, s, wl, preset).moe_kernel is None
    engine = Engine.make(m, s, wl, dataclasses.replace(preset, moe_kernel="measured"))
    assert engine.moe_kernel is not None and engine.moe_kernel.dtype == "fp8"
    lay = layout(8, 1, 8, True)
    t = np.array([4.0])
    st = step_times(engine, lay, t, t, 2000.0, True)
    assert float(st.by_op_s["moe/permute"][0]) == 0.0
    op = next(o for o in layer_ops(m, wl, lay, t, t, 2000.0, True)
              if o.spec.name == "moe/experts")
    per_layer = mk.grouped_moe_s(engine.moe_kernel, m, *op.routing)
    layers = m.layers
    assert float(st.by_op_s["moe/experts"][0]) == pytest.approx(
        float(per_layer[0]) * layers * m.moe_layers / m.layers, rel=1e-9)
    assert float(st.by_op_s["moe/experts"][0]) < 0.01


def test_a_system_without_a_table_keeps_the_roofline():
    m = load_model("deepseek-v3")
    wl = ServingWorkload(1000, 1000, weight_precision="fp8")
    stack = dataclasses.replace(load_serving_stack("trtllm-1.0"), moe_kernel="measured")
    engine = Engine.make(m, load_system("h800"), wl, stack)
    assert engine.moe_kernel is None
