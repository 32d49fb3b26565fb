"""Training's matmuls and fused attention priced through the kernel layer
(``Execution.kernel_tables``), forward and backward, broadcast over candidates.

**GEMMs.** A linear layer Y[m, n] = X[m, k]·W[k, n] runs three GEMMs: the forward (output
m × n, reduction k), the input gradient dX[m, k] = dY·Wᵀ (output m × k, reduction n) and the
weight gradient dW[k, n] = Xᵀ·dY (output k × n, reduction m). Each goes through the same
measured GEMM model (:func:`model.physics.kernels.gemm_kernel.gemm_efficiency`: η of the
table's kernel × wave quantisation of its CTAs with split-K × the depth term with the fitted
k₀ × the rows' share of their padded MMA tiles). On Hopper (H100, H200 and the H100 die's
variants) in BF16 and per-tensor FP8 its η and k₀ are those fitted to training GEMMs measured
with PyTorch/cuBLAS on an H100 and an H200 — the forward, dX and dW of 8 Llama-3 linears
(:mod:`.training_fit`, ``reference/kernels/training_gemm_params.json``; :data:`TRAINING_SOURCE`).
Everywhere else (A100, Blackwell; FP8 block-scale, NVFP4) they are those fitted to NVIDIA
AIConfigurator 0.12.0's GEMM table of the GPU and the precision's kernel (TensorRT-LLM's
inference sweep, unscaled: cuBLASLt BF16 and per-tensor FP8, TensorRT-LLM's FP8 block-scale
GEMM for 128-element blocks, CUTLASS NVFP4; :data:`TABLE_SOURCE`). The backward's two GEMMs of equal
FLOPs run one after the other: their efficiency is the harmonic mean
(:func:`model.physics.gemm.backward_efficiency`). The efficiency is returned over the table's
asymptotic BF16 η of the same GPU, so the stack's calibrated GEMM efficiency keeps its meaning
(a fraction of the peak on large BF16 GEMMs) and ``fitted η / table η`` is what the kernels do
not explain; an FP8 kernel's own asymptote relative to BF16 of the same fit (0.94 measured in
training on H100, 1.01 on H200; 0.83 in TensorRT-LLM's H100 table) replaces the calibration's
fixed FP8 ratio.

**Attention.** The forward of a fused causal attention over r local query rows, L keys, h
local heads of dimension d runs at the measured context-attention model's efficiency
(:mod:`model.physics.kernels.attention_kernel`, TensorRT-LLM's FMHA tables):
η·w(C)·L̄/(L̄ + L₀)·d/(d + d₀), C = b·h·⌈r/128⌉ CTAs, L̄ the mean keys a query visits. The
stack's kernel runs at ρ·η·w(C)·L̄/(L̄ + L₀ₖ)·d/(d + d₀): ρ its asymptotic forward rate over
that model's and L₀ₖ its own key-loop depth (the keys per query its pipeline fill and epilogue
cost), both fitted (:func:`model.physics.kernels.fit.fit_log_latency`) to the lead's PyTorch
table on H100/H200 (``reference/kernels/h100_torch_measured.json``: SDPA's FlashAttention-2
backend ρ ≈ 0.49, L₀ₖ ≈ 220 keys; cuDNN ρ ≈ 0.91, L₀ₖ ≈ 185 — against TensorRT-LLM's FMHA L₀ ≈
424 on H100: a constant ρ over FMHA's longer ramp priced 512-token sequences 20–35 % slow and
32K–64K ones up to 19 % fast). Without a measured table: the kernel's published forward curve
(:mod:`model.physics.attention_kernels`) at its benchmark shapes (16K tokens, hidden 2048) gives
ρ, with the model's L₀.
The backward runs at the forward's efficiency times the kernel's backward/forward rate ratio:
from the measured table (t_bwd = t_fwd+bwd − t_fwd, 2.5× the forward's FLOPs) where it has the
kernel, else the published ratio. Blackwell takes Hopper's ρ and ratio (no measured table),
as :mod:`model.physics.attention_kernels` does. The kernel is the stack's ``attention_kernel``;
``auto`` is Transformer Engine's own choice (Megatron-Core's attention): cuDNN fused attention
on compute capability ≥ 9.0, FlashAttention-2 below
(transformer_engine/pytorch/attention/dot_product_attention/utils.py,
``get_attention_backend``: "Disabling FlashAttention to give FusedAttention preference on
Hopper+").

MXFP8, which no table measured, runs at per-tensor FP8's kernel (:data:`TRAINING_DTYPE`).
Where the tables have no fit for the system's GPU (GB300, B300, MI300X …), or no measurement
of the attention kernel, the model's own shape terms price the op as without
the switch."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from model.errors import ModelError
from model.physics import attention_kernels as published
from model.physics.gemm import backward_efficiency
from model.physics.kernels import attention_kernel as attn
from model.physics.kernels import gemm_kernel
from model.physics.kernels.fit import fit_log_latency
from model.physics.kernels.hardware import KernelHardware, kernel_hardware
from model.physics.kernels.params import KERNEL_DIR, fitted, training_fitted
from model.physics.kernels.pricing import TABLE_GPU
from model.physics.ops import wave_efficiency
from model.specs import memo
from model.specs.hardware import System

Array = np.ndarray
# a training precision → the GEMM kernel of the tables it runs. MXFP8 has no table: it runs
# the block-scaled form of the same FP8 MMA at the FP8 peak, priced as per-tensor FP8 — the
# assumption the calibration already makes (one FP8 ratio for fp8 and mxfp8)
TRAINING_DTYPE = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "fp8-delayed": "fp8",
                  "fp8-blockwise": "fp8_block", "mxfp8": "fp8", "nvfp4": "nvfp4"}
# system presets on the same die as a table GPU (GH100, 132 SMs): their own peaks and SMs apply
SAME_CHIP = {"h100-96gb-500w": "h100_sxm", "h800": "h100_sxm"}
# Transformer Engine's attention backend by generation (module docstring)
TE_ATTENTION = {"ampere": "fa2", "hopper": "cudnn", "blackwell": "cudnn",
                "blackwell-ultra": "cudnn"}
# the measured PyTorch tables (scripts/measure_kernels_gpu.py) and their SDPA backend names
TORCH_TABLES = {"h100_sxm": "h100_torch_measured.json", "h200_sxm": "h200_torch_measured.json"}
SDPA_BACKEND = {"fa2": "flash", "cudnn": "cudnn"}
BLACKWELL = ("blackwell", "blackwell-ultra")
# whose GEMM fit a kernel uses: the PyTorch training GEMMs measured on Hopper
# (reference/kernels/training_gemm_params.json) where they cover the GPU × dtype, else
# AIConfigurator's TensorRT-LLM table of the GPU (its inference sweep, as before)
TRAINING_SOURCE = "PyTorch training GEMMs (H100/H200, training_gemm_params.json)"
TABLE_SOURCE = "AIConfigurator TensorRT-LLM GEMM table (aic_params.json)"
BENCH_TOKENS, BENCH_HIDDEN = 16384.0, 2048.0  # the FlashAttention papers' benchmark shapes


def table_gpu(system: System) -> str | None:
    """The measured tables' GPU of a system preset (its own name or the same die), or None."""
    return TABLE_GPU.get(system.name) or SAME_CHIP.get(system.name)


