"""Collective latency by message size and GPU count, NCCL's own cost model: NCCL's tuner
(src/graph/tuning.cc, ``ncclTopoTuneModel``) prices every algorithm × protocol as a latency
plus bytes over a bus bandwidth and runs the cheapest; three such lines, one per protocol
regime (LL for small messages: lowest latency, half the bandwidth in flags; LL128; Simple
for large: the full bandwidth, the most latency), are fitted per GPU × collective × GPU count:

    t = min_p (α_p + f(n)·S / B_p),   p ∈ {small, mid, large}

S the message in bytes (nccl-tests' size: the full buffer), f(n) NCCL's busbw factor
(nccl-tests doc/PERFORMANCE.md): 2(n − 1)/n for all-reduce, (n − 1)/n for all-gather,
reduce-scatter and all-to-all — so B_p is a bus bandwidth comparable across n. Fitted to
AIConfigurator 0.12.0's NCCL tables and TensorRT-LLM's custom all-reduce table
(``scripts/extract_kernel_tables.py``)."""

from __future__ import annotations

import numpy as np

Array = np.ndarray
PARAMS = ("alpha_small_s", "busbw_small", "alpha_mid_s", "busbw_mid", "alpha_large_s",
          "busbw_large")  # α in s, B in bytes/s
PROTOCOLS = ("small", "mid", "large")  # NCCL's LL, LL128 and Simple protocols' regimes
BUS_FACTOR = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "alltoall": 1.0,
              "custom_all_reduce": 2.0}


def bus_factor(op: str, gpus: Array) -> Array:
    """nccl-tests' busbw factor of ``op`` on ``gpus`` ranks."""
    n = np.asarray(gpus, dtype=float)
    return BUS_FACTOR[op] * (n - 1.0) / n


def collective_latency_s(op: str, message_bytes: Array, gpus: Array,
                         params: dict[str, float]) -> Array:
    """Seconds of one collective (module docstring)."""
    moved = bus_factor(op, gpus) * np.asarray(message_bytes, dtype=float)
    lines = [params[f"alpha_{p}_s"] + moved / params[f"busbw_{p}"] for p in PROTOCOLS]
    return np.minimum(np.minimum(lines[0], lines[1]), lines[2])


def comm_starts() -> list[list[float]]:
    """Starting points of the fit (α, B of each regime)."""
    return [[1e-5, 2e10, 2e-5, 1e11, 3e-5, 3e11], [5e-6, 5e9, 1e-5, 5e10, 1e-4, 4e11],
            [2e-5, 1e11, 3e-5, 2e11, 5e-5, 4e11]]


__all__ = ["BUS_FACTOR", "PARAMS", "bus_factor", "collective_latency_s", "comm_starts"]
