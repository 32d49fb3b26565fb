"""Memory per GPU: one place for what a pipeline stage holds (docs/model.md, memory).

For every configuration (numpy arrays), the binding stage's bytes of weights, gradients,
optimizer state and activations, and what lives in host memory:

* per block, each op keeps what its backward needs (:mod:`model.physics.ops`, with the strategy's
  sharding: sequence parallelism keeps the l/tp shard of a matmul's input, ``OpSpec.act_rows``);
  A₁ = their sum. Recompute: ``full`` keeps only each block's input (the boundary activation);
  partial recompute of r of a stage's D blocks keeps A₁ on D − r of them (Korthikanti et al.
  2022, §5);
* a 1F1B stage holds min(pp, n_mb) microbatches in flight, × (1 + (pp − 1)/(pp·V)) with V
  interleaved stages (Korthikanti et al. 2022, §4.2.3); the first stage also holds the
  embedding and its activations, the last the final norm, LM head and loss;
* weights W = D·W₁ (+ the ends), gradients g·W (g = 2 for fp32 gradients), optimizer state 6·W
  (fp32 master, Adam m and v: 12 B per 2-byte parameter); ZeRO stage 1 shards the optimizer
  state over the replica group G, 2 the gradients too, 3 the weights too, plus two gathered
  blocks of weights (the one computing and the next, prefetched) (Rajbhandari et al. 2020);
  a MoE block's expert weights W_e (already sharded over ep·etp) are sharded so over the
  expert-data-parallel group G_e = tp1·tp2·dp/(ep·etp) instead (Megatron-Core's distributed
  optimizer; ``theoretical_memory_usage.py``: expert parameters at 6 + 12/EDP bytes each);
* offload (ZeRO-Offload / Infinity, Ren et al. 2021, Rajbhandari et al. 2021) moves the
  optimizer state, the weights and gradients (HBM keeps two blocks' worth of each: the one
  computing and the one in transfer) or the activations (HBM keeps two blocks' worth) to host
  memory; partial activation offload moves N layers' activations of each stage (Megatron-Core's
  ``cpu_offloading_num_layers``, Transformer Engine's CPU offload context).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from model.specs.execution import Execution

OPTIMIZER_FACTOR = 6.0  # fp32 master + Adam m, v = 12 B/param = 6 × the 2-byte weights
# Megatron-Core's precision-aware optimizer with BF16 moments (--use-precision-aware-optimizer
# --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16): fp32 master + bf16 m, v = 8 B/param
OPTIMIZER_FACTOR_BF16_MOMENTS = 4.0
# PyTorch FSDP keeps the sharded parameters in FP32 (the model is built in FP32; FSDP2's
# MixedPrecisionPolicy casts only the gathered copy to BF16: ``FSDPParam`` keeps
# ``_sharded_param_data`` in the original dtype, torch/distributed/fsdp/_fully_shard/
# _fsdp_param.py at 17a7e1e09b3e17825b4cb51d75dab1a764712793): Adam steps them in place, so
# the 4-byte master is the shard itself, not a copy beside 2-byte weights
FP32_MASTER_FACTOR = 2.0  # the FP32 master's 4 B per parameter over the 2-byte weights


def optimizer_factor(ex: Execution) -> float:
    """Optimizer-state bytes per 2-byte weight byte: 6 (fp32 master, m, v), 4 with BF16
    moments (``Execution.optimizer_bf16_moments``)."""
    return OPTIMIZER_FACTOR_BF16_MOMENTS if ex.optimizer_bf16_moments else OPTIMIZER_FACTOR


def block_activation_bytes(ex: Execution, block_act_bytes, boundary_act_bytes, layers,
                           recomputed=None):
    """Activation bytes one block keeps per microbatch, on average over a stage of ``layers``
    blocks: A₁ (the ops' sum), or the block's input alone for the blocks that recompute (all
    with ``full``, min(r, D) of D with r = ``recomputed`` (per configuration) or the execution's
    ``recompute_layers``)."""
    share = ex.recompute_share(layers, recomputed)
    if not np.any(share):
        return block_act_bytes
    if ex.recompute == "full":
        return boundary_act_bytes
    return block_act_bytes + share * (boundary_act_bytes - block_act_bytes)


def in_flight_microbatches(pp, n_mb, interleave, rank=0):
    """Microbatches whose activations pipeline stage ``rank`` holds at its peak, at most n_mb.

    1F1B runs pp − rank forward passes before its first backward: pp − rank. The interleaved
    schedule with V chunks per stage runs (pp − rank − 1)·2 + (V − 1)·pp warm-up chunks and
    holds one more, pp + (pp − 1 − 2·rank)/V microbatches (Megatron-LM's interleaved 1F1B; for
    the first stage Korthikanti et al. 2022's pp·(1 + (pp − 1)/(pp·V)), §4.2.3)."""
    v = np.asarray(interleave)
    if not np.any(v > 1):  # plain 1F1B everywhere
        return np.minimum(pp - rank, n_mb).astype(float)
    pp = np.asarray(pp, dtype=float)
    v = v.astype(float)
    ahead = np.where(v > 1, pp + (pp - 1 - 2 * rank) / v, pp - rank)
    return np.minimum(ahead, n_mb).astype(float)


def zero_sharded(weights, dp_group, zero: int, grad_factor: float = 1.0,
                 opt_factor: float = OPTIMIZER_FACTOR, grad_group=None,
                 fp32_shards: bool = False):
    """(weights, gradients, optimizer) bytes held under ZeRO stage ``zero`` (Rajbhandari et al.
    2020): optimizer state (``opt_factor`` × the 2-byte weights: 6, or 4 with BF16 moments)
    sharded from stage 1, gradients (``grad_factor`` × the weights: 2 for fp32 gradients) from
    2 — over ``grad_group`` when given (FSDP2 under pipelining holds them unsharded:
    :func:`model.physics.peak_memory.fsdp_pipeline_grad_group`) —, weights from 3. With
    ``fp32_shards`` (PyTorch FSDP) the weight shards are the FP32 master itself: 4 B a
    parameter held as weights, the optimizer state keeping only its moments."""
    master = FP32_MASTER_FACTOR if fp32_shards and zero >= 3 else 0.0
    optimizer = (opt_factor - master) * weights / (dp_group if zero >= 1 else 1)
    group = dp_group if grad_group is None else grad_group
    grads = grad_factor * weights / (group if zero >= 2 else 1)
    if zero < 3:
        return weights, grads, optimizer
    held = weights / dp_group if not master else (1.0 + master / 2.0) * weights / dp_group
    return held, grads, optimizer


@dataclass(frozen=True, kw_only=True)
class StageWeights:
    """What a stage holds besides its activations, per candidate (arrays broadcast): one
    block's weight bytes (``expert_weight_bytes`` of the experts, synchronised over
    ``expert_group``), the embedding's and the head's (``pre_weight``, ``post_weight``),
    ``n_mb`` microbatches over ``pp`` stages of ``layers`` blocks (``end_layers`` on the end
    stages; None: the same) and ``interleave`` virtual stages, the replica group and the ZeRO
    stage that shard them, the gradient and optimizer bytes per 2-byte weight, DualPipe's two
    stages per GPU, and PyTorch FSDP's gathered blocks and their gather factor
    (:func:`model.physics.fsdp.fsdp_memory`); the group the dense gradients are sharded over
    (None: the replica group), the bytes the loss adds at its peak on the stage holding the
    head, whether the embedding and head stay gathered (FSDP2's root;
    :mod:`model.physics.peak_memory`) and whether the weight shards are the FP32 master
    (PyTorch FSDP: :data:`FP32_MASTER_FACTOR`)."""

    block_weight_bytes: Any
    pre_weight: Any
    post_weight: Any
    n_mb: Any
    layers: Any
    pp: Any
    dp_group: Any
    interleave: Any = 1
    zero: int = 1
    grad_factor: float = 1.0
    end_layers: Any = None
    expert_weight_bytes: Any = 0.0
    expert_group: Any = 1
    opt_factor: float = OPTIMIZER_FACTOR
    dualpipe: bool = False
    gathered_blocks: Any = None
    gathered_factor: float = 1.0
    grad_group: Any = None
    loss_peak_bytes: Any = 0.0
    gathered_ends: bool = False
    fp32_shards: bool = False


class StageMemory:
    """Memory per GPU (bytes) of a pipeline's first, last and second stage, for any activations.

    The first stage holds the embedding (``pre``) and its in-flight microbatches' activations,
    the last the head (``post``), a middle stage ``layers`` blocks; the end stages hold
    ``end_layers`` blocks (default ``layers``; one fewer where the embedding and loss count as
    layers). With pp = 1 it is one stage. The binding (largest) stage is reported. ZeRO-3 adds
    two gathered blocks of weights (the one computing, the next prefetched). What does not
    depend on the activations (weights, gradients, optimizer, in-flight counts) is computed
    once, so a search for the fewest recomputed layers (:func:`fewest_recomputed_layers`) pays
    only for the activations at each step.

    Two shortcuts leave every number as it is. When the end stages hold as many blocks as a
    middle one, the middle stage holds no more than the first (the same blocks without the
    embedding, no more microbatches in flight; every step of the sum is monotone, so rounding
    keeps the order), so it never binds and is not computed. Without expert weights (a dense
    model) the expert parts are zero and are not computed either.
    """

    def __init__(self, stage: StageWeights) -> None:
        block_weight_bytes, layers, pp = stage.block_weight_bytes, stage.layers, stage.pp
        pre_weight, post_weight, end_layers = stage.pre_weight, stage.post_weight, stage.end_layers
        zero, grad_factor, opt_factor = stage.zero, stage.grad_factor, stage.opt_factor
        expert_weight_bytes, expert_group = stage.expert_weight_bytes, stage.expert_group
        n_mb, interleave, dualpipe = stage.n_mb, stage.interleave, stage.dualpipe
        dp_group = stage.dp_group
        gathered_blocks, gathered_factor = stage.gathered_blocks, stage.gathered_factor
        d = layers.astype(float)
        ends = d if end_layers is None else np.asarray(end_layers, dtype=float)
        self.single, self.d, self.ends = pp == 1, d, ends
        self.middle = not np.array_equal(ends, d)  # else the first stage bounds the middle one
        blocks = (ends, ends, d) if self.middle else (ends, ends)
        self.weights = (ends * block_weight_bytes + pre_weight
                        + np.where(self.single, post_weight, 0.0),
                        ends * block_weight_bytes + post_weight,
                        d * block_weight_bytes)[:len(blocks)]
        self.dualpipe = dualpipe and not np.all(self.single)
        if self.dualpipe:  # an end GPU holds stage 0 of one direction and stage pp − 1 of the
            # other: the embedding and the head (DeepSeek-V3 report §3.2.1, Figure 5)
            both = np.where(self.single, 0.0, pre_weight + post_weight)
            ends_w = ends * block_weight_bytes + both
            self.weights = (np.where(self.single, self.weights[0], ends_w),
                            np.where(self.single, self.weights[1], ends_w)) + self.weights[2:]
        self.has_experts = bool(np.any(expert_weight_bytes))
        self.experts = tuple(b * expert_weight_bytes for b in blocks) if self.has_experts else ()
        # ZeRO-3 holds the block it computes and the one it prefetches (2), or — PyTorch FSDP
        # without resharding after the forward — every block of the stage from its forward to
        # its backward (``gathered_blocks`` = the stage's layers); gathered in FP32, twice the
        # bytes (``gathered_factor``, model.physics.fsdp)
        held = 2.0 if gathered_blocks is None else np.maximum(
            np.asarray(gathered_blocks, dtype=float), 2.0)
        self.gathered = (held * gathered_factor * (block_weight_bytes + expert_weight_bytes)
                         if zero >= 3 else 0.0)
        self.parts = [zero_sharded(w, dp_group, zero, grad_factor, opt_factor,
                                   stage.grad_group, stage.fp32_shards) for w in self.weights]
        self.loss_peak = stage.loss_peak_bytes
        if self.has_experts:
            self.parts = [tuple(a + b for a, b in zip(p, zero_sharded(e, expert_group, zero,
                                                                      grad_factor, opt_factor,
                                                                      None, stage.fp32_shards)))
                          for p, e in zip(self.parts, self.experts)]
        # FSDP2's root (the embedding, final norm and head) is never resharded after the
        # forward: the end stages hold it gathered through the forward and the backward
        # (model.physics.peak_memory.root_gathered)
        self.gathered_stage = [self.gathered] * len(blocks)
        self.root_gathered = stage.gathered_ends and zero >= 3  # the end stages hold more
        if self.root_gathered:
            ends_w = (pre_weight + np.where(self.single, post_weight, 0.0), post_weight, 0.0)
            if self.dualpipe:
                both = np.where(self.single, 0.0, pre_weight + post_weight)
                ends_w = (np.where(self.single, ends_w[0], both),
                          np.where(self.single, ends_w[1], both), 0.0)
            self.gathered_stage = [self.gathered + gathered_factor * w
                                   for w in ends_w[:len(blocks)]]
        self.static = [sum(p) + g for p, g in zip(self.parts, self.gathered_stage)]
        ranks = (0, np.maximum(pp - 1, 0), np.minimum(1, pp))[:len(blocks)]
        self.in_flight = tuple(in_flight_microbatches(pp, n_mb, interleave, r) for r in ranks)
        if dualpipe:  # every GPU holds pp + 1 microbatches' activations (DualPipe README)
            self.in_flight = tuple(np.minimum(pp + 1, n_mb).astype(float) for _ in ranks)
            # … as a 1F1B pipeline in each direction: its stage r holds pp − r, the other
            # direction's stage pp − 1 − r holds r + 1 (together pp + 1); an end GPU's
            # embedding chunk is stage 0 (pp), its head chunk stage pp − 1 (1)
            self.pre_flight = in_flight_microbatches(pp, n_mb, 1, 0)
            self.post_flight = in_flight_microbatches(pp, n_mb, 1, np.maximum(pp - 1, 0))

    def activations(self, block_act_bytes, pre_act, post_act) -> tuple:
        """Activation bytes of the first, last and (when it can bind) second stage."""
        f, loss = self.in_flight, self.loss_peak  # the loss's peak: once, where the head is
        if self.dualpipe:  # each end GPU: its two chunks' blocks, the embedding and the head
            ends = (self.ends * block_act_bytes * f[0] + pre_act * self.pre_flight
                    + post_act * self.post_flight + loss)
            ends = np.where(self.single, (self.ends * block_act_bytes + pre_act) * f[0]
                            + post_act + loss, ends)
            return (ends, ends) + ((self.d * block_act_bytes * f[2],) if self.middle else ())
        if isinstance(loss, float) and loss == 0.0:  # no loss peak (every stack but eager FP32)
            acts = ((self.ends * block_act_bytes + pre_act) * f[0]
                    + np.where(self.single, post_act, 0.0),
                    (self.ends * block_act_bytes + post_act) * f[1])
        else:
            acts = ((self.ends * block_act_bytes + pre_act) * f[0]
                    + np.where(self.single, post_act + loss, 0.0),
                    (self.ends * block_act_bytes + post_act) * f[1] + loss)
        return acts + (self.d * block_act_bytes * f[2],) if self.middle else acts

    def total(self, block_act_bytes, pre_act, post_act) -> np.ndarray:
        """The binding stage's bytes (with pp = 1 the first stage holds the most)."""
        acts = self.activations(block_act_bytes, pre_act, post_act)
        out = np.maximum(self.static[0] + acts[0], self.static[1] + acts[1])
        return np.maximum(out, self.static[2] + acts[2]) if self.middle else out

    def breakdown(self, block_act_bytes, pre_act, post_act) -> dict[str, np.ndarray]:
        """The binding stage's bytes and their breakdown."""
        acts = self.activations(block_act_bytes, pre_act, post_act)
        totals = [st + a for st, a in zip(self.static, acts)]
        pick = self._picker(totals)
        held, grads, optimizer = (pick([p[i] for p in self.parts]) for i in range(3))
        if self.has_experts:
            params, experts = pick([w + e for w, e in zip(self.weights, self.experts)]), pick(
                list(self.experts))
        else:
            params, experts = pick(list(self.weights)), np.zeros(np.shape(totals[0]))
        # the stages hold the same gathered blocks unless FSDP2's root sits on the end stages
        gathered = pick(self.gathered_stage) if self.root_gathered else self.gathered
        return {"weights_bytes": held + gathered, "gradients_bytes": grads,
                "optimizer_bytes": optimizer, "activations_bytes": pick(list(acts)),
                "params_bytes": params, "expert_params_bytes": experts,
                "memory_bytes": pick(totals),
                # the binding stage's blocks and microbatches in flight (partial offload)
                "stage_layers": pick([self.ends, self.ends, self.d]),
                "in_flight": pick(list(self.in_flight))}

    def _picker(self, totals: list[np.ndarray]):
        """A function picking the binding stage's value out of each stage's: the first (always
        with pp = 1; on ties), else the largest (the last on a tie with the middle)."""
        t0, t1 = totals[0], totals[1]
        first = self.single | ((t0 >= t1) & (t0 >= totals[2]) if self.middle else t0 >= t1)
        shape = np.shape(first)
        if first.all():  # the usual case: the first stage binds everywhere
            return lambda values: _full(values[0], shape)
        if not self.middle:
            return lambda values: np.where(first, _full(values[0], shape),
                                           _full(values[1], shape))
        second = totals[1] >= totals[2]
        return lambda values: np.where(first, _full(values[0], shape), np.where(
            second, _full(values[1], shape), _full(values[2], shape)))


def _full(values, shape: tuple) -> np.ndarray:
    """``values`` (bytes or counts, as floats) broadcast to one per configuration."""
    if np.shape(values) == shape:
        return np.asarray(values, dtype=float)
    return np.broadcast_to(np.asarray(values, dtype=float), shape).copy()


def stage_memory(*, block_act_bytes, pre_act, post_act, **fixed) -> dict[str, np.ndarray]:
    """Memory per GPU (bytes) of the binding stage and its breakdown (:class:`StageMemory`)."""
    return StageMemory(StageWeights(**fixed)).breakdown(block_act_bytes, pre_act, post_act)


def offload_memory(mem: dict[str, np.ndarray], block_weight_bytes, block_act_bytes,
                   grad_factor: float, ex: Execution) -> dict[str, np.ndarray]:
    """Move the offloaded parts of the binding stage's memory to ``host_bytes``: HBM keeps two
    blocks' worth of what is offloaded (the block computing and the one in transfer). Partial
    activation offload (``offload_layers`` N) moves min(N, D)·f blocks' activations of the
    binding stage's D blocks and f microbatches in flight."""
    if ex.offload == "none" and not ex.offload_layers:
        return {**mem, "host_bytes": np.zeros_like(mem["memory_bytes"])}
    out = dict(mem)
    host = np.zeros_like(mem["memory_bytes"])
    if ex.offloads("optimizer"):
        host = host + out["optimizer_bytes"]
        out["optimizer_bytes"] = np.zeros_like(host)
    if ex.offloads("weights"):
        keep_w = np.minimum(out["weights_bytes"], 2 * block_weight_bytes)
        keep_g = np.minimum(out["gradients_bytes"], 2 * grad_factor * block_weight_bytes)
        host = host + out["weights_bytes"] - keep_w + out["gradients_bytes"] - keep_g
        out["weights_bytes"], out["gradients_bytes"] = keep_w, keep_g
    if ex.offloads("activations"):
        keep_a = np.minimum(out["activations_bytes"], 2 * block_act_bytes)
        host = host + out["activations_bytes"] - keep_a
        out["activations_bytes"] = keep_a
    elif ex.offload_layers:  # N layers' activations of every microbatch in flight
        moved = (np.minimum(ex.offload_layers, mem["stage_layers"]) * mem["in_flight"]
                 * block_act_bytes)
        back = np.minimum(moved, 2 * block_act_bytes)  # the layer computing, the one in transfer
        host = host + moved - back
        out["activations_bytes"] = out["activations_bytes"] - moved + back
    out["memory_bytes"] = (out["weights_bytes"] + out["gradients_bytes"]
                           + out["optimizer_bytes"] + out["activations_bytes"])
    out["host_bytes"] = host
    return out


def fewest_recomputed_layers(memory_at, layers, usable_bytes: float) -> np.ndarray:
    """Per configuration, the fewest layers r of a stage's D that must recompute fully for
    ``memory_at(r)`` (bytes, non-increasing in r) to fit in ``usable_bytes``: 0 when it fits
    as it is, or when even r = D does not fit. A bisection over r, vectorized."""
    d = np.asarray(layers, dtype=np.int64)
    lo = np.zeros_like(d)  # does not fit at lo (or lo = 0)
    hi = d.copy()  # fits at hi, where it fits at all
    need = (memory_at(lo) > usable_bytes) & (memory_at(hi) <= usable_bytes)
    while True:
        open_ = need & (hi - lo > 1)
        if not open_.any():
            break
        mid = (lo + hi) // 2
        fits = memory_at(mid) <= usable_bytes
        hi = np.where(open_ & fits, mid, hi)
        lo = np.where(open_ & ~fits, mid, lo)
    return np.where(need, hi, 0)


def fits_in_memory(mem: dict[str, np.ndarray], hbm_usable_bytes: float,
                   host_bytes: float) -> np.ndarray:
    """Whether the HBM left for the model and, for offloaded parts, the host tier suffice."""
    return (mem["memory_bytes"] <= hbm_usable_bytes) & (mem["host_bytes"] <= host_bytes)
