"""Attention kernel latencies, closed forms over arrays of shapes.

**Context (prefill / training forward)**, a FlashAttention-style kernel over b sequences of
S tokens, h query heads of dimension d (h_kv key/value heads), causal, optional sliding
window w, as TensorRT-LLM's attention op runs it (its QKV pre-processing — RoPE, the K/V
written to the cache — then the fused kernel):

    t = t₀ + ⌈C/SMs⌉·τ + c·b·S·(h + 2·h_kv)·d·2 / B
          + 4·b·h·d·pairs / (P·η·w(C)·L/(L + L₀)·d/(d + d₀))

pairs = Σ_i min(i, w) the query-key pairs a causal (windowed) mask keeps — the FA2/FA3 FLOP
convention, two matmuls of 2 FLOPs per multiply-add, halved by causality (:func:`context_flops`)
—, C = b·h·⌈S/128⌉ the CTAs (one per sequence, head and 128-query tile), w(C) their wave
quantisation over the SMs, τ a CTA's fixed cost, L = pairs/S the mean keys a query visits
(the key loop's pipeline fill and epilogue against its length, the depth term of
:mod:`model.physics.gemm`), d/(d + d₀) the per-key softmax work against the head's MMA work,
and c passes of the BF16 Q, K, V over HBM for the pre-processing.

**Decode (generation)**, one new token per sequence against a KV cache of L tokens. Two
kernels, chosen by the GQA group g = h/h_kv, as the measured table shows (the time per cached
token of g = 64 or 96 scales with h, of g ≤ 32 with h_kv): a grouped kernel (TensorRT-LLM's
XQA) for 1 < g ≤ 32, each CTA one (sequence, KV head) sharing the K/V reads over its g query
heads, and a per-query-head kernel (masked multi-head attention) otherwise, each CTA one
(sequence, query head) reading its K/V. With u = h_kv or h the CTAs per sequence:

    t = t₀ + τ·b·u + max(bytes / (B·β·W/(W + W₀)),  [g > 1 per head] bytes_u / (r·B))

bytes = 2·b·h_kv·L·d·s_kv the cache read from HBM once, W = b·u·L the key-value rows of
parallel work (short caches of few sequences keep too few loads in flight: the ramp W/(W + W₀)),
τ the fixed cost of one CTA (τ_g grouped, τ_h per head); a per-head kernel on a shared KV head
(g > 32) reads it once per query head, bytes_u = 2·b·h·L·d·s_kv, mostly from L2: at r times
the HBM bandwidth (H100 fits r ≈ 2).

Parameters per GPU × dtype (context: attention dtype; decode: KV-cache dtype) fitted to
AIConfigurator 0.12.0's TensorRT-LLM 1.3.0rc20 attention tables
(``scripts/extract_kernel_tables.py``)."""

from __future__ import annotations

import numpy as np

from model.physics.kernels.hardware import INPUT_BYTES, KernelHardware
from model.physics.ops import wave_efficiency

Array = np.ndarray
CONTEXT_PARAMS = ("eta", "tau_s", "d0", "t0_s", "l0", "passes")
DECODE_PARAMS = ("beta", "w0", "tau_grouped_s", "tau_head_s", "t0_s", "l2_ratio")
Q_TILE = 128.0  # query rows per CTA (FlashAttention-2/3 forward)


def causal_pairs(seq: Array, window: Array) -> Array:
    """Query-key pairs a causal mask keeps per sequence and head, Σ_{i=1..S} min(i, w)
    (w = 0: no window)."""
    s = np.asarray(seq, dtype=float)
    w = np.asarray(window, dtype=float)
    full = s * (s + 1.0) / 2.0
    wf = np.where(w > 0, w, 1.0)
    windowed = wf * (wf + 1.0) / 2.0 + np.maximum(s - wf, 0.0) * wf
    return np.where((w > 0) & (s > w), windowed, full)


def context_flops(batch: Array, seq: Array, heads: Array, head_dim: Array,
                  window: Array = 0) -> Array:
    """Matmul FLOPs of causal attention's forward: 4·b·h·d·pairs."""
    return 4.0 * np.asarray(batch, float) * heads * np.asarray(head_dim, float) * causal_pairs(
        seq, window)


