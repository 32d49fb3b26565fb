"""From one block's per-microbatch times to an iteration: pipeline (1F1B), data parallel, memory.

docs/model.md §8 and §9, for arrays of configurations. Per configuration: n_mb = (GBS/dp) // b
microbatches, D = depth / pp blocks per stage, T_f / T_b one block's forward / backward time.

* DP (ZeRO-1 / distributed optimizer): reduce-scatter gradients and all-gather parameters of W1
  bytes per block over the replica group G (τ = its members per domain). One block's collective is
  exposed; the other D − 1 hide behind one microbatch of the next block:
  t_dp = T_AG + (D−1)·max(T_AG − T_f, 0) + T_RS + (D−1)·max(T_RS − T_b, 0).
* PP: one p2p per microbatch each way, t_pp = 2·n_mb·T_p2p; of the pp − 1 stage links
  int(pp/nv_pp − 1) cross domains (slow; free in the paper, bug 2), the rest stay inside.
* T_loc = n_mb·(D·(T_f + T_b) + T_edge); bubble = (pp − 1)·(T_loc + t_pp)/n_mb;
  t = T_loc + t_pp + bubble + t_dp.
* Memory per GPU: weights D·W1 (+ embedding/head on the edge stages), gradients = weights (bf16),
  optimizer state 6·weights/G (fp32 master, momentum, variance: 12 B/param sharded over the
  replicas), activations D·A1·min(pp, n_mb) (1F1B keeps at most pp microbatches in flight).
"""

from __future__ import annotations

import numpy as np

from .block import Totals
from .collectives import Collective, collective_time_s, overlapped_s
from .execution import DEFAULT_EXECUTION, Execution
from .hardware import System
from .modes import Mode
from .offload import host_optimizer_time_s, offload_time_s

OPTIMIZER_FACTOR = 6.0  # fp32 master + Adam m, v = 12 B/param = 6 × the 2-byte weights


def _gather_and_reduce_s(weight_bytes, group, tau, system: System, paper: bool,
                         grad_factor: float):
    """(T, T_rs): one block's parameter all-gather of W bytes and its gradient reduce-scatter of
    grad_factor·W bytes (the same time when the factor is 1: docs/model.md §5.1)."""
    t = collective_time_s(Collective.ALLGATHER, weight_bytes, group, tau, system, paper)
    t_rs = t if grad_factor == 1.0 else collective_time_s(
        Collective.REDUCESCATTER, grad_factor * weight_bytes, group, tau, system, paper)
    return t, t_rs


def dp_time_s(weight_bytes, group, tau, t_fwd, t_bwd, layers, system: System, paper: bool,
              grad_factor: float = 1.0):
    """Data-parallel gradient RS + parameter AG with per-block overlap (module docstring).

    A ring all-gather and reduce-scatter of the same buffer take the same time T (docs/model.md
    §5.1), so t_dp = 2T + (D−1)·(max(T − T_f, 0) + max(T − T_b, 0)) (+ the overlap slowdown, see
    :func:`overlapped_s`); gradients reduced in fp32 (``grad_factor`` 2) make the
    reduce-scatter's buffer twice the 2-byte weights.
    """
    t, t_rs = _gather_and_reduce_s(weight_bytes, group, tau, system, paper, grad_factor)
    g = system.overlap_slowdown
    return t + t_rs + (layers - 1) * (overlapped_s(t, t_fwd, g) + overlapped_s(t_rs, t_bwd, g))


def p2p_time_s(volume_bytes, pp, nv_pp, system: System, paper: bool):
    """Mean time of one pipeline p2p message of V bytes over the pp − 1 stage links.

    All links slow when nv_pp = 1: λ_s + V/(ν·b_s). Otherwise slow = int(pp/nv_pp − 1) links leave
    the domain and fast = pp − 1 − slow stay in it: (fast·(λ_f + V/b_f) + slow·T_slow)/(pp − 1),
    with T_slow = 0 in paper mode (bug 2) and λ_s + V/(ν·b_s) otherwise. Each GPU of a stage sends
    its own shard over its own NIC(s) (ν = NICs per GPU; 1 in paper mode).
    """
    v = np.asarray(volume_bytes, dtype=float)
    nics = 1.0 if paper else system.nics_per_gpu  # paper: one NIC, slow links free
    slow_msg = system.network_latency_s + v / (nics * system.slow_bytes_per_s)
    fast_msg = system.nvlink_latency_s + v / system.fast_bytes_per_s
    links = np.maximum(pp - 1, 1)
    slow = np.floor(pp / nv_pp - 1).astype(float)
    fast = (pp - 1) - slow
    mixed = (fast * fast_msg + slow * (0.0 if paper else slow_msg)) / links
    out = np.where(nv_pp == 1, slow_msg, mixed)
    return np.where(pp > 1, out, 0.0)


