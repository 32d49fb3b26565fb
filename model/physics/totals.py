"""Sums of evaluated ops: one block's (or the pipeline ends') times, bytes and FLOPs per
microbatch, and the expert-parallel all-to-all overlap (docs/model.md §8 and §14)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from model.physics.optable import ALLTOALL_OPS

if TYPE_CHECKING:
    from model.physics.block import OpResult
    from model.physics.context import Ctx


@dataclass
class Totals:
    """Sums over a list of ops (one block, or the ops before/after the blocks), per microbatch.

    ``weight_bytes`` are the weights replicated over the data-parallel group,
    ``expert_weight_bytes`` the routed experts' (replicated over the expert-data-parallel
    group). The breakdown fields (``t_comp`` … ``flop_model``) are None in a lower bound (a
    :class:`~model.physics.pricing.Bound` prices only the time); every operation below keeps
    None. ``t_comm`` is the ops' exposed tensor/context-parallel communication, ``t_ep`` their
    exposed expert-parallel all-to-alls."""

    t_fwd: np.ndarray
    t_bwd: np.ndarray
    weight_bytes: np.ndarray
    act_bytes: np.ndarray
    expert_weight_bytes: np.ndarray
    t_comp: np.ndarray | None = None
    t_mem: np.ndarray | None = None
    t_comm: np.ndarray | None = None
    t_ep: np.ndarray | None = None
    flop: np.ndarray | None = None  # true FLOPs incl. recomputation (hardware FLOPs)
    flop_model: np.ndarray | None = None  # without recomputation or padding (model FLOPs)

    def map(self, fn, *others: Totals) -> Totals:
        """``fn`` applied field by field (with the same fields of ``others``); None stays."""
        return Totals(*(None if getattr(self, f) is None
                        else fn(getattr(self, f), *(getattr(o, f) for o in others))
                        for f in TOTAL_FIELDS))

    def take(self, idx: np.ndarray) -> Totals:
        return self.map(lambda v: v[idx])

    def __add__(self, other: Totals) -> Totals:
        return self.map(np.add, other)

    def scaled(self, share) -> Totals:
        return self.map(lambda v: v * share)

    @staticmethod
    def where(cond: np.ndarray, a: Totals, b: Totals) -> Totals:
        return a.map(lambda x, y: np.where(cond, x, y), b)


TOTAL_FIELDS = tuple(f.name for f in fields(Totals))
REQUIRED = ("t_fwd", "t_bwd", "weight_bytes", "act_bytes", "expert_weight_bytes")


def zero_totals(like: np.ndarray, breakdown: bool = True) -> Totals:
    """Totals of nothing (zeros; the breakdown fields None without ``breakdown``)."""
    z = np.zeros(like.shape, dtype=float)
    return Totals(**{f: z.copy() if breakdown or f in REQUIRED else None
                     for f in TOTAL_FIELDS})


def sum_ops(results: list[OpResult], like: np.ndarray, breakdown: bool = True,
            ctx: Ctx | None = None) -> Totals:
    """Add up evaluated ops (forward + backward) into :class:`Totals` (only the times and
    bytes without ``breakdown``).

    With ``ep_overlap`` (``ctx``'s execution), the expert-parallel all-to-alls A = A_f + A_b of
    a block hide behind the compute C of its other ops — Megatron-Core's 1F1B all-to-all
    overlap runs one microbatch's forward beside another's backward, so each direction's
    all-to-alls overlap the other's compute: exposed = h(A, C), h = ``pricing.hidden``, shared
    between the directions in proportion to A_f and A_b."""
    tot = zero_totals(like, breakdown)
    a2a_fwd, a2a_bwd, busy = (np.zeros(like.shape, dtype=float) for _ in range(3))
    # the compute that all-to-alls hide behind: only needed when there are any to hide
    overlap = (ctx is not None and ctx.execution.ep_overlap
               and any(r.spec.kind in ALLTOALL_OPS for r in results))
    for r in results:
        c = r.counts
        tot.t_fwd += r.fwd.t
        tot.t_bwd += r.bwd.t
        if r.spec.routed:
            tot.expert_weight_bytes += c.weight_bytes
        else:
            tot.weight_bytes += c.weight_bytes
        tot.act_bytes += c.act_bytes
        alltoall = r.spec.kind in ALLTOALL_OPS
        if alltoall:
            a2a_fwd += r.fwd.t_comm
            a2a_bwd += r.bwd.t_comm
        elif overlap:
            busy += r.fwd.t - r.fwd.t_comm + r.bwd.t - r.bwd.t_comm
        if breakdown:
            tot.t_comp += r.fwd.t_comp + r.bwd.t_comp
            tot.t_mem += r.fwd.t_mem_exposed + r.bwd.t_mem_exposed
            if not alltoall:
                tot.t_comm += r.fwd.t_comm + r.bwd.t_comm
            flop = c.flop_mat_fwd + c.flop_vec_fwd + c.flop_mat_bwd + c.flop_vec_bwd
            tot.flop += flop
            tot.flop_model += flop - c.flop_recompute - c.flop_padding
    if overlap:
        total = a2a_fwd + a2a_bwd
        exposed = ctx.pricing.hidden(total, busy)
        kept = np.where(total > 0, exposed / np.where(total > 0, total, 1.0), 0.0)
        tot.t_fwd -= a2a_fwd * (1.0 - kept)
        tot.t_bwd -= a2a_bwd * (1.0 - kept)
        a2a_fwd, a2a_bwd = a2a_fwd * kept, a2a_bwd * kept
    if breakdown:
        tot.t_ep += a2a_fwd + a2a_bwd
    return tot