def context_latency_s(batch, seq, heads, kv_heads, head_dim, window, dtype: str,
                      hw: KernelHardware, params: dict[str, float]) -> Array:
    """Seconds of a causal context-attention op (module docstring)."""
    b, s, h, hk, d = (np.asarray(v, dtype=float) for v in (batch, seq, heads, kv_heads,
                                                            head_dim))
    ctas = b * h * np.ceil(s / Q_TILE)
    waves = wave_efficiency(ctas * Q_TILE, Q_TILE, Q_TILE, hw.sm_count)
    pairs = causal_pairs(s, window)
    keys = pairs / np.maximum(s, 1.0)
    eff = (params["eta"] * waves * keys / (keys + params["l0"])
           * d / (d + params["d0"]))
    fixed = np.ceil(ctas / hw.sm_count) * params["tau_s"]
    prep = params["passes"] * b * s * (h + 2.0 * hk) * d * 2.0 / hw.hbm_bytes_per_s
    flops = 4.0 * b * h * d * pairs
    return params["t0_s"] + fixed + prep + flops / (hw.peak(dtype) * np.maximum(eff, 1e-12))


MAX_GROUP = 32  # largest GQA group of the grouped decode kernel (measured table)


def decode_units(heads: Array, kv_heads: Array) -> tuple[Array, Array]:
    """(units per sequence, grouped?) of the decode kernel: KV heads for a GQA group
    1 < g ≤ :data:`MAX_GROUP`, query heads otherwise."""
    h, hk = np.asarray(heads, dtype=float), np.asarray(kv_heads, dtype=float)
    grouped = (h > hk) & (h <= MAX_GROUP * hk)
    return np.where(grouped, hk, h), grouped


def decode_bytes(batch, kv_len, heads, head_dim, kv_dtype: str) -> Array:
    """Bytes of K and V of every cached token, once per head given (the KV heads: the HBM
    read; the query heads: a per-head kernel's reads)."""
    return (2.0 * INPUT_BYTES[kv_dtype] * np.asarray(batch, float) * heads
            * np.asarray(kv_len, float) * head_dim)


def decode_latency_s(batch, kv_len, heads, kv_heads, head_dim, window, kv_dtype: str,
                     hw: KernelHardware, params: dict[str, float]) -> Array:
    """Seconds of one decode step's attention kernel (module docstring); a sliding window w
    caps the cache read at w tokens."""
    w = np.asarray(window, dtype=float)
    length = np.where(w > 0, np.minimum(kv_len, np.where(w > 0, w, 1.0)), kv_len)
    units, grouped = decode_units(heads, kv_heads)
    hk = np.asarray(kv_heads, dtype=float)
    b = np.asarray(batch, dtype=float)
    work = b * units * length
    hbm = decode_bytes(b, length, hk, head_dim, kv_dtype) / (
        hw.hbm_bytes_per_s * params["beta"] * work / (work + params["w0"]))
    shared = np.where(units > hk, decode_bytes(b, length, units, head_dim, kv_dtype)
                      / (hw.hbm_bytes_per_s * params["l2_ratio"]), 0.0)
    tau = np.where(grouped, params["tau_grouped_s"], params["tau_head_s"])
    return params["t0_s"] + tau * b * units + np.maximum(hbm, shared)


def context_starts() -> list[list[float]]:
    """Starting points of the context fit (η, τ, d₀, t₀, L₀, passes)."""
    return [[0.6, 1e-6, 30.0, 5e-6, 100.0, 1.0], [0.8, 1e-7, 20.0, 1e-5, 800.0, 3.0],
            [0.5, 3e-6, 100.0, 3e-6, 300.0, 0.3]]


def decode_starts() -> list[list[float]]:
    """Starting points of the decode fit (β, W₀, τ_g, τ_h, t₀, r)."""
    return [[0.8, 3e4, 3e-8, 9e-9, 8e-6, 2.0], [0.9, 1e4, 2e-8, 5e-9, 6e-6, 3.0],
            [0.7, 1e5, 5e-8, 2e-8, 1e-5, 1.5]]


__all__ = ["CONTEXT_PARAMS", "DECODE_PARAMS", "MAX_GROUP", "causal_pairs", "context_flops",
           "context_latency_s", "context_starts", "decode_bytes",
           "decode_latency_s", "decode_starts", "decode_units"]
