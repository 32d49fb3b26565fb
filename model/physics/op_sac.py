"""TorchTitan's per-op selective activation checkpointing ("op" SAC): ``recompute: op-sac``.

TorchTitan wraps every transformer block in a checkpoint whose policy saves the outputs of the
ops in its save list — matmuls, the fused attention (SDPA flash/efficient/cuDNN: output and
log-sum-exp), reduce-scatters, ``max`` — **except every second matmul** of the block, counted
in forward order; every other op (norms, RoPE, SiLU, the gating product, residual adds) reruns
in the backward: ``_apply_op_sac``'s ``_custom_policy`` in ``torchtitan/distributed/
activation_checkpoint.py`` at pytorch/torchtitan@cfb93265153094f99736547f26b5346410181102
("Saves output of all compute ops, except every second mm"; ``meta[mm_count_key] % 2 == 0``
→ ``PREFER_RECOMPUTE``). A checkpointed block always keeps its input.

In a Llama block the matmuls run wq (1), wk (2), wv (3), wo (4), w1 (5), w3 (6), w2 (7): wq,
wv, w1, w2 are saved, wk, wo, w3 recomputed. On the estimator's ops (fused QKV and fc1 = [w1,
w3]) that is, per block and microbatch of b·r tokens, s bytes an element:

* kept: the block input x (``attn/norm``, s·e), Q and V of the attention core and its fp32
  log-sum-exp (``attn/flash`` without K), the attention output O (``attn/proj``'s input),
  w1's output (half of ``mlp/act``'s input), w2's output (s·e, ``mlp/fc2``: saved though no
  backward reads it); nothing of the norms' outputs, of h = x + O·wo nor of the gated product:
  s·b·r·(2e + H·d_q + kv·d_v + H·d_v + f) + 4·b·H·r bytes;
* rerun in the backward: the forward of both norms and of the SwiGLU, wk's share of the QKV
  GEMM (kv·d_q / (H·d_q + kv·(d_q + d_v))), all of wo, and w3's half of fc1.

The policy is TorchTitan's for its Llama-style blocks: a SwiGLU MLP without MoE or MLA
(other blocks are refused where the execution is checked:
:func:`model.physics.op_sac_scope.check_model`). Not modelled:
with tensor parallelism, the reduce-scatter outputs it also saves (s·b·r/tp·e each after wo
and w2). Closed-form test: tests/test_op_sac.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from model.physics.light_recompute import rerun_forward
from model.physics.op_sac_scope import MODE
from model.physics.ops import OpCounts
from model.physics.optable import Kind, OpSpec

if TYPE_CHECKING:
    from model.physics.context import Ctx

_RERUN = frozenset({"attn/norm", "mlp/norm", "mlp/act", "attn/proj"})
_NOTHING_KEPT = frozenset({"attn/qkv", "mlp/norm", "mlp/fc1", "mlp/fc2"})
_FWD_FIELDS = (("flop_mat_fwd", "flop_mat_bwd"), ("flop_vec_fwd", "flop_vec_bwd"),
               ("bytes_fwd", "bytes_bwd"), ("extra_bytes_fwd", "extra_bytes_bwd"),
               ("launches_fwd", "launches_bwd"), ("exp_fwd", "exp_bwd"))


def rerun_share(c: OpCounts, share: float) -> OpCounts:
    """``c`` with ``share`` of its forward added to its backward (that part recomputed)."""
    for fwd, bwd in _FWD_FIELDS:
        setattr(c, bwd, getattr(c, bwd) + share * getattr(c, fwd))
    c.flop_recompute = c.flop_recompute + share * (c.flop_mat_fwd + c.flop_vec_fwd)
    return c


def op_sac(spec: OpSpec, c: OpCounts, sh, ctx: Ctx, s: float) -> OpCounts:
    """One op's counts (before its layer share) under op-SAC when the execution asks for it
    (see the module docstring), else unchanged; ``sh``: the configurations' shards."""
    if ctx.execution.recompute != MODE or spec.routed:
        return c
    m = ctx.model
    if spec.name in _NOTHING_KEPT:
        c.act_bytes = 0.0 * c.act_bytes
    if spec.name == "mlp/fc2":  # w2's output, saved by the policy
        rows = ctx.dims["l"] // sh.size(spec.rows)
        c.act_bytes = c.act_bytes + s * sh.b.astype(float) * rows * float(m.hidden)
    if spec.name == "mlp/act":  # keeps w1's output only; w3's is recomputed
        c.act_bytes = 0.5 * c.act_bytes
    if spec.name in _RERUN:
        c = rerun_forward(c)
    if spec.name == "attn/qkv":  # wk, the second matmul
        q, v = float(m.qk_head_dim), float(m.value_head_dim)
        c = rerun_share(c, m.kv_heads * q / (m.heads * q + m.kv_heads * (q + v)))
    if spec.name == "mlp/fc1":  # w3, the sixth
        c = rerun_share(c, 0.5)
    if spec.kind == Kind.ATTENTION:  # K is recomputed (from wk), Q and V saved
        shards = sh.size(spec.heads_shard)
        kv = np.maximum(np.asarray(m.kv_heads // shards, dtype=float), 1.0)  # as block.py
        rows = np.asarray(ctx.dims["l"] // sh.size(spec.rows), dtype=float)
        c.act_bytes = c.act_bytes - s * sh.b.astype(float) * kv * rows * float(m.qk_head_dim)
    return c
