"""Dense GEMM latency Y[m, n] = X[m, k]·W[k, n], a closed form over arrays of shapes:

    t = max(2·m·n·k / (P·η·w(m, n)·k/(k + k₀)),  bytes / (B·β)) + t₀

* P the dtype's tensor-core peak, B the HBM bandwidth (datasheet, :mod:`.hardware`);
* w(m, n) the wave quantisation of 128 × 128 output tiles over the SMs
  (:func:`model.physics.ops.wave_efficiency`);
* k/(k + k₀) the fixed cost per output tile (pipeline fill, epilogue) in reduction elements,
  the depth term of :mod:`model.physics.gemm`;
* bytes = s·(m·k + k·n) + 2·m·n (inputs at the dtype's bytes per element, BF16 output): the
  weight read that bounds small-m (decode) GEMMs;
* t₀ the launch/latency floor of a tiny GEMM.

η (asymptotic fraction of peak), k₀, β (fraction of HBM bandwidth) and t₀ are fitted per GPU ×
dtype to AIConfigurator 0.12.0's measured GEMM table (TensorRT-LLM 1.3.0rc20 ``torch_flow``:
cuBLAS/cuBLASLt for BF16 and FP8, TensorRT-LLM's FP8 block-scale and NVFP4 GEMMs);
``scripts/extract_kernel_tables.py``. A huge GEMM tends to P·η, a tiny one to t₀."""

from __future__ import annotations

import numpy as np

from model.physics.kernels.hardware import INPUT_BYTES, KernelHardware
from model.physics.ops import wave_efficiency

Array = np.ndarray
PARAMS = ("eta", "k0", "beta", "t0_s")  # the fitted parameters, in this order
TILE = 128.0  # output tile edge (elements)
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


def gemm_efficiency(m: Array, n: Array, k: Array, hw: KernelHardware, eta: float,
                    k0: float) -> Array:
    """Fraction of the peak a GEMM's tensor cores reach: η · wave quantisation of its CTAs ·
    the depth term (k/s)/(k/s + k₀) of each CTA's reduction slice, s = :func:`split_k`."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    tiles = np.ceil(m / TILE) * np.ceil(n / TILE)
    s = split_k(tiles, k, hw.sm_count)
    waves = wave_efficiency(tiles * s * TILE, TILE, TILE, hw.sm_count)
    depth = k / s
    return eta * waves * depth / (depth + k0)


def gemm_latency_s(m: Array, n: Array, k: Array, dtype: str, hw: KernelHardware,
                   params: dict[str, float]) -> Array:
    """Seconds of one GEMM (module docstring), broadcast over m, n, k."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    eff = gemm_efficiency(m, n, k, hw, params["eta"], params["k0"])
    compute = 2.0 * m * n * k / (hw.peak(dtype) * np.maximum(eff, 1e-12))
    memory = gemm_bytes(m, n, k, dtype) / (hw.hbm_bytes_per_s * params["beta"])
    return np.maximum(compute, memory) + params["t0_s"]


def gemm_starts() -> list[list[float]]:
    """Starting points of the fit (η, k₀, β, t₀)."""
    return [[0.8, 300.0, 0.8, 5e-6], [0.6, 100.0, 0.6, 1e-5], [0.9, 1000.0, 0.9, 3e-6]]


__all__ = ["PARAMS", "gemm_bytes", "gemm_efficiency", "gemm_latency_s", "gemm_starts"]
