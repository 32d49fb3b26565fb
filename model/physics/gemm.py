"""Shape-aware GEMM efficiency: what a matmul's shape costs beyond its FLOPs, for dense and
grouped (MoE expert) GEMMs alike.

A tiled GEMM Y[m, n] = X[m, k]·W[k, n] runs output tiles of tile × tile (``System.gemm_tile``)
in waves over the SMs (:func:`model.physics.ops.wave_efficiency`; for grouped GEMMs each
expert's rows padded to whole tiles, :func:`model.physics.moe.grouped_wave_efficiency`). Two
more effects depend on the shape, measured on published kernel benchmarks
(``model/data/reference/gemm_kernels.json``: deepseek-ai/DeepGEMM README @ 55ab91f, FP8 GEMMs
with 128-element block scales on H800; fitted by ``bench/gemm_kernels.py``):

* **depth** — every output tile pays a fixed cost besides its k/BK main-loop steps (filling
  the load pipeline, the epilogue writing the tile): its efficiency is k/(k + k₀), k₀ the fixed
  cost in reduction elements. DeepGEMM's 4096-row FP8 GEMMs run 751 TFLOP/s at k = 512 and
  1426 at k = 16384. k₀ is in units of the tensor cores' work per element of k, so it scales
  with the precision's matmul rate: a BF16 MMA step takes twice an FP8 one, so the same fixed
  time is k₀/2 elements of k; FP4 2·k₀ (:func:`depth_overhead`). The same k₀ is used on every
  GPU: checked, not fitted, on XLA's published B200 and H100 GEMM timings
  (model/validation/gemm_kernels.py ``xla_depth_fit``: 540 FP8 / 260 BF16 on B200, 160 BF16
  on H100, a launch time per call refitted with them); no A100 table is known.
* **weight streaming** — with few rows per expert a grouped GEMM reads every local expert's
  weights for few FLOPs: the roofline's HBM time (:func:`model.physics.moe.grouped_linear`'s
  bytes) binds. DeepGEMM's masked grouped GEMMs (4 × 256 rows, k 7168) run 932 TFLOP/s
  against 1233 for 1 × 1024 rows with the same FLOPs; the plain roofline max(t_c, t_m) with
  the model's bytes gives 703 and 1257 (a partial-overlap term max + α·min fits α = 0:
  ``bench/gemm_kernels.py``).

The backward of a matmul is two GEMMs of equal FLOPs: dX[m, k] = dY[m, n]·Wᵀ (reduction n)
and dW[k, n] = Xᵀ·dY (reduction m, the rows — for an expert, its tokens: few tokens per
expert make its weight gradient shallow); their time is the sum, so their efficiency is the
harmonic mean (:func:`backward_efficiency`).

The kernel path of the experts (``Execution.expert_gemm``) decides which tiles share waves:
Transformer Engine's ``GroupedLinear`` launches one cuBLASLt GEMM per expert round-robin on 4
streams (transformer_engine/common/util/multi_stream.cpp: ``num_compute_streams`` 4), so at
most 4 experts' tiles run together; a grouped kernel (CUTLASS grouped GEMM, DeepGEMM's
M-grouped contiguous layout) schedules every local expert's tiles as one grid.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray

# fixed cost per output tile in reduction elements of an 8-bit (FP8) GEMM: least squares of
# log TFLOP/s over DeepGEMM's 16 H800 GEMMs with at least 256 rows per group
# (bench/gemm_kernels.py: the model's wave quantisation and HBM bytes, the kernels' asymptotic
# efficiency a free factor; within ±9 % on the 10 GEMMs of 4096 rows or more)
DEPTH_OVERHEAD_FP8 = 380.0
# reduction-step time relative to FP8 by the precision's peak field (the MMA rate per element)
_DEPTH_SCALE = {"matrix_tflops_fp16": 0.5, "matrix_tflops_fp8": 1.0, "matrix_tflops_fp4": 2.0}
# experts whose tiles share waves, per kernel path (0: every local expert)
EXPERT_GEMM_STREAMS = {"multi-stream": 4.0, "grouped": 0.0}


def depth_overhead(peak_field: str) -> float:
    """k₀ (reduction elements) of a GEMM at the precision whose peak is ``peak_field``."""
    return DEPTH_OVERHEAD_FP8 * _DEPTH_SCALE.get(peak_field, 0.5)


def depth_efficiency(k: Array, k0: float) -> Array:
    """Busy fraction of a GEMM whose reduction dimension is k: k / (k + k₀) (module docstring);
    1 where k = 0 (no GEMM)."""
    k = np.asarray(k, dtype=float)
    return np.where(k > 0, k / np.maximum(k + k0, 1e-30), 1.0)


def backward_efficiency(dgrad: Array, wgrad: Array) -> Array:
    """Efficiency of the backward's two GEMMs of equal FLOPs run one after the other: the
    harmonic mean 2/(1/η_dX + 1/η_dW)."""
    return 2.0 / (1.0 / np.asarray(dgrad, dtype=float) + 1.0 / np.asarray(wgrad, dtype=float))


def concurrent_experts(experts: Array, path: str) -> Array:
    """Local experts whose tiles run in the same waves under the kernel path ``path``
    (:data:`EXPERT_GEMM_STREAMS`): min(E_l, streams), or E_l for a grouped kernel."""
    e = np.asarray(experts, dtype=float)
    streams = EXPERT_GEMM_STREAMS[path]
    return np.minimum(e, streams) if streams else e


__all__ = ["DEPTH_OVERHEAD_FP8", "EXPERT_GEMM_STREAMS", "backward_efficiency",
           "concurrent_experts", "depth_efficiency", "depth_overhead"]
