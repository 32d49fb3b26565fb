"""Strong-scaling efficiency of a sweep and its knee: the recommended size.

A sweep's frame (``model.explore.sweep.best_frame``: the best configuration per strategy and GPU
count) answers "how fast on n GPUs"; these pure functions answer "how many GPUs are worth it".

Baseline. Parallel efficiency is measured against the *most efficient* count of a curve — the
count b with the highest throughput per GPU, samples/s(b) / b — never against its smallest
count, which is often memory-starved (full recompute, deep pipelines) and would make every
larger count look superlinear. For a fixed model and global batch the model FLOPs per sample
are fixed, so this is MFU(n) / MFU(b):

    efficiency(n) = (samples/s(n) / n) / (samples/s(b) / b)  ≤ 1,
    speedup(n) = samples/s(n) / samples/s(b),  ideal speedup = n / b.

Knee. The recommended size is the largest count n ≥ b such that every count from b up to n
keeps efficiency ≥ threshold (default 50 %): past it, doubling the GPUs buys less than the
threshold's share of a doubling in speed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ModelError
from ..physics.strategies import PRODUCTION

DEFAULT_THRESHOLD = 0.5


def _usable(frame: pd.DataFrame | None, strategies: Iterable[str] | None) -> pd.DataFrame:
    """The rows with a GPU count and a finite positive throughput, of ``strategies`` if given."""
    if frame is None or frame.empty or not {"gpus", "samples_per_s"} <= set(frame.columns):
        return pd.DataFrame()
    rate = pd.to_numeric(frame["samples_per_s"], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(rate) & (rate > 0) & (pd.to_numeric(frame["gpus"]) > 0).to_numpy()
    if strategies is not None and "strategy" in frame.columns:
        keep &= frame["strategy"].isin(list(strategies)).to_numpy()
    return frame.loc[keep]


def best_per_count(frame: pd.DataFrame | None,
                   strategies: Iterable[str] | None = None) -> pd.DataFrame:
    """The fastest row (highest samples/s) at each GPU count, over ``strategies`` (all when
    None), sorted by GPU count."""
    rows = _usable(frame, strategies)
    if rows.empty:
        return rows
    order = rows.sort_values(["gpus", "samples_per_s"], ascending=[True, False], kind="stable")
    return order.drop_duplicates("gpus", keep="first").reset_index(drop=True)


def _with_efficiency(curve: pd.DataFrame) -> pd.DataFrame:
    """One curve (rows sorted by GPU count) with its baseline, efficiency and speedups."""
    gpus = curve["gpus"].to_numpy(dtype=float)
    rate = curve["samples_per_s"].to_numpy(dtype=float)
    per_gpu = rate / gpus
    b = int(np.argmax(per_gpu))  # the first count of the highest per-GPU throughput
    return curve.assign(samples_per_s_per_gpu=per_gpu, baseline_gpus=int(gpus[b]),
                        efficiency=per_gpu / per_gpu[b], speedup=rate / rate[b],
                        ideal_speedup=gpus / gpus[b])


def parallel_efficiency(frame: pd.DataFrame | None, by_strategy: bool = True) -> pd.DataFrame:
    """The frame's usable rows with ``samples_per_s_per_gpu``, ``baseline_gpus`` (the most
    efficient count of the row's curve), ``efficiency``, ``speedup`` and ``ideal_speedup``
    (see the module docstring).

    ``by_strategy``: one curve per strategy (the frame holds one row per strategy and count);
    else the frame is one curve (one row per count, e.g. :func:`best_per_count`).
    """
    rows = _usable(frame, None)
    if rows.empty:
        return rows
    if not by_strategy or "strategy" not in rows.columns:
        return _with_efficiency(rows.sort_values("gpus", kind="stable"))
    parts = [_with_efficiency(part.sort_values("gpus", kind="stable"))
             for _, part in rows.groupby("strategy", sort=False)]
    return pd.concat(parts).reset_index(drop=True)


@dataclass(frozen=True)
class Knee:
    """The recommended size of a sweep (see the module docstring)."""

    gpus: int  # the knee: largest count whose efficiency stays ≥ threshold
    strategy: str  # the strategy of the fastest configuration there
    efficiency: float  # its efficiency against the baseline (0…1)
    baseline_gpus: int  # the most efficient count (highest samples/s per GPU)
    threshold: float  # the efficiency it must keep (0…1)
    row: pd.Series  # the knee's row of the sweep


def knee(frame: pd.DataFrame | None, threshold: float = DEFAULT_THRESHOLD,
         strategies: Iterable[str] | None = PRODUCTION) -> Knee | None:
    """The knee of the fastest-per-count curve over ``strategies`` (default: the production
    strategies, ``model.physics.strategies.PRODUCTION``; None: every strategy in the frame), or
    None when no count of them has a feasible configuration.

    ``threshold`` is the efficiency (0 < threshold ≤ 1) every count from the baseline up to
    the knee keeps."""
    try:
        ok = 0.0 < float(threshold) <= 1.0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ModelError(f"the efficiency threshold must be in (0, 1], got {threshold!r:.40}")
    curve = best_per_count(frame, strategies)
    if curve.empty:
        return None
    curve = parallel_efficiency(curve, by_strategy=False)
    eff = curve["efficiency"].to_numpy(dtype=float)
    start = int(np.flatnonzero(curve["gpus"].to_numpy() == curve["baseline_gpus"].iloc[0])[0])
    k = start
    while k + 1 < len(curve) and eff[k + 1] >= threshold:
        k += 1
    row = curve.iloc[k]
    return Knee(gpus=int(row["gpus"]), strategy=str(row.get("strategy", "")),
                efficiency=float(eff[k]), baseline_gpus=int(curve["baseline_gpus"].iloc[0]),
                threshold=float(threshold), row=row)
