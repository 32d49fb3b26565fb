"""Evaluate candidates at once: memory per shape, then times per placed candidate.

Memory depends only on the shape (tp1, tp2, pp, dp, microbatch, nb), not on where each dimension
sits in the NVLink domain, so :func:`shape_memory` runs before placements are enumerated and the
search expands only the shapes that fit. One block's cost depends on (microbatch, tp1, tp2, nb,
nv_tp1, nv_tp2): it is evaluated once per distinct key and gathered back to the candidates
(:func:`candidate_times`). No Python loop touches candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .block import (
    Ctx,
    OpResult,
    Shards,
    Totals,
    evaluate_op,
    op_counts,
    op_lower_bounds,
    sum_ops,
    take_counts,
)
from .collectives import Collective, collective_lower_bound_s
from .hardware import System
from .offload import offload_memory
from .ops import OpCounts
from .pipeline import (
    edge_weight_bytes,
    iteration_time,
    memory,
    optimizer_time_s,
)
from .space import Space, stage_layers
from .strategies import OpSpec, Strategy
from .transformer import Transformer

SHAPE_KEY = ("microbatch", "tp1", "tp2", "nb")
BLOCK_KEY = SHAPE_KEY + ("nv_tp1", "nv_tp2")


def distinct_rows(cols: dict[str, np.ndarray], names: tuple[str, ...]):
    """Indices of the distinct rows over ``names`` and, per row, the index of its distinct row."""
    key = np.zeros(len(cols[names[0]]), dtype=np.int64)
    radices = [int(cols[name].max(initial=0)) + 1 for name in names]
    if np.prod(np.array(radices, dtype=float)) < 2.0**62:  # mixed radix of the raw values
        for name, radix in zip(names, radices):
            key = key * radix + cols[name]
    else:  # too wide: rank each column first
        for name in names:
            values, codes = np.unique(cols[name], return_inverse=True)
            key = key * len(values) + codes
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse


def _distinct_blocks(cols: dict[str, np.ndarray], shape_id: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distinct_rows` over ``BLOCK_KEY`` of the candidates, without a sort.

    ``shape_id`` is each candidate's distinct shape (its rank in ``SHAPE_KEY`` order), so
    (shape_id, nv_tp1, nv_tp2) orders the block keys as ``BLOCK_KEY`` does, and its values fit a
    small dense table. Each distinct row is represented by one of its candidates (all of them
    have the same ``BLOCK_KEY`` columns).
    """
    if len(shape_id) == 0:
        return distinct_rows(cols, BLOCK_KEY)
    nv1, nv2 = cols["nv_tp1"], cols["nv_tp2"]
    r1, r2 = int(nv1.max()) + 1, int(nv2.max()) + 1
    size = (int(shape_id.max()) + 1) * r1 * r2
    if size > 4 * len(shape_id) + 1_000_000:  # a sparse key: sorting is cheaper
        return distinct_rows(cols, BLOCK_KEY)
    key = (shape_id * r1 + nv1) * r2 + nv2
    present = np.zeros(size, dtype=bool)
    present[key] = True
    rank = np.cumsum(present) - 1
    row = np.empty(size, dtype=np.int64)
    row[key] = np.arange(len(key))
    return row[present], rank[key]


def shards_of(cols: dict[str, np.ndarray], idx: np.ndarray | slice = slice(None)) -> Shards:
    """The block-relevant columns of rows ``idx`` (placement 1 where the columns have none)."""
    ones = np.ones_like(cols["tp1"])
    return Shards(b=cols["microbatch"][idx], tp1=cols["tp1"][idx], tp2=cols["tp2"][idx],
                  nb=cols["nb"][idx], nv_tp1=cols.get("nv_tp1", ones)[idx],
                  nv_tp2=cols.get("nv_tp2", ones)[idx])


