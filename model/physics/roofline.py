"""The roofline time of one op's kernels in one direction, placement-free (docs/model.md §4):
max(FLOP time, HBM time) plus separate memory-bound kernels, each kernel launched at the system's
overhead; matmuls at the precision's tensor-core rate, attention through the measured kernel
tables when the stack names a kernel (:mod:`model.physics.kernels.training`,
:mod:`model.physics.attention_kernels`). :mod:`model.physics.block` adds an op's collectives to
it; :mod:`model.physics.serving_step` prices a serving step's ops with it.
"""

from __future__ import annotations

import numpy as np

from model.physics import attention_kernels, moe, ops
from model.physics.context import Ctx
from model.physics.kernels import training as kernel_training
from model.physics.optable import MATMULS, TOKEN_KERNELS, Kind, OpSpec


def nonzero(value: float | np.ndarray) -> bool:
    """Whether a count (a Python number when absent, else an array) has any nonzero entry; far
    cheaper than np.any on a number, on the hot path of every op."""
    return bool(value) if isinstance(value, (int, float)) else bool(value.any())


def per_candidate(seconds: float | np.ndarray, zero: np.ndarray) -> np.ndarray:
    """``zero + seconds``: one time per candidate. A float array of that shape already is
    returned as it is, a freshly computed one on the hot path (adding 0.0 changes no time: a
    time is never −0.0), saving an array pass per op."""
    if isinstance(seconds, np.ndarray) and seconds.shape == zero.shape \
            and seconds.dtype == zero.dtype:
        return seconds
    return zero + seconds


def kernel_times(spec: OpSpec, c: ops.OpCounts, way: str, zero: np.ndarray, ctx: Ctx):
    """(t_comp, t_mem, t_extra, compute) of one op's kernels in one direction (``way``: fwd or
    bwd), placement-free: roofline max(FLOP time, HBM time) plus separate memory-bound kernels.

    t_comp = n_k·overhead + F_mat/(η_mat·wave·P_mat) + F_vec/(η·P_vec) + N_exp/R_exp (n_k the
    op's kernel launches, :attr:`~model.physics.ops.OpCounts.launches_fwd`): matrix FLOPs at
    the tensor-core rate (the precision's for matmuls), vector FLOPs at the vector rate, and the
    exponentials of a softmax at the special-function rate R_exp (the SFU issues few per clock;
    FlashAttention-3, Shah et al. 2024, §3: 3.9 T exp/s against 989 TFLOP/s on H100), in
    sequence. ``zero`` is an array of zeros of the result's length (counts may be scalars)."""
    flop_mat, flop_vec = getattr(c, f"flop_mat_{way}"), getattr(c, f"flop_vec_{way}")
    hbm_bytes, extra_bytes = getattr(c, f"bytes_{way}"), getattr(c, f"extra_bytes_{way}")
    wave, exps = getattr(c, f"wave_{way}"), getattr(c, f"exp_{way}")
    launches = getattr(c, f"launches_{way}")
    sysm = ctx.system
    eta = sysm.flop_efficiency
    # FP8 recipes run the linear layers in FP8; attention and the rest stay in bf16
    peak, eta_mat = sysm.matrix_flop_per_s, eta
    if spec.kind in MATMULS:
        peak, eta_mat = ctx.matrix_flop_per_s, ctx.linear_efficiency
        if spec.kind == Kind.EXPERT_LINEAR:
            eta_mat = ctx.expert_efficiency
    elif spec.kind == Kind.ATTENTION:
        eta_mat = ctx.attention_efficiency
        if ctx.attention_kernel is not None:  # measured kernel efficiency, softmax included
            return kernel_training.kernel_times(c, way, zero, ctx.system,
                                                sysm.kernel_overhead_s * launches)
        if ctx.attention_passes is not None:  # the kernel's measured rate: softmax included
            return attention_kernels.tabled_times(c, way, zero, ctx,
                                                  sysm.kernel_overhead_s * launches)
    # each of its kernels launched in a share of the layers
    overhead = sysm.kernel_overhead_s * launches * ctx.share(spec)
    t_comp = per_candidate(overhead + flop_mat / (eta_mat * wave * peak)
                            + flop_vec / (eta * sysm.vector_flop_per_s), zero)
    if sysm.exp_tera_per_s and nonzero(exps):
        t_comp = t_comp + exps / (sysm.exp_tera_per_s * 1e12)
    if spec.kind == Kind.EXPERT_LINEAR:  # per-expert launches issued while earlier ones run
        t_comp = moe.issued_ahead_s(t_comp - overhead, overhead,
                                    sysm.kernel_overhead_s * ctx.share(spec))
    bandwidth = sysm.hbm_bytes_per_s
    if spec.kind in TOKEN_KERNELS:
        bandwidth = bandwidth * ctx.token_efficiency
    t_mem = per_candidate(hbm_bytes / bandwidth, zero)
    if not nonzero(extra_bytes):  # no separate kernels (the common case): skip the arrays
        return t_comp, t_mem, 0.0, np.maximum(t_comp, t_mem)
    t_extra = per_candidate(extra_bytes / bandwidth, zero)
    return t_comp, t_mem, t_extra, np.maximum(t_comp, t_mem) + t_extra
