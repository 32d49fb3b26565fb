"""PyTorch's context-parallel attention as torchtitan runs it (``context_attention: pytorch``).

torchtitan at 9dec370 (2024-12-26; its Llama 3.1 H100 benchmarks) wraps the step in
``torch.distributed.tensor.experimental.context_parallel`` with
``--experimental.context_parallel_rotate_method allgather`` (its default,
``torchtitan/config_manager.py``) and runs SDPA's flash backend. The ring is
``_templated_ring_attention`` / ``_templated_ring_attention_backward`` of
``torch/distributed/tensor/experimental/_attention.py`` (read at pytorch/pytorch
0123248a484ffe531edb5098b986c1bac08cd296; defaults ``convert_to_f32 = True``,
``enable_load_balance = True``, ``rotate_method = ALL_GATHER``). With n = cp GPUs, each
holding r = L/n query rows (two chunks of L/2n, the round-robin load balance):

* **Every step costs the same.** Step 0 is causal attention of the local rows over the local
  keys, (2c)²/2 = 2c² score pairs for chunks of c = L/2n; every later step is either all local
  queries over the first half of the visiting keys or the second half of the queries over all
  of them, 2c² pairs too. So each of the n steps is 1/n of the op's compute C.
* **K and V carry every query head.** torchtitan's Llama repeats K and V to the query heads
  before SDPA (``repeat_kv`` in ``torchtitan/models/llama/model.py`` at 9dec370), so the
  exchanged volume is s·b·h·L·(q + v) (:func:`kv_bytes`), h/k times the GQA tensors.
* **Forward: one all-gather under the first step.** ``_AllGatherRotater.exchange_buffers``
  issues one all-gather of K/V before step 0's kernel; step 1 waits for it: the exposed time
  is max(T_ag − C_f/n, 0).
* **Backward: the all-gather again, and dK/dV around the ring in FP32.** K/V are all-gathered
  as in the forward (max(T_ag − C_b/n, 0)); the dK/dV accumulators (FP32: 4 bytes, twice the
  bf16 volume over n, :func:`dkv_hop_bytes`) are sent to the next GPU after every step with an
  all-to-all permute (``dkv_rotater`` is always ``ALL_TO_ALL``) and waited for after the next
  step's kernel: n − 1 hops hide behind a step, max(T_p − C_b/n, 0) each, and the last,
  waited for after the loop, is exposed: T_p.
* **Merges in FP32 through HBM** (:func:`merge_bytes`): the slowest GPU (the last, whose steps
  all merge full-size blocks) pays per forward step after the first the ``_SDPAMerger``
  update — the block output cast to FP32 (2 bytes read, 4 written per output element), then
  out − block_out, ×σ(Δlse), out − … (12 + 8 + 12 bytes) — and the concatenation of K and V
  for the next exchange (2 + 2 bytes per K/V element); at the end the FP32 output cast back (6).
  Backward: per step the FP32 dQ accumulation (4 + 2 read, 4 written), dK/dV accumulated into
  a ``torch.cat`` rebuild of the received FP32 buffer (10 + 8) and concatenated for the next
  hop (8), K/V concatenated (4, steps after the first); zeroed accumulators (4) and the final
  casts (6) once.

None of it exists at n = 1: torchtitan applies no context parallelism then.
"""

from __future__ import annotations

import numpy as np

# bytes per output element of one forward merge: cast (2 + 4), three FP32 element-wise ops
MERGE_FWD_PER_OUT = 6.0 + 12.0 + 8.0 + 12.0
KV_CAT_PER_KV = 4.0  # bf16 K/V concatenated for the next exchange: read 2, write 2
FINAL_CAST_PER_OUT = 6.0  # FP32 output read (4), bf16 written (2)
DQ_PER_Q = 10.0  # FP32 dQ += bf16 step dQ: read 4 + 2, write 4
DKV_PER_KV = 10.0 + 8.0 + 8.0  # accumulate, torch.cat rebuild, concatenation for the hop
DKV_FIRST_PER_KV = 10.0 + 8.0  # step 0: accumulate and concatenate (nothing received yet)
ZERO_AND_CAST = 4.0 + 6.0  # FP32 accumulators zeroed, cast back to bf16 at the end


