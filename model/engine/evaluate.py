"""Evaluate candidates at once: memory per shape, then times per placed candidate.

Memory depends only on the shape (tp1, tp2, pp, dp, microbatch, nb), not on where each dimension
sits in the NVLink domain, so :func:`shape_memory` runs before placements are enumerated and the
search expands only the shapes that fit. One block's cost depends on (microbatch, tp1, tp2, nb,
nv_tp1, nv_tp2): it is evaluated once per distinct key and gathered back to the candidates
(:func:`candidate_times`). No Python loop touches candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from model.engine.distinct import SHAPE_KEY, distinct_blocks, distinct_rows
from model.engine.rules import stage_layout
from model.engine.space import EXPERT_PLACEMENT, PLACEMENT, Space
from model.physics.block import OpResult, evaluate_op, op_counts, take_counts
from model.physics.context import Ctx
from model.physics.fsdp import fsdp_memory
from model.physics.lora import gradient_factor, trainable_share
from model.physics.memory import (
    StageMemory,
    StageWeights,
    block_activation_bytes,
    fewest_recomputed_layers,
    fits_in_memory,
    offload_memory,
    optimizer_factor,
)
from model.physics.ops import OpCounts
from model.physics.optable import ALLTOALL_OPS, OpSpec, Shards
from model.physics.peak_memory import (
    eager_loss,
    fsdp_pipeline_grad_group,
    loss_peak_extra_bytes,
    root_gathered,
)
from model.physics.pipeline import edge_weight_bytes, iteration_time
from model.physics.stage import Stage
from model.physics.strategies import Strategy
from model.physics.totals import Totals, sum_ops, zero_totals
from model.specs.hardware import System
from model.specs.transformer import Transformer


def shards_of(cols: dict[str, np.ndarray], idx: np.ndarray | slice = slice(None)) -> Shards:
    """The block-relevant columns of rows ``idx`` (placement 1 where the columns have none)."""
    ones = np.ones_like(cols["tp1"])
    return Shards(b=cols["microbatch"][idx], tp1=cols["tp1"][idx], tp2=cols["tp2"][idx],
                  nb=cols["nb"][idx], nv_tp1=cols.get("nv_tp1", ones)[idx],
                  nv_tp2=cols.get("nv_tp2", ones)[idx], ep=cols.get("ep", ones)[idx],
                  etp=cols.get("etp", ones)[idx], nv_ep=cols.get("nv_ep", ones)[idx],
                  nv_etp=cols.get("nv_etp", ones)[idx])


def evaluate_ops(ops: tuple[OpSpec, ...], sh: Shards, ctx: Ctx,
                 counts: list[OpCounts] | None = None,
                 twins: tuple[int, ...] | None = None) -> list[OpResult]:
    """:func:`~model.physics.block.evaluate_op` of each op; collectives with the same volume and
    time in several ops are priced once (one memo for the list). With ``twins``
    (:attr:`~model.physics.strategies.Strategy.twins` of these ops), an op equal to an earlier
    one but for its name, with the same counts, takes that op's times."""
    memo: dict = {}
    if counts is None:
        return [evaluate_op(spec, sh, ctx, memo=memo) for spec in ops]
    out: list[OpResult] = []
    for i, (spec, c) in enumerate(zip(ops, counts)):
        twin = out[twins[i]] if twins is not None and twins[i] < i else None
        if twin is not None and twin.counts is c:
            out.append(OpResult(spec, c, twin.fwd, twin.bwd))
        else:
            out.append(evaluate_op(spec, sh, ctx, c, memo))
    return out


@dataclass
class ShapeCounts:
    """Per-op counts of each distinct shape (counts do not depend on the placement)."""

    inverse: np.ndarray  # per row of the shapes: its distinct shape
    block: list[OpCounts]
    pre: list[OpCounts]
    post: list[OpCounts]

    @classmethod
    def of(cls, strategy: Strategy, cols: dict[str, np.ndarray], ctx: Ctx) -> ShapeCounts:
        """The counts of every op at each distinct shape of ``cols`` (an op equal to an earlier
        one but for its name shares that op's counts: :attr:`Strategy.twins`)."""
        first, inverse = distinct_rows(cols, SHAPE_KEY)
        sh = shards_of(cols, first)
        tables = []
        for which in ("block", "pre", "post"):
            counts: list[OpCounts] = []
            for spec, twin in zip(getattr(strategy, which), strategy.twins[which]):
                counts.append(counts[twin] if twin < len(counts) else op_counts(spec, sh, ctx))
            tables.append(counts)
        return cls(inverse, *tables)

    def take(self, which: str, distinct: np.ndarray) -> list[OpCounts]:
        """The counts of ``which`` ops (block, pre, post) for the given distinct shapes (counts
        shared by several ops taken once, and still shared)."""
        taken: dict[int, OpCounts] = {}
        for c in getattr(self, which):
            if id(c) not in taken:
                taken[id(c)] = take_counts(c, distinct)
        return [taken[id(c)] for c in getattr(self, which)]


