"""Kernel-level error of training's GEMMs: a linear layer's forward, input-gradient and
weight-gradient GEMMs measured with PyTorch on an H100 and an H200
(``model/data/reference/kernels/h100_training_gemms.json``, ``h200_training_gemms.json``,
scripts/measure_training_gemms_gpu.py), each at its own shape — forward (m, n, k), dX (m, k, n),
dW (n, k, m) as :func:`model.physics.kernels.training.linear_efficiencies` prices them.

* :func:`held_out_rows`: the GEMM law fitted to these tables (what training through the kernel
  layer uses on Hopper, :mod:`model.physics.kernels.training_fit`), each linear priced by a
  refit without it — the rows ``validate --set kernels`` prints (class ``training_gemm``);
* :func:`training_gemm_errors`: the same rows priced with the parameters fitted to
  AIConfigurator's TensorRT-LLM table of the GPU (what training used before; still what it
  uses off Hopper), not fitted to them.

FP8 rows ran on pre-quantised operands: priced without the activation quantisation kernel."""

from __future__ import annotations

import json

import numpy as np

from model.physics.kernels import gemm_kernel as gemm
from model.physics.kernels import training_fit as tf
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


def held_out_rows() -> list[dict]:
    """Rows {class 'training_gemm', gpu, engine 'pytorch', dtype '<dtype> <pass>', n,
    median_pct, p90_pct, mean_signed_pct} of the training fit's leave-one-linear-out error
    per GPU × dtype × pass (:func:`model.physics.kernels.training_fit.held_out_pct`)."""
    out = []
    for gpu, path in tf.TABLES.items():
        for table_dtype, dtype in tf.DTYPES.items():
            c = tf.table_columns(path, table_dtype)
            for which, e in tf.per_pass(c, tf.held_out_pct(c, gpu, dtype)).items():
                out.append({"class": "training_gemm", "gpu": gpu, "engine": "pytorch",
                            "dtype": f"{table_dtype} {which}", **e})
    return out


__all__ = ["TABLE", "TABLES", "held_out_rows", "priced_s", "training_gemm_errors"]
