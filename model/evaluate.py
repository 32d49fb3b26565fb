"""Evaluate a whole candidate space at once: block → memory → pipeline → throughput.

One block's cost depends only on (microbatch, tp1, tp2, nb, nv_tp1, nv_tp2); candidates that
differ only in dp, pp or their placement share it. The block is therefore evaluated once per
distinct key and gathered back to the candidates. Memory is computed for every candidate first;
times only for the candidates asked for (by default those that fit in HBM). No Python loop
touches candidates.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from .block import Ctx, OpResult, Shards, Totals, evaluate_op, sum_ops
from .hardware import System
from .pipeline import edge_weight_bytes, iteration_time, memory
from .space import Space
from .strategies import Strategy
from .transformer import Transformer

BLOCK_KEY = ("microbatch", "tp1", "tp2", "nb", "nv_tp1", "nv_tp2")


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


def shards_of(cols: dict[str, np.ndarray], idx: np.ndarray | slice = slice(None)) -> Shards:
    return Shards(b=cols["microbatch"][idx], tp1=cols["tp1"][idx], tp2=cols["tp2"][idx],
                  nb=cols["nb"][idx], nv_tp1=cols["nv_tp1"][idx], nv_tp2=cols["nv_tp2"][idx])


def evaluate_ops(ops, sh: Shards, ctx: Ctx) -> list[OpResult]:
    return [evaluate_op(spec, sh, ctx) for spec in ops]


def _take(t: Totals, idx: np.ndarray) -> Totals:
    return Totals(*(getattr(t, f.name)[idx] for f in fields(Totals)))


def _pick(cond: np.ndarray, a: Totals, b: Totals) -> Totals:
    return Totals(*(np.where(cond, getattr(a, f.name), getattr(b, f.name)) for f in fields(Totals)))


def _add(a: Totals, b: Totals) -> Totals:
    return Totals(*(getattr(a, f.name) + getattr(b, f.name) for f in fields(Totals)))


def _zeros(n: int) -> Totals:
    zero = np.zeros(n)
    return Totals(*(zero for _ in fields(Totals)))


def _edges(model: Transformer, strategy: Strategy, sh: Shards, ctx: Ctx,
           inverse: np.ndarray, pp: np.ndarray) -> tuple[Totals, Totals]:
    """Totals of the ops before the first and after the last block, per candidate."""
    if not strategy.pre and not strategy.post:
        none = _zeros(len(pp))
        return none, none
    pre = _take(sum_ops(evaluate_ops(strategy.pre, sh, ctx), sh.tp1), inverse)
    post = _take(sum_ops(evaluate_ops(strategy.post, sh, ctx), sh.tp1), inverse)
    if model.tied_embeddings:  # one matrix serves embedding and head on a single stage
        post.weight_bytes = np.where(pp == 1, 0.0, post.weight_bytes)
    return pre, post


def evaluate_space(model: Transformer, system: System, strategy: Strategy, space: Space,
                   global_batch: int, compat: object = None,
                   capacity_bytes: float | None = None) -> dict[str, np.ndarray]:
    """Result columns for the candidates of ``space`` whose memory ≤ ``capacity_bytes``.

    ``capacity_bytes=None`` keeps every candidate. Returned arrays are aligned: ``row`` holds the
    candidates' indices in ``space``, the space's columns are included, times are in s and memory
    in bytes.
    """
    c = space.cols
    ctx = Ctx.make(model, system, compat)
    first, inverse = distinct_rows(c, BLOCK_KEY)
    sh = shards_of(c, first)
    block_ops = evaluate_ops(strategy.block, sh, ctx)
    boundary = next(r for r in block_ops if r.spec.name == strategy.boundary)
    block = sum_ops(block_ops, sh.tp1)  # per distinct key
    pre, post = _edges(model, strategy, sh, ctx, inverse, c["pp"])
    dp_group, dp_tau = np.ones_like(c["dp"]), np.ones_like(c["dp"])
    for axis in strategy.dp_axes:
        dp_group, dp_tau = dp_group * c[axis], dp_tau * c["nv_" + axis]
    n_mb = (global_batch // c["dp"]) // c["microbatch"]
    layers = model.layers // c["pp"]
    mem = memory(block_weight_bytes=block.weight_bytes[inverse],
                 block_act_bytes=block.act_bytes[inverse], pre=pre, post=post, n_mb=n_mb,
                 layers=layers, pp=c["pp"], dp_group=dp_group)
    keep = (np.arange(len(space)) if capacity_bytes is None
            else np.flatnonzero(mem["memory_bytes"] <= capacity_bytes))
    k_inv, pp = inverse[keep], c["pp"][keep]
    pre_k, post_k = _take(pre, keep), _take(post, keep)
    edge = _pick(pp == 1, _add(pre_k, post_k),
                 _pick(pre_k.t_fwd + pre_k.t_bwd >= post_k.t_fwd + post_k.t_bwd, pre_k, post_k))
    out = iteration_time(
        block=_take(block, k_inv), edge=edge, edge_weight=edge_weight_bytes(pre_k, post_k, pp),
        boundary_act_bytes=np.asarray(boundary.counts.act_bytes)[k_inv], n_mb=n_mb[keep],
        layers=layers[keep], pp=pp, nv_pp=c["nv_pp"][keep], dp_group=dp_group[keep],
        dp_tau=dp_tau[keep], system=system, mode=ctx.mode,
    )
    out.update({name: values[keep] for name, values in mem.items()})
    out.update({name: values[keep] for name, values in c.items()})
    out["row"] = keep
    out["n_microbatches"] = n_mb[keep]
    out["layers_per_stage"] = layers[keep]
    return out
