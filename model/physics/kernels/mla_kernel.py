"""Multi-head latent attention (DeepSeek-V2/V3, Liu et al. 2024, arXiv 2405.04434) kernels as
TensorRT-LLM runs them, closed forms over arrays, with DeepSeek-V3's dimensions (the only MLA
shape in the measured tables): q/k "nope" 128 + RoPE 64 per head, values 128, the latent
cache c_kv of 512 plus the shared RoPE key of 64 per token.

**Context (prefill)**: the latent is expanded to per-head keys (192) and values (128) and a
causal flash-attention kernel runs over h heads — the context law of
:func:`model.physics.kernels.attention_kernel.context_latency_s` with h_kv = h and the head
dimension (192 + 128)/2 = 160 that gives its FLOPs 2·b·h·pairs·(192 + 128).

**Decode (generation)**: the weight-absorbed form — every query head attends to the one latent
cache (multi-query attention with keys of 576 and values of 512; FlashMLA's layout):

    t = t₀ + τ·b·(1 + h/h₀) + max(b·L·576·s_kv / (B·β·W/(W + W₀)),  2·b·h·L·(576 + 512) / (P·η),
                                  L·τ_k)

τ·b·(1 + h/h₀) the fixed work per sequence, part of it per query head (each head's 576-wide
query loaded, its 512-wide output and softmax statistics written; FlashMLA tiles a
sequence's query heads 64 to a CTA): without the heads' share Hopper's 64-head family at large
batches and short caches was priced 40–60 % fast. W = b·L the latent rows in
flight; the FLOP term binds once many heads share the cache. The
last term is one CTA's serial walk over the cache, τ_k per key: TensorRT-LLM does not split an
MLA decode over the KV length (``computeMultiBlockCountForMLA`` returns 1, NVIDIA/TensorRT-LLM
b35ac1b6, cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/decoderXQAImplCommon.h),
so a few sequences with long caches take L·τ_k whatever the bandwidth left idle — on the A100
(no XQA-MLA kernel before sm90) 0.12 µs per key, the same for 1 to 16 sequences.
Parameters per GPU × KV dtype fitted to AIConfigurator 0.12.0's TensorRT-LLM MLA tables
(``scripts/extract_kernel_tables.py``)."""

from __future__ import annotations

import numpy as np

from model.physics.kernels import attention_kernel as attn
from model.physics.kernels.hardware import INPUT_BYTES, KernelHardware

Array = np.ndarray
QK_DIM, V_DIM = 192.0, 128.0  # per-head key (nope + RoPE) and value dims of the prefill
LATENT, ROPE = 512.0, 64.0  # the cached latent and shared RoPE key per token
CONTEXT_PARAMS = attn.CONTEXT_PARAMS
DECODE_PARAMS = ("beta", "w0", "eta", "tau_s", "t0_s", "tau_key_s", "h0")


def mla_context_latency_s(batch, seq, heads, kv_dtype: str, hw: KernelHardware,
                          params: dict[str, float]) -> Array:
    """Seconds of MLA's prefill attention (module docstring): BF16 attention whatever the
    cache's dtype (``kv_dtype`` keys the fitted parameters: an FP8 cache adds its casts)."""
    del kv_dtype
    return attn.context_latency_s(batch, seq, heads, heads, (QK_DIM + V_DIM) / 2.0, 0,
                                  "bfloat16", hw, params)


def mla_decode_latency_s(batch, kv_len, heads, kv_dtype: str, hw: KernelHardware,
                         params: dict[str, float]) -> Array:
    """Seconds of MLA's absorbed decode attention (module docstring)."""
    b, length, h = (np.asarray(v, dtype=float) for v in (batch, kv_len, heads))
    work = b * length
    memory = b * length * (LATENT + ROPE) * INPUT_BYTES[kv_dtype] / (
        hw.hbm_bytes_per_s * params["beta"] * work / (work + params["w0"]))
    compute = 2.0 * b * h * length * (LATENT + ROPE + LATENT) / (
        hw.peak("bfloat16") * params["eta"])
    chain = length * params["tau_key_s"]
    fixed = params["tau_s"] * b * (1.0 + h / params["h0"])
    return params["t0_s"] + fixed + np.maximum(np.maximum(memory, compute), chain)


def mla_decode_starts() -> list[list[float]]:
    """Starting points of the decode fit (β, W₀, η, τ, t₀, τ_k, h₀)."""
    return [[0.8, 1e4, 0.3, 1e-8, 1e-5, 1e-9, 32.0], [0.6, 1e5, 0.5, 1e-7, 5e-6, 1e-8, 32.0],
            [0.9, 1e3, 0.1, 1e-9, 2e-5, 1e-7, 32.0]]


__all__ = ["CONTEXT_PARAMS", "DECODE_PARAMS", "mla_context_latency_s", "mla_decode_latency_s",
           "mla_decode_starts"]
