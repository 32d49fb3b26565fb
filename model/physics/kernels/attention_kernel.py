"""Attention kernel latencies, closed forms over arrays of shapes.

**Context (prefill / training forward)**, a FlashAttention-style kernel over b sequences of
S tokens, h query heads of dimension d (h_kv key/value heads), causal, optional sliding
window w. Each CTA takes one (sequence, head, 128-query tile) and loops over 128-key blocks up
to the diagonal (or the window); its tensor cores compute whole blocks, masked or not:

    t = t₀ + ⌈C/SMs⌉·τ + 4·d·128²·N_blk·b·h / (P·η·w(C)·d/(d + d₀))

C = b·h·⌈S/128⌉ the CTAs, w(C) their wave quantisation over the SMs, N_blk = Σ_i min(i, w_b)
the query-key blocks a causal (windowed: w_b = ⌈w/128⌉ + 1) mask keeps per (sequence, head),
τ a CTA's fixed cost (prologue, softmax rescale, epilogue), d/(d + d₀) the per-key softmax work
against the head's MMA work. The model FLOPs (FA2/FA3 convention: 4·b·h·d·pairs, two matmuls,
halved by causality; :func:`context_flops`) over this time give the efficiency a caller sees.

**Decode (generation)**, one new token per sequence against a KV cache of L tokens. Two
kernels, chosen by the GQA group g = h/h_kv, as the measured table shows (the time per cached
token of g = 64 or 96 equals that of h = h_kv, of g ≤ 32 that of h_kv heads): a grouped kernel
(TensorRT-LLM's XQA) for 1 < g ≤ 32, each CTA one (sequence, KV head) sharing the K/V reads
over its g query heads, and a per-query-head kernel (masked multi-head attention) otherwise,
each CTA one (sequence, query head) reading its K/V. With u = h_kv or h the units per sequence:

    t = t₀ + τ·b·u + bytes / (B·β·W/(W + W₀)),   bytes = 2·b·u·L·d·s_kv,   W = b·u·L

τ the cost of one CTA's fixed work (τ_g for the grouped kernel, τ_h for the per-head one), β
the fraction of HBM bandwidth a long cache streams at, W/(W + W₀) the fraction reached by W
key-value rows of parallel work (short caches of few sequences keep too few loads in flight).

Parameters per GPU × dtype (context: attention dtype; decode: KV-cache dtype) fitted to
AIConfigurator 0.12.0's TensorRT-LLM 1.3.0rc20 attention tables
(``scripts/extract_kernel_tables.py``)."""

from __future__ import annotations

import numpy as np

from model.physics.kernels.hardware import INPUT_BYTES, KernelHardware
from model.physics.ops import wave_efficiency

Array = np.ndarray
CONTEXT_PARAMS = ("eta", "tau_s", "d0", "t0_s", "l0")
DECODE_PARAMS = ("beta", "w0", "tau_grouped_s", "tau_head_s", "t0_s")
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


def context_keys(seq: Array, window: Array) -> Array:
    """Keys the CTAs of one (sequence, head) visit, summed over its 128-query tiles: tile i of
    T = ⌈S/128⌉ visits min(128·i, S, w + 128) keys (up to the diagonal, the last tile S;
    w = 0: no window)."""
    s = np.asarray(seq, dtype=float)
    w = np.asarray(window, dtype=float)
    tiles = np.ceil(s / Q_TILE)
    cap = np.where(w > 0, w + Q_TILE, np.inf)
    cap_blocks = np.where(w > 0, np.where(w > 0, w, 0.0) / Q_TILE + 1.0, 0.0)
    inner = Q_TILE * causal_pairs(np.maximum(tiles - 1.0, 0.0), cap_blocks)
    return inner + np.minimum(s, cap)


def context_latency_s(batch, seq, heads, kv_heads, head_dim, window, dtype: str,
                      hw: KernelHardware, params: dict[str, float]) -> Array:
    """Seconds of a causal context-attention kernel (module docstring)."""
    b, s, h, d = (np.asarray(v, dtype=float) for v in (batch, seq, heads, head_dim))
    ctas = b * h * np.ceil(s / Q_TILE)
    waves = wave_efficiency(ctas * Q_TILE, Q_TILE, Q_TILE, hw.sm_count)
    keys = context_keys(s, window)
    per_cta = keys / np.maximum(np.ceil(s / Q_TILE), 1.0)
    eff = (params["eta"] * waves * d / (d + params["d0"])
           * per_cta / (per_cta + params["l0"]))
    flops = 4.0 * d * Q_TILE * keys * b * h
    fixed = np.ceil(ctas / hw.sm_count) * params["tau_s"]
    return params["t0_s"] + fixed + flops / (hw.peak(dtype) * np.maximum(eff, 1e-12))


MAX_GROUP = 32  # largest GQA group of the grouped decode kernel (measured table)


def decode_units(heads: Array, kv_heads: Array) -> tuple[Array, Array]:
    """(units per sequence, grouped?) of the decode kernel: KV heads for a GQA group
    1 < g ≤ :data:`MAX_GROUP`, query heads otherwise."""
    h, hk = np.asarray(heads, dtype=float), np.asarray(kv_heads, dtype=float)
    grouped = (h > hk) & (h <= MAX_GROUP * hk)
    return np.where(grouped, hk, h), grouped


def decode_bytes(batch, kv_len, units, head_dim, kv_dtype: str) -> Array:
    """HBM bytes a decode step's attention reads: K and V of every cached token, once per
    unit (KV head of the grouped kernel, query head of the per-head one)."""
    return (2.0 * INPUT_BYTES[kv_dtype] * np.asarray(batch, float) * units
            * np.asarray(kv_len, float) * head_dim)


def decode_latency_s(batch, kv_len, heads, kv_heads, head_dim, window, kv_dtype: str,
                     hw: KernelHardware, params: dict[str, float]) -> Array:
    """Seconds of one decode step's attention kernel (module docstring); a sliding window w
    caps the cache read at w tokens."""
    w = np.asarray(window, dtype=float)
    length = np.where(w > 0, np.minimum(kv_len, np.where(w > 0, w, 1.0)), kv_len)
    units, grouped = decode_units(heads, kv_heads)
    b = np.asarray(batch, dtype=float)
    work = b * units * length
    memory = decode_bytes(b, length, units, head_dim, kv_dtype) / (
        hw.hbm_bytes_per_s * params["beta"] * work / (work + params["w0"]))
    tau = np.where(grouped, params["tau_grouped_s"], params["tau_head_s"])
    return params["t0_s"] + tau * b * units + memory


def context_starts() -> list[list[float]]:
    """Starting points of the context fit (η, τ, d₀, t₀)."""
    return [[0.6, 1e-6, 30.0, 5e-6, 100.0], [0.8, 3e-7, 10.0, 1e-5, 30.0],
            [0.5, 3e-6, 100.0, 3e-6, 300.0]]


def decode_starts() -> list[list[float]]:
    """Starting points of the decode fit (β, W₀, τ_g, τ_h, t₀)."""
    return [[0.8, 3e4, 2.5e-8, 9e-9, 8e-6], [0.6, 1e5, 1e-8, 3e-9, 5e-6],
            [0.9, 1e4, 5e-8, 2e-8, 1e-5]]


__all__ = ["CONTEXT_PARAMS", "DECODE_PARAMS", "MAX_GROUP", "causal_pairs", "context_flops",
           "context_keys", "context_latency_s", "context_starts", "decode_bytes",
           "decode_latency_s", "decode_starts", "decode_units"]
