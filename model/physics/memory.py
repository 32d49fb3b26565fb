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
* offload (ZeRO-Offload / Infinity, Ren et al. 2021, Rajbhandari et al. 2021) moves the
  optimizer state, the weights and gradients (HBM keeps two blocks' worth of each: the one
  computing and the one in transfer) or the activations (HBM keeps two blocks' worth) to host
  memory.
"""

from __future__ import annotations

import numpy as np

from ..specs.execution import Execution

OPTIMIZER_FACTOR = 6.0  # fp32 master + Adam m, v = 12 B/param = 6 × the 2-byte weights


def block_activation_bytes(ex: Execution, block_act_bytes, boundary_act_bytes, layers):
    """Activation bytes one block keeps per microbatch, on average over a stage of ``layers``
    blocks: A₁ (the ops' sum), or the block's input alone for the blocks that recompute (all
    with ``full``, min(r, D) of D with ``recompute_layers`` = r)."""
    share = ex.recompute_share(layers)
    if not np.any(share):
        return block_act_bytes
    if ex.recompute == "full":
        return boundary_act_bytes
    return block_act_bytes + share * (boundary_act_bytes - block_act_bytes)


def in_flight_microbatches(pp, n_mb, interleave: int):
    """Microbatches whose activations the first stage holds: min(pp, n_mb) with 1F1B, times
    (1 + (pp − 1)/(pp·V)) with V interleaved stages (Korthikanti et al. 2022, §4.2.3)."""
    flight = np.minimum(pp, n_mb).astype(float)
    if interleave > 1:
        flight = flight * (1.0 + (pp - 1) / (pp * interleave))
    return flight


def zero_sharded(weights, dp_group, zero: int, grad_factor: float = 1.0):
    """(weights, gradients, optimizer) bytes held under ZeRO stage ``zero`` (Rajbhandari et al.
    2020): optimizer state (6× the 2-byte weights) sharded from stage 1, gradients (``grad_factor``
    × the weights: 2 for fp32 gradients) from 2, weights from 3."""
    optimizer = OPTIMIZER_FACTOR * weights / (dp_group if zero >= 1 else 1)
    grads = grad_factor * weights / (dp_group if zero >= 2 else 1)
    held = weights / dp_group if zero >= 3 else weights
    return held, grads, optimizer


def stage_memory(*, block_weight_bytes, block_act_bytes, pre_weight, pre_act, post_weight,
                 post_act, n_mb, layers, pp, dp_group, interleave: int = 1, zero: int = 1,
                 grad_factor: float = 1.0) -> dict[str, np.ndarray]:
    """Memory per GPU (bytes) of the binding stage and its breakdown.

    The first stage holds the embedding (``pre``) and the in-flight microbatches' activations;
    the last holds the head (``post``) and one; with pp = 1 they are one stage. The larger is
    reported. ZeRO-3 adds two gathered blocks of weights (the one computing, the next
    prefetched).
    """
    d = layers.astype(float)
    single = pp == 1
    in_flight = in_flight_microbatches(pp, n_mb, interleave)
    w_first = d * block_weight_bytes + pre_weight + np.where(single, post_weight, 0.0)
    a_first = (d * block_act_bytes + pre_act) * in_flight + np.where(single, post_act, 0.0)
    w_last = d * block_weight_bytes + post_weight
    a_last = d * block_act_bytes + post_act
    gathered = 2 * block_weight_bytes if zero >= 3 else 0.0
    parts_first = zero_sharded(w_first, dp_group, zero, grad_factor)
    parts_last = zero_sharded(w_last, dp_group, zero, grad_factor)
    mem_first = sum(parts_first) + gathered + a_first
    mem_last = sum(parts_last) + gathered + a_last
    first_binds = single | (mem_first >= mem_last)
    held, grads, optimizer = (np.where(first_binds, f, s) for f, s in zip(parts_first, parts_last))
    return {"weights_bytes": held + gathered, "gradients_bytes": grads,
            "optimizer_bytes": optimizer,
            "activations_bytes": np.where(first_binds, a_first, a_last),
            "params_bytes": np.where(first_binds, w_first, w_last),
            "memory_bytes": np.where(first_binds, mem_first, mem_last)}


def offload_memory(mem: dict[str, np.ndarray], block_weight_bytes, block_act_bytes,
                   grad_factor: float, ex: Execution) -> dict[str, np.ndarray]:
    """Move the offloaded parts of the binding stage's memory to ``host_bytes``: HBM keeps two
    blocks' worth of what is offloaded (the block computing and the one in transfer)."""
    if ex.offload == "none":
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
    out["memory_bytes"] = (out["weights_bytes"] + out["gradients_bytes"]
                           + out["optimizer_bytes"] + out["activations_bytes"])
    out["host_bytes"] = host
    return out


def fits_in_memory(mem: dict[str, np.ndarray], hbm_usable_bytes: float,
                   host_bytes: float) -> np.ndarray:
    """Whether the HBM left for the model and, for offloaded parts, the host tier suffice."""
    return (mem["memory_bytes"] <= hbm_usable_bytes) & (mem["host_bytes"] <= host_bytes)
