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

**Decode (generation)**, one new token per sequence against a KV cache of L tokens. The
kernel is chosen by the GQA group g = h/h_kv. TensorRT-LLM runs a grouped kernel (XQA) for
1 < g ≤ 32, each CTA one (sequence, KV head) sharing the K/V reads over its g query heads, and a
per-query-head kernel (masked multi-head attention, MMHA) otherwise, each CTA one (sequence,
query head) reading its K/V (the measured table: the time per cached token of g = 64 or 96
scales with h, of g ≤ 32 with h_kv); FlashAttention-2/3 and FlashInfer's decode kernels (the
vLLM and SGLang tables) pack every GQA group into one CTA per (sequence, KV head) whatever g
(``max_group`` = 0). With u = h_kv or h the CTAs per sequence before splitting:

    t = t₀ + τ·b·u + max(bytes / (B·β·C/(C + C₀)),  [per head] bytes_u / (r·B),
                         4·b·h·L·d / (P·η))

bytes = 2·b·h_kv·L·d·s_kv the cache read from HBM once, τ the fixed cost of one CTA (τ_g
grouped, τ_h per head) of one query head at d = 128, scaled by (d + d_τ)/(128 + d_τ) and by
(1 + g_c/g₀)/(1 + 1/g₀), g_c the query heads a CTA carries (g grouped, 1 per head) — its Q load,
output write and the new token's RoPE and K/V append grow with the head dimension and the
heads, the rest does not (the measured per-sequence floor of TensorRT-LLM's grouped kernel on
H100: 31, 35, 50 ns per KV head at d = 64, 128, 256; 35 → 55 ns from g = 2 to 32 at d = 128);
a per-head kernel on a shared KV head (g > 32) reads it once per query
head, bytes_u = 2·b·h·L·d·s_kv, mostly from L2: at r times the HBM bandwidth; the last term
the two matmuls of the decode at an MMA rate η of the BF16 peak (FP8 caches are dequantised
to BF16 before the MMA: a group of 16–32 query heads per KV head binds on it).

