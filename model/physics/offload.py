"""Offload to a second memory tier (host DRAM behind PCIe or NVLink-C2C), per GPU.

Following ZeRO-Offload / ZeRO-Infinity (Ren et al. 2021, arXiv 2101.06840; Rajbhandari et al.
2021, arXiv 2104.07857), with B = the host link's bandwidth per direction and per GPU:

What stays in HBM is :func:`model.physics.memory.offload_memory`; the times:

* optimizer: the fp32 state leaves HBM; each step the gradients go down and the updated bf16
  weights come back, (G + W)/B, and the CPU runs Adam at host DRAM speed, 28 B/param / B_dram;
* activations: each block's activations A are written to the host after its forward and read
  back for its backward, each hidden behind that block's compute:
  n_mb·D·(max(A/B − T_f, 0) + max(A/B − T_b, 0)); HBM keeps two blocks' worth; with partial
  offload of N layers per stage (Megatron-Core ``cpu_offloading_num_layers``) D becomes
  min(N, D);
* weights: weights stream in per block for the forward and the backward, gradients stream out:
  n_mb·D·(max(W/B − T_f, 0) + max((W + G)/B − T_b, 0)); HBM keeps two blocks' worth of each.
"""

from __future__ import annotations

import numpy as np

from model.physics.context import Ctx
from model.physics.totals import Totals

ADAM_HOST_BYTES_PER_PARAM = 28.0  # the same Adam traffic as on the GPU, in host DRAM


def offload_time_s(block: Totals, n_mb, layers, grad_factor: float, ctx: Ctx):
    """Exposed transfer time (s) of offloaded activations and weights per iteration: each
    transfer's ``ctx.pricing.excess`` over the block compute it hides behind (``block``: one
    block's totals; ``layers`` blocks per stage, ``n_mb`` microbatches)."""
    ex, pricing = ctx.execution, ctx.pricing
    link_bytes_per_s = ctx.system.host_bandwidth_gb_per_s * 1e9
    t_fwd, t_bwd = block.t_fwd, block.t_bwd
    block_act_bytes = block.act_bytes
    block_weight_bytes = block.weight_bytes + block.expert_weight_bytes
    t = np.zeros_like(np.asarray(t_fwd, dtype=float))
    if link_bytes_per_s <= 0:
        return t
    moved = layers if ex.offloads("activations") else np.minimum(ex.offload_layers, layers)
    if ex.offloads("activations") or ex.offload_layers:
        a = block_act_bytes / link_bytes_per_s
        t = t + n_mb * moved * (pricing.excess(a, t_fwd) + pricing.excess(a, t_bwd))
    if ex.offloads("weights"):
        w = block_weight_bytes / link_bytes_per_s
        t = t + n_mb * layers * (pricing.excess(w, t_fwd)
                                 + pricing.excess((1 + grad_factor) * w, t_bwd))
    return t


def host_optimizer_time_s(local_params, grad_factor: float, link_bytes_per_s: float,
                          dram_bytes_per_s: float):
    """Optimizer step on the host: gradients down, weights up, Adam in host DRAM."""
    transfer = (2.0 * grad_factor + 2.0) * local_params / link_bytes_per_s
    return transfer + ADAM_HOST_BYTES_PER_PARAM * local_params / dram_bytes_per_s
