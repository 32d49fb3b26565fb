"""PyTorch FSDP (FSDP1 and FSDP2) as it runs a step: per-block gathers, their prefetch, the
per-microbatch reduce-scatter, the gather dtype, HSDP.

Per microbatch and block (W the block's 2-byte weights over the shard group G of S GPUs):

* forward: all-gather of g·W (g = gathered bytes per parameter / 2: ``fsdp_gather_dtype``
  fp32 → 2, Composer's DEFAULT mixed precision of 2023, ``prepare_fsdp_module``:
  param_dtype float32; bf16 → 1), issued one block ahead (FSDP1 issues the next block's
  gather from its pre-forward hook while the current block's kernels run; FSDP2 prefetches
  one block explicitly): exposed beyond the block's forward, h(T, T_f);
* backward: with ``fsdp_reshard_after_forward`` (FULL_SHARD; FSDP2's default) the weights are
  gathered again, and the gradients reduce-scattered (every microbatch: FSDP keeps only
  sharded gradients). With ``fsdp_prefetch`` 1 (BACKWARD_PRE, FSDP2) the next block's gather
  overlaps the current block's backward: h(T + T_rs, T_b); with 0 (FSDP1's BACKWARD_POST,
  Composer's default) it is issued after the current block's gradient and waits in front of
  the next block's backward: T + h(T_rs, T_b);
* FSDP2 copies each gathered block out of the all-gather buffer into its parameters
  (``foreach_all_gather_copy_out``, torch/distributed/_composable/fsdp/_fsdp_collectives.py):
  2·g·W bytes of HBM traffic on the compute stream per gather;
* the first block's forward gather is exposed (nothing to hide behind): + T.

HSDP (``fsdp_shard_group`` S > 0): the gathers and reduce-scatters run inside groups of S GPUs
(the placement's NVLink share, at most S), and each shard's gradients are all-reduced across
the dp/S replicas once per step, overlapped with the last microbatch's backward as DDP's
buckets are (:func:`model.physics.pipeline.dp_time_s` on W/S over the replicas).

The time is t = T + n_mb·D·(h(T, T_f) + backward + copies) + t_replicas.
"""

from __future__ import annotations

import numpy as np

from model.physics.collectives import Collective
from model.physics.context import Ctx
from model.physics.peak_memory import fsdp_pipelined, root_gathered
from model.physics.stage import DpSync
from model.specs.execution import Execution

GATHER_FACTOR = {"bf16": 1.0, "fp32": 2.0}  # gathered bytes per parameter / 2


def gather_factor(execution: Execution, default: float) -> float:
    """Gathered bytes per parameter over 2: the FSDP gather dtype's, else ``default`` (the
    precision's, :func:`model.physics.pipeline.param_gather_factor`)."""
    return GATHER_FACTOR.get(execution.fsdp_gather_dtype, default)


def shard_group(dp_group, dp_tau, execution: Execution):
    """(G, τ, replicas): the group FSDP shards over (HSDP: at most ``fsdp_shard_group``), its
    members per NVLink domain, and the replicas across which the shards are all-reduced."""
    group = np.asarray(dp_group, dtype=float)
    if not execution.fsdp_shard_group:
        return group, np.asarray(dp_tau, dtype=float), np.ones_like(group)
    shard = np.minimum(group, float(execution.fsdp_shard_group))
    return shard, np.minimum(np.asarray(dp_tau, dtype=float), shard), group / shard


def pytorch_fsdp_time_s(sync: DpSync, t_fwd, t_bwd, layers, n_mb, ctx: Ctx, *, dp_time_s):
    """FSDP1/FSDP2 data-parallel time of one step (s) for arrays of configurations (module
    docstring): ``sync`` the block's weights (dense and expert) over the replica group, its
    gradient factor and its precision's gather factor (the default of the FSDP gather dtype).
    ``dp_time_s``: :func:`model.physics.pipeline.dp_time_s`, the replicas' all-reduce (HSDP),
    which is plain data parallelism (passed in: pipeline calls this module, so importing it
    here would be a circle)."""
    pricing, execution = ctx.pricing, ctx.execution
    weight_bytes, dp_group, dp_tau = sync.weight_bytes, sync.group, sync.tau
    grad_factor, hbm_bytes_per_s = sync.grad_factor, ctx.system.hbm_bytes_per_s
    group, tau, replicas = shard_group(dp_group, dp_tau, execution)
    g = gather_factor(execution, sync.gather_factor)
    t = pricing.collective(Collective.ALLGATHER, g * weight_bytes, group, tau)
    t_rs = pricing.collective(Collective.REDUCESCATTER, grad_factor * weight_bytes, group, tau)
    gathers = 2.0 if execution.fsdp_reshard_after_forward else 1.0
    if not execution.fsdp_reshard_after_forward:
        backward = pricing.hidden(t_rs, t_bwd)
    elif execution.fsdp_prefetch:
        backward = pricing.hidden(t + t_rs, t_bwd)
    else:
        backward = t + pricing.hidden(t_rs, t_bwd)
    copies = 0.0
    if execution.fsdp_version == 2:
        copies = gathers * 2.0 * g * np.asarray(weight_bytes, dtype=float) / hbm_bytes_per_s
    out = t + n_mb * layers * (pricing.hidden(t, t_fwd) + backward + copies)
    if execution.fsdp_shard_group:
        shard = DpSync(np.asarray(weight_bytes, dtype=float) / group, replicas, 1, grad_factor)
        out = out + np.where(replicas > 1, dp_time_s(shard, t_fwd, t_bwd, layers, pricing), 0.0)
    return out


def fsdp_memory(execution: Execution, layers, pp=1) -> dict:
    """What PyTorch FSDP holds gathered beyond ZeRO-3's two blocks (the keyword arguments of
    :class:`model.physics.memory.StageMemory`): without resharding after the forward — and,
    for FSDP2, under pipeline parallelism (:func:`model.physics.peak_memory.fsdp_pipelined`)
    — every block of the stage stays gathered until its backward; FP32 gathers hold 4 bytes
    per parameter; FSDP2's root (embedding, final norm, head) stays gathered
    (:func:`model.physics.peak_memory.root_gathered`). Empty for the ZeRO-3 of DeepSpeed and
    Megatron (``fsdp_version`` 0)."""
    if not execution.fsdp_version:
        return {}
    out: dict = {"gathered_factor": gather_factor(execution, 1.0),
                 "gathered_ends": root_gathered(execution),
                 # the FP32 shards are the master weights (model.physics.memory), for a model
                 # trained whole (LoRA's frozen weights have no master)
                 "fp32_shards": execution.trainable == "all"}
    if not execution.fsdp_reshard_after_forward:
        out["gathered_blocks"] = layers
    elif np.any(fsdp_pipelined(execution, pp)):
        out["gathered_blocks"] = np.where(fsdp_pipelined(execution, pp), layers, 2)
    return out
