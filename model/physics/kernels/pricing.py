"""The kernel layer where the model prices a matmul: the shape part of a GEMM's efficiency
(wave quantisation with split-K, reduction depth, padded tile rows) as fitted to the measured
GEMM table of the system's GPU and the precision's kernel, for
:func:`model.physics.serving_step.shape_efficiency`. The asymptotic fraction of peak η of the
table is *not* applied: the stack's own fitted GEMM efficiency keeps that role, so this
replaces only the tile-wave × DeepGEMM-depth shape term of :mod:`model.physics.gemm`."""

from __future__ import annotations

import numpy as np

from model.physics.kernels import gemm_kernel
from model.physics.kernels.hardware import GPU_PRESETS, kernel_hardware
from model.physics.kernels.params import fitted

Array = np.ndarray
# a system preset → the GPU of the measured tables
TABLE_GPU = {preset: gpu for gpu, preset in GPU_PRESETS.items()}
# a precision's peak field → the GEMM dtype of the tables (FP8: per-tensor scales, cuBLASLt)
TABLE_DTYPE = {"matrix_tflops_fp16": "bfloat16", "matrix_tflops_fp8": "fp8",
               "matrix_tflops_fp4": "nvfp4"}


def table_key(system_name: str, peak_field: str, engine: str = "trtllm"
              ) -> tuple[str, str] | None:
    """(GPU, dtype) of the measured table for a system preset and precision, None where the
    tables of ``engine`` (TensorRT-LLM's by default; vLLM's, SGLang's) have no fit (other GPUs,
    MXFP8)."""
    gpu, dtype = TABLE_GPU.get(system_name), TABLE_DTYPE.get(peak_field)
    if gpu is None or dtype is None or fitted("gemm", gpu, dtype, engine) is None:
        return None
    return gpu, dtype


def gemm_shape_efficiency(key: tuple[str, str], rows: Array, k: Array, n: Array,
                          engine: str = "trtllm") -> Array:
    """Shape efficiency of Y[rows, n] = X[rows, k]·W[k, n] on the table's kernel (of
    ``engine``'s tables): wave quantisation of its CTAs (split-K where the kernel splits), the
    depth term with the fitted k₀, and the rows' share of their padded MMA tiles
    (:mod:`.gemm_kernel`), without η."""
    gpu, dtype = key
    params = fitted("gemm", gpu, dtype, engine)
    split, rows_tile = gemm_kernel.KERNEL_PATH[dtype]
    rows = np.maximum(np.asarray(rows, dtype=float), 1e-9)
    shape = gemm_kernel.gemm_efficiency(rows, n, k, kernel_hardware(gpu), 1.0, params["k0"],
                                        split)
    return shape * rows / (np.ceil(rows / rows_tile) * rows_tile)


__all__ = ["TABLE_DTYPE", "TABLE_GPU", "gemm_shape_efficiency", "table_key"]