def edge_weight_bytes(pre_weight, post_weight, pp: np.ndarray) -> np.ndarray:
    """Weights outside the blocks on the heavier end stage (both ends when pp = 1)."""
    return np.where(pp == 1, pre_weight + post_weight, np.maximum(pre_weight, post_weight))


ADAM_BYTES_PER_PARAM = 28.0  # read fp32 master, m, v, bf16 grad; write master, m, v, bf16 weight


def in_flight_microbatches(pp, n_mb, interleave: int):
    """Microbatches whose activations the first stage holds: min(pp, n_mb) with 1F1B, times
    (1 + (pp − 1)/(pp·V)) with V interleaved stages (Korthikanti et al. 2022, §4.2.3)."""
    flight = np.minimum(pp, n_mb).astype(float)
    if interleave > 1:
        flight = flight * (1.0 + (pp - 1) / (pp * interleave))
    return flight


def _zero_sharded(weights, dp_group, zero: int, grad_factor: float = 1.0):
    """(weights, gradients, optimizer) bytes held under ZeRO stage ``zero`` (Rajbhandari et al.
    2020): optimizer state (6× the 2-byte weights) sharded from stage 1, gradients (``grad_factor``
    × the weights: 2 for fp32 gradients) from 2, weights from 3."""
    optimizer = OPTIMIZER_FACTOR * weights / (dp_group if zero >= 1 else 1)
    grads = grad_factor * weights / (dp_group if zero >= 2 else 1)
    held = weights / dp_group if zero >= 3 else weights
    return held, grads, optimizer


