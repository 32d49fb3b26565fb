"""What an op's tensors and collectives hold, from its sharding: the local size of a dimension
sharded over some axes, and the bytes V of each named collective volume (``in``, ``out``,
``stats``, ``kv``, ``dispatch``, …) an op table names — defined once here
(:func:`comm_volume_bytes`), used by :mod:`model.physics.block` to price the collectives and by
the per-op report (:mod:`model.engine.report`) to show them.
"""

from __future__ import annotations

import numpy as np

from model.physics import moe, ring_attention
from model.physics.context import Ctx
from model.physics.optable import Axes, OpSpec, Shards
from model.specs.precision import PRECISIONS

ELEMENT_BYTES = 2.0  # fp16/bf16 activations and weights
MASK_BYTES = 1.0  # dropout mask element


def local_size(full: int, shards: Shards, axes: Axes) -> np.ndarray:
    """Floor-divided local size of a dimension of size ``full`` sharded over ``axes``."""
    return np.asarray(full // shards.size(axes), dtype=float)


def _kv_volume(name: str, spec: OpSpec, sh: Shards, ctx: Ctx) -> np.ndarray:
    """``kv``: K and V of the ``kv_heads`` over the whole sequence, s·b·k·L·(q + v);
    ``kv_rep``, ``dkv_hop``: PyTorch's context_parallel (:mod:`model.physics.ring_attention`)."""
    if name != "kv":
        return ring_attention.volume_bytes(name, spec, sh, ctx)
    m = ctx.model
    kv = np.maximum(local_size(m.kv_heads, sh, spec.heads_shard), 1.0)
    return ELEMENT_BYTES * sh.b.astype(float) * kv * ctx.dims["l"] * (
        m.qk_head_dim + m.value_head_dim)


def comm_volume_bytes(name: str, spec: OpSpec, axes: Axes, sh: Shards, ctx: Ctx) -> np.ndarray:
    """Bytes V of the collective named ``name`` of op ``spec`` over ``axes`` (the full buffer).

    * ``in`` / ``out``: the op's input / output activation gathered over the collective's axes,
      s·b·(l // rows sharded by the other axes)·K (or N) — RS/AG of Megatron TP (§7.1);
      ``in_q`` / ``out_q`` the same in the precision's quantised bytes per element (torchao's
      Float8 TP gathers, ``tp_style`` dtensor)
    * ``kv_rep`` / ``dkv_hop``: PyTorch's context_parallel (:mod:`model.physics.ring_attention`)
    * ``stats``: two values per local row, 2s·b·r (LayerNorm2D statistics, loss max/sum)
    * ``stats_paper_bwd``: the paper's LayerNorm2D backward volume s·((2e)//tp1 + (2·b·l)//tp2)
    * ``norm_weights``: γ and β gradients 2s·(K // tp1)
    * ``kv``: K and V of the whole sequence for the local KV heads, s·b·kv·l·(q_k + q_v)
      (2s·b·kv·l·q with one head dim)
    * ``summa_x`` / ``summa_w``: the SUMMA panels' X [b·r, K] and W [K, N/tp1]
    * ``dispatch``: the routed copies one GPU sends in an expert-parallel all-to-all,
      s_d·b·r·k·λ·e (r its sequence rows, k = top_k, λ the load factor; bf16 tokens)
    * ``etp``: the routed tokens gathered over the expert-tensor-parallel group,
      s·b·r·k·λ·etp·e
    """
    d, s, m = ctx.dims, ELEMENT_BYTES, ctx.model
    b = sh.b.astype(float)
    if name in ("in", "out", "in_q", "out_q"):  # _q: quantised (tp_style dtensor, FP8)
        other_rows = tuple(a for a in spec.rows if a not in axes)
        feats = d[spec.k] if name.startswith("in") else d[spec.n]
        per = PRECISIONS[ctx.execution.precision].kept_bytes_per_element if (
            name.endswith("_q")) else s
        return per * b * local_size(d["l"], sh, other_rows) * feats
    if name == "stats":
        return 2 * s * b * local_size(d["l"], sh, spec.rows)
    if name == "stats_paper_bwd":
        return s * ((2 * d["e"]) // sh.tp1 + (2 * sh.b * d["l"]) // sh.tp2).astype(float)
    if name == "norm_weights":
        return 2 * s * local_size(d[spec.k], sh, spec.k_shard)
    if name in ("kv", "kv_rep", "dkv_hop"):
        return _kv_volume(name, spec, sh, ctx)
    if name in ("dispatch", "etp"):
        rows = local_size(d["l"], sh, spec.rows)
        if name == "dispatch":
            return moe.DISPATCH_BYTES * b * rows * m.top_k * ctx.execution.moe_load * d["e"]
        return s * b * moe.routed_rows(rows, sh, ctx) * d["e"]
    if name == "summa_x":
        return s * b * local_size(d["l"], sh, spec.rows) * d[spec.k]
    if name == "summa_w":
        return s * d[spec.k] * local_size(d[spec.n], sh, spec.n_shard)
    raise AssertionError(f"unknown volume {name}")