def evaluate_ops(ops: tuple[OpSpec, ...], sh: Shards, ctx: Ctx,
                 counts: list[OpCounts] | None = None) -> list[OpResult]:
    if counts is None:
        return [evaluate_op(spec, sh, ctx) for spec in ops]
    return [evaluate_op(spec, sh, ctx, c) for spec, c in zip(ops, counts)]


@dataclass
class ShapeCounts:
    """Per-op counts of each distinct shape (counts do not depend on the placement)."""

    inverse: np.ndarray  # per row of the shapes: its distinct shape
    block: list[OpCounts]
    pre: list[OpCounts]
    post: list[OpCounts]

    @classmethod
    def of(cls, strategy: Strategy, cols: dict[str, np.ndarray], ctx: Ctx) -> ShapeCounts:
        first, inverse = distinct_rows(cols, SHAPE_KEY)
        sh = shards_of(cols, first)
        return cls(inverse, *([op_counts(spec, sh, ctx) for spec in ops]
                              for ops in (strategy.block, strategy.pre, strategy.post)))

    def take(self, which: str, distinct: np.ndarray) -> list[OpCounts]:
        """The counts of ``which`` ops (block, pre, post) for the given distinct shapes."""
        return [take_counts(c, distinct) for c in getattr(self, which)]