def _weights_acts(counts: list[OpCounts], inverse: np.ndarray,
                  specs: tuple[OpSpec, ...] = ()) -> tuple[np.ndarray, np.ndarray, Any]:
    """Σ weight bytes (of ops not routed), Σ activation bytes and Σ routed experts' weight
    bytes of ops, per row (``specs``: the ops' rows, to tell the experts' weights apart; 0.0
    for the experts when no op is routed). Summed per distinct shape, then gathered to rows:
    the same sums, in the same order."""
    w = a = e = np.zeros(int(inverse.max(initial=-1)) + 1)
    routed = [s.routed for s in specs] or [False] * len(counts)
    for c, expert in zip(counts, routed):
        if expert:
            e = e + c.weight_bytes
        else:
            w = w + c.weight_bytes
        a = a + c.act_bytes
    return w[inverse], a[inverse], e[inverse] if any(routed) else 0.0


def _per_row(x, inverse: np.ndarray):
    """An array per distinct row gathered to rows, or one number for all rows."""
    return np.asarray(x)[inverse] if np.ndim(x) else x


HEAD = "head/logits"
LOSS = "head/loss"


def _untied(model: Transformer, strategy: Strategy, post_weight, head_weight, pp: np.ndarray):
    """With tied embeddings and a single stage, the LM head reuses the embedding matrix: its
    weights are not held twice (the final norm's still are)."""
    if not model.tied_embeddings or not strategy.post:
        return post_weight
    return post_weight - np.where(pp == 1, head_weight, 0.0)


def expert_dp_group(cols: dict[str, np.ndarray]) -> np.ndarray:
    """The expert-data-parallel group: a stage's tp1·tp2·dp GPUs regrouped as etp × ep × edp
    (Megatron-Core MoE parallel folding), edp = tp1·tp2·dp / (ep·etp)."""
    ones = np.ones_like(cols["dp"])
    return cols["tp1"] * cols["tp2"] * cols["dp"] // (cols.get("ep", ones) * cols.get("etp", ones))


def _dp_group(strategy: Strategy, cols: dict[str, np.ndarray], prefix: str = "") -> np.ndarray:
    """Product over the strategy's replica axes (dp, and tp2 for context) of ``prefix + axis``."""
    out = np.ones_like(cols["dp"])
    for axis in strategy.dp_axes:
        out = out * cols[prefix + axis]
    return out


def _loss_peak(strategy: Strategy, counts: ShapeCounts, ex) -> Any:
    """Bytes the eager FP32 loss adds at its peak, per row (:mod:`model.physics.peak_memory`)."""
    names = [s.name for s in strategy.post]
    if LOSS not in names or not eager_loss(ex):
        return 0.0
    kept = counts.post[names.index(LOSS)].act_bytes
    return _per_row(loss_peak_extra_bytes(ex, kept), counts.inverse)


