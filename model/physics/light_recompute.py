"""DeepSeek-V3's light recompute: the RMSNorms and MLA's up-projections rerun in the backward.

DeepSeek-V3 technical report (arXiv 2412.19437v2) §3.2.3, "Recomputation of RMSNorm and MLA
Up-Projection": "We recompute all RMSNorm operations and MLA up-projections during
back-propagation, thereby eliminating the need to persistently store their output activations.
With a minor overhead, this strategy significantly reduces memory requirements for storing
activations." (``Execution.recompute_norm_up_proj``.)

In the op table an op keeps its *input* for its backward (:mod:`model.physics.ops`), so a
recomputed op's output disappears from the memory of the ops that read it:

* a norm's output is the input of the next linear (``attn/down`` or ``attn/qkv`` after the
  attention norm, ``attn/q_up`` / ``attn/kv_up`` after MLA's latent norm, ``mlp/fc1`` /
  ``shared/fc1`` after the MLP norm): those linears keep nothing (:data:`NORM_CONSUMERS`); the
  norm keeps its own input (the residual stream, or the down-projection's output), from which
  its output is rerun;
* the up-projections' outputs are the attention core's Q, K and V: the core keeps only its
  fp32 log-sum-exp, A = s·(H·r·q + b·kv·r·(q + v)) bytes fewer (:func:`qkv_bytes`, the Q, K, V
  part of :func:`model.physics.ops.flash_attention`'s kept bytes); K's rotary part comes from
  the down-projection's output, kept by the latent norm.

The MoE SwiGLU (``Execution.swiglu_fp8_cache``; report §3.3.3, "Low-Precision Storage and
Communication" (2): "we cache the inputs of the SwiGLU operator and recompute its output in the
backward pass. These activations are also stored in FP8 with our fine-grained quantization
method"): the routed experts' activation keeps its input in 1 byte instead of s
(:data:`FP8_BYTES`; the 1×128 scales, 4 bytes per 128 elements, add 1/32), and ``moe/fc2``
keeps nothing: the activation reruns in the backward.

The time: each recomputed op's forward runs again at the start of its backward — its FLOPs,
HBM bytes, quantisation bytes and launches added to the backward's (FLOPs counted as
``flop_recompute``: hardware, not model FLOPs), priced by the backward's roofline. Closed form
and test: tests/test_light_recompute.py. Under ``recompute: full`` both options do nothing
(every layer reruns its whole forward); with ``recompute_layers`` r, the r fully recomputed
layers of a stage count their norms', up-projections' and SwiGLU's forwards twice (about 2 %
of such a layer's time for DeepSeek-V3's shapes).
"""

from __future__ import annotations

import numpy as np

from model.physics.context import Ctx
from model.physics.ops import OpCounts
from model.physics.optable import Kind, OpSpec

# linears whose input is a norm's output (model.physics.strategies, model.physics.moe)
NORM_CONSUMERS = frozenset({"attn/qkv", "attn/down", "attn/q", "attn/q_up", "attn/kv_up",
                            "mlp/fc1", "shared/fc1"})
UP_PROJECTIONS = frozenset({"attn/q_up", "attn/kv_up"})  # MLA's (model.physics.moe.mla_rows)
# an op whose whole forward reruns: every norm of a block, and MLA's up-projections
_BLOCK_NORMS = frozenset({"attn/norm", "mlp/norm", "attn/latent_norm"})
FP8_BYTES = 1.0 + 4.0 / 128.0  # an FP8 element with its fp32 scale per 1×128 tile


def rerun_forward(c: OpCounts) -> OpCounts:
    """The op's counts with its forward added to its backward (recomputed there)."""
    c.flop_mat_bwd = c.flop_mat_bwd + c.flop_mat_fwd
    c.flop_vec_bwd = c.flop_vec_bwd + c.flop_vec_fwd
    c.flop_recompute = c.flop_recompute + c.flop_mat_fwd + c.flop_vec_fwd
    c.bytes_bwd = c.bytes_bwd + c.bytes_fwd
    c.extra_bytes_bwd = c.extra_bytes_bwd + c.extra_bytes_fwd
    c.launches_bwd = c.launches_bwd + c.launches_fwd
    c.exp_bwd = c.exp_bwd + c.exp_fwd
    return c


def qkv_bytes(b, heads, kv_heads, rows, q: float, v: float, s: float):
    """Bytes of the Q, K and V a flash-attention core keeps for its backward (b samples of r
    rows, ``heads`` query heads and ``kv_heads`` key/value heads, head dimensions q for queries
    and keys and v for values, s bytes an element): s·(b·heads·r·q + b·kv·r·(q + v))."""
    return s * (b * heads * rows * q + b * kv_heads * rows * (q + v))


def light_recompute(spec: OpSpec, c: OpCounts, sh, ctx: Ctx, s: float) -> OpCounts:
    """``c`` (one op's counts, before its layer share) under the light recompute of the module
    docstring when the execution asks for it, else unchanged. ``sh``: the configurations'
    shards (``sh.b``, ``sh.size(axes)``); s: bytes of an activation element."""
    if ctx.execution.recompute == "full":  # every layer reruns its whole forward already
        return c
    if ctx.execution.swiglu_fp8_cache and spec.routed:
        if spec.name == "moe/act":
            c = rerun_forward(c)
            c.act_bytes = c.act_bytes * (FP8_BYTES / s)
        elif spec.name == "moe/fc2":
            c.act_bytes = 0.0 * c.act_bytes
    if not ctx.execution.recompute_norm_up_proj:
        return c
    mla = ctx.model.mla
    if spec.name in NORM_CONSUMERS and (mla or spec.name not in UP_PROJECTIONS):
        c.act_bytes = 0.0 * c.act_bytes
    if (spec.kind == Kind.NORM and spec.name in _BLOCK_NORMS) or spec.name in UP_PROJECTIONS:
        c = rerun_forward(c)
    if spec.kind == Kind.ATTENTION and mla:
        m = ctx.model
        shards = sh.size(spec.heads_shard)
        heads = np.asarray(m.heads // shards, dtype=float)
        kv = np.maximum(np.asarray(m.kv_heads // shards, dtype=float), 1.0)  # as block.py
        rows = np.asarray(ctx.dims["l"] // sh.size(spec.rows), dtype=float)
        c.act_bytes = c.act_bytes - qkv_bytes(sh.b.astype(float), heads, kv, rows,
                                              float(m.qk_head_dim), float(m.value_head_dim), s)
    return c
