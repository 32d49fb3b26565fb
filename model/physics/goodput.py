"""Training time with failures: checkpoints, restarts and the optimal checkpoint interval
(docs/model.md §15).

A job of n GPUs failing at λ per GPU-hour (Poisson) has a mean time between failures
M = 3600 / (n·λ) s. It writes a checkpoint of δ seconds after every τ seconds of work and, after a
failure, restarts in R seconds from the last checkpoint.

* Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9):
  τ_Y = √(2δM).
* Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps",
  FGCS 22(3): τ_D = √(2δM)·[1 + ⅓·√(δ/2M) + (1/9)·(δ/2M)] − δ for δ < 2M, else M.
* Expected wall time of W seconds of work (Daly 2006, the complete model for exponentially
  distributed failures): T = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·W/τ.

With no failures (λ = 0) nothing is checkpointed and T = W.
"""

from __future__ import annotations

import numpy as np


def checkpoint_write_s(params: float, bytes_per_param: float, storage_gb_per_s: float) -> float:
    """Time to write one checkpoint of ``params`` parameters at the job's storage bandwidth, s."""
    return params * bytes_per_param / (storage_gb_per_s * 1e9)


def job_mtbf_s(gpus, failures_per_gpu_hour: float):
    """Mean time between job-stopping failures of ``gpus`` GPUs, s (inf without failures)."""
    rate_per_s = np.asarray(gpus, dtype=float) * failures_per_gpu_hour / 3600.0
    with np.errstate(divide="ignore"):
        return np.where(rate_per_s > 0, 1.0 / np.maximum(rate_per_s, 1e-300), np.inf)


def young_interval_s(write_s, mtbf_s):
    """Young's (1974) optimal work between checkpoints, √(2δM), s."""
    return np.sqrt(2.0 * np.asarray(write_s, dtype=float) * np.asarray(mtbf_s, dtype=float))


def daly_interval_s(write_s, mtbf_s):
    """Daly's (2006) higher-order optimal work between checkpoints, s (M when δ ≥ 2M)."""
    d, m = np.asarray(write_s, dtype=float), np.asarray(mtbf_s, dtype=float)  # broadcast below
    x = d / (2.0 * m)
    tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
    return np.where(d < 2.0 * m, tau, m)


def expected_wall_s(work_s, interval_s, write_s, restart_s: float, mtbf_s):
    """Expected wall time of ``work_s`` seconds of training with a checkpoint of ``write_s``
    after every ``interval_s`` of work and failures every ``mtbf_s`` on average, s (Daly 2006:
    M·e^{R/M}·(e^{(τ+δ)/M} − 1)·W/τ); ``work_s`` itself where there are no failures."""
    w, tau, d, m = (np.asarray(v, dtype=float) for v in (work_s, interval_s, write_s, mtbf_s))
    finite = np.isfinite(m)
    ms = np.where(finite, m, 1.0)
    taus = np.where(finite & (tau > 0), tau, 1.0)
    with np.errstate(over="ignore"):  # failures far more often than checkpoints: inf
        wall = ms * np.exp(restart_s / ms) * np.expm1((taus + d) / ms) * w / taus
    return np.where(finite, wall, w)