@dataclass(frozen=True)
class GemmKernel:
    """The fitted GEMM kernel of one GPU × dtype, for a system with ``sm_count`` SMs."""

    dtype: str
    eta: float  # asymptotic fraction of the dtype's peak
    k0: float  # fixed cost per output tile, reduction elements
    split: bool  # splits k when the tiles cannot fill the SMs
    rows_tile: float  # rows per MMA tile
    reference_eta: float  # the same GPU's BF16 η (what the stack's efficiency is relative to)
    sm_count: int
    source: str = ""  # whose fit: TRAINING_SOURCE or TABLE_SOURCE

    @property
    def hardware(self) -> KernelHardware:
        """The SM count the wave term divides by (the only rate the efficiency needs)."""
        return _waves_only(self.sm_count)


@memo.lru("kernel-layer SM counts", 16)
def _waves_only(sm_count: int) -> KernelHardware:
    return KernelHardware("", {}, 0.0, sm_count)


def gemm_kernel_of(system: System, precision: str) -> GemmKernel | None:
    """The measured GEMM kernel of ``system`` in ``precision``, None where not tabled."""
    gpu, dtype = table_gpu(system), TRAINING_DTYPE.get(precision)
    if gpu is None or dtype is None or system.sm_count <= 0:
        return None
    return _gemm_kernel(gpu, dtype, int(system.sm_count))


