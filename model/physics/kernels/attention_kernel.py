"""Attention kernel latencies, closed forms over arrays of shapes.

**Context (prefill / training forward)**, a FlashAttention-style kernel over b sequences of
S tokens, h query heads of dimension d (h_kv key/value heads), causal, optional sliding
window w:

    t = 4·b·h·d·pairs / (P·η·w(b·h·⌈S/128⌉)·L/(L + L₀)·d/(d + d₀)) + t₀

pairs = Σ_i min(i, w) the query-key pairs a causal (windowed) mask keeps — the FA2/FA3 FLOP
convention, two matmuls of 2 FLOPs per multiply-add, halved by causality —, w(·) the wave
quantisation of its 128-query tiles over the SMs, L = pairs/S the mean keys each query visits
(each tile's fixed prologue/epilogue against its key loop, the depth term of
:mod:`model.physics.gemm`), d/(d + d₀) the per-key softmax work against the head's MMA work.

**Decode (generation)**, one new token per sequence against a KV cache of L tokens:

    t = max(bytes / (B·β·u), 4·b·h·d·L / (P·η_c)) + t₀,   u = W / (W + W₀),  W = b·h_kv·L

bytes = b·h_kv·L·2·d·s_kv (K and V read once per KV head; GQA's query heads share them), u the
fraction of HBM bandwidth reached by W key-value rows of parallel work (few sequences of short
caches cannot keep enough loads in flight), η_c the tensor-core fraction once many query heads
share a KV head.

Parameters per GPU × dtype (context: attention dtype; decode: KV-cache dtype) fitted to
AIConfigurator 0.12.0's TensorRT-LLM 1.3.0rc20 attention tables
(``scripts/extract_kernel_tables.py``)."""

from __future__ import annotations

import numpy as np

from model.physics.kernels.hardware import INPUT_BYTES, KernelHardware
from model.physics.ops import wave_efficiency

Array = np.ndarray
CONTEXT_PARAMS = ("eta", "l0", "d0", "t0_s")
DECODE_PARAMS = ("beta", "w0", "eta_c", "t0_s")
Q_TILE = 128.0  # query rows per CTA (FlashAttention-2/3 forward)


def causal_pairs(seq: Array, window: Array) -> Array:
    """Query-key pairs a causal mask keeps per sequence and head, Σ_{i=1..S} min(i, w)
    (w = 0: no window)."""
    s = np.asarray(seq, dtype=float)
    w = np.asarray(window, dtype=float)
    full = s * (s + 1.0) / 2.0
    wf = np.where(w > 0, w, np.inf)
    windowed = wf * (wf + 1.0) / 2.0 + np.maximum(s - wf, 0.0) * wf
    return np.where((w > 0) & (s > w), np.nan_to_num(windowed), full)


def context_flops(batch: Array, seq: Array, heads: Array, head_dim: Array,
                  window: Array = 0) -> Array:
    """Matmul FLOPs of causal attention's forward: 4·b·h·d·pairs."""
    return 4.0 * np.asarray(batch, float) * heads * np.asarray(head_dim, float) * causal_pairs(
        seq, window)


def context_latency_s(batch, seq, heads, kv_heads, head_dim, window, dtype: str,
                      hw: KernelHardware, params: dict[str, float]) -> Array:
    """Seconds of a causal context-attention kernel (module docstring)."""
    b, s, h, d = (np.asarray(v, dtype=float) for v in (batch, seq, heads, head_dim))
    pairs = causal_pairs(s, window)
    keys = pairs / np.maximum(s, 1.0)
    tiles = b * h * np.ceil(s / Q_TILE)
    waves = wave_efficiency(tiles * Q_TILE, Q_TILE, Q_TILE, hw.sm_count)
    eff = params["eta"] * waves * keys / (keys + params["l0"]) * d / (d + params["d0"])
    flops = 4.0 * b * h * d * pairs
    return flops / (hw.peak(dtype) * np.maximum(eff, 1e-12)) + params["t0_s"]


def decode_bytes(batch, kv_len, kv_heads, head_dim, kv_dtype: str) -> Array:
    """HBM bytes a decode step's attention reads: K and V of every cached token and KV head."""
    return (2.0 * INPUT_BYTES[kv_dtype] * np.asarray(batch, float) * kv_heads
            * np.asarray(kv_len, float) * head_dim)


def decode_latency_s(batch, kv_len, heads, kv_heads, head_dim, window, kv_dtype: str,
                     hw: KernelHardware, params: dict[str, float]) -> Array:
    """Seconds of one decode step's attention kernel (module docstring)."""
    w = np.asarray(window, dtype=float)
    length = np.where(w > 0, np.minimum(kv_len, np.where(w > 0, w, 1.0)), kv_len)
    work = np.asarray(batch, float) * kv_heads * length
    util = work / (work + params["w0"])
    memory = decode_bytes(batch, length, kv_heads, head_dim, kv_dtype) / (
        hw.hbm_bytes_per_s * params["beta"] * util)
    compute = 4.0 * np.asarray(batch, float) * heads * head_dim * length / (
        hw.peak("bfloat16") * params["eta_c"])
    return np.maximum(memory, compute) + params["t0_s"]


def context_starts() -> list[list[float]]:
    """Starting points of the context fit (η, L₀, d₀, t₀)."""
    return [[0.6, 200.0, 30.0, 5e-6], [0.8, 50.0, 10.0, 1e-5], [0.5, 1000.0, 100.0, 3e-6]]


def decode_starts() -> list[list[float]]:
    """Starting points of the decode fit (β, W₀, η_c, t₀)."""
    return [[0.7, 1e5, 0.3, 5e-6], [0.9, 1e4, 0.1, 1e-5], [0.5, 1e6, 0.5, 3e-6]]


__all__ = ["CONTEXT_PARAMS", "DECODE_PARAMS", "causal_pairs", "context_flops",
           "context_latency_s", "context_starts", "decode_bytes", "decode_latency_s",
           "decode_starts"]
