"""Dense GEMM latency Y[m, n] = X[m, k]·W[k, n], a closed form over arrays of shapes:

    t = max(2·m̃·n·k / (P·η·w·k′/(k′ + k₀)),  bytes / (B·β)) + t_quant + [split] t_split + t₀

* m̃ the rows padded to the kernel's MMA tile rows (:data:`KERNEL_PATH`);
* P the dtype's tensor-core peak, B the HBM bandwidth (datasheet, :mod:`.hardware`);
* w the wave quantisation of the CTAs (128 × 128 output tiles, times the split-K slices
  where the tiles cannot fill the SMs) over the SMs (:func:`model.physics.ops.wave_efficiency`);
* k/(k + k₀) the fixed cost per output tile (pipeline fill, epilogue) in reduction elements,
  the depth term of :mod:`model.physics.gemm`;
* bytes = s·(m·k + k·n) + 2·m·n (inputs at the dtype's bytes per element, BF16 output): the
  weight read that bounds small-m (decode) GEMMs;
* t₀ the launch/latency floor of a tiny GEMM; t_split the reduction of the partial tiles
  where the reduction is split (split-K's second pass over a workspace);
* for FP8/NVFP4, the quantisation of X as its own memory-bound kernel (:func:`quantise_s`);
* the kernel path of each dtype (:data:`KERNEL_PATH`): split-K or not, rows per MMA tile.

η (asymptotic fraction of peak), k₀, β (fraction of HBM bandwidth), t₀ and t_split (only where
the kernel splits; 0 otherwise) are fitted per GPU × dtype to AIConfigurator 0.12.0's measured
GEMM table (TensorRT-LLM 1.3.0rc20 ``torch_flow``: cuBLAS/cuBLASLt for BF16 and FP8,
TensorRT-LLM's FP8 block-scale and NVFP4 GEMMs);
``scripts/extract_kernel_tables.py``. A huge GEMM tends to P·η, a tiny one to t₀."""

from __future__ import annotations

import numpy as np

from model.physics.kernels.hardware import INPUT_BYTES, KernelHardware
from model.physics.ops import wave_efficiency

Array = np.ndarray
PARAMS = ("eta", "k0", "beta", "t0_s", "t_split_s")  # the fitted parameters, in this order
TILE = 128.0  # output tile edge (elements)
# The kernel path of each dtype in the tables (TensorRT-LLM 1.3.0rc20 ``torch_flow``):
# (splits the reduction when the tiles cannot fill the SMs, rows per MMA tile). cuBLASLt
# (BF16, FP8 per-tensor scales) splits k (split-K) and picks small-row tiles for skinny
# GEMMs, so a few rows cost their FLOPs (tile 1: no padding); TensorRT-LLM's FP8 GEMM with
# 128-element block scales runs one CTA per output tile over 64-row wgmma tiles, its CUTLASS
# NVFP4 GEMM over 128-row tiles — a decode GEMM of 1 row pays the tile's rows. Which path
# fits each dtype was read off the table (least squares on log latency).
KERNEL_PATH = {"bfloat16": (True, 1.0), "fp8": (True, 1.0), "fp8_block": (False, 64.0),
               "nvfp4": (False, 128.0)}
OUT_BYTES = 2.0  # BF16 output


def gemm_bytes(m: Array, n: Array, k: Array, dtype: str) -> Array:
    """HBM bytes of one GEMM: both inputs once at the dtype's size, the BF16 output once."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    return INPUT_BYTES[dtype] * (m * k + k * n) + OUT_BYTES * m * n


def split_k(tiles: Array, k: Array, sm_count: int) -> Array:
    """Slices the reduction is split into when the output tiles cannot fill the SMs (cuBLAS's
    split-K / CUTLASS stream-K): ⌊SMs / tiles⌋, at least 1, at most k / 128 so every slice
    keeps a full main-loop step."""
    fill = np.floor(sm_count / np.maximum(tiles, 1.0))
    return np.clip(fill, 1.0, np.maximum(np.floor(np.asarray(k, dtype=float) / 128.0), 1.0))


def _slices(m: Array, n: Array, k: Array, hw: KernelHardware, split: bool) -> Array:
    """Split-K slices of a GEMM on a kernel that splits (1 otherwise)."""
    if not split:
        return np.ones_like(np.asarray(k, dtype=float))
    tiles = np.ceil(np.asarray(m, dtype=float) / TILE) * np.ceil(np.asarray(n, dtype=float)
                                                                   / TILE)
    return split_k(tiles, k, hw.sm_count)


def gemm_efficiency(m: Array, n: Array, k: Array, hw: KernelHardware, eta: float,
                    k0: float, split: bool = True) -> Array:
    """Fraction of the peak a GEMM's tensor cores reach: η · wave quantisation of its CTAs ·
    the depth term (k/s)/(k/s + k₀) of each CTA's reduction slice, s = :func:`split_k` (1 for
    a kernel that does not split)."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    tiles = np.ceil(m / TILE) * np.ceil(n / TILE)
    s = split_k(tiles, k, hw.sm_count) if split else 1.0
    waves = wave_efficiency(tiles * s * TILE, TILE, TILE, hw.sm_count)
    depth = k / s
    return eta * waves * depth / (depth + k0)


def quantise_s(m: Array, k: Array, dtype: str, hw: KernelHardware,
               params: dict[str, float]) -> Array:
    """Seconds of quantising the activations X[m, k] before an FP8/FP4 GEMM, a separate
    memory-bound kernel (TensorRT-LLM's FP8/NVFP4 linear quantises its BF16 input each call):
    read 2 bytes, write the dtype's bytes per element, at the GEMM's HBM fraction β. 0 for
    BF16."""
    if dtype == "bfloat16":
        return 0.0
    m, k = np.asarray(m, dtype=float), np.asarray(k, dtype=float)
    return m * k * (2.0 + INPUT_BYTES[dtype]) / (hw.hbm_bytes_per_s * params["beta"])


def gemm_latency_s(m: Array, n: Array, k: Array, dtype: str, hw: KernelHardware,
                   params: dict[str, float]) -> Array:
    """Seconds of one GEMM (module docstring), broadcast over m, n, k."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    split, rows_tile = KERNEL_PATH[dtype]
    eff = gemm_efficiency(m, n, k, hw, params["eta"], params["k0"], split)
    rows = np.ceil(m / rows_tile) * rows_tile
    compute = 2.0 * rows * n * k / (hw.peak(dtype) * np.maximum(eff, 1e-12))
    memory = gemm_bytes(m, n, k, dtype) / (hw.hbm_bytes_per_s * params["beta"])
    reduce = np.where(_slices(m, n, k, hw, split) > 1, params["t_split_s"], 0.0)
    return (np.maximum(compute, memory) + quantise_s(m, k, dtype, hw, params) + reduce
            + params["t0_s"])


def gemm_starts() -> list[list[float]]:
    """Starting points of the fit (η, k₀, β, t₀, t_split)."""
    return [[0.8, 300.0, 0.8, 5e-6, 2e-6], [0.6, 100.0, 0.6, 1e-5, 2e-6],
            [0.9, 1000.0, 0.9, 3e-6, 2e-6]]


__all__ = ["KERNEL_PATH", "PARAMS", "gemm_bytes", "gemm_efficiency", "gemm_latency_s",
           "gemm_starts", "quantise_s", "split_k"]