@memo.lru("kernel-layer GEMM kernels", 32)
def _gemm_kernel(gpu: str, dtype: str, sm_count: int) -> GemmKernel | None:
    """:func:`gemm_kernel_of` once per table GPU × dtype × SM count (every evaluation of a
    search builds its context: the parameters are read once)."""
    params, ref = training_fitted(gpu, dtype), training_fitted(gpu, "bfloat16")
    source = TRAINING_SOURCE
    if params is None or ref is None:  # no training measurement: the TensorRT-LLM table's
        params, ref = fitted("gemm", gpu, dtype), fitted("gemm", gpu, "bfloat16")
        source = TABLE_SOURCE
    if params is None or ref is None:
        return None
    split, rows_tile = gemm_kernel.KERNEL_PATH[dtype]
    return GemmKernel(dtype, params["eta"], params["k0"], split, rows_tile, ref["eta"],
                      sm_count, source)


def gemm_efficiency(g: GemmKernel, m: Array, n: Array, k: Array) -> Array:
    """Efficiency of Y[m, n] = X[m, k]·W[k, n] on the kernel, over the BF16 asymptote
    (module docstring); 1 where the GEMM is empty."""
    m = np.maximum(np.asarray(m, dtype=float), 1e-9)
    eff = gemm_kernel.gemm_efficiency(m, n, k, g.hardware, g.eta / g.reference_eta, g.k0,
                                      g.split)
    if g.rows_tile > 1.0:  # the rows' share of their padded MMA tiles
        eff = eff * m / (np.ceil(m / g.rows_tile) * g.rows_tile)
    return np.where(eff > 0, eff, 1.0)


def linear_efficiencies(g: GemmKernel, m: Array, k: Array, n: Array, k_dw: Array
                        ) -> tuple[Array, Array]:
    """(forward, backward) efficiency of a linear X[m, k]·W[k, n]: forward Y[m, n]; backward
    dX[m, k] (reduction n) and dW[k_dw, n] (reduction m; k_dw = k but for SUMMA's local
    K/tp2 rows), their harmonic mean. The three GEMMs are priced in one broadcast call (rows
    0, 1, 2 of a stacked array: elementwise, so each value is what its own call gives)."""
    m, k, n, k_dw = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (m, k, n, k_dw)))
    eff = gemm_efficiency(g, np.stack((m, m, k_dw)), np.stack((n, k, n)), np.stack((k, n, m)))
    return eff[0], backward_efficiency(eff[1], eff[2])


@dataclass(frozen=True)
class AttentionKernel:
    """The context-attention model of one GPU and the stack's kernel's standing against it."""

    kernel: str
    eta: float
    l0: float  # keys per query of the key loop's fixed cost (the kernel's own where measured)
    d0: float  # head dimension of the per-key softmax work
    rho: float  # the kernel's asymptotic forward rate over the model's, measured
    backward: float  # its backward rate over its forward rate
    sm_count: int


def _context_efficiency(p: dict[str, float], sm_count: int, b, rows, heads, keys, head_dim
                        ) -> Array:
    """η·w(C)·L̄/(L̄ + L₀)·d/(d + d₀) of the context model (fraction of the BF16 peak)."""
    ctas = np.asarray(b, dtype=float) * heads * np.ceil(np.asarray(rows, dtype=float)
                                                        / attn.Q_TILE)
    waves = wave_efficiency(ctas * attn.Q_TILE, attn.Q_TILE, attn.Q_TILE, sm_count)
    return p["eta"] * waves * keys / (keys + p["l0"]) * head_dim / (head_dim + p["d0"])


