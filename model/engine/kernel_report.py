"""Per op and direction, the time its kernels take and the efficiencies that time implies: the
``kernel_time_*_s`` and ``implied_*_efficiency_*`` columns of the per-op table
(:func:`model.engine.report.op_table`, docs/model.md §10). Nothing here prices anything: the
times are the ones :func:`model.physics.roofline.kernel_times` gave the op, read back from its
phases, and the peaks are the ones it divided by.

The implied FLOP efficiency of an op in one direction is the fraction of peak its kernels would
need to run at to take their time:

    η_FLOP = (F_mat / P_mat + F_vec / P_vec) / t_kernel

with F_mat its tensor-core FLOPs at the peak P_mat of the precision it runs in (the
execution's for the matmuls, BF16 for attention and every other op, as the physics prices
them), F_vec its vector FLOPs at the vector peak P_vec (left out for an attention priced from
its kernel's benchmark or the kernel layer, whose measured rate already pays its softmax), and
t_kernel = max(t_comp, t_mem) + t_extra, launches, exponentials and separate quantisation
kernels included. The implied HBM efficiency is η_HBM = (M + M_extra) / (t_kernel · B_HBM),
all of its HBM bytes over the GPU's nominal bandwidth. A compute-bound matmul without launch
overhead reads back η·shape efficiency; a memory-bound kernel, the achievable fraction of the
bandwidth.
"""

from __future__ import annotations

import math

import numpy as np

from model.physics.block import OpResult, Phase
from model.physics.context import Ctx
from model.physics.optable import MATMULS, Kind

# the columns this module adds, in the table's order
KERNEL_COLUMNS = ("kernel_time_fwd_s", "kernel_time_bwd_s", "implied_flop_efficiency_fwd",
                  "implied_flop_efficiency_bwd", "implied_hbm_efficiency_fwd",
                  "implied_hbm_efficiency_bwd", "matrix_peak_tflops")


def kernel_time_s(phase: Phase) -> float:
    """The op's kernel time in one direction, s: its FLOP time plus its exposed HBM time
    (max(t_comp, t_mem) + t_extra), its collectives left out."""
    return float(phase.t_comp[0] + phase.t_mem_exposed[0])


def matrix_peak_flop_per_s(r: OpResult, ctx: Ctx) -> float:
    """The tensor-core peak an op's matrix FLOPs are priced against, FLOP/s: the execution's
    precision for the matmuls, the BF16/FP16 one for the rest."""
    return ctx.matrix_flop_per_s if r.spec.kind in MATMULS else ctx.system.matrix_flop_per_s


def peak_time_s(r: OpResult, way: str, ctx: Ctx) -> float:
    """The time the op's FLOPs in one direction (``way``: fwd or bwd) take at peak, s."""
    c = r.counts
    t = float(np.sum(getattr(c, f"flop_mat_{way}"))) / matrix_peak_flop_per_s(r, ctx)
    tabled = r.spec.kind == Kind.ATTENTION and (ctx.attention_passes is not None
                                                or ctx.attention_kernel is not None)
    if not tabled:
        t += float(np.sum(getattr(c, f"flop_vec_{way}"))) / ctx.system.vector_flop_per_s
    return t


def kernel_columns(r: OpResult, ctx: Ctx) -> dict[str, float]:
    """The kernel time (s) and implied FLOP and HBM efficiencies (fractions of peak, NaN for a
    direction without kernel time) of an op, forward and backward (module docstring), and the
    matrix peak it is measured against (TFLOP/s)."""
    c = r.counts
    hbm_peak = ctx.system.hbm_bandwidth_gb_per_s * 1e9
    out: dict[str, float] = {}
    for way, phase in (("fwd", r.fwd), ("bwd", r.bwd)):
        t = kernel_time_s(phase)
        hbm = float(np.sum(getattr(c, f"bytes_{way}")) + np.sum(getattr(c, f"extra_bytes_{way}")))
        out[f"kernel_time_{way}_s"] = t
        out[f"implied_flop_efficiency_{way}"] = peak_time_s(r, way, ctx) / t if t > 0 else math.nan
        out[f"implied_hbm_efficiency_{way}"] = hbm / (t * hbm_peak) if t > 0 else math.nan
    out["matrix_peak_tflops"] = matrix_peak_flop_per_s(r, ctx) / 1e12
    return {name: out[name] for name in KERNEL_COLUMNS}