def _weights_acts(counts: list[OpCounts], inverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Σ weight bytes and Σ activation bytes of ops, per row."""
    w = a = np.zeros(len(inverse))
    for c in counts:
        w, a = w + _per_row(c.weight_bytes, inverse), a + _per_row(c.act_bytes, inverse)
    return w, a


def _per_row(x, inverse: np.ndarray):
    """An array per distinct row gathered to rows, or one number for all rows."""
    return np.asarray(x)[inverse] if np.ndim(x) else x


HEAD = "head/logits"


def _untied(model: Transformer, strategy: Strategy, post_weight, head_weight, pp: np.ndarray):
    """With tied embeddings and a single stage, the LM head reuses the embedding matrix: its
    weights are not held twice (the final norm's still are)."""
    if not model.tied_embeddings or not strategy.post:
        return post_weight
    return post_weight - np.where(pp == 1, head_weight, 0.0)


def _dp_group(strategy: Strategy, cols: dict[str, np.ndarray], prefix: str = "") -> np.ndarray:
    """Product over the strategy's replica axes (dp, and tp2 for context) of ``prefix + axis``."""
    out = np.ones_like(cols["dp"])
    for axis in strategy.dp_axes:
        out = out * cols[prefix + axis]
    return out


def shape_memory(model: Transformer, strategy: Strategy, cols: dict[str, np.ndarray],
                 global_batch: int, counts: ShapeCounts, ctx: Ctx) -> dict[str, np.ndarray]:
    """Memory per GPU (bytes) and its breakdown for every shape in ``cols`` (docs/model.md §9)."""
    inv = counts.inverse
    block_w, block_a = _weights_acts(counts.block, inv)
    ex = ctx.execution
    share = ex.recompute_share(stage_layers(model.layers, cols["pp"]))
    if np.any(share):  # recomputed layers keep only their input: per layer on average
        boundary = [s.name for s in strategy.block].index(strategy.boundary)
        kept = _per_row(counts.block[boundary].act_bytes, inv)
        block_a = kept if ex.recompute == "full" else block_a + share * (kept - block_a)
    pre_w, pre_a = _weights_acts(counts.pre, inv)
    post_w, post_a = _weights_acts(counts.post, inv)
    if strategy.post:
        head = counts.post[[s.name for s in strategy.post].index(HEAD)].weight_bytes
        post_w = _untied(model, strategy, post_w, _per_row(head, inv), cols["pp"])
    grad_factor = 2.0 if ex.fp32_gradients else 1.0
    mem = memory(block_weight_bytes=block_w, block_act_bytes=block_a, pre_weight=pre_w,
                 pre_act=pre_a, post_weight=post_w, post_act=post_a,
                 n_mb=(global_batch // cols["dp"]) // cols["microbatch"],
                 layers=stage_layers(model.layers, cols["pp"]), pp=cols["pp"],
                 dp_group=_dp_group(strategy, cols), interleave=ex.interleave, zero=ex.zero,
                 grad_factor=grad_factor)
    return offload_memory(mem, block_w, block_a, grad_factor, ex)


def fits_in_memory(mem: dict[str, np.ndarray], system: System,
                   usable_bytes: float | None = None) -> np.ndarray:
    """HBM (capacity less the reserve, or ``usable_bytes`` when given) and, for offloaded
    parts, the host tier both suffice."""
    usable = system.usable_hbm_bytes if usable_bytes is None else usable_bytes
    return (mem["memory_bytes"] <= usable) & (mem["host_bytes"] <= system.host_memory_gb * 1e9)


def _take(t: Totals, idx: np.ndarray) -> Totals:
    return Totals(*(getattr(t, f.name)[idx] for f in fields(Totals)))


def _pick(cond: np.ndarray, a: Totals, b: Totals) -> Totals:
    return Totals(*(np.where(cond, getattr(a, f.name), getattr(b, f.name)) for f in fields(Totals)))


def _add(a: Totals, b: Totals) -> Totals:
    return Totals(*(getattr(a, f.name) + getattr(b, f.name) for f in fields(Totals)))


def _p2p_bytes(boundary: OpResult, strategy: Strategy, ctx: Ctx, sh: Shards) -> np.ndarray:
    """Bytes each GPU sends to the next stage: the block output it holds. Without sequence
    parallelism that output is replicated over tp1, and Megatron's scatter-gather sends 1/tp1
    of it per GPU and all-gathers it inside the domain (Narayanan et al. 2021, §4.1)."""
    act = np.asarray(boundary.counts.act_bytes, dtype=float)
    if ctx.execution.sequence_parallel or strategy.name == "summa":
        return act
    return act / sh.tp1


def _forward_rerun(results: list[OpResult], like: np.ndarray) -> Totals:
    """What rerunning a block's forward in its backward adds (recompute): T_f more backward time
    (its collectives included) and the forward FLOPs again (hardware FLOPs only)."""
    fwd = [sum(getattr(r.fwd, name) for r in results)
           for name in ("t", "t_comp", "t_mem_exposed", "t_comm")]
    flop_fwd = sum(r.counts.flop_mat_fwd + r.counts.flop_vec_fwd for r in results)
    z = np.zeros(like.shape, dtype=float)
    return Totals(t_fwd=z, t_bwd=z + fwd[0], t_comp=z + fwd[1], t_mem=z + fwd[2],
                  t_comm=z + fwd[3], weight_bytes=z, act_bytes=z, flop=z + flop_fwd,
                  flop_model=z)


def _scaled(t: Totals, share) -> Totals:
    return Totals(*(getattr(t, f.name) * share for f in fields(Totals)))


def candidate_times(model: Transformer, system: System, strategy: Strategy,
                    cols: dict[str, np.ndarray], global_batch: int, ctx: Ctx,
                    counts: ShapeCounts, shape_of: np.ndarray) -> dict[str, np.ndarray]:
    """Iteration time, its breakdown and FLOPs of every placed candidate in ``cols``.

    ``shape_of`` gives each candidate's row in the shapes that ``counts`` was built from.
    """
    first, inverse = _distinct_blocks(cols, counts.inverse[shape_of])
    sh = shards_of(cols, first)
    distinct_shape = counts.inverse[shape_of[first]]

    def totals(which: str) -> tuple[Totals, list[OpResult]]:  # per distinct block key
        results = evaluate_ops(getattr(strategy, which), sh, ctx,
                               counts.take(which, distinct_shape))
        return sum_ops(results, sh.tp1), results

    block, block_ops = totals("block")
    boundary = next(r for r in block_ops if r.spec.name == strategy.boundary)
    pp = cols["pp"]
    layers = stage_layers(model.layers, pp)
    block_c = _take(block, inverse)
    share = ctx.execution.recompute_share(layers)  # recomputed layers rerun their forward
    if np.any(share):
        block_c = _add(block_c, _scaled(_take(_forward_rerun(block_ops, block.t_fwd), inverse),
                                        share))
    # ends of the pipeline: both on one stage when pp = 1, else the slower end sets the pace
    pre, post_ops = totals("pre")[0], totals("post")
    post = post_ops[0]
    both, slower = _add(pre, post), _pick(pre.t_fwd + pre.t_bwd >= post.t_fwd + post.t_bwd,
                                          pre, post)
    choice = 2 * inverse + (pp == 1)  # per candidate: its distinct row's (slower, both)
    edge = Totals(*(np.stack([getattr(slower, f.name), getattr(both, f.name)], axis=1).ravel()[
        choice] for f in fields(Totals)))
    post_weight = post.weight_bytes[inverse]
    for r in post_ops[1]:
        if r.spec.name == HEAD:
            post_weight = _untied(model, strategy, post_weight,
                                  _per_row(r.counts.weight_bytes, inverse), pp)
    n_mb = (global_batch // cols["dp"]) // cols["microbatch"]
    out = iteration_time(
        block=block_c, edge=edge,
        edge_weight=edge_weight_bytes(pre.weight_bytes[inverse], post_weight, pp),
        boundary_act_bytes=_p2p_bytes(boundary, strategy, ctx, sh)[inverse], n_mb=n_mb,
        layers=layers, pp=pp, nv_pp=cols["nv_pp"], dp_group=_dp_group(strategy, cols),
        dp_tau=_dp_group(strategy, cols, "nv_"), system=system, mode=ctx.mode,
        interleave=ctx.execution.interleave, zero=ctx.execution.zero,
        grad_factor=2.0 if ctx.execution.fp32_gradients else 1.0,
        params_bytes=cols["params_bytes"] if "params_bytes" in cols else 0.0,
        execution=ctx.execution,
    )
    out["n_microbatches"] = n_mb
    out["layers_per_stage"] = layers
    return out


LOWER_BOUND_SLACK = 1.0 - 1e-9  # bounds are built from other formulas: room for rounding


def _op_sums(ops: tuple[OpSpec, ...], counts: list[OpCounts], sh: Shards, ctx: Ctx
             ) -> tuple[np.ndarray, np.ndarray]:
    """Lower bounds of :func:`~model.block.sum_ops`' ``t_fwd`` and ``t_bwd`` at any placement,
    from each op's bounds."""
    fwd, bwd = np.zeros(len(sh.tp1)), np.zeros(len(sh.tp1))
    for spec, c in zip(ops, counts):
        f, b = op_lower_bounds(spec, c, sh, ctx)
        fwd += f
        bwd += b
    return fwd, bwd


def shape_lower_bound(model: Transformer, system: System, strategy: Strategy,
                      cols: dict[str, np.ndarray], global_batch: int, ctx: Ctx,
                      counts: ShapeCounts, params_bytes: np.ndarray) -> np.ndarray:
    """A lower bound (s) of the iteration time of every placement of each shape in ``cols``.

    :func:`candidate_times` term by term, each at its smallest over the placements: every
    collective at :func:`~model.collectives.collective_lower_bound_s` (in the ops, the
    pipeline's p2p and the data-parallel gradient and parameter collectives, of which only the
    exposed ones and the overlap slowdown of the others count), the slower pipeline end at the
    larger of the embedding's and head's bounds, offload transfers and the embedding's
    gradients at 0, the optimizer step exact. ``params_bytes`` are the shapes'
    (``shape_memory``). Times by :data:`LOWER_BOUND_SLACK` for rounding.
    """
    inv = counts.inverse
    first = np.zeros(int(inv.max(initial=-1)) + 1, dtype=np.int64)
    first[inv] = np.arange(len(inv))  # a row of each distinct shape
    sh = shards_of(cols, first)
    bf, bb = _op_sums(strategy.block, counts.block, sh, ctx)
    pf, pb = _op_sums(strategy.pre, counts.pre, sh, ctx)
    qf, qb = _op_sums(strategy.post, counts.post, sh, ctx)
    pp = cols["pp"]
    edge = np.where(pp == 1, (pf + qf + pb + qb)[inv], np.maximum(pf + pb, qf + qb)[inv])
    n_mb = ((global_batch // cols["dp"]) // cols["microbatch"]).astype(float)
    d = stage_layers(model.layers, pp).astype(float)
    ex, mode = ctx.execution, ctx.mode
    bf, bb = bf[inv], bb[inv] + ex.recompute_share(d) * bf[inv]  # recomputed forwards
    t_loc = n_mb * (d * (bf + bb) + edge)
    if mode.free_slow_pipeline_links:
        t_pp = 0.0
    else:  # one p2p per microbatch each way, each link at least the cheaper message
        boundary = counts.block[[s.name for s in strategy.block].index(strategy.boundary)]
        volume = np.asarray(boundary.act_bytes, dtype=float)
        if not (ex.sequence_parallel or strategy.name == "summa"):
            volume = volume / sh.tp1
        msg = np.minimum(  # p2p_time_s: a mean of slow and fast messages
            system.network_latency_s + volume / (system.nics_per_gpu * system.slow_bytes_per_s),
            system.nvlink_latency_s + volume / system.fast_bytes_per_s)[inv]
        t_pp = 2 * ex.interleave * n_mb * np.where(pp > 1, msg, 0.0)
    bubble = (pp - 1) * (t_loc + t_pp) / (n_mb * ex.interleave)
    grad_factor = 2.0 if ex.fp32_gradients else 1.0
    group = _dp_group(strategy, cols)
    weights = np.zeros(len(first))
    for c in counts.block:
        weights = weights + c.weight_bytes
    weights = weights[inv]
    ar_bug = mode.allreduce_half_counted
    t_ag = collective_lower_bound_s(Collective.ALLGATHER, weights, group, system, ar_bug)
    t_rs = collective_lower_bound_s(Collective.REDUCESCATTER, grad_factor * weights, group,
                                    system, ar_bug)
    g = system.overlap_slowdown
    if ex.zero >= 3:  # the first gather exposed; the others' overlap slowdown
        t_dp = t_ag + n_mb * d * g * (np.minimum(t_ag, bf) + np.minimum(t_ag + t_rs, bb))
    else:
        t_dp = t_ag + t_rs + (d - 1) * g * (np.minimum(t_ag, bf) + np.minimum(t_rs, bb))
    t_opt = optimizer_time_s(params_bytes, group, system, mode, ex, ex.zero, grad_factor)
    return (t_loc + t_pp + bubble + t_dp + t_opt) * LOWER_BOUND_SLACK


def evaluate_space(model: Transformer, system: System, strategy: Strategy, space: Space,
                   global_batch: int, compat: object = None, fitting_only: bool = False,
                   execution: object = None) -> dict[str, np.ndarray]:
    """Result columns for every candidate of ``space`` (only those that fit the system's memory
    with ``fitting_only``). Returned arrays are aligned: ``row`` holds the candidates' indices in
    ``space``, the space's columns are included, times are in s and memory in bytes.
    """
    ctx = Ctx.make(model, system, compat, execution)
    counts = ShapeCounts.of(strategy, space.cols, ctx)
    mem = shape_memory(model, strategy, space.cols, global_batch, counts, ctx)
    keep = (np.flatnonzero(fits_in_memory(mem, system)) if fitting_only
            else np.arange(len(space)))
    cols = {name: values[keep] for name, values in space.cols.items()}
    cols["params_bytes"] = mem["params_bytes"][keep]
    out = candidate_times(model, system, strategy, cols, global_batch, ctx, counts, keep)
    out.update({name: values[keep] for name, values in mem.items()})
    out.update(cols)
    out["row"] = keep
    return out