@memo.lru("measured attention kernels", 8)
def _measured(gpu: str, kernel: str) -> tuple[float, float, float] | None:
    """(ρ, L₀ₖ, backward/forward rate) of ``kernel`` from the PyTorch table of ``gpu``: ρ and
    its key-loop depth L₀ₖ fitted to its causal forward rows, the ratio the median over the
    forward + backward rows of the same shapes."""
    backend = SDPA_BACKEND.get(kernel)
    name = TORCH_TABLES.get(gpu)
    p = fitted("context_attention", gpu, "bfloat16")
    if backend is None or name is None or p is None or not (KERNEL_DIR / name).exists():
        return None
    rows = json.loads((KERNEL_DIR / name).read_text())["rows"]
    both = {(r["model"], r["seq"], r["batch"]): r["latency_ms"] for r in rows
            if r["kind"] == "attention_fwd_bwd" and r["backend"] == backend}
    fwd = [r for r in rows
           if r["kind"] == "attention_fwd" and r["backend"] == backend and r["causal"]]
    ratio = []
    for r in fwd:
        t, t_both = r["latency_ms"], both.get((r["model"], r["seq"], r["batch"]))
        if t_both is not None and t_both > t:
            ratio.append(published.BWD_OVER_FWD_FLOP * t / (t_both - t))
    if not fwd or not ratio:
        return None
    rho, l0 = fit_attention_forward(gpu, p, fwd)
    return rho, l0, float(np.median(ratio))


def fit_attention_forward(gpu: str, p: dict[str, float], fwd: list[dict]
                          ) -> tuple[float, float]:
    """(ρ, L₀ₖ) minimising Σ (ln t̂ − ln t)² over a kernel's measured forward rows, t̂ the FLOPs
    at ρ·(the context model's efficiency with L₀ₖ for L₀) of the BF16 peak."""
    t = np.array([r["latency_ms"] for r in fwd], dtype=float) * 1e-3

    def model(theta: Array) -> Array:
        return attention_forward_s(gpu, p, theta[0], theta[1], fwd)
    rho, l0 = fit_log_latency(model, t, [[0.5, p["l0"]], [1.0, 100.0], [0.3, 1000.0]])
    return float(rho), float(l0)


def attention_forward_s(gpu: str, p: dict[str, float], rho: float, l0: float, rows: list[dict]
                        ) -> Array:
    """Seconds of measured causal forward rows (batch, seq, heads, head_dim) at ρ·(the context
    model's efficiency with the kernel's L₀ₖ) of the BF16 peak — the training pricing."""
    hw = kernel_hardware(gpu)
    b, s, h, d = (np.array([r[c] for r in rows], dtype=float)
                  for c in ("batch", "seq", "heads", "head_dim"))
    eff = _context_efficiency({**p, "l0": l0}, hw.sm_count, b, s, h,
                              attn.causal_pairs(s, 0) / s, d)
    return attn.context_flops(b, s, h, d) / (hw.peak("bfloat16") * rho * eff)


@memo.lru("published attention kernels", 16)
def _published_rho(gpu: str, kernel: str, generation: str, causal: bool) -> float | None:
    """ρ of ``kernel`` from its published forward curve on the generation's benchmark GPU, at
    the benchmark shapes (16K tokens, hidden 2048, head dims 64 and 128), over the context
    model of ``gpu``; None where no curve exists."""
    p = fitted("context_attention", gpu, "bfloat16")
    if p is None:
        return None
    try:
        fwd_eff = [(d, s, published.pass_efficiencies(kernel, generation, causal, d, s)[0])
                   for d in (64.0, 128.0) for s in (512.0, 1024.0, 2048.0, 4096.0, 8192.0,
                                                    16384.0)]
    except ModelError:  # no published table: the kernel layer does not price it
        return None
    sms = kernel_hardware(gpu).sm_count
    out = []
    for d, s, eff in fwd_eff:
        keys = (s + 1.0) / 2.0 if causal else s
        model = _context_efficiency(p, sms, BENCH_TOKENS / s, s, BENCH_HIDDEN / d, keys, d)
        out.append(eff / float(model))
    return float(np.median(out))


