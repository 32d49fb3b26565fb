"""The records the pipeline and data-parallel formulas take (:mod:`model.physics.pipeline`,
:mod:`model.physics.fsdp`): one pipeline stage of every candidate (:class:`Stage`) and what one
block synchronises over its data-parallel group (:class:`DpSync`). Arrays broadcast over the
candidates; the pricing context (:class:`~model.physics.context.Ctx`: system, mode, execution,
exact or lower-bound pricing) is passed beside them, never unpacked into arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from model.physics.totals import Totals

Array = Any  # a numpy array over candidates, or a scalar that broadcasts


@dataclass(frozen=True)
class DpSync:
    """One block's data-parallel synchronisation: its 2-byte weights W over the replica
    group G (τ of them per NVLink domain); gradients of ``grad_factor``·W bytes (2: fp32; a
    LoRA trainable share scales it), parameters gathered as ``gather_factor``·W (< 1: FP8),
    in buckets of at most ``bucket_bytes`` (0: one collective); ``experts``: the expert
    weights' own synchronisation over the expert-data-parallel group, after the others."""

    weight_bytes: Array
    group: Array
    tau: Array
    grad_factor: float = 1.0
    bucket_bytes: float = 0.0
    experts: DpSync | None = None
    gather_factor: float = 1.0

    def with_experts(self, weight_bytes: Array, group: Array, tau: Array) -> DpSync:
        """This synchronisation plus the experts' (W_e over G_e, τ_e), same factors."""
        return replace(self, experts=replace(self, weight_bytes=weight_bytes, group=group,
                                             tau=tau))


@dataclass(frozen=True)
class Stage:
    """The binding pipeline stage of every candidate, per microbatch (docs/model.md §8–§9).

    ``block``: one block's totals; ``edge``: the ops outside the blocks on the slower end stage
    (both ends when pp = 1) and ``edge_weight`` their weight bytes; ``boundary_act_bytes``: a
    pipeline message; ``n_mb`` microbatches; ``layers`` blocks on a middle stage and
    ``end_layers`` on an end stage (None: the same); ``interleave`` virtual stages.
    ``dp_group``/``dp_tau``: the replica group and its members per NVLink domain;
    ``params_bytes`` the stage's 2-byte weights (``expert_params_bytes`` of them sharded over
    ``expert_group``, ``expert_tau`` per domain) and ``grad_factor`` the gradient bytes per
    2-byte weight (LoRA's trainable share included).
    """

    block: Totals
    edge: Totals
    edge_weight: Array
    boundary_act_bytes: Array
    n_mb: Array
    layers: Array
    pp: Array
    nv_pp: Array
    dp_group: Array
    dp_tau: Array
    end_layers: Array | None = None
    interleave: Array = 1
    params_bytes: Array = 0.0
    grad_factor: float = 1.0
    expert_group: Array = 1
    expert_tau: Array = 1
    expert_params_bytes: Array = 0.0