def memory(*, block_weight_bytes, block_act_bytes, pre_weight, pre_act, post_weight, post_act,
           n_mb, layers, pp, dp_group, interleave: int = 1, zero: int = 1,
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
    parts_first = _zero_sharded(w_first, dp_group, zero, grad_factor)
    parts_last = _zero_sharded(w_last, dp_group, zero, grad_factor)
    mem_first = sum(parts_first) + gathered + a_first
    mem_last = sum(parts_last) + gathered + a_last
    first_binds = single | (mem_first >= mem_last)
    held, grads, optimizer = (np.where(first_binds, f, s) for f, s in zip(parts_first, parts_last))
    return {"weights_bytes": held + gathered, "gradients_bytes": grads,
            "optimizer_bytes": optimizer,
            "activations_bytes": np.where(first_binds, a_first, a_last),
            "params_bytes": np.where(first_binds, w_first, w_last),
            "memory_bytes": np.where(first_binds, mem_first, mem_last)}


def fsdp_time_s(weight_bytes, group, tau, t_fwd, t_bwd, layers, n_mb, system: System,
                paper: bool, grad_factor: float = 1.0):
    """ZeRO-3 / FSDP: each microbatch all-gathers every block's weights (T) in the forward and
    again in the backward, and reduce-scatters its gradients (T_rs, fp32 when ``grad_factor`` is
    2) in the backward, each overlapped with one block's compute (DeepSpeed ZeRO-3 and
    Megatron FSDP keep gradients sharded, so they reduce every microbatch). The first block's
    gather is exposed: t = T + n_mb·D·(o(T, T_f) + o(T + T_rs, T_b)), o = :func:`overlapped_s`."""
    t, t_rs = _gather_and_reduce_s(weight_bytes, group, tau, system, paper, grad_factor)
    g = system.overlap_slowdown
    return t + n_mb * layers * (overlapped_s(t, t_fwd, g) + overlapped_s(t + t_rs, t_bwd, g))


def optimizer_time_s(params_bytes, dp_group, system: System, mode: Mode, execution: Execution,
                     zero: int = 1, grad_factor: float = 1.0):
    """The optimizer step: 28 B per local parameter (``params_bytes`` / 2 bytes, sharded over
    ``dp_group`` from ZeRO-1) at HBM speed, or on the host when the optimizer is offloaded."""
    local_params = np.asarray(params_bytes, dtype=float) / 2.0 / (dp_group if zero >= 1 else 1)
    adam = ADAM_BYTES_PER_PARAM + 2.0 * (grad_factor - 1.0)  # an fp32 gradient is 2 B more
    if mode.no_optimizer_step:
        return 0.0
    if execution.offloads("optimizer"):
        return host_optimizer_time_s(local_params, grad_factor,
                                     system.host_bandwidth_gb_per_s * 1e9,
                                     system.host_memory_bandwidth_gb_per_s * 1e9)
    return adam * local_params / system.hbm_bytes_per_s


def iteration_time(
    *, block: Totals, edge: Totals, edge_weight, boundary_act_bytes, n_mb, layers, pp, nv_pp,
    dp_group, dp_tau, system: System, mode: Mode, interleave: int = 1, zero: int = 1,
    params_bytes=0.0, grad_factor: float = 1.0, execution: Execution = DEFAULT_EXECUTION,
) -> dict[str, np.ndarray]:
    """Iteration time (s), its breakdown and FLOPs per GPU for arrays of configurations.

    ``edge`` is the per-microbatch cost of the ops outside the blocks charged to the slowest stage
    (both ends when pp = 1, else the slower of embedding and head); ``edge_weight`` their weights.
    With V = ``interleave`` virtual stages the bubble shrinks V× and each microbatch crosses V×
    as many stage boundaries (Narayanan et al. 2021). The optimizer step reads and writes
    28 B per local parameter (``params_bytes`` / 2 bytes, sharded from ZeRO-1) at HBM speed.
    """
    n_mb = n_mb.astype(float)
    d = layers.astype(float)
    t_loc = n_mb * (d * (block.t_fwd + block.t_bwd) + edge.t_fwd + edge.t_bwd)
    t_pp = 2 * interleave * n_mb * p2p_time_s(boundary_act_bytes, pp, nv_pp, system,
                                              mode.free_slow_pipeline_links)
    ar_bug = mode.allreduce_half_counted
    bubble = (pp - 1) * (t_loc + t_pp) / (n_mb * interleave)
    if zero >= 3:
        t_dp = fsdp_time_s(block.weight_bytes, dp_group, dp_tau, block.t_fwd, block.t_bwd, d,
                           n_mb, system, ar_bug, grad_factor)
    else:
        t_dp = dp_time_s(block.weight_bytes, dp_group, dp_tau, block.t_fwd, block.t_bwd, d,
                         system, ar_bug, grad_factor)
    if np.any(edge_weight > 0):  # embedding/head gradients: exposed, nothing left to hide behind
        t_dp = t_dp + dp_time_s(edge_weight, dp_group, dp_tau, 0.0, 0.0, 1.0, system, ar_bug,
                                grad_factor)
    t_opt = np.zeros_like(t_loc) + optimizer_time_s(params_bytes, dp_group, system, mode,
                                                    execution, zero, grad_factor)
    link = system.host_bandwidth_gb_per_s * 1e9
    t_off = offload_time_s(block_weight_bytes=block.weight_bytes, block_act_bytes=block.act_bytes,
                           t_fwd=block.t_fwd, t_bwd=block.t_bwd, n_mb=n_mb, layers=d,
                           grad_factor=grad_factor, link_bytes_per_s=link, ex=execution)
    return {
        "iteration_time_s": t_loc + t_pp + bubble + t_dp + t_opt + t_off,
        "t_optimizer_s": t_opt,
        "t_offload_s": t_off,
        "t_compute_s": n_mb * (d * block.t_comp + edge.t_comp),
        "t_memory_s": n_mb * (d * block.t_mem + edge.t_mem),
        "t_tp_comm_s": n_mb * (d * block.t_comm + edge.t_comm),
        "t_pp_comm_s": t_pp,
        "t_dp_comm_s": t_dp,
        "t_bubble_s": bubble,
        "flop_per_gpu": n_mb * (d * block.flop + edge.flop),
        "model_flop_per_gpu": n_mb * (d * block.flop_model + edge.flop_model),
    }
