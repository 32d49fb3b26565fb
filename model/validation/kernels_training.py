"""Kernel-level error of training's GEMMs priced by the kernel layer, not fitted: a linear
layer's forward, input-gradient and weight-gradient GEMMs measured with PyTorch on an H100
(``model/data/reference/kernels/h100_training_gemms.json``, scripts/measure_training_gemms_gpu.py)
priced by the GEMM model with the parameters fitted to AIConfigurator's H100 table, each at its
own shape — forward (m, n, k), dX (m, k, n), dW (n, k, m) as
:func:`model.physics.kernels.training.linear_efficiencies` prices them. FP8 rows ran on
pre-quantised operands: priced without the activation quantisation kernel."""

from __future__ import annotations

import json

import numpy as np

from model.physics.kernels import gemm_kernel as gemm
from model.physics.kernels.hardware import kernel_hardware
from model.physics.kernels.params import KERNEL_DIR, fitted

TABLE = KERNEL_DIR / "h100_training_gemms.json"
# the measured tables by the kernel layer's GPU name (each priced with that GPU's own fit)
TABLES = {"h100_sxm": TABLE, "h200_sxm": KERNEL_DIR / "h200_training_gemms.json"}
DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}


def _shape(r: dict) -> tuple[float, float, float]:
    """(rows, cols, reduction) of the row's GEMM."""
    m, k, n = r["m"], r["k"], r["n"]
    return {"fwd": (m, n, k), "dgrad": (m, k, n), "wgrad": (n, k, m)}[r["gemm"]]


def priced_s(r: dict, gpu: str = "h100_sxm") -> float:
    """Seconds the kernel layer gives the row's GEMM."""
    dtype = DTYPES[r["dtype"]]
    p, hw = fitted("gemm", gpu, dtype), kernel_hardware(gpu)
    rows, cols, red = _shape(r)
    return float(gemm.gemm_latency_s(rows, cols, red, dtype, hw, p)
                 - gemm.quantise_s(rows, red, dtype, hw, p))


def training_gemm_errors(gpu: str = "h100_sxm") -> list[dict]:
    """Per dtype and GEMM (fwd, dgrad, wgrad) of ``gpu``'s measured table (:data:`TABLES`):
    rows, median and 90th percentile of |t̂ − t|/t and the mean signed error (t̂ − t)/t, in
    %."""
    rows = json.loads(TABLES[gpu].read_text())["rows"]
    out = []
    for dtype in DTYPES:
        for which in ("fwd", "dgrad", "wgrad"):
            got = [r for r in rows if r["dtype"] == dtype and r["gemm"] == which]
            err = np.array([(priced_s(r, gpu) - r["latency_ms"] * 1e-3) / (r["latency_ms"] * 1e-3)
                            for r in got]) * 100.0
            out.append({"dtype": dtype, "gemm": which, "n": int(err.size),
                        "median_pct": round(float(np.median(np.abs(err))), 1),
                        "p90_pct": round(float(np.percentile(np.abs(err), 90)), 1),
                        "mean_signed_pct": round(float(np.mean(err)), 1)})
    return out


__all__ = ["TABLE", "TABLES", "priced_s", "training_gemm_errors"]