def shape_memory(model: Transformer, strategy: Strategy, cols: dict[str, np.ndarray],
                 global_batch: int, counts: ShapeCounts, ctx: Ctx,
                 usable_bytes: float | None = None) -> dict[str, np.ndarray]:
    """Memory per GPU (bytes) and its breakdown for every shape in ``cols`` (docs/model.md §9):
    the ops' kept bytes summed per block and end, then :mod:`model.physics.memory`.
    ``recompute_layers`` per shape: the execution's, or with ``"auto"`` the fewest that fit in
    ``usable_bytes``."""
    inv = counts.inverse
    block_w, acts, expert_w = _weights_acts(counts.block, inv, strategy.block)
    ex = ctx.execution
    layers, end_layers = stage_layout(model, cols["pp"], ex.ends_count_as_layers)
    boundary = counts.block[[s.name for s in strategy.block].index(strategy.boundary)]
    kept = _per_row(boundary.act_bytes, inv)
    pre_w, pre_a, _ = _weights_acts(counts.pre, inv)
    post_w, post_a, _ = _weights_acts(counts.post, inv)
    if strategy.post:
        head = counts.post[[s.name for s in strategy.post].index(HEAD)].weight_bytes
        post_w = _untied(model, strategy, post_w, _per_row(head, inv), cols["pp"])
    trainable = trainable_share(model, strategy, ctx)
    grad_factor = gradient_factor(ctx, trainable)
    if ex.pipeline_schedule == "dualpipe":  # two stages' parameters per GPU (DualPipe README)
        block_w, expert_w = 2.0 * block_w, 2.0 * expert_w

    stages = StageMemory(StageWeights(
        block_weight_bytes=block_w, pre_weight=pre_w, post_weight=post_w,
        n_mb=(global_batch // cols["dp"]) // cols["microbatch"], layers=layers, pp=cols["pp"],
        dp_group=_dp_group(strategy, cols), interleave=cols["interleave"], zero=ex.zero,
        grad_factor=grad_factor, end_layers=end_layers, expert_weight_bytes=expert_w,
        expert_group=expert_dp_group(cols) if np.any(expert_w) else 1,
        opt_factor=optimizer_factor(ex) * trainable,
        dualpipe=ex.pipeline_schedule == "dualpipe",
        grad_group=fsdp_pipeline_grad_group(ex, cols["pp"], _dp_group(strategy, cols))
        if root_gathered(ex) else None,
        loss_peak_bytes=_loss_peak(strategy, counts, ex), **fsdp_memory(ex, layers, cols["pp"])))

    def memory_at(recomputed) -> dict[str, np.ndarray]:
        block_a = block_activation_bytes(ex, acts, kept, layers, recomputed)
        mem = stages.breakdown(block_a, pre_a, post_a)
        return offload_memory(mem, block_w + expert_w, block_a, grad_factor, ex)

    def total_at(recomputed) -> np.ndarray:  # the bytes alone: cheaper, for the bisection
        if ex.offload != "none":
            return memory_at(recomputed)["memory_bytes"]
        return stages.total(block_activation_bytes(ex, acts, kept, layers, recomputed),
                            pre_a, post_a)

    if ex.fewest_recomputed and usable_bytes is not None:
        recomputed = fewest_recomputed_layers(total_at, layers, usable_bytes)
    else:
        fixed = 0 if ex.fewest_recomputed or ex.recompute == "full" else ex.recompute_layers
        recomputed = np.full(len(layers), fixed, dtype=np.int64)
    return {**memory_at(recomputed), "recompute_layers": recomputed}


def fits_on(mem: dict[str, np.ndarray], system: System,
            usable_bytes: float | None = None) -> np.ndarray:
    """:func:`model.physics.memory.fits_in_memory` on ``system`` (capacity less the reserve, or
    ``usable_bytes`` when given)."""
    usable = system.usable_hbm_bytes if usable_bytes is None else usable_bytes
    return fits_in_memory(mem, usable, system.host_memory_gb * 1e9)


def _p2p_bytes(boundary: OpResult, strategy: Strategy, sh: Shards) -> np.ndarray:
    """Bytes each GPU sends to the next stage: the block output it holds, over the axes it is
    replicated on (``Strategy.p2p_scatter``: Megatron's scatter-gather)."""
    return np.asarray(boundary.counts.act_bytes, dtype=float) / sh.size(strategy.p2p_scatter)


def _forward_rerun(results: list[OpResult], like: np.ndarray, breakdown: bool,
                   ctx: Ctx | None = None) -> Totals:
    """What rerunning a block's forward in its backward adds (recompute): T_f more backward time
    (its collectives included) and the forward FLOPs again (hardware FLOPs only).

    Under DualPipe with ``ep_overlap`` the rerun belongs to a backward chunk, paired with another
    microbatch's forward chunk (DeepSeek-V3 report §3.2.1): its all-to-alls A_r join the
    block's A and its compute C_r the block's C, so it adds h(A + A_r, C + C_r) − h(A, C) of
    exposed all-to-all (h = ``pricing.hidden``, as :func:`model.physics.totals.sum_ops`)
    instead of A_r."""
    rerun = zero_totals(like, breakdown)
    rerun.t_bwd = rerun.t_bwd + sum(r.fwd.t for r in results)
    a2a_rerun = None
    if ctx is not None and ctx.execution.ep_overlap and (
            ctx.execution.pipeline_schedule == "dualpipe"):
        a2a_rerun = _paired_rerun_a2a(results, ctx)
        if a2a_rerun is not None:
            rerun.t_bwd = rerun.t_bwd - a2a_rerun[0] + a2a_rerun[1]
    if breakdown:
        rerun.t_comp, rerun.t_mem = (rerun.t_comp + sum(getattr(r.fwd, name) for r in results)
                                     for name in ("t_comp", "t_mem_exposed"))
        alltoall = [r.spec.kind in ALLTOALL_OPS for r in results]
        rerun.t_comm = rerun.t_comm + sum(r.fwd.t_comm for r, a in zip(results, alltoall)
                                          if not a)
        rerun.t_ep = rerun.t_ep + (sum(r.fwd.t_comm for r, a in zip(results, alltoall) if a)
                                   if a2a_rerun is None else a2a_rerun[1])
        rerun.flop = rerun.flop + sum(r.counts.flop_mat_fwd + r.counts.flop_vec_fwd
                                      for r in results)
    return rerun


def _paired_rerun_a2a(results: list[OpResult], ctx: Ctx):
    """(A_r, exposed) of a rerun forward's all-to-alls paired as :func:`_forward_rerun` says,
    or None for a block without all-to-alls."""
    a2a = [r.spec.kind in ALLTOALL_OPS for r in results]
    if not any(a2a):
        return None
    total = sum(r.fwd.t_comm + r.bwd.t_comm for r, a in zip(results, a2a) if a)
    busy = sum(r.fwd.t - r.fwd.t_comm + r.bwd.t - r.bwd.t_comm
               for r, a in zip(results, a2a) if not a)
    again = sum(r.fwd.t_comm for r, a in zip(results, a2a) if a)
    busy_again = sum(r.fwd.t - r.fwd.t_comm for r, a in zip(results, a2a) if not a)
    hidden = ctx.pricing.hidden
    return again, hidden(total + again, busy + busy_again) - hidden(total, busy)


def candidate_times(strategy: Strategy, cols: dict[str, np.ndarray], global_batch: int,
                    ctx: Ctx, counts: ShapeCounts, shape_of: np.ndarray
                    ) -> dict[str, np.ndarray]:
    """Iteration time, its breakdown and FLOPs of every configuration in ``cols``, priced by
    ``ctx.pricing``: exactly for placed candidates, or as a lower bound over the placements of
    shapes (:func:`shape_lower_bound`). One code path, so the bound cannot drift from the model.

    ``shape_of`` gives each row's row in the shapes that ``counts`` was built from; ``cols``
    holds ``params_bytes`` (``shape_memory``) for the optimizer step.
    """
    model = ctx.model
    first, inverse = distinct_blocks(cols, counts.inverse[shape_of])
    sh = shards_of(cols, first)
    distinct_shape = counts.inverse[shape_of[first]]

    breakdown = ctx.pricing.breakdown

    def totals(which: str) -> tuple[Totals, list[OpResult]]:  # per distinct block key
        results = evaluate_ops(getattr(strategy, which), sh, ctx,
                               counts.take(which, distinct_shape), strategy.twins[which])
        return sum_ops(results, sh.tp1, breakdown, ctx), results

    block, block_ops = totals("block")
    boundary = next(r for r in block_ops if r.spec.name == strategy.boundary)
    pp = cols["pp"]
    layers, end_layers = stage_layout(model, pp, ctx.execution.ends_count_as_layers)
    block_c = block.take(inverse)
    # recomputed layers rerun their forward
    share = ctx.execution.recompute_share(layers, cols.get("recompute_layers"))
    if np.any(share):
        block_c = block_c + _forward_rerun(block_ops, block.t_fwd, breakdown, ctx).take(
            inverse).scaled(share)
    edge, edge_weight = _pipeline_ends(model, strategy, totals, inverse, pp, breakdown)
    n_mb = (global_batch // cols["dp"]) // cols["microbatch"]
    ones = np.ones_like(pp)  # a shape has no placement: a bound ignores it
    trainable = trainable_share(model, strategy, ctx)  # 1 unless LoRA freezes the base
    stage = Stage(
        block=block_c, edge=edge, edge_weight=edge_weight,
        boundary_act_bytes=_p2p_bytes(boundary, strategy, sh)[inverse], n_mb=n_mb,
        layers=layers, end_layers=end_layers, pp=pp, nv_pp=cols.get("nv_pp", ones),
        dp_group=_dp_group(strategy, cols),
        dp_tau=_dp_group(strategy, cols, "nv_") if "nv_dp" in cols else ones,
        interleave=cols["interleave"], grad_factor=gradient_factor(ctx, trainable),
        params_bytes=cols["params_bytes"] * trainable if "params_bytes" in cols else 0.0,
        expert_group=expert_dp_group(cols) if any(s.routed for s in strategy.block) else 1,
        expert_tau=cols["nv_edp"] if "nv_edp" in cols else ones,
        expert_params_bytes=cols.get("expert_params_bytes", 0.0) * trainable,
    )
    out = iteration_time(ctx, stage)
    out["n_microbatches"] = n_mb
    out["layers_per_stage"] = layers
    return out


def _pipeline_ends(model: Transformer, strategy: Strategy, totals, inverse: np.ndarray,
                   pp: np.ndarray, breakdown: bool) -> tuple[Totals, np.ndarray]:
    """(edge ops' totals, their weight bytes) per candidate: both ends on one stage when pp = 1,
    else the slower end sets the pace (``totals``: the ``pre`` or ``post`` ops' totals and
    results per distinct block). A strategy without end ops (the paper mode's: blocks only)
    has zeros, what their sums would be, without summing nothing."""
    if not strategy.pre and not strategy.post:
        return zero_totals(pp, breakdown), np.zeros(len(pp))
    pre, post_ops = totals("pre")[0], totals("post")
    post = post_ops[0]
    both = pre + post
    slower = Totals.where(pre.t_fwd + pre.t_bwd >= post.t_fwd + post.t_bwd, pre, post)
    edge = Totals.where(pp == 1, both.take(inverse), slower.take(inverse))
    post_weight = post.weight_bytes[inverse]
    for r in post_ops[1]:
        if r.spec.name == HEAD:
            post_weight = _untied(model, strategy, post_weight,
                                  _per_row(r.counts.weight_bytes, inverse), pp)
    return edge, edge_weight_bytes(pre.weight_bytes[inverse], post_weight, pp)


LOWER_BOUND_SLACK = 1.0 - 1e-9  # bounds are built from other formulas: room for rounding


def shape_lower_bound(strategy: Strategy, cols: dict[str, np.ndarray], global_batch: int,
                      ctx: Ctx, counts: ShapeCounts, mem: dict[str, np.ndarray],
                      rows: np.ndarray | None = None) -> np.ndarray:
    """A lower bound (s) of the iteration time of every placement of the shapes ``rows`` of
    ``cols`` (default: all): :func:`candidate_times` of those shapes (placement columns
    ignored) with the lower-bound pricing of :mod:`model.physics.pricing`, times
    :data:`LOWER_BOUND_SLACK` for rounding. ``mem``: the shapes' ``params_bytes`` and, when
    given, ``expert_params_bytes`` and ``recompute_layers`` (``shape_memory``)."""
    rows = np.arange(len(counts.inverse)) if rows is None else rows
    shapes = {k: v[rows] for k, v in cols.items() if k not in PLACEMENT + EXPERT_PLACEMENT}
    for name in ("params_bytes", "expert_params_bytes", "recompute_layers"):
        if name in mem:
            shapes[name] = mem[name][rows]
    out = candidate_times(strategy, shapes, global_batch, ctx.bounded(), counts, rows)
    return out["iteration_time_s"] * LOWER_BOUND_SLACK


def evaluate_space(model: Transformer, system: System, strategy: Strategy, space: Space,
                   global_batch: int, mode: object = None, fitting_only: bool = False,
                   execution: object = None) -> dict[str, np.ndarray]:
    """Result columns for every candidate of ``space`` (only those that fit the system's memory
    with ``fitting_only``). Returned arrays are aligned: ``row`` holds the candidates' indices in
    ``space``, the space's columns are included, times are in s and memory in bytes.
    """
    ctx = Ctx.make(model, system, mode, execution)
    counts = ShapeCounts.of(strategy, space.cols, ctx)
    mem = shape_memory(model, strategy, space.cols, global_batch, counts, ctx,
                       system.usable_hbm_bytes)
    keep = (np.flatnonzero(fits_on(mem, system)) if fitting_only
            else np.arange(len(space)))
    cols = {name: values[keep] for name, values in space.cols.items()}
    for name in ("params_bytes", "expert_params_bytes", "recompute_layers"):
        cols[name] = mem[name][keep]
    out = candidate_times(strategy, cols, global_batch, ctx, counts, keep)
    out.update({name: values[keep] for name, values in mem.items()})
    out.update(cols)
    out["row"] = keep
    return out
