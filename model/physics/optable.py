"""The vocabulary of the op tables: op kinds, collectives of an op, and one op's row.

A strategy (:mod:`model.physics.strategies`, with the MoE and MLA rows of
:mod:`model.physics.moe`) is a table of :class:`OpSpec` rows evaluated by the one code path of
:mod:`model.physics.block`. Parallel axes: ``tp1`` shards hidden features / heads, ``tp2`` the
sequence (SUMMA rows or context parallel), ``ep`` the routed experts and ``etp`` each expert's
hidden features (Megatron-Core's expert parallel and expert tensor parallel); ``dp`` and ``pp``
never shard an op.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from model.physics.collectives import Collective

Axes = tuple[str, ...]
TP1: Axes = ("tp1",)
TP2: Axes = ("tp2",)
EP: Axes = ("ep",)
ETP: Axes = ("etp",)
NONE: Axes = ()


class Kind(Enum):
    """Which formula of :mod:`model.physics.ops` (or :mod:`model.physics.moe`) an op uses."""

    LINEAR = "linear"
    SUMMA_LINEAR = "summa_linear"
    BIAS = "bias"
    ACT = "act"
    DROPOUT = "dropout"
    NORM = "norm"
    ATTENTION = "attention"
    EMBEDDING = "embedding"
    LOSS = "loss"
    ROUTER = "router"
    PERMUTE = "permute"
    UNPERMUTE = "unpermute"
    EXPERT_LINEAR = "expert_linear"


MATMULS = (Kind.LINEAR, Kind.SUMMA_LINEAR, Kind.EXPERT_LINEAR)  # at the precision's rate
ALLTOALL_OPS = (Kind.PERMUTE, Kind.UNPERMUTE)  # their collectives are the EP all-to-alls
# the MoE layer's memory-bound token kernels (System.moe_token_efficiency)
TOKEN_KERNELS = (Kind.ROUTER, Kind.PERMUTE, Kind.UNPERMUTE)


@dataclass(frozen=True)
class CommSpec:
    """One collective: its type, the named volume it moves, and the axes forming its group."""

    collective: Collective
    volume: str
    axes: Axes


@dataclass(frozen=True)
class OpSpec:
    """One op of a block: formula, feature dims, how each is sharded, and its collectives.

    ``k``/``n`` name input/output features (elementwise ops and norms use ``k`` only); ``rows``
    shards the sequence, ``k_shard``/``n_shard`` the features, ``heads_shard`` attention heads.
    ``panels`` names what splits the op's collectives into overlapped panels (SUMMA, §2.3): ``nb``
    (searched panel count) or an axis; ``None`` means collectives are serial (t = compute + Σ comm).
    ``share``: the op runs in every layer (""), in the dense-MLP layers ("dense") or in the MoE
    layers ("moe") of a MoE model — a block is the layers' mix, each op weighted by its share.
    ``routed``: the op works on the tokens routed to this GPU's experts (rows × top_k × etp × the
    load factor) and its weights are expert weights (sharded over ep·etp, replicated over the
    expert-data-parallel group). ``tied``: its weights are another op's (MTP's head).
    """

    name: str
    kind: Kind
    k: str = "e"
    n: str = ""
    rows: Axes = NONE
    k_shard: Axes = NONE
    n_shard: Axes = NONE
    heads_shard: Axes = NONE
    fwd: tuple[CommSpec, ...] = ()
    bwd: tuple[CommSpec, ...] = ()
    panels: str | None = None
    act_rows: Axes | None = None  # rows of the kept input when not ``rows`` (SP keeps a shard)
    share: str = ""
    routed: bool = False
    tied: bool = False


def rs(volume: str, axes: Axes) -> CommSpec:
    return CommSpec(Collective.REDUCESCATTER, volume, axes)


def ag(volume: str, axes: Axes) -> CommSpec:
    return CommSpec(Collective.ALLGATHER, volume, axes)


def ar(volume: str, axes: Axes) -> CommSpec:
    return CommSpec(Collective.ALLREDUCE, volume, axes)


def a2a(volume: str, axes: Axes, dedup: bool = False) -> CommSpec:
    """An all-to-all, or with ``dedup`` a deduplicating dispatch (DeepEP / HybridEP)."""
    return CommSpec(Collective.DISPATCH if dedup else Collective.ALLTOALL, volume, axes)


@dataclass
class Shards:
    """Per-configuration arrays that the block depends on (all the same length)."""

    b: np.ndarray  # microbatch size (samples)
    tp1: np.ndarray
    tp2: np.ndarray
    nb: np.ndarray  # SUMMA panel count (1 where unused)
    nv_tp1: np.ndarray  # tp1 members inside one NVLink domain
    nv_tp2: np.ndarray
    ep: np.ndarray | int = 1  # expert parallel (MoE layers)
    etp: np.ndarray | int = 1  # expert tensor parallel
    nv_ep: np.ndarray | int = 1  # ep members inside one NVLink domain
    nv_etp: np.ndarray | int = 1

    def size(self, axes: Axes) -> np.ndarray | int:
        """Product of the sizes of ``axes`` (1 for none)."""
        out: np.ndarray | int = 1
        for a in axes:
            out = out * getattr(self, a)
        return out

    def tau(self, axes: Axes) -> np.ndarray | int:
        """How many members of the group over ``axes`` sit in one NVLink domain."""
        out: np.ndarray | int = 1
        for a in axes:
            out = out * getattr(self, "nv_" + a)
        return out


def layer_share(model, spec: OpSpec) -> float:
    """Share of the pipeline's layers an op runs in: all, the dense-MLP or the MoE ones
    (``model``: a Transformer, for its ``moe_share``)."""
    if spec.share == "moe":
        return model.moe_share
    if spec.share == "dense":
        return 1.0 - model.moe_share
    return 1.0
