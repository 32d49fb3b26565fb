"""From one block's per-microbatch times to an iteration: pipeline (1F1B), data parallel.

docs/model.md §8 and §9, for arrays of configurations. Per configuration: n_mb = (GBS/dp) // b
microbatches, D = depth / pp blocks per stage, T_f / T_b one block's forward / backward time.

* DP (ZeRO-1 / distributed optimizer): reduce-scatter gradients and all-gather parameters of W1
  bytes per block over the replica group G (τ = its members per domain). One block's collective is
  exposed; the other D − 1 hide behind one microbatch of the next block:
  t_dp = T_AG + (D−1)·max(T_AG − T_f, 0) + T_RS + (D−1)·max(T_RS − T_b, 0); with FP8
  parameters gathered (``fp8_param_gather``) T_AG moves the FP8 bytes, about W1/2.
* PP: one p2p per microbatch each way, t_pp = 2·n_mb·T_p2p; of the pp − 1 stage links
  int(pp/nv_pp − 1) cross domains (slow; free in the paper, bug 2), the rest stay inside.
* T_loc = n_mb·(D·(T_f + T_b) + T_edge); bubble = (pp − 1)·(T_loc + t_pp)/n_mb;
  t = T_loc + t_pp + bubble + t_dp.
* Memory per GPU: :mod:`model.physics.memory`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from model.physics.collectives import Collective
from model.physics.context import Ctx
from model.physics.fsdp import pytorch_fsdp_time_s
from model.physics.offload import host_optimizer_time_s, offload_time_s
from model.physics.pricing import Pricing
from model.physics.stage import DpSync, Stage
from model.specs.execution import Execution
from model.specs.precision import PRECISIONS


def _bucketed_s(kind: Collective, volume_bytes, group, tau, pricing: Pricing,
                bucket_bytes: float):
    """A collective of V bytes issued as ceil(V / B) collectives of V/ceil(V/B) bytes each
    (buckets of at most B bytes; B = 0: one collective): each pays the ring's per-step latency
    again (DeepSpeed ZeRO-3 gathers parameters in buckets of stage3_prefetch_bucket_size
    elements, Rajbhandari et al. 2020 and the DeepSpeed configuration reference)."""
    if not bucket_bytes:
        return pricing.collective(kind, volume_bytes, group, tau)
    pieces = np.maximum(np.ceil(np.asarray(volume_bytes, dtype=float) / bucket_bytes), 1.0)
    return pieces * pricing.collective(kind, volume_bytes / pieces, group, tau)


def _gather_and_reduce_s(sync: DpSync, pricing: Pricing):
    """(T, T_rs): one block's parameter all-gather of gather_factor·W bytes (W: its 2-byte
    weights; ``gather_factor`` < 1 when FP8 parameters are gathered) and its gradient
    reduce-scatter of grad_factor·W bytes (the same time when the factors are equal:
    docs/model.md, data parallelism), in buckets of ``bucket_bytes`` (0: one collective each).
    ``sync.experts``: the experts' weights, gathered and reduced over their own
    (expert-data-parallel) group after the others: their times add."""
    w, group, tau, bucket = sync.weight_bytes, sync.group, sync.tau, sync.bucket_bytes
    t = _bucketed_s(Collective.ALLGATHER, sync.gather_factor * w, group, tau, pricing, bucket)
    t_rs = t if sync.grad_factor == sync.gather_factor else _bucketed_s(
        Collective.REDUCESCATTER, sync.grad_factor * w, group, tau, pricing, bucket)
    if sync.experts is not None:
        t_e, t_rs_e = _gather_and_reduce_s(sync.experts, pricing)
        t, t_rs = t + t_e, t_rs + t_rs_e
    return t, t_rs


def dp_time_s(sync: DpSync, t_fwd, t_bwd, layers, pricing: Pricing, overlap: bool = True):
    """Data-parallel gradient RS + parameter AG with per-block overlap (module docstring).

    A ring all-gather and reduce-scatter of the same buffer take the same time T, so
    t_dp = 2T + (D−1)·(h(T, T_f) + h(T, T_b)) with h = ``pricing.hidden`` (the excess over the
    block's compute plus the overlap slowdown); gradients reduced in fp32 (``grad_factor`` 2)
    make the reduce-scatter's buffer twice the 2-byte weights. Without ``overlap`` every
    block's collectives are exposed: t_dp = D·(T + T_rs). A MoE block's expert weights add
    their collectives over the expert-data-parallel group (``sync.experts``) to T and T_rs;
    FP8 parameters make the all-gather ``gather_factor`` × the 2-byte weights.
    """
    t, t_rs = _gather_and_reduce_s(sync, pricing)
    if not overlap:
        return layers * (t + t_rs)
    return t + t_rs + (layers - 1) * (pricing.hidden(t, t_fwd) + pricing.hidden(t_rs, t_bwd))


def param_gather_factor(execution: Execution) -> float:
    """The blocks' parameter all-gather over its BF16 bytes: the precision's FP8 bytes per
    parameter / 2 with ``fp8_param_gather`` (Megatron-Core's ``--fp8-param-gather``), else 1.
    The embedding and the LM head stay BF16."""
    if not execution.fp8_param_gather:
        return 1.0
    return PRECISIONS[execution.precision].param_gather_factor


def edge_weight_bytes(pre_weight, post_weight, pp: np.ndarray) -> np.ndarray:
    """Weights outside the blocks on the heavier end stage (both ends when pp = 1)."""
    return np.where(pp == 1, pre_weight + post_weight, np.maximum(pre_weight, post_weight))


ADAM_BYTES_PER_PARAM = 28.0  # read fp32 master, m, v, bf16 grad; write master, m, v, bf16 weight
BF16_MOMENTS_SAVED_BYTES = 8.0  # m and v read and written in bf16: 4 × 2 B fewer


def fsdp_time_s(sync: DpSync, t_fwd, t_bwd, layers, n_mb, pricing: Pricing,
                overlap: bool = True):
    """ZeRO-3 / FSDP: each microbatch all-gathers every block's weights (T) in the forward and
    again in the backward, and reduce-scatters its gradients (T_rs, fp32 when ``grad_factor`` is
    2) in the backward, each overlapped with one block's compute (DeepSpeed ZeRO-3 and
    Megatron FSDP keep gradients sharded, so they reduce every microbatch). The first block's
    gather is exposed: t = T + n_mb·D·(h(T, T_f) + h(T + T_rs, T_b)), h = ``pricing.hidden``;
    without ``overlap`` every gather and reduce-scatter is exposed: n_mb·D·(2T + T_rs)."""
    t, t_rs = _gather_and_reduce_s(sync, pricing)
    if not overlap:
        return n_mb * layers * (2 * t + t_rs)
    return t + n_mb * layers * (pricing.hidden(t, t_fwd) + pricing.hidden(t + t_rs, t_bwd))


def optimizer_time_s(ctx: Ctx, stage: Stage):
    """The optimizer step: 28 B per local parameter (``stage.params_bytes`` / 2 bytes,
    sharded over the replica group from ZeRO-1; of them ``expert_params_bytes`` over the
    expert group) at HBM speed, or on the host when the optimizer is offloaded."""
    system, mode, execution = ctx.system, ctx.mode, ctx.execution
    params_bytes, dp_group, zero = stage.params_bytes, stage.dp_group, execution.zero
    expert_params_bytes, expert_group = stage.expert_params_bytes, stage.expert_group
    if np.any(expert_params_bytes):
        dense = np.asarray(params_bytes, dtype=float) - expert_params_bytes
        local_params = (dense / (dp_group if zero >= 1 else 1) + np.asarray(
            expert_params_bytes, dtype=float) / (expert_group if zero >= 1 else 1)) / 2.0
    else:  # a dense model: the same numbers without adding zeros
        local_params = np.asarray(params_bytes, dtype=float) / (
            dp_group if zero >= 1 else 1) / 2.0
    # an fp32 gradient is 2 B more; ``grad_factor`` may carry a LoRA trainable share
    # (model.physics.lora), which scales ``params_bytes`` instead, so the bytes per trainable
    # parameter come from the execution
    own_factor = 2.0 if execution.fp32_gradients else 1.0
    adam = ADAM_BYTES_PER_PARAM + 2.0 * (own_factor - 1.0)
    if execution.optimizer_bf16_moments:  # m and v read and written in 2 B instead of 4
        adam = adam - BF16_MOMENTS_SAVED_BYTES
    if mode.no_optimizer_step:
        return 0.0
    if execution.offloads("optimizer"):
        return host_optimizer_time_s(local_params, own_factor,
                                     system.host_bandwidth_gb_per_s * 1e9,
                                     system.host_memory_bandwidth_gb_per_s * 1e9)
    return adam * local_params / system.hbm_bytes_per_s


# the weight-gradient share W/(B + W) of a backward chunk: a matmul's dX and dW take equal
# FLOPs (model.physics.gemm.backward_efficiency prices them alike)
WGRAD_SHARE = 0.5


def dualpipe_bubble_s(pp, t_fwd_s, t_bwd_s, p2p_s=0.0):
    """DualPipe's bubble (DeepSeek-V3 report §3.2.1, Table 2; deepseek-ai/DualPipe README @
    3da1bbe): (pp/2 − 1)·(F&B + B − 3W), F a forward chunk's time, B a full backward chunk's,
    W its backward-for-weights part and F&B the time of a forward and a backward chunk run
    overlapped (the compute of both, F + B, their communication hidden). With W = w·B
    (w = :data:`WGRAD_SHARE`): (pp/2 − 1)·(F + (2 − 3w)·B) — with w = ½, (pp/2 − 1)·(F + B/2),
    against 1F1B's (pp − 1)·(F + B). A chunk is one stage's layers (the same number of stages;
    each GPU holds two of them). ``p2p_s``: a chunk's pipeline message, added to F. Zero for
    pp ≤ 2 (DualPipe needs pp even)."""
    half = np.maximum(np.asarray(pp, dtype=float) / 2.0 - 1.0, 0.0)
    return half * (t_fwd_s + p2p_s + (2.0 - 3.0 * WGRAD_SHARE) * t_bwd_s)


def iteration_time(ctx: Ctx, stage: Stage) -> dict[str, np.ndarray]:
    """Iteration time (s), its breakdown and FLOPs per GPU for arrays of configurations: the
    binding pipeline ``stage`` of each (:class:`~model.physics.stage.Stage`), priced in
    ``ctx`` (its system, mode, execution and pricing).

    ``stage.edge`` is the per-microbatch cost of the ops outside the blocks on the slower end
    stage (both ends when pp = 1, else the slower of embedding and head); ``edge_weight`` their
    weights. The pace is the slowest stage's: a middle stage's ``layers`` blocks or an end
    stage's ``end_layers`` blocks (default ``layers``) plus its edge ops.
    With V = ``interleave`` virtual stages the bubble shrinks V× and each microbatch crosses V×
    as many stage boundaries (Narayanan et al. 2021). The optimizer step reads and writes
    28 B per local parameter (``params_bytes`` / 2 bytes, sharded from ZeRO-1) at HBM speed.
    Every communication and overlap term is priced by ``ctx.pricing``: the exact time of a
    placed configuration, or a lower bound over the placements of a shape
    (:mod:`model.physics.pricing`). A MoE block's expert weights synchronise over the
    expert-data-parallel group (``expert_group``, ``expert_tau`` per NVLink domain), and their
    optimizer state is sharded over it (``expert_params_bytes`` of the stage's
    ``params_bytes``).
    """
    pricing, execution = ctx.pricing, ctx.execution
    block, edge, end_layers, pp = stage.block, stage.edge, stage.end_layers, stage.pp
    interleave, grad_factor = stage.interleave, stage.grad_factor
    n_mb, layers = stage.n_mb, stage.layers
    n_mb = n_mb.astype(float)
    d = layers.astype(float)
    # a middle stage sets the pace only where the end stages hold fewer blocks (else an end
    # stage's are the same blocks plus its edge ops, never less: not compared at all)
    lighter = end_layers is not None and end_layers is not layers
    d_end = np.asarray(end_layers, dtype=float) if lighter else d
    t_block = block.t_fwd + block.t_bwd
    t_end = d_end * t_block + edge.t_fwd + edge.t_bwd
    middle_binds = d * t_block > t_end if lighter else None
    t_loc = n_mb * (np.where(middle_binds, d * t_block, t_end) if lighter else t_end)
    t_pp = 2 * interleave * n_mb * pricing.p2p(stage.boundary_act_bytes, pp, stage.nv_pp)
    dualpipe = execution.pipeline_schedule == "dualpipe"
    if dualpipe:  # two stages' parameters per GPU, each chunk's forward on the bubble
        t_f = d_end * block.t_fwd + edge.t_fwd  # the binding stage's forward chunk
        if lighter:
            t_f = np.where(middle_binds, d * block.t_fwd, t_f)
        bubble = dualpipe_bubble_s(pp, t_f, t_loc / n_mb - t_f, t_pp / (2 * n_mb))
        # the pipeline messages run beside the paired chunks' compute (report §3.2.1: "both
        # all-to-all and PP communication can be fully hidden"), slowing it like any overlap
        t_pp = pricing.hidden(t_pp, t_loc)
    else:
        bubble = (pp - 1) * (t_loc + t_pp) / (n_mb * interleave)
    copies = 2.0 if dualpipe else 1.0
    sync = DpSync(copies * block.weight_bytes, stage.dp_group, stage.dp_tau, grad_factor,
                  execution.dp_bucket_mb * 1e6, None, param_gather_factor(execution))
    if np.any(block.expert_weight_bytes):
        sync = sync.with_experts(copies * block.expert_weight_bytes, stage.expert_group,
                                 stage.expert_tau)
    if execution.zero >= 3 and execution.fsdp_version:  # PyTorch FSDP1/FSDP2 (physics.fsdp)
        whole = replace(sync, weight_bytes=block.weight_bytes + block.expert_weight_bytes,
                        experts=None)
        t_dp = pytorch_fsdp_time_s(whole, block.t_fwd, block.t_bwd, d, n_mb, ctx,
                                   dp_time_s=dp_time_s)
    elif execution.zero >= 3:
        own = replace(sync, weight_bytes=block.weight_bytes)  # the dense weights once
        t_dp = fsdp_time_s(own, block.t_fwd, block.t_bwd, d, n_mb, pricing,
                           execution.dp_overlap)
    else:
        t_dp = dp_time_s(sync, block.t_fwd, block.t_bwd, d, pricing, execution.dp_overlap)
    edge_weight = stage.edge_weight
    if np.any(edge_weight > 0):  # embedding/head (BF16) gradients: exposed, nothing to hide behind
        edges = DpSync(edge_weight, stage.dp_group, stage.dp_tau, grad_factor)
        t_dp = t_dp + dp_time_s(edges, 0.0, 0.0, 1.0, pricing)
    t_opt = np.zeros_like(t_loc) + optimizer_time_s(ctx, stage)
    t_off = offload_time_s(block, n_mb, d, grad_factor, ctx)
    out = {"iteration_time_s": t_loc + t_pp + bubble + t_dp + t_opt + t_off}
    if block.t_comp is None:  # a bound: the time only
        return out

    def per_iteration(name: str):  # the binding stage's share of a block/edge quantity
        per_block, per_edge = getattr(block, name), getattr(edge, name)
        if not lighter:
            return n_mb * (d_end * per_block + per_edge)
        return n_mb * np.where(middle_binds, d * per_block, d_end * per_block + per_edge)

    return {
        **out,
        "t_optimizer_s": t_opt,
        "t_offload_s": t_off,
        "t_compute_s": per_iteration("t_comp"),
        "t_memory_s": per_iteration("t_mem"),
        "t_tp_comm_s": per_iteration("t_comm"),
        "t_ep_comm_s": per_iteration("t_ep"),
        "t_pp_comm_s": t_pp,
        "t_dp_comm_s": t_dp,
        "t_bubble_s": bubble,
        "flop_per_gpu": per_iteration("flop"),
        "model_flop_per_gpu": per_iteration("flop_model"),
    }