def attention_kernel_of(system: System, kernel: str, causal: bool, head_dim: float,
                        seq_len: float) -> AttentionKernel | None:
    """The measured attention model for ``system`` running ``kernel`` (``auto``: Transformer
    Engine's choice), None where the tables do not cover it (module docstring)."""
    return _attention_kernel(table_gpu(system), system.generation, system.sm_count, kernel,
                             causal, head_dim, seq_len)


@memo.lru("kernel-layer attention kernels", 32)
def _attention_kernel(gpu: str | None, generation: str, sm_count: float, kernel: str,
                      causal: bool, head_dim: float, seq_len: float) -> AttentionKernel | None:
    """:func:`attention_kernel_of` once per table GPU × generation × SM count × kernel ×
    model shape (every evaluation of a search builds its context)."""
    kernel = TE_ATTENTION.get(generation, "") if kernel == "auto" else kernel
    p = None if gpu is None else fitted("context_attention", gpu, "bfloat16")
    if p is None or kernel in ("", "math") or sm_count <= 0:
        return None
    reference = "h100_sxm" if generation in BLACKWELL else gpu  # where ρ is measured
    measured = _measured(reference, kernel)
    l0 = p["l0"]
    if measured is not None:
        rho, l0, backward = measured
    else:
        rho = _published_rho(reference, kernel, generation, causal)
        if rho is None:
            return None
        fwd, bwd = published.pass_efficiencies(kernel, generation, causal, head_dim, seq_len)
        backward = bwd / fwd
    return AttentionKernel(kernel, p["eta"], l0, p["d0"], rho, backward, int(sm_count))


def attention_efficiencies(a: AttentionKernel, b, rows, heads, keys, head_dim
                           ) -> tuple[Array, Array]:
    """(forward, backward) fractions of the BF16 peak of one fused attention: b sequences of
    ``rows`` local queries, ``heads`` local heads, ``keys`` mean keys per query, head dim."""
    ctas = np.asarray(b, dtype=float) * heads * np.ceil(np.asarray(rows, dtype=float)
                                                        / attn.Q_TILE)
    waves = wave_efficiency(ctas * attn.Q_TILE, attn.Q_TILE, attn.Q_TILE, a.sm_count)
    fwd = waves * (a.rho * a.eta * keys / (keys + a.l0) * head_dim / (head_dim + a.d0))
    return fwd, fwd * a.backward


def kernel_times(c, way: str, zero: Array, system: System, overhead: float):
    """(t_comp, t_mem, t_extra, compute) of a fused attention priced by the kernel layer:
    t_comp = overhead + F_mat / (η_way·P_bf16), η_way the op's per-candidate forward or
    backward efficiency (``wave_fwd``/``wave_bwd`` of its counts: softmax and exponentials are
    inside the measured rate); t_mem and the separate kernels' bytes as any op."""
    eta = getattr(c, f"wave_{way}")
    t_comp = zero + overhead + getattr(c, f"flop_mat_{way}") / (
        np.maximum(eta, 1e-12) * system.matrix_flop_per_s)
    t_mem = zero + getattr(c, f"bytes_{way}") / system.hbm_bytes_per_s
    t_extra = zero + getattr(c, f"extra_bytes_{way}") / system.hbm_bytes_per_s  # RoPE
    return t_comp, t_mem, t_extra, np.maximum(t_comp, t_mem) + t_extra


__all__ = ["AttentionKernel", "GemmKernel", "SAME_CHIP", "TABLE_SOURCE", "TE_ATTENTION",
           "TRAINING_DTYPE", "TRAINING_SOURCE",
           "attention_efficiencies", "attention_kernel_of", "attention_forward_s",
           "fit_attention_forward", "gemm_efficiency",
           "gemm_kernel_of", "kernel_times", "linear_efficiencies", "table_gpu"]
