"""The one generic code path that turns a strategy's op table into per-op counts and times.

For every :class:`~model.physics.strategies.OpSpec` it derives the local shapes from the sharding
axes, calls the op's formula in :mod:`model.physics.ops`, sizes its collectives (named volumes,
defined once in :func:`comm_volume_bytes`), and applies the roofline of docs/model.md §4:

* t_comp = overhead + F_mat / (η·P_mat) + F_vec / (η·P_vec);  t_mem = M / B_hbm
* serial op: t = max(t_comp, t_mem) + Σ_i T_comm(V_i, n_i, τ_i)            (§4, §5.2)
* panelled op (SUMMA, nb panels): t = max(t_comp, t_mem) + t_piece
  + max(nb·t_piece − max(t_comp, t_mem), 0), t_piece = Σ_i T_comm(V_i / nb, …)   (§5.3)

Everything is vectorized over the parallel configurations in a :class:`Shards`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from model.physics import attention_kernels, elementwise, gemm, lora, moe, ops, ring_attention
from model.physics.collectives import Collective, overlapped_s, summa_comm_time_s
from model.physics.context import Ctx
from model.physics.kernels import training as kernel_training
from model.physics.light_recompute import light_recompute
from model.physics.op_sac import op_sac
from model.physics.optable import CommSpec, Kind, OpSpec, Shards
from model.physics.roofline import kernel_times, per_candidate
from model.physics.volumes import ELEMENT_BYTES, MASK_BYTES, comm_volume_bytes, local_size
from model.specs.params import attention_keys
from model.specs.precision import PRECISIONS


def _linear(spec: OpSpec, sh: Shards, ctx: Ctx, b, rows, k) -> ops.OpCounts:
    """A matmul: its counts, then :func:`_gemm` (waves, kept input, quantisation)."""
    n = local_size(ctx.dims[spec.n], sh, spec.n_shard)
    kept_rows = rows if spec.act_rows is None else local_size(ctx.dims["l"], sh, spec.act_rows)
    return _gemm(ops.linear(b, rows, k, n, ELEMENT_BYTES), ctx, b, rows, k, k, n, kept_rows)


def _summa_linear(spec: OpSpec, sh: Shards, ctx: Ctx, b, rows, k) -> ops.OpCounts:
    """A SUMMA matmul (``k`` = its local k_cols = K/tp1): its counts, then :func:`_gemm` on its
    local GEMMs — forward Y [b·r, n], backward dX [b·r, K/tp1] and dW [K/tp2, n] — so that
    with tp1 = tp2 = nb = 1 it is priced exactly as the 1D matmul of the same GEMM."""
    d = ctx.dims
    k_rows = local_size(d[spec.k], sh, spec.rows)
    n = local_size(d[spec.n], sh, spec.n_shard)
    counts = ops.linear_summa(b, rows, float(d[spec.k]), k_rows, k, n, sh.nb.astype(float),
                              ELEMENT_BYTES, ctx.mode.summa_matmul_2k_flops)
    return _gemm(counts, ctx, b, rows, k, k_rows, n, rows)


def _gemm(counts: ops.OpCounts, ctx: Ctx, b, rows, k_dx, k_dw, n, kept_rows) -> ops.OpCounts:
    """What every matmul shares, whatever its strategy: its shape efficiency
    (:func:`_shape_efficiency`: wave quantisation and depth of its forward Y [b·r, n] and
    backward dX [b·r, k_dx] and dW [k_dw, n]), its input kept for the backward
    (b·kept_rows·k_dx elements at the precision's kept bytes) and, under an FP8/FP4 recipe,
    its quantisation kernels (of X and dY)."""
    precision = PRECISIONS[ctx.execution.precision]
    if ctx.gemm_kernel is not None:  # the measured GEMM kernel at each GEMM's own shape
        counts.wave_fwd, counts.wave_bwd = kernel_training.linear_efficiencies(
            ctx.gemm_kernel, b * rows, k_dx, n, k_dw)
    else:
        counts.wave_fwd, counts.wave_bwd = _shape_efficiency(b * rows, k_dx, n, ctx,
                                                             precision.peak_field, k_dw)
    counts.act_bytes = precision.kept_bytes_per_element * b * kept_rows * k_dx
    if precision.quantised:
        counts = ops.quantisation(counts, b, rows, k_dx, n,
                                  precision.quantise_bytes_per_element)
    return counts


def _shape_efficiency(m, k, n, ctx: Ctx, peak_field: str, k_dw=None):
    """(forward, backward) shape efficiency of a matmul X[m, k]·W[k, n] (model.physics.gemm):
    forward Y [m, n] with reduction k; backward dX [m, k] (reduction n) and dW [k_dw, n]
    (reduction m; ``k_dw`` = k but for SUMMA, whose local dW has K/tp2 rows), their harmonic
    mean — each GEMM's wave quantisation times its depth efficiency (none in the paper mode:
    the paper's code prices waves only)."""
    k_dw = k if k_dw is None else k_dw
    fwd = dx = dw = 1.0  # the paper mode: k₀ = 0, every depth efficiency k/k is exactly 1
    if not ctx.mode.is_paper:
        k0 = gemm.depth_overhead(peak_field)
        fwd, dx, dw = (gemm.depth_efficiency(r, k0) for r in (k, n, m))
    sysm = ctx.system
    if sysm.sm_count > 0:
        tile, units = sysm.gemm_tile, sysm.sm_count
        fwd = fwd * ops.wave_efficiency(m, n, tile, units)
        dx = dx * ops.wave_efficiency(m, k, tile, units)
        dw = dw * ops.wave_efficiency(k_dw, n, tile, units)
    return fwd, gemm.backward_efficiency(dx, dw)


def _router(ctx: Ctx, b, rows, k) -> ops.OpCounts:
    """The router (:func:`model.physics.moe.router`) with its logits GEMM [b·r, e]·[e, E]
    priced by its shape like any BF16 matmul (:func:`_shape_efficiency`; with the kernel layer,
    the measured BF16 GEMM kernel's forward, dX and dW at their shapes,
    :func:`model.physics.kernels.training.linear_efficiencies`): a small hidden size e makes
    it shallow, few experts E a narrow output; its score, top-k and aux-loss kernels on the
    stack's path (``moe_router_fusion``)."""
    experts = float(ctx.dims["E"])
    counts = moe.router(b, rows, k, experts, ELEMENT_BYTES, ctx.execution.moe_router_fusion)
    router_gemm = None if ctx.gemm_kernel is None else kernel_training.gemm_kernel_of(
        ctx.system, "bf16")
    if router_gemm is not None:  # the measured BF16 GEMM kernel at the three GEMMs' shapes
        counts.wave_fwd, counts.wave_bwd = kernel_training.linear_efficiencies(
            router_gemm, b * rows, k, experts, k)
    else:
        counts.wave_fwd, counts.wave_bwd = _shape_efficiency(b * rows, k, experts, ctx,
                                                             "matrix_tflops_fp16")
    return counts


def _attention(spec: OpSpec, sh: Shards, ctx: Ctx, b, rows, k) -> ops.OpCounts:
    """Fused (or unfused) attention of the local heads; causal flash attention skips the
    masked half."""
    d, m, ex = ctx.dims, ctx.model, ctx.execution
    heads = local_size(m.heads, sh, spec.heads_shard)
    kv = np.maximum(local_size(m.kv_heads, sh, spec.heads_shard), 1.0)  # replicated if tp1 > k
    kernel = attention_kernels.kernel_used(ex.attention_kernel, m.attention_sinks)
    fused = ex.flash_attention and kernel != "math"
    counts = ops.flash_attention(b, heads, kv, rows, float(d["l"]), float(m.qk_head_dim),
                                 ELEMENT_BYTES, m.dropout,
                                 # a fused kernel never materialises the scores, whatever the
                                 # recompute: the kernel is its own field (issue 32)
                                 keep_scores=ex.recompute == "none" and not fused,
                                 fused=fused,
                                 keep_output=ctx.mode.attention_output_kept,
                                 v=float(m.value_head_dim))
    if m.position_embedding == "alibi":  # one bias add per score, forward and backward
        counts = ops.alibi_bias(counts, b * heads * rows * float(d["l"]))
    # a benchmarked kernel's rate counts the causal FLOPs as half (its table's convention,
    # model.physics.attention_kernels), unfused math attention included
    tabled = ctx.attention_passes is not None
    skips = kernel == "auto" or attention_kernels.supports(kernel, "sliding_window")
    if ctx.causal_attention and (ex.flash_attention or tabled):
        counts = ops.skip_masked_half(counts)
        if m.sliding_window and skips:  # window layers skip the blocks outside their window
            counts = ops.score_share(counts, attention_keys(m, d["l"]) / (d["l"] / 2))
    if ctx.attention_kernel is not None:  # the measured kernel at the local shape
        seq = float(d["l"])
        keys = (attention_keys(m, seq) if skips else seq / 2) if ctx.causal_attention else seq
        counts.wave_fwd, counts.wave_bwd = kernel_training.attention_efficiencies(
            ctx.attention_kernel, b, rows, heads, keys,
            (float(m.qk_head_dim) + float(m.value_head_dim)) / 2.0)
    return counts


def _embedding(spec: OpSpec, sh: Shards, ctx: Ctx, b, rows, k) -> ops.OpCounts:
    """The token-embedding lookup, plus a learned position table where the model has one."""
    counts = ops.embedding(b, rows, k, local_size(ctx.dims[spec.n], sh, spec.n_shard),
                           ELEMENT_BYTES)
    if ctx.model.position_embedding == "learned":
        counts = ops.learned_positions(counts, b, rows, k, float(ctx.dims["l"]), ELEMENT_BYTES)
    return counts


_COUNTERS = {
    Kind.LINEAR: _linear,
    Kind.SUMMA_LINEAR: _summa_linear,
    Kind.BIAS: lambda spec, sh, ctx, b, rows, k: ops.bias(b, rows, k, ELEMENT_BYTES),
    Kind.ACT: lambda spec, sh, ctx, b, rows, k: (
        ops.swiglu if ctx.model.mlp == "swiglu" else ops.gelu)(b * rows * k, ELEMENT_BYTES),
    Kind.DROPOUT: lambda spec, sh, ctx, b, rows, k: ops.dropout(b * rows * k, ELEMENT_BYTES,
                                                               MASK_BYTES),
    Kind.NORM: lambda spec, sh, ctx, b, rows, k: ops.layer_norm(b, rows, k, ELEMENT_BYTES),
    Kind.ATTENTION: _attention,
    Kind.EMBEDDING: lambda spec, sh, ctx, b, rows, k: _embedding(spec, sh, ctx, b, rows, k),
    Kind.LOSS: lambda spec, sh, ctx, b, rows, k: ops.cross_entropy(b, rows, k, ELEMENT_BYTES),
    Kind.ROUTER: lambda spec, sh, ctx, b, rows, k: _router(ctx, b, rows, k),
    # the sender's side, on its own T·k routed copies (the busiest GPU's load shows in the
    # all-to-all it receives and in its expert GEMMs)
    Kind.PERMUTE: lambda spec, sh, ctx, b, rows, k: moe.token_permutation(sh, ctx, b, rows, k),
    Kind.UNPERMUTE: lambda spec, sh, ctx, b, rows, k: moe.token_permutation(
        sh, ctx, b, rows, k, unpermute=True),
    Kind.EXPERT_LINEAR: moe.expert_linear,
}
_ROUTED = {Kind.BIAS: moe.expert_bias}  # routed ops whose counts differ from the dense op's
_SCALED = tuple(f for f in ("flop_mat_fwd", "flop_vec_fwd", "flop_mat_bwd", "flop_vec_bwd",
                            "flop_recompute", "bytes_fwd", "bytes_bwd", "act_bytes",
                            "weight_bytes", "extra_bytes_fwd", "extra_bytes_bwd", "exp_fwd",
                            "exp_bwd"))




def _elementwise(spec: OpSpec, sh: Shards, ctx: Ctx, counts: ops.OpCounts, rows, k
                 ) -> ops.OpCounts:
    """The extra HBM passes of an eager or compiled stack's element-wise kernels on the op
    that carries them (:mod:`model.physics.elementwise`)."""
    m, mode, b = ctx.model, ctx.execution.elementwise, sh.b.astype(float)
    if spec.kind == Kind.NORM and spec.name in elementwise.BLOCK_NORMS:
        kernels = ("residual_add", "attention_output") + (
            ("rmsnorm",) if m.norm == "rmsnorm" else ())
        return elementwise.add_passes(counts, mode, kernels, b * rows * k, share=0.5)
    if spec.kind == Kind.LOSS:  # eager PyTorch's FP32 cross-entropy over the logits
        return elementwise.add_passes(counts, mode, ("loss",), b * rows * k)
    if spec.kind == Kind.ACT and m.mlp == "swiglu":
        return elementwise.add_passes(counts, mode, ("swiglu",), b * rows * k)
    if spec.kind == Kind.ATTENTION and m.position_embedding == "rope":
        heads = local_size(m.heads, sh, spec.heads_shard)
        kv = np.maximum(local_size(m.kv_heads, sh, spec.heads_shard), 1.0)
        return elementwise.add_passes(counts, mode, ("rope",),
                                      b * rows * (heads + kv) * m.qk_head_dim)
    return counts


def op_counts(spec: OpSpec, sh: Shards, ctx: Ctx) -> ops.OpCounts:
    """FLOPs and bytes of one op for every configuration in ``sh``: the op kind's formula
    (:data:`_COUNTERS`, :mod:`model.physics.ops`) on its local shapes — b the microbatch, rows
    the local sequence rows, k the local input features."""
    rows = local_size(ctx.dims["l"], sh, spec.rows)
    k = local_size(ctx.dims[spec.k], sh, spec.k_shard)
    if spec.routed:
        rows = moe.routed_rows(rows, sh, ctx)
    counter = (_ROUTED.get(spec.kind) if spec.routed else None) or _COUNTERS[spec.kind]
    counts = counter(spec, sh, ctx, sh.b.astype(float), rows, k)
    if ctx.execution.elementwise in ("eager", "compile"):
        counts = _elementwise(spec, sh, ctx, counts, rows, k)
    if spec.kind == Kind.ATTENTION and ctx.execution.context_attention == "pytorch":
        counts = ring_attention.add_merges(counts, spec, sh, ctx, rows)
    if spec.tied:  # its weights are another op's (counted there)
        counts.weight_bytes = 0.0
    if spec.routed and ctx.execution.moe_load != 1.0:  # beyond the mean load: not model FLOPs
        work = counts.flop_mat_fwd + counts.flop_vec_fwd + counts.flop_mat_bwd + (
            counts.flop_vec_bwd) - counts.flop_recompute
        counts.flop_padding = work * (1.0 - 1.0 / ctx.execution.moe_load)
    counts = light_recompute(spec, counts, sh, ctx, ELEMENT_BYTES)
    ex = ctx.execution
    if lora.frozen(ex.trainable) and spec.n:  # LoRA / QLoRA (model.physics.lora)
        n = local_size(ctx.dims[spec.n], sh, spec.n_shard)
        counts = lora.frozen_counts(counts, spec, k, n, ELEMENT_BYTES, ex.trainable,
                                    ex.lora_rank, ex.lora_targets)
    counts = op_sac(spec, counts, sh, ctx, ELEMENT_BYTES)
    share = ctx.share(spec)
    if share != 1.0:  # a block is the layers' mix: the op runs in a share of them
        for name in _SCALED + ("flop_padding",):
            setattr(counts, name, getattr(counts, name) * share)
    return counts


@dataclass
class Phase:
    """Times (s), FLOPs and bytes of one op in one direction (forward or backward)."""

    t: np.ndarray
    t_comp: np.ndarray
    t_mem_exposed: np.ndarray
    t_comm: np.ndarray
    comm_bytes: np.ndarray


# Collectives with the same time formula: a ring reduce-scatter costs what an all-gather does,
# and a reduce what a broadcast does (docs/model.md §5.1); ops reuse such times instead of
# recomputing them.
_SAME_TIME = {Collective.REDUCESCATTER: Collective.ALLGATHER,
              Collective.REDUCE: Collective.BROADCAST}


def _comm_key(spec: OpSpec, cs: CommSpec) -> tuple:
    """Everything a collective's volume and time depend on besides the shards and the context:
    its time formula, named volume and axes, and the op fields :func:`comm_volume_bytes`, its
    panels (:func:`_panels`) and its share of the layers read. Collectives with equal keys in
    one evaluation (an op's forward and backward, ops with the same features and sharding)
    have the same volume and time, priced once."""
    return (_SAME_TIME.get(cs.collective, cs.collective), cs.volume, cs.axes, spec.rows,
            spec.k, spec.n, spec.k_shard, spec.n_shard, spec.heads_shard, spec.panels,
            spec.share)


_ZEROS = "zeros"  # the memo's key of the zeros of its shards' length (no _comm_key tuple)


def _panels(spec: OpSpec, sh: Shards) -> np.ndarray | None:
    """How many pieces the op's collectives are split into (SUMMA panels, ring steps), or None."""
    if spec.panels is None:
        return None
    return (sh.nb if spec.panels == "nb" else sh.size((spec.panels,))).astype(float)


def _exposed_comm(spec: OpSpec, comm: np.ndarray, compute: np.ndarray,
                  panels: np.ndarray | None, ctx: Ctx, ring: tuple | None = None
                  ) -> np.ndarray:
    """The op's collective time left after overlap: SUMMA/ring pieces pipelined with the
    compute, TP collectives hidden behind their matmul (with the overlap slowdown), PyTorch's
    context-parallel ring (``ring``: way, times by volume name, group size), or all."""
    if ring is not None:
        return ring_attention.exposed_s(ring[0], ring[1], compute, ring[2])
    if panels is not None:
        return summa_comm_time_s(comm, panels, compute)
    if ctx.execution.tp_overlap and spec.kind == Kind.LINEAR:
        return overlapped_s(comm, compute, ctx.system.overlap_slowdown)
    return comm


def _phase(spec: OpSpec, c: ops.OpCounts, way: str, sh: Shards, ctx: Ctx, memo: dict) -> Phase:
    """Times of one op in one direction: roofline max(FLOP time, HBM time) of its kernel, plus
    its separate memory-bound kernels (extra bytes / HBM bandwidth), plus its collectives.
    ``memo`` also keeps the zeros of ``sh``'s length (read only) for every op of ``sh``."""
    zero = memo.get(_ZEROS)
    if zero is None:  # counts may be scalars (e.g. no FLOPs); times are arrays
        zero = memo[_ZEROS] = np.zeros(len(sh.tp1))
    t_comp, t_mem, t_extra, compute = kernel_times(spec, c, way, zero, ctx)
    comms = spec.fwd if way == "fwd" else spec.bwd
    panels = _panels(spec, sh)
    comm = volume = zero
    share = ctx.share(spec)
    by_name = {}
    for cs in comms:
        key = _comm_key(spec, cs)
        if key not in memo:
            v = comm_volume_bytes(cs.volume, spec, cs.axes, sh, ctx)
            piece = v if panels is None else v / panels
            t = ctx.pricing.collective(cs.collective, piece, sh.size(cs.axes),
                                       sh.tau(cs.axes), fanout=float(ctx.model.top_k),
                                       max_domains=float(ctx.execution.ep_max_domains))
            memo[key] = (v, t) if share == 1.0 else (share * v, share * t)
        v, t = memo[key]
        # the first collective's arrays as they are (no zeros added), the next ones summed
        comm = per_candidate(t, zero) if comm is zero else comm + t
        volume = per_candidate(v, zero) if volume is zero else volume + v
        by_name[cs.volume] = t
    ring = None
    if spec.kind == Kind.ATTENTION and "kv_rep" in by_name:  # PyTorch's context_parallel
        ring = (way, by_name, sh.size(spec.rows).astype(float))
    comm = _exposed_comm(spec, comm, compute, panels, ctx, ring)
    exposed = np.maximum(t_mem - t_comp, 0.0)
    if not (isinstance(t_extra, float) and t_extra == 0.0):  # no array pass adding 0.0
        exposed = exposed + t_extra
    return Phase(compute if comm is zero else compute + comm, t_comp, exposed, comm, volume)


@dataclass
class OpResult:
    """One op, evaluated: its counts and its forward and backward phases."""

    spec: OpSpec
    counts: ops.OpCounts
    fwd: Phase
    bwd: Phase


def take_counts(c: ops.OpCounts, idx: np.ndarray) -> ops.OpCounts:
    """The counts of rows ``idx`` (fields that are scalars stay scalars)."""
    return ops.OpCounts(*(v[idx] if isinstance(v, np.ndarray) and v.ndim else v
                          for v in (getattr(c, name) for name in _COUNT_FIELDS)))


_COUNT_FIELDS = tuple(f.name for f in fields(ops.OpCounts))


def evaluate_op(spec: OpSpec, sh: Shards, ctx: Ctx, counts: ops.OpCounts | None = None,
                memo: dict | None = None) -> OpResult:
    """Counts and times of one op for every configuration in ``sh``.

    ``counts`` may be given when already known: they do not depend on the placement. ``memo``
    keeps collective volumes and times (:func:`_comm_key`) for other ops of the same ``sh``
    and ``ctx``; by default the op's forward and backward share them.
    """
    c = op_counts(spec, sh, ctx) if counts is None else counts
    memo = {} if memo is None else memo
    fwd = _phase(spec, c, "fwd", sh, ctx, memo)
    bwd = _phase(spec, c, "bwd", sh, ctx, memo)
    return OpResult(spec, c, fwd, bwd)
