"""Fit the shape-aware GEMM constants (model/physics/gemm.py) on published kernel benchmarks.

Run: python bench/gemm_kernels.py   (then the check on XLA's B200/H100 table)

The table, the model each row is priced with and the fit: model/validation/gemm_kernels.py (the
formulas, which the tests import); this script prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model.physics.gemm import DEPTH_OVERHEAD_FP8, depth_overhead  # noqa: E402
from model.validation.gemm_kernels import (  # noqa: E402
    MIN_ROWS,
    blackwell_rows,
    blackwell_tflops,
    fit,
    fit_blackwell,
    predicted_tflops,
    rows,
    xla_depth_fit,
)


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
    print("check on XLA's B200/H100 GEMM table (model/data/reference/xla_gemm_shapes.json):")
    for system, field in (("b200", "matrix_tflops_fp8"), ("b200", "matrix_tflops_fp16"),
                          ("h100", "matrix_tflops_fp16")):
        a, k0, t0 = xla_depth_fit(system, field)
        print(f"  {system} {field}: A {a:.3f}, k0 {k0:.0f} (model {depth_overhead(field):.0f}), "
              f"t0 {t0 * 1e6:.1f} us per call")

    a, k0 = fit_blackwell()
    hopper = depth_overhead("matrix_tflops_fp16")
    print(f"\nBlackwell (B200 BF16 cuBLAS, Liger-Kernel #1380): A {a:.3f}, k0 {k0:.0f} in BF16 "
          f"units (Hopper's, in the model: {hopper:.0f})")
    b = blackwell_rows()
    for row, pred in zip(b, blackwell_tflops(b, a, k0)):
        m, n, k, tf = row
        print(f"{m:6.0f} {n:6.0f} {k:6.0f} {tf:8.0f} {pred:6.0f} {100 * (pred / tf - 1):+5.0f}%")


if __name__ == "__main__":
    main()
