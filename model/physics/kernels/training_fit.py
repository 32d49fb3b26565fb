"""The dense GEMM law (:mod:`.gemm_kernel`) fitted to training GEMMs measured with PyTorch on
Hopper: a linear layer's forward Y[m, n] = X·Wᵀ, input gradient dX[m, k] = dY·W (reduction n)
and weight gradient dW[n, k] = dYᵀ·X (reduction m), BF16 (cuBLAS through ``F.linear`` and
``@``) and FP8 (``torch._scaled_mm``, e4m3, per-tensor scales, pre-quantised operands), 8
Llama-3 linears × m = 1,024–16,384 on one H100 and one H200
(``model/data/reference/kernels/h100_training_gemms.json``, ``h200_training_gemms.json``,
measured by ``scripts/measure_training_gemms_gpu.py``).

Per GPU × dtype only the two parameters a training GEMM's efficiency depends on are fitted —
η, the asymptotic fraction of the dtype's peak, and k₀, the fixed cost per output tile in
reduction elements — on the three passes pooled (each GEMM at its own (rows, cols, reduction)),
least squares on log latency (:func:`.fit.fit_log_latency`). The floors (HBM fraction β,
launch floor t₀, split-K reduction t_split) stay at the same GPU's TensorRT-LLM fit: shapes of
m ≥ 1,024 are compute-bound and do not constrain them. The law's shape (roofline × wave
quantisation with split-K × depth k/(k + k₀)) is :func:`.gemm_kernel.gemm_latency_s` unchanged.

Held-out test: one linear — one (n, k) pair, all its m and all three passes — left out at a
time, the two parameters refitted on the other seven and the left-out rows priced. No pyarrow,
no PyTorch: the tables are JSON in the repository (``scripts/fit_training_gemms.py`` writes
the fit)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from model.physics.kernels import gemm_kernel as gemm
from model.physics.kernels.fit import fit_log_latency
from model.physics.kernels.hardware import kernel_hardware
from model.physics.kernels.params import KERNEL_DIR, fitted

Array = np.ndarray
# the measured tables by the kernel layer's GPU name
TABLES = {"h100_sxm": KERNEL_DIR / "h100_training_gemms.json",
          "h200_sxm": KERNEL_DIR / "h200_training_gemms.json"}
DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}  # the tables' dtype → the kernel layer's
PASSES = ("fwd", "dgrad", "wgrad")
FREE = ("eta", "k0")  # the fitted parameters; the rest held at the TensorRT-LLM fit


def gemm_shape(m: Array, k: Array, n: Array, which: Array) -> tuple[Array, Array, Array]:
    """(rows, cols, reduction) of a linear X[m, k]·Wᵀ[k, n]'s pass ``which``: forward
    (m, n, k), dX (m, k, n), dW (n, k, m); broadcast over rows of a table."""
    which = np.asarray(which)
    rows = np.where(which == "wgrad", n, m)
    cols = np.where(which == "fwd", n, k)
    red = np.select([which == "fwd", which == "dgrad"], [k, n], m)
    return (rows.astype(float), cols.astype(float), red.astype(float))


def table_columns(path: Path, dtype: str) -> dict[str, Array]:
    """The rows of one measured table in one table dtype ('bf16', 'fp8') as columns: layer,
    pass, rows, cols, reduction and latency_s."""
    rows = [r for r in json.loads(Path(path).read_text())["rows"] if r["dtype"] == dtype]
    m, k, n = (np.array([r[c] for r in rows], dtype=float) for c in ("m", "k", "n"))
    which = np.array([r["gemm"] for r in rows])
    rr, cc, red = gemm_shape(m, k, n, which)
    return {"layer": np.array([r["layer"] for r in rows]), "pass": which, "rows": rr,
            "cols": cc, "red": red,
            "latency_s": np.array([r["latency_ms"] for r in rows], dtype=float) * 1e-3}


def price_s(c: dict[str, Array], gpu: str, dtype: str, p: dict[str, float]) -> Array:
    """Seconds the GEMM law gives each row with parameters ``p``: the pre-quantised FP8 GEMM
    of the measurement, so without the activation quantisation kernel."""
    hw = kernel_hardware(gpu)
    return (gemm.gemm_latency_s(c["rows"], c["cols"], c["red"], dtype, hw, p)
            - gemm.quantise_s(c["rows"], c["red"], dtype, hw, p))


def _subset(c: dict[str, Array], mask: Array) -> dict[str, Array]:
    return {key: v[mask] for key, v in c.items()}


def fit(c: dict[str, Array], gpu: str, dtype: str) -> dict[str, float]:
    """η and k₀ fitted to the rows ``c`` (every pass pooled), started from and otherwise held
    at the GPU's TensorRT-LLM fit; the full parameter set of :func:`.gemm_kernel.
    gemm_latency_s`."""
    base = fitted("gemm", gpu, dtype)
    if base is None:
        raise ValueError(f"no TensorRT-LLM GEMM fit for {gpu} {dtype}")

    def model(theta: Array) -> Array:
        return price_s(c, gpu, dtype, {**base, **dict(zip(FREE, theta))})
    theta = fit_log_latency(model, c["latency_s"], [[base[f] for f in FREE]])
    return {**base, **{f: float(v) for f, v in zip(FREE, theta)}}


def held_out_pct(c: dict[str, Array], gpu: str, dtype: str) -> Array:
    """Signed percent error (t̂ − t)/t of every row, priced by a fit without its linear (one
    (n, k) pair, all its m and passes)."""
    err = np.empty(c["latency_s"].size)
    for layer in np.unique(c["layer"]):
        out = c["layer"] == layer
        p = fit(_subset(c, ~out), gpu, dtype)
        held = _subset(c, out)
        err[out] = 100.0 * (price_s(held, gpu, dtype, p) - held["latency_s"]) / held["latency_s"]
    return err


def error_summary(err: Array) -> dict[str, float]:
    """n, median and 90th percentile of |error| and the mean signed error, in %."""
    a = np.abs(err)
    return {"n": int(err.size), "median_pct": round(float(np.median(a)), 1),
            "p90_pct": round(float(np.percentile(a, 90)), 1),
            "mean_signed_pct": round(float(np.mean(err)), 1)}


def per_pass(c: dict[str, Array], err: Array) -> dict[str, dict[str, float]]:
    """:func:`error_summary` of each pass (fwd, dgrad, wgrad)."""
    return {w: error_summary(err[c["pass"] == w]) for w in PASSES}


__all__ = ["DTYPES", "FREE", "PASSES", "TABLES", "error_summary", "fit", "gemm_shape",
           "held_out_pct", "per_pass", "price_s", "table_columns"]