def kv_bytes(b, heads, seq, q, v, element_bytes: float = 2.0):
    """Bytes of K and V over the whole sequence with every query head (repeated K/V)."""
    return element_bytes * np.asarray(b, dtype=float) * heads * seq * (q + v)


def dkv_hop_bytes(b, heads, rows, q, v):
    """Bytes of one dK/dV hop: the FP32 accumulators of the local r rows, every head."""
    return 4.0 * np.asarray(b, dtype=float) * heads * rows * (q + v)


def merge_bytes(b, heads, rows, q, v, n) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes of the merges and accumulations (module docstring) for
    b sequences of r local rows, ``heads`` local query heads, head dims q (query/key) and v
    (value); zero at n = 1."""
    n = np.asarray(n, dtype=float)
    hb = np.asarray(b, dtype=float) * heads * rows
    out, qq, kv = hb * v, hb * q, hb * (q + v)
    on = n > 1
    later = np.maximum(n - 1.0, 0.0)
    fwd = later * (MERGE_FWD_PER_OUT * out + KV_CAT_PER_KV * kv) + FINAL_CAST_PER_OUT * out
    bwd = (n * DQ_PER_Q * qq + later * (DKV_PER_KV + KV_CAT_PER_KV) * kv
           + DKV_FIRST_PER_KV * kv + ZERO_AND_CAST * (qq + kv))
    return np.where(on, fwd, 0.0), np.where(on, bwd, 0.0)


def exposed_fwd_s(t_allgather, compute_s, n):
    """Forward: the all-gather beyond the first step's kernel, max(T_ag − C/n, 0)."""
    n = np.asarray(n, dtype=float)
    return np.maximum(t_allgather - compute_s / n, 0.0)


def exposed_bwd_s(t_allgather, t_hop, compute_s, n):
    """Backward: the all-gather beyond the first step, n − 1 dK/dV hops beyond a step each,
    and the last hop whole: max(T_ag − C/n, 0) + (n − 1)·max(T_p − C/n, 0) + T_p."""
    n = np.asarray(n, dtype=float)
    step = compute_s / n
    hops = np.maximum(n - 1.0, 0.0) * np.maximum(t_hop - step, 0.0) + t_hop
    return np.maximum(t_allgather - step, 0.0) + np.where(n > 1, hops, 0.0)


def _heads(spec, sh, ctx) -> np.ndarray:
    """Local query heads (K/V are repeated to them)."""
    return np.asarray(ctx.model.heads // sh.size(spec.heads_shard), dtype=float)


def volume_bytes(name: str, spec, sh, ctx) -> np.ndarray:
    """``kv_rep``: the all-gathered K/V (:func:`kv_bytes`); ``dkv_hop``: one FP32 dK/dV hop
    of the local rows (:func:`dkv_hop_bytes`)."""
    m, seq = ctx.model, float(ctx.dims["l"])
    q, v = float(m.qk_head_dim), float(m.value_head_dim)
    if name == "kv_rep":
        return kv_bytes(sh.b, _heads(spec, sh, ctx), seq, q, v)
    rows = np.asarray(ctx.dims["l"] // sh.size(spec.rows), dtype=float)
    return dkv_hop_bytes(sh.b, _heads(spec, sh, ctx), rows, q, v)


def add_merges(counts, spec, sh, ctx, rows):
    """The op's counts with the FP32 merges (:func:`merge_bytes`) as separate HBM passes."""
    m = ctx.model
    fwd, bwd = merge_bytes(sh.b, _heads(spec, sh, ctx), rows, float(m.qk_head_dim),
                           float(m.value_head_dim), sh.size(spec.rows))
    counts.extra_bytes_fwd = counts.extra_bytes_fwd + fwd
    counts.extra_bytes_bwd = counts.extra_bytes_bwd + bwd
    return counts


def exposed_s(way: str, times: dict, compute_s, n):
    """The exposed collective time of the op in direction ``way`` from its collectives' times
    by volume name (``kv_rep``, ``dkv_hop``)."""
    t_ag = times.get("kv_rep", 0.0)
    if way == "fwd":
        return exposed_fwd_s(t_ag, compute_s, n)
    return exposed_bwd_s(t_ag, times.get("dkv_hop", 0.0), compute_s, n)
