"""Attention kernels priced from their published benchmarks, forward and backward apart.

``reference/attention_kernels.json`` holds, per kernel (FlashAttention-2 ``fa2``,
FlashAttention-3 ``fa3``, cuDNN fused attention ``cudnn``, Triton flash attention ``triton``,
unfused PyTorch attention ``math``), benchmark GPU (A100 SXM4, H100 SXM5), pass (forward,
forward + backward), mask (causal or not) and head dimension (64, 128), the TFLOP/s the
FlashAttention-2 (arXiv 2307.08691, Fig. 4) and FlashAttention-3 (arXiv 2407.08608, Fig. 5)
papers measured at sequence lengths 512–16K. Their FLOP count is the one the estimator uses
for the attention op (:func:`model.physics.ops.flash_attention`): forward F = 4·L²·d per head
(halved by the causal mask), backward 2.5·F with the recomputed QKᵀ — so a rate R times the
op's matrix FLOPs is its time, softmax, exponentials and HBM traffic included.

Per pass, as a fraction of the benchmark GPU's dense BF16 peak (312 / 989 TFLOP/s):

* forward R_f: the forward table; without one, the forward + backward rate R_fb;
* backward R_b, the first of (:func:`pass_rates_tflops`):
  1. the backward table of the mask (FlashAttention-3 paper Fig. 6 on H100: math, FA2, cuDNN
     and FA3, non-causal only);
  2. where the forward and forward + backward tables exist, from t_fb = t_f + t_b:
     R_b = 2.5 / (3.5/R_fb − 1/R_f) (FA2 and math, causal, on H100);
  3. the other mask's backward table times the kernel's own forward ratio between the masks,
     R_b = R_b' · R_f/R_f' (FA3 and cuDNN, causal: the causal kernels skip the same
     masked blocks in both passes, so the mask costs the backward what it costs the forward);
  4. with only R_fb, R_b = R_fb (A100);
  5. with only R_f (Triton on H100: no backward bar), R_b = R_f × FA2's R_b/R_f at the same
     shape on the same GPU — an assumption, stated in docs/stacks.md.

Between tabulated points: linear in log2 L and in the head dimension, clamped at the ends
(the curves are flat by 8–16K; head dimensions above 128 — MLA's 192 — take the 128 rates, the
copied tables stopping there). GQA with few KV heads runs at the same rate (the kernels are
compute-bound; their smaller K/V traffic shows in the op's HBM bytes). Sliding-window layers
run at the rate of their effective length, 2 × the mean keys per query of causal attention
(:func:`model.specs.params.attention_keys`), where the kernel skips the blocks outside the
window (``features.sliding_window``); a kernel without windows computes the full causal
attention and masks it. Learnable attention sinks (GPT-OSS) run fused only where the table's
``features.sinks`` says so; elsewhere the unfused math kernel runs (:func:`kernel_used`).

A kernel runs where its table has a GPU of the system's
generation; Blackwell, which none of the copied benchmarks ran, takes Hopper's fractions; a
kernel without a table for the generation (FA3 and cuDNN on Ampere) is refused.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from model.errors import ModelError
from model.specs import memo
from model.specs.schema import DATA_DIR

TABLE = DATA_DIR / "reference" / "attention_kernels.json"
GENERATION_GPU = {"ampere": "a100", "hopper": "h100", "blackwell": "h100",
                  "blackwell-ultra": "h100"}
REFERENCE_KERNEL = "fa2"  # whose backward/forward ratio carries a forward-only table
BWD_OVER_FWD_FLOP = 2.5  # the benchmarks' backward FLOPs over the forward's


@memo.lru("attention kernel table", 1)
def _table() -> dict:
    return json.loads(TABLE.read_text())


def kernels() -> tuple[str, ...]:
    """The kernels with published tables."""
    return tuple(_table()["kernels"])


def _curve(rows: dict, causal: bool, head_dim: float, seq_len: float) -> float | None:
    """TFLOP/s of one pass at (head_dim, seq_len): linear in log2 L, then in the head dim;
    None where the table has no curve for the mask."""
    by_dim = rows.get("causal" if causal else "noncausal")
    if by_dim is None:
        return None
    seq = np.log2(np.asarray(_table()["seq_len"], dtype=float))
    x = np.clip(np.log2(max(seq_len, 1.0)), seq[0], seq[-1])
    dims, values = [], []
    for dim, speeds in sorted(by_dim.items(), key=lambda kv: int(kv[0])):
        pts = [(s, v) for s, v in zip(seq, speeds) if v is not None]  # OOM cells dropped
        dims.append(float(dim))
        values.append(float(np.interp(x, [p[0] for p in pts], [p[1] for p in pts])))
    return float(np.interp(head_dim, dims, values))


def _pass(kernel: str, gpu: str, way: str, causal: bool, head_dim: float, seq_len: float
          ) -> float | None:
    """TFLOP/s of one table (``fwd``, ``bwd`` or ``fwd_bwd``) of ``kernel`` on ``gpu``."""
    entry = _table()["kernels"].get(kernel, {}).get(gpu, {})
    return _curve(entry[way], causal, head_dim, seq_len) if way in entry else None


def pass_rates_tflops(kernel: str, gpu: str, causal: bool, head_dim: float, seq_len: float
                      ) -> tuple[float, float]:
    """(forward, backward) TFLOP/s of ``kernel`` on the benchmark GPU ``gpu`` (the module
    docstring lists the backward's sources in the order they are tried)."""
    shape = (head_dim, seq_len)
    fwd = _pass(kernel, gpu, "fwd", causal, *shape)
    both = _pass(kernel, gpu, "fwd_bwd", causal, *shape)
    bwd = _pass(kernel, gpu, "bwd", causal, *shape)
    if fwd is None and both is None:
        raise ModelError(f"no published benchmark of attention kernel '{kernel}' on {gpu}")
    if fwd is None:
        return both, both
    if bwd is not None:
        return fwd, bwd
    if both is not None:
        return fwd, BWD_OVER_FWD_FLOP / (3.5 / both - 1.0 / fwd)
    bwd_other = _pass(kernel, gpu, "bwd", not causal, *shape)
    fwd_other = _pass(kernel, gpu, "fwd", not causal, *shape)
    if bwd_other is not None and fwd_other is not None:
        return fwd, bwd_other * fwd / fwd_other
    ref_fwd, ref_bwd = pass_rates_tflops(REFERENCE_KERNEL, gpu, causal, head_dim, seq_len)
    return fwd, fwd * ref_bwd / ref_fwd


def supports(kernel: str, feature: str) -> bool:
    """Whether ``kernel`` runs ``feature`` (``sliding_window``, ``sinks``) fused in training
    (the ``features`` of the table, with their sources); math runs everything, unfused."""
    return kernel == "math" or kernel in _table()["features"][feature]


def kernel_used(kernel: str, sinks: bool) -> str:
    """The kernel that actually runs: with learnable attention sinks, a kernel without them
    falls back to unfused math attention (Transformer Engine's UnfusedDotProductAttention
    fallback; FlashAttention-2/-3 have no sink backward, Dao-AILab/flash-attention#1797)."""
    return kernel if not sinks or supports(kernel, "sinks") else "math"


def pass_efficiencies(kernel: str, generation: str, causal: bool, head_dim: float,
                      seq_len: float) -> tuple[float, float]:
    """(forward, backward) fractions of the dense BF16 peak ``kernel`` reaches on a GPU of
    ``generation`` for one attention of ``seq_len`` keys and ``head_dim``."""
    gpu = GENERATION_GPU.get(generation)
    if gpu is None or gpu not in _table()["kernels"].get(kernel, {}):
        have = sorted(g for g, b in GENERATION_GPU.items()
                      if b in _table()["kernels"].get(kernel, {}))
        raise ModelError(f"attention kernel '{kernel}' has no published benchmark for "
                         f"{generation} GPUs (it is priced on: {', '.join(have) or 'none'}); "
                         "choose another attention_kernel")
    peak = _table()["peak_tflops"][gpu]
    fwd, bwd = pass_rates_tflops(kernel, gpu, causal, head_dim, seq_len)
    return fwd / peak, bwd / peak


def tabled_times(c: Any, way: str, zero: np.ndarray, ctx: Any, overhead: float):
    """(t_comp, t_mem, t_extra, compute) of an attention whose kernel has a published benchmark:
    t_comp = overhead + F_mat / (η_way·P_bf16) with η_way its forward or backward fraction of
    the peak (the module docstring: the measured rate already pays the
    softmax, exponentials and the kernel's own HBM traffic); t_mem as any op (the unfused
    math kernel's score passes)."""
    eta = ctx.attention_passes[0 if way == "fwd" else 1]
    t_comp = zero + overhead + getattr(c, f"flop_mat_{way}") / (
        eta * ctx.system.matrix_flop_per_s)
    t_mem = zero + getattr(c, f"bytes_{way}") / ctx.system.hbm_bytes_per_s
    t_extra = zero + getattr(c, f"extra_bytes_{way}") / ctx.system.hbm_bytes_per_s  # RoPE
    return t_comp, t_mem, t_extra, np.maximum(t_comp, t_mem) + t_extra
