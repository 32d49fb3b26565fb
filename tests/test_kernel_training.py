"""Training priced through the kernel layer (``Execution.kernel_tables``,
model/physics/kernels/training.py): a linear layer's backward is two GEMMs of their own shapes
through the same measured GEMM model, fused attention's backward runs at the measured
backward/forward ratio, the implementation ratios are the measured table's, and with the
switch off (or where the tables do not cover the GPU or precision) every answer is the old one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from model import load_model, load_system
from model.engine.evaluate import shards_of
from model.engine.report import op_table
from model.physics import gemm
from model.physics.block import evaluate_op, op_counts
from model.physics.context import Ctx
from model.physics.kernels import gemm_kernel
from model.physics.kernels import training as kt
from model.physics.kernels.hardware import KernelHardware
from model.physics.kernels.params import KERNEL_DIR, training_fitted
from model.physics.optable import Shards
from model.physics.strategies import build_strategy
from model.specs.execution import resolve_execution

ROOT = Path(__file__).resolve().parent.parent


def _ctx(system: str = "h100", **execution) -> Ctx:
    return Ctx.make(load_model("llama3-8b"), load_system(system), "default", execution)


def _shards() -> Shards:
    """Microbatch 1 and 2, TP 1 and 4 (the candidates a search prices together)."""
    b, tp = np.array([1, 2, 1, 2]), np.array([1, 1, 4, 4])
    one = np.ones(4, dtype=int)
    return Shards(b=b, tp1=tp, tp2=one, nb=one, nv_tp1=tp, nv_tp2=one)


def _block(ctx: Ctx):
    return build_strategy("1d", ctx.model, ctx.mode, ctx.execution).block


def test_backward_is_two_gemms_of_their_own_shapes():
    """dX[m, k] (reduction n) and dW[k, n] (reduction m) each through the measured model; the
    backward efficiency is their harmonic mean — by hand from gemm_kernel.gemm_efficiency."""
    g = kt.gemm_kernel_of(load_system("h100"), "bf16")
    p = training_fitted("h100_sxm", "bfloat16")  # Hopper BF16: the PyTorch training fit
    hw = KernelHardware("", {}, 0.0, 132)
    m, k, n = np.array([64.0, 8192.0]), np.array([4096.0, 4096.0]), np.array([1024.0, 14336.0])

    def by_hand(rows, cols, red):
        return gemm_kernel.gemm_efficiency(rows, cols, red, hw, p["eta"], p["k0"], True) / p[
            "eta"]

    fwd, bwd = kt.linear_efficiencies(g, m, k, n, k)
    assert np.allclose(fwd, by_hand(m, n, k))
    dx, dw = by_hand(m, k, n), by_hand(k, n, m)
    assert np.allclose(bwd, 2.0 / (1.0 / dx + 1.0 / dw))
    # 64 rows: the weight gradient's reduction is 64 deep, far below k0, so the backward is
    # slower than the forward; 8192 rows: both near the asymptote
    assert bwd[0] < 0.7 * fwd[0] and abs(bwd[1] / fwd[1] - 1.0) < 0.1


def test_fp8_runs_its_own_kernel_asymptote():
    """An FP8 GEMM's efficiency is the FP8 kernel's, over the BF16 asymptote of the same GPU
    (the calibration's fixed FP8 ratio no longer applies)."""
    h100 = load_system("h100")
    bf16, fp8 = kt.gemm_kernel_of(h100, "bf16"), kt.gemm_kernel_of(h100, "fp8")
    big = np.array([65536.0])
    ratio = kt.gemm_efficiency(fp8, big, big, big) / kt.gemm_efficiency(bf16, big, big, big)
    p8, p16 = training_fitted("h100_sxm", "fp8"), training_fitted("h100_sxm", "bfloat16")
    assert ratio[0] == pytest.approx(p8["eta"] / p16["eta"] * (65536 / (65536 + p8["k0"]))
                                     / (65536 / (65536 + p16["k0"])), rel=1e-9)
    ctx = _ctx("h100", kernel_tables=True, precision="fp8")
    assert ctx.linear_efficiency == ctx.system.flop_efficiency  # no FP8 ratio on top


def test_uncovered_gpus_and_precisions_fall_back():
    """No table fit: GB300 (any precision), MI300X — the switch changes nothing; MXFP8 runs
    per-tensor FP8's kernel (no table of its own)."""
    assert kt.gemm_kernel_of(load_system("gb300-nvl72"), "fp8") is None
    assert kt.gemm_kernel_of(load_system("gb200-nvl72"), "mxfp8") == kt.gemm_kernel_of(
        load_system("gb200-nvl72"), "fp8")
    assert kt.gemm_kernel_of(load_system("mi300x"), "bf16") is None
    assert kt.gemm_kernel_of(load_system("h100-96gb-500w"), "bf16") is not None  # same die
    on, off = _ctx("gb300-nvl72", kernel_tables=True), _ctx("gb300-nvl72")
    assert on.gemm_kernel is None and on.attention_kernel is None
    assert (on.linear_efficiency, on.attention_passes) == (off.linear_efficiency,
                                                           off.attention_passes)


def _measured_ratios(backend: str) -> tuple[list[float], list[float]]:
    rows = json.loads((KERNEL_DIR / "h100_torch_measured.json").read_text())["rows"]
    fb = {(r["model"], r["seq"], r["batch"]): r["latency_ms"] for r in rows
          if r["kind"] == "attention_fwd_bwd" and r["backend"] == backend}
    fwd = [r for r in rows if r["kind"] == "attention_fwd" and r["backend"] == backend]
    ratio = [2.5 * r["latency_ms"] / (fb[(r["model"], r["seq"], r["batch"])] - r["latency_ms"])
             for r in fwd]
    return [r["tflops"] for r in fwd], ratio


def test_attention_backward_ratio_is_the_measured_one():
    """FlashAttention-2 (SDPA flash) on H100: backward efficiency = forward × the median of
    2.5·t_fwd / (t_fwd+bwd − t_fwd) over the measured shapes; cuDNN runs about as the
    TensorRT-LLM context model (ρ ≈ 1), FlashAttention-2 at about half (Hopper's wgmma)."""
    h100 = load_system("h100")
    fa2 = kt.attention_kernel_of(h100, "fa2", True, 128.0, 8192.0)
    cudnn = kt.attention_kernel_of(h100, "cudnn", True, 128.0, 8192.0)
    assert fa2.backward == pytest.approx(float(np.median(_measured_ratios("flash")[1])))
    assert cudnn.backward == pytest.approx(float(np.median(_measured_ratios("cudnn")[1])))
    assert 0.85 < cudnn.rho < 1.2 and 0.4 < fa2.rho < 0.65
    f, b = kt.attention_efficiencies(fa2, np.array([2.0]), 8192.0, np.array([32.0]), 4096.0,
                                     128.0)
    assert b[0] == pytest.approx(f[0] * fa2.backward)
    # auto is Transformer Engine's choice: cuDNN on Hopper, FlashAttention-2 on Ampere
    assert kt.attention_kernel_of(h100, "auto", True, 128.0, 8192.0).kernel == "cudnn"
    assert kt.attention_kernel_of(load_system("a100"), "auto", True, 128.0,
                                  2048.0).kernel == "fa2"


@pytest.mark.parametrize("backend,kernel", [("flash", "fa2"), ("cudnn", "cudnn")])
def test_attention_forward_follows_the_kernels_own_key_loop(backend, kernel):
    """The SDPA kernel's forward at ρ·η·w·L̄/(L̄ + L₀ₖ)·d/(d + d₀), ρ and its own key-loop depth
    L₀ₖ fitted to the H100 table: every measured causal forward (512 to 64K tokens) within
    15 % at the 90th percentile, the median within 8 % and the 32K–64K rows (the long-context
    runs) within 10 % — a constant ρ over TensorRT-LLM's L₀ missed 512-token rows by 20–35 % and
    64K by up to 19 %."""
    from model.physics.kernels import attention_kernel as attn
    h100 = load_system("h100")
    a = kt.attention_kernel_of(h100, kernel, True, 128.0, 8192.0)
    assert a.l0 < 0.7 * kt.fitted("context_attention", "h100_sxm", "bfloat16")["l0"]
    rows = [r for r in json.loads((KERNEL_DIR / "h100_torch_measured.json").read_text())["rows"]
            if r["kind"] == "attention_fwd" and r["backend"] == backend and r["causal"]]
    b, s, h, d = (np.array([r[c] for r in rows], dtype=float)
                  for c in ("batch", "seq", "heads", "head_dim"))
    peak = kt.kernel_hardware("h100_sxm").peak("bfloat16")
    measured = np.array([r["tflops"] for r in rows]) * 1e12 / peak  # fraction of the peak
    fwd, _ = kt.attention_efficiencies(a, b, s, h, attn.causal_pairs(s, 0) / s, d)
    err = np.abs(fwd / measured - 1.0)
    assert np.percentile(err, 90) < 0.15 and np.median(err) < 0.08
    assert err[s >= 32768].max() < 0.10


def test_sdpa_forward_held_out_by_head_configuration():
    """``validate --set kernels``' '(torch)' context rows: every SDPA forward priced as training
    prices it, (ρ, L₀ₖ) refitted without the row's head configuration — within the issue's
    target (median ≤ 10 %, p90 ≤ 25 %) on H100 and H200, both backends (priced by TensorRT-LLM's
    context law they were 40 % / 51 % for FlashAttention-2, 17 % / 131 % for cuDNN)."""
    from model.validation.kernels_torch import torch_error_rows
    rows = [r for r in torch_error_rows() if r["class"] == "context_attention (torch)"]
    assert {(r["gpu"], r["dtype"]) for r in rows} == {
        (g, b) for g in ("h100_sxm", "h200_sxm") for b in ("flash", "cudnn")}
    assert all(r["median_pct"] <= 10.0 and r["p90_pct"] <= 25.0 for r in rows), rows


def test_switch_off_is_the_old_pricing_and_on_changes_it():
    """kernel_tables off: no kernel in the context and op times bit-identical to an execution
    that never named the switch; on, the matmuls' and attention's efficiencies are the
    kernel's, and a linear's forward time is overhead + F/(η·w_kernel·P) exactly."""
    plain, off, on = _ctx(), _ctx(kernel_tables=False), _ctx(kernel_tables=True)
    assert off.gemm_kernel is None and off.attention_kernel is None
    assert on.gemm_kernel is not None and on.attention_kernel.kernel == "cudnn"
    sh = _shards()
    for spec in _block(plain):
        a, b = evaluate_op(spec, sh, plain), evaluate_op(spec, sh, off)
        for way in ("fwd", "bwd"):
            assert np.array_equal(getattr(a, way).t, getattr(b, way).t), spec.name
    qkv = next(s for s in _block(on) if s.name == "attn/qkv")
    c = op_counts(qkv, sh, on)
    m = on.model
    rows, k = sh.b * m.seq_len, float(m.hidden)
    n = (m.heads + 2 * m.kv_heads) * m.qk_head_dim / sh.tp1
    fwd, bwd = kt.linear_efficiencies(on.gemm_kernel, rows, k, n, k)
    assert np.allclose(c.wave_fwd, fwd) and np.allclose(c.wave_bwd, bwd)
    t = evaluate_op(qkv, sh, on).fwd.t_comp
    expected = on.system.kernel_overhead_s + c.flop_mat_fwd / (
        on.linear_efficiency * fwd * on.matrix_flop_per_s)
    assert np.allclose(t, expected, rtol=1e-12)
    flash = next(s for s in _block(on) if s.kind.name == "ATTENTION")
    att = op_counts(flash, sh, on)
    f, b = kt.attention_efficiencies(on.attention_kernel, sh.b, float(m.seq_len),
                                     m.heads / sh.tp1, m.seq_len / 2.0,
                                     float(m.qk_head_dim))
    assert np.allclose(att.wave_fwd, f) and np.allclose(att.wave_bwd, b)
    assert gemm.backward_efficiency(1.0, 1.0) == 1.0


def test_explain_reads_back_the_kernel_layer_efficiencies():
    """``evaluate --explain``'s op table (model/engine/kernel_report.py) under kernel_tables,
    without launch overhead: a compute-bound matmul implies η × its kernel efficiency, the
    fused attention exactly the kernel layer's forward and backward efficiencies (softmax
    inside the measured rate: no vector FLOPs added)."""
    model = load_model("llama3-8b")
    system = load_system("h100").with_overrides(kernel_overhead_s=0.0)
    ex = resolve_execution({"kernel_tables": True})
    ctx = Ctx.make(model, system, None, ex)
    one = np.array([1])
    sh = shards_of({"microbatch": one, "tp1": one, "tp2": one, "nb": one})
    for name in ("mlp/fc1", "attn/flash"):
        [spec] = [s for s in build_strategy("1d", model, None, ex).block if s.name == name]
        r = evaluate_op(spec, sh, ctx)
        row = op_table([("block", r)], 1, 1, sh, ctx).iloc[0]
        assert row["bound"] == "compute"
        scale = ctx.linear_efficiency if name == "mlp/fc1" else 1.0
        for way in ("fwd", "bwd"):
            eff = float(np.ravel(getattr(r.counts, f"wave_{way}"))[0])
            assert row[f"implied_flop_efficiency_{way}"] == pytest.approx(scale * eff,
                                                                           rel=1e-12)


def _doc_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "accuracy.md").read_text()
    section = text.split("## Training through the kernel layer", 1)[1].split("\n## ", 1)[0]
    table = section.split("| source (stack) |", 1)[1].split("\n\n", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def test_the_docs_figures_are_the_committed_calibration():
    """docs/accuracy.md's before/after table: for each source's row, the column of the
    switch's default state is the committed cross-validation's mean |error| in sample and
    left out (scripts/calibrate --write), so a refit that moves them fails here."""
    sources = {r["source"]: r for r in json.loads(
        (ROOT / "model" / "data" / "reference" / "cross_validation.json").read_text())["sources"]}
    checked = 0
    for source_stack, _, off, *_, on, default in _doc_rows():  # on: the current fit
        source = source_stack.split(" (")[0]
        if source not in sources:
            continue
        figures = (on if default == "on" else off).replace("*", "")
        ins, cv = (float(v) for v in figures.split(" / "))
        assert (ins, cv) == (round(sources[source]["in_sample_mean_pct"], 2),
                             round(sources[source]["cross_validated_mean_pct"], 2)), source
        checked += 1
    assert checked >= 8


def test_backward_gemms_priced_as_well_as_forward_ones_on_measured_training_shapes():
    """The H100 PyTorch table of training GEMMs (not fitted): dX and dW, each at its own shape
    through the same model, come within the forward's error, and docs/model.md quotes the
    figures model/validation/kernels_training.py computes."""
    from model.validation.kernels_training import training_gemm_errors
    rows = {(r["dtype"], r["gemm"]): r for r in training_gemm_errors()}
    doc = (ROOT / "docs" / "model.md").read_text()
    for dtype in ("bf16", "fp8"):
        fwd = rows[(dtype, "fwd")]
        for which in ("dgrad", "wgrad"):
            r = rows[(dtype, which)]
            assert r["n"] == 32 and r["median_pct"] <= fwd["median_pct"] + 1.0
        for which in ("fwd", "dgrad", "wgrad"):
            r = rows[(dtype, which)]
            assert f"{r['median_pct']} % / {r['p90_pct']} %" in doc, (dtype, which)


def test_the_h200_training_gemms_repeat_the_h100_pattern():
    """The second measured table (H200, not fitted), priced with the H200 fit: the backward
    GEMMs within the forward's error, BF16 too fast on average and FP8 within ±10 %, as on the
    H100; docs/model.md quotes the forward figures."""
    from model.validation.kernels_training import training_gemm_errors
    rows = {(r["dtype"], r["gemm"]): r for r in training_gemm_errors("h200_sxm")}
    doc = (ROOT / "docs" / "model.md").read_text()
    for dtype in ("bf16", "fp8"):
        fwd = rows[(dtype, "fwd")]
        assert f"{fwd['median_pct']} % / {fwd['p90_pct']} %" in doc, dtype
        for which in ("dgrad", "wgrad"):
            assert rows[(dtype, which)]["median_pct"] <= fwd["median_pct"] + 1.0
    assert all(rows[("bf16", g)]["mean_signed_pct"] < -10 for g in ("fwd", "dgrad", "wgrad"))
    assert all(abs(rows[("fp8", g)]["mean_signed_pct"]) < 10 for g in ("fwd", "dgrad", "wgrad"))