C = b·u·n the CTAs in flight, the bandwidth ramp C/(C + C₀) (a CTA keeps a bounded number of
loads in flight, Little's law): few sequences on few heads keep few loads in flight **however
long the cache** unless the kernel splits the KV length over n CTAs (split-KV, "flash-decoding";
:func:`decode_splits`), each reducing its partial softmax in a second pass:

- TensorRT-LLM XQA (``xqa_split`` = 1, grouped): ``computeMultiBlockCount``
  (NVIDIA/TensorRT-LLM b35ac1b6, cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/
  decoderXQAImplCommon.h): n₀ = ⌊L/512⌋ (kMinHistoryTokensPerBlock), n = min(n₀, round(√(8·n₀)))
  — growing as √L, not as the GPU needs —, cut to ≤ 8 waves (kTargetWaveFactor) of b·h_kv·n CTAs;
- MMHA (``xqa_split`` = 1, per head) and FlashAttention / FlashInfer (``xqa_split`` = 0):
  fill the SMs, capped by the KV length — MMHA's ``multi_block_grid_setup``
  (decoderMaskedMultiheadAttentionLaunch.h, same commit): n = clamp(⌈SMs/(b·u)⌉, 1,
  ⌈(L + 1)/128⌉) at one CTA per SM; FlashAttention's ``num_splits_heuristic``
  (Dao-AILab/flash-attention, csrc/flash_attn/flash_api.cpp): none once b·u ≥ 0.8·SMs, else the
  fewest splits within 85 % of the best wave efficiency, ≈ ⌈0.85·SMs/(b·u)⌉, at most 128 and
  the KV blocks of 128 keys.

Parameters per GPU × dtype (context: attention dtype; decode: KV-cache dtype) fitted to
AIConfigurator 0.12.0's TensorRT-LLM 1.3.0rc20 attention tables
(``scripts/extract_kernel_tables.py``)."""

from __future__ import annotations

import numpy as np

from model.physics.kernels.hardware import INPUT_BYTES, KernelHardware
from model.physics.ops import wave_efficiency

Array = np.ndarray
CONTEXT_PARAMS = ("eta", "tau_s", "d0", "t0_s", "l0", "passes")
DECODE_PARAMS = ("beta", "c0", "tau_grouped_s", "tau_head_s", "t0_s", "l2_ratio", "eta",
                 "d_tau", "g0")
# the kernel's launch rules, set per engine (not fitted): TensorRT-LLM's XQA/MMHA, else
# FlashAttention/FlashInfer's (module docstring)
DECODE_RULES = {"trtllm": {"max_group": 32.0, "xqa_split": 1.0},
                "other": {"max_group": 0.0, "xqa_split": 0.0}}
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


MAX_GROUP = 32  # largest GQA group of TensorRT-LLM's grouped decode kernel (measured table)
SPLIT_TOKENS = 512.0  # XQA kMinHistoryTokensPerBlock
SPLIT_WAVES = 8.0  # XQA kTargetWaveFactor
KV_BLOCK = 128.0  # keys per split-KV block of MMHA (seq_len_per_kv_loop) and FlashAttention


def decode_rules(engine: str) -> dict[str, float]:
    """The decode kernel's fixed launch rules of an engine's tables (:data:`DECODE_RULES`)."""
    return dict(DECODE_RULES["trtllm" if engine == "trtllm" else "other"])


def decode_units(heads: Array, kv_heads: Array, max_group: float = MAX_GROUP
                 ) -> tuple[Array, Array]:
    """(units per sequence, grouped?) of the decode kernel: KV heads for a GQA group
    1 < g ≤ ``max_group`` (0: any g > 1), query heads otherwise."""
    h, hk = np.asarray(heads, dtype=float), np.asarray(kv_heads, dtype=float)
    grouped = (h > hk) & ((max_group <= 0) | (h <= max_group * hk))
    return np.where(grouped, hk, h), grouped


def decode_splits(ctas: Array, length: Array, grouped: Array, sm_count: float,
                  xqa_split: float) -> Array:
    """Split-KV CTAs per (sequence, unit), n ≥ 1, of ``ctas`` = b·u unsplit CTAs over a cache
    of ``length`` keys (module docstring): XQA's √L rule for TensorRT-LLM's grouped kernel,
    else the fill-the-SMs rule of MMHA (TensorRT-LLM, per head) or FlashAttention."""
    c, length = np.asarray(ctas, dtype=float), np.asarray(length, dtype=float)
    blocks = np.ceil((length + 1.0) / KV_BLOCK)
    if xqa_split:
        fill = np.clip(np.ceil(sm_count / c), 1.0, blocks)  # MMHA, one CTA per SM
        n0 = np.floor(length / SPLIT_TOKENS)
        xqa = np.maximum(np.minimum(n0, np.round(np.sqrt(8.0 * n0))), 1.0)
        waves = c * xqa / (sm_count * SPLIT_WAVES)
        xqa = np.maximum(np.where(waves > 1.0, np.floor(xqa / np.maximum(waves, 1.0)), xqa), 1.0)
        return np.where(grouped, xqa, fill)
    fa = np.minimum(np.minimum(np.ceil(0.85 * sm_count / c), 128.0), blocks)
    return np.where(c >= 0.8 * sm_count, 1.0, np.maximum(fa, 1.0))


def decode_bytes(batch, kv_len, heads, head_dim, kv_dtype: str) -> Array:
    """Bytes of K and V of every cached token, once per head given (the KV heads: the HBM
    read; the query heads: a per-head kernel's reads)."""
    return (2.0 * INPUT_BYTES[kv_dtype] * np.asarray(batch, float) * heads
            * np.asarray(kv_len, float) * head_dim)


def decode_latency_s(batch, kv_len, heads, kv_heads, head_dim, window, kv_dtype: str,
                     hw: KernelHardware, params: dict[str, float]) -> Array:
    """Seconds of one decode step's attention kernel (module docstring); a sliding window w
    caps the cache read at w tokens. ``params`` holds the fitted :data:`DECODE_PARAMS` and the
    engine's launch rules (:func:`decode_rules`; TensorRT-LLM's where absent)."""
    w = np.asarray(window, dtype=float)
    length = np.where(w > 0, np.minimum(kv_len, np.where(w > 0, w, 1.0)), kv_len)
    units, grouped = decode_units(heads, kv_heads, params.get("max_group", MAX_GROUP))
    hk = np.asarray(kv_heads, dtype=float)
    b = np.asarray(batch, dtype=float)
    ctas = b * units
    ctas = ctas * decode_splits(ctas, length, grouped, hw.sm_count,
                                params.get("xqa_split", 1.0))
    hbm = decode_bytes(b, length, hk, head_dim, kv_dtype) / (
        hw.hbm_bytes_per_s * params["beta"] * ctas / (ctas + params["c0"]))
    shared = np.where(units > hk, decode_bytes(b, length, units, head_dim, kv_dtype)
                      / (hw.hbm_bytes_per_s * params["l2_ratio"]), 0.0)
    mma = 4.0 * b * np.asarray(heads, float) * length * head_dim / (
        hw.peak("bfloat16") * params["eta"])
    per_cta = np.asarray(heads, float) / units  # query heads a CTA carries
    tau = np.where(grouped, params["tau_grouped_s"], params["tau_head_s"]) * (
        np.asarray(head_dim, float) + params["d_tau"]) / (128.0 + params["d_tau"]) * (
        1.0 + per_cta / params["g0"]) / (1.0 + 1.0 / params["g0"])
    return params["t0_s"] + tau * b * units + np.maximum(np.maximum(hbm, shared), mma)


def context_starts() -> list[list[float]]:
    """Starting points of the context fit (η, τ, d₀, t₀, L₀, passes)."""
    return [[0.6, 1e-6, 30.0, 5e-6, 100.0, 1.0], [0.8, 1e-7, 20.0, 1e-5, 800.0, 3.0],
            [0.5, 3e-6, 100.0, 3e-6, 300.0, 0.3]]


def decode_starts() -> list[list[float]]:
    """Starting points of the decode fit (β, C₀, τ_g, τ_h, t₀, r, η, d_τ, g₀)."""
    return [[0.8, 100.0, 3e-8, 9e-9, 8e-6, 2.0, 0.2, 128.0, 16.0],
            [0.9, 30.0, 2e-8, 5e-9, 6e-6, 3.0, 0.5, 128.0, 16.0],
            [0.7, 300.0, 5e-8, 2e-8, 1e-5, 1.5, 0.05, 128.0, 16.0]]


__all__ = ["CONTEXT_PARAMS", "DECODE_PARAMS", "DECODE_RULES", "MAX_GROUP", "causal_pairs",
           "context_flops", "context_latency_s", "context_starts", "decode_bytes",
           "decode_latency_s", "decode_rules", "decode_splits", "decode_starts",
           "decode_units"]
