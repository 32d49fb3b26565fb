"""Fit the shape-aware GEMM constants (model/physics/gemm.py) on published kernel benchmarks.

Run: python bench/gemm_kernels.py

The table (model/data/reference/gemm_kernels.json: deepseek-ai/DeepGEMM README @ 55ab91f, FP8
GEMMs with 128-element block scales on H800) gives TFLOP/s by (groups, rows per group, n, k).
Each row is priced as the model prices a grouped GEMM on the h800 preset: its FLOPs and HBM
bytes (model.physics.moe.grouped_linear), its wave quantisation with each group's rows padded
to whole tiles (grouped_wave_efficiency), the depth efficiency k/(k + k0) (model.physics.gemm)
and the roofline max(t_c, t_m) of model.physics.block, with the kernel's asymptotic efficiency A
a free factor (the stacks' calibrated efficiency plays its part in the model). A and k0
minimise the squared log error over the rows with at least 256 rows per group (training
shapes; the 64- and 128-row rows are decoding shapes, printed but not fitted). A partial
overlap of compute and HBM time, max + alpha·min, was tried as a third parameter: its best
alpha is 0 (the rows with 256 rows per group are already HBM-bound in the model's bytes), so
the model keeps the plain roofline.

The formulas live in model/validation/gemm_kernels.py (the tests import them from there); this
script prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model.physics.gemm import DEPTH_OVERHEAD_FP8  # noqa: E402
from model.validation.gemm_kernels import MIN_ROWS, fit, predicted_tflops, rows  # noqa: E402


def main() -> None:
    r = rows()
    fitted = r[:, 1] >= MIN_ROWS
    a, k0 = fit(r[fitted])
    print(f"fit on {int(fitted.sum())} rows: A {a:.3f}, k0 {k0:.0f} "
          f"(model/physics/gemm.py: k0 {DEPTH_OVERHEAD_FP8:.0f})")
    p = predicted_tflops(r, a, k0)
    print(f"{'groups':>6s} {'m':>6s} {'n':>6s} {'k':>6s} {'TFLOP/s':>8s} {'model':>6s} error")
    for row, pred, used in zip(r, p, fitted):
        g, m, n, k, tf = row
        print(f"{g:6.0f} {m:6.0f} {n:6.0f} {k:6.0f} {tf:8.0f} {pred:6.0f} "
              f"{100 * (pred / tf - 1):+5.0f}%{'' if used else '  (not fitted)'}")


if __name__ == "__main__":
    main()
