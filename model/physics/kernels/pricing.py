"""The kernel layer where the model prices a matmul: the shape part of a GEMM's efficiency
(wave quantisation with split-K, reduction depth, padded tile rows) as fitted to the measured
GEMM table of the system's GPU and the precision's kernel, for
:func:`model.physics.serving_step.shape_efficiency`. The asymptotic fraction of peak η of the
table is *not* applied: the stack's own fitted GEMM efficiency keeps that role, so this
replaces only the tile-wave × DeepGEMM-depth shape term of :mod:`model.physics.gemm`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from model.physics.kernels import attention_kernel, gemm_kernel
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


# a KV-cache precision → the decode attention table's KV dtype
KV_TABLE_DTYPE = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}


def decode_attention_key(system_name: str, kv_precision: str, engine: str = "trtllm"
                         ) -> tuple[str, str, str] | None:
    """(GPU, KV dtype, engine) of ``engine``'s measured decode-attention table, None where it
    has no fit (other GPUs, NVFP4 KV)."""
    gpu, dtype = TABLE_GPU.get(system_name), KV_TABLE_DTYPE.get(kv_precision)
    if gpu is None or dtype is None or fitted("decode_attention", gpu, dtype, engine) is None:
        return None
    return gpu, dtype, engine


def decode_attention_s(key: tuple[str, str, str], hbm_bytes_per_s: float, seqs: Array, keys: Array,
                       heads: Array, kv_heads: Array, head_dim: float) -> Array:
    """Seconds of one layer's decode attention on one GPU by the kernel fitted to the measured
    decode table (:func:`model.physics.kernels.attention_kernel.decode_latency_s`: the engine's
    kernel — XQA or per-head on TensorRT-LLM, packed GQA on vLLM/SGLang —, its CTA costs, its
    split-KV launch rule and the load ramp of the CTAs in flight), at the system's
    HBM bandwidth ``hbm_bytes_per_s`` (so a what-if of the bandwidth moves it)."""
    gpu, dtype, engine = key
    hw = replace(kernel_hardware(gpu), hbm_bytes_per_s=float(hbm_bytes_per_s))
    return attention_kernel.decode_latency_s(np.maximum(seqs, 0.0), keys, heads, kv_heads,
                                             head_dim, 0.0, dtype, hw,
                                             fitted("decode_attention", gpu, dtype, engine))


__all__ = ["KV_TABLE_DTYPE", "TABLE_DTYPE", "TABLE_GPU", "decode_attention_key",
           "decode_attention_s", "gemm_shape_efficiency", "table_key"]
