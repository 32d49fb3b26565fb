"""Evaluate a whole candidate space at once: block → pipeline → throughput, memory, feasibility.

One block's cost depends only on (microbatch, tp1, tp2, nb, nv_tp1, nv_tp2); candidates that
differ only in dp, pp or their placement share it. The block is therefore evaluated once per
distinct key and gathered back to the candidates, then :func:`model.pipeline.iteration` runs on
all candidates together. No Python loop touches candidates.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from .block import Ctx, OpResult, Shards, Totals, evaluate_op, sum_ops
from .hardware import System
from .pipeline import iteration
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


def _edges(model: Transformer, strategy: Strategy, sh: Shards, ctx: Ctx, inverse: np.ndarray,
           pp: np.ndarray) -> tuple[Totals, Totals, Totals]:
    """Ops before the first and after the last block: (pre, post, edge charged to the slowest
    stage). With pp = 1 one stage runs both; otherwise the slower of the two ends sets the pace."""
    if not strategy.pre and not strategy.post:
        zero = np.zeros(len(pp))
        none = Totals(*(zero for _ in fields(Totals)))
        return none, none, none
    pre = _take(sum_ops(evaluate_ops(strategy.pre, sh, ctx), sh.tp1), inverse)
    post = _take(sum_ops(evaluate_ops(strategy.post, sh, ctx), sh.tp1), inverse)
    if model.tied_embeddings:  # one matrix serves embedding and head on a single stage
        post.weight_bytes = np.where(pp == 1, 0.0, post.weight_bytes)
    edge = _pick(pp == 1, _add(pre, post),
                 _pick(pre.t_fwd + pre.t_bwd >= post.t_fwd + post.t_bwd, pre, post))
    return pre, post, edge


def evaluate_space(model: Transformer, system: System, strategy: Strategy, space: Space,
                   global_batch: int, compat: object = None) -> dict[str, np.ndarray]:
    """Every result column for every candidate of ``space`` (times in s, memory in bytes)."""
    c = space.cols
    ctx = Ctx.make(model, system, compat)
    first, inverse = distinct_rows(c, BLOCK_KEY)
    sh = shards_of(c, first)
    block_ops = evaluate_ops(strategy.block, sh, ctx)
    boundary = next(r for r in block_ops if r.spec.name == strategy.boundary)
    block = _take(sum_ops(block_ops, sh.tp1), inverse)
    pre, post, edge = _edges(model, strategy, sh, ctx, inverse, c["pp"])
    dp_group = np.ones_like(c["dp"])
    dp_tau = np.ones_like(c["dp"])
    for axis in strategy.dp_axes:
        dp_group = dp_group * c[axis]
        dp_tau = dp_tau * c["nv_" + axis]
    n_mb = (global_batch // c["dp"]) // c["microbatch"]
    out = iteration(
        block=block, edge=edge, edge_pre=pre, edge_post=post,
        boundary_act_bytes=np.asarray(boundary.counts.act_bytes)[inverse],
        n_mb=n_mb, layers=model.layers // c["pp"], pp=c["pp"], nv_pp=c["nv_pp"],
        dp_group=dp_group, dp_tau=dp_tau, system=system, mode=ctx.mode,
    )
    out["n_microbatches"] = n_mb
    out["layers_per_stage"] = model.layers // c["pp"]
    return out
