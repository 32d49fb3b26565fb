"""Strong-scaling efficiency of a sweep and its knee: the recommended size.

A sweep's frame (``model.studies.sweep.best_frame``: the best configuration per strategy and GPU
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

from model.errors import ModelError
from model.physics.strategies import PRODUCTION

DEFAULT_THRESHOLD = 0.5


def _usable(frame: pd.DataFrame | None, strategies: Iterable[str] | None) -> pd.DataFrame:
    """The rows with a GPU count and a finite positive throughput, of ``strategies`` if given."""
    if frame is None or frame.empty or not {"gpus", "samples_per_s"} <= set(frame.columns):
        return pd.DataFrame()
    rate = pd.to_numeric(frame["samples_per_s"], errors="coerce").to_numpy(dtype=float)
    gpus = pd.to_numeric(frame["gpus"], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(rate) & (rate > 0) & (gpus > 0)
    if strategies is not None and "strategy" in frame.columns:
        keep &= np.isin(frame["strategy"].to_numpy(dtype=object), list(strategies))
    return frame if keep.all() else frame.loc[keep]


def fastest_per_count(frame: pd.DataFrame | None,
                   strategies: Iterable[str] | None = None) -> pd.DataFrame:
    """The fastest row (highest samples/s) at each GPU count, over ``strategies`` (all when
    None), sorted by GPU count; of equally fast rows the first in the frame."""
    rows = _usable(frame, strategies)
    if rows.empty:
        return rows
    gpus = rows["gpus"].to_numpy(dtype=float)
    rate = rows["samples_per_s"].to_numpy(dtype=float)
    order = np.lexsort((np.arange(len(rows)), -rate, gpus))
    first = np.ones(len(order), dtype=bool)
    first[1:] = gpus[order][1:] != gpus[order][:-1]
    return rows.iloc[order[first]].reset_index(drop=True)


def _curve_columns(gpus: np.ndarray, rate: np.ndarray) -> dict[str, np.ndarray]:
    """Baseline, efficiency and speedups of one curve (arrays sorted by GPU count)."""
    per_gpu = rate / gpus
    b = int(np.argmax(per_gpu))  # the first count of the highest per-GPU throughput
    return {"samples_per_s_per_gpu": per_gpu,
            "baseline_gpus": np.full(len(gpus), int(gpus[b]), dtype=np.int64),
            "efficiency": per_gpu / per_gpu[b], "speedup": rate / rate[b],
            "ideal_speedup": gpus / gpus[b]}


def parallel_efficiency(frame: pd.DataFrame | None, by_strategy: bool = True) -> pd.DataFrame:
    """The frame's usable rows with ``samples_per_s_per_gpu``, ``baseline_gpus`` (the most
    efficient count of the row's curve), ``efficiency``, ``speedup`` and ``ideal_speedup``
    (see the module docstring), sorted by curve then GPU count.

    ``by_strategy``: one curve per strategy (the frame holds one row per strategy and count);
    else the frame is one curve (one row per count, e.g. :func:`fastest_per_count`).
    """
    rows = _usable(frame, None)
    if rows.empty:
        return rows
    gpus = rows["gpus"].to_numpy(dtype=float)
    rate = rows["samples_per_s"].to_numpy(dtype=float)
    if by_strategy and "strategy" in rows.columns:
        keys = pd.factorize(rows["strategy"])[0]  # curves in the order they first appear
    else:
        keys = np.zeros(len(rows), dtype=np.int64)
    order = np.lexsort((gpus, keys))
    parts: dict[str, list[np.ndarray]] = {}
    for k in np.unique(keys):
        idx = order[keys[order] == k]
        for name, values in _curve_columns(gpus[idx], rate[idx]).items():
            parts.setdefault(name, []).append(values)
    out = rows.iloc[order].reset_index(drop=True)
    for name, values in parts.items():
        out[name] = np.concatenate(values)
    return out


@dataclass(frozen=True)
class Knee:
    """The recommended size of a sweep (see the module docstring)."""

    gpus: int  # the knee: largest count whose efficiency stays ≥ threshold
    strategy: str  # the strategy of the fastest configuration there
    efficiency: float  # its efficiency against the baseline (0…1)
    baseline_gpus: int  # the most efficient count (highest samples/s per GPU)
    threshold: float  # the efficiency it must keep (0…1)
    row: pd.Series  # the knee's row of the sweep
    baseline: pd.Series  # the baseline's row
    largest_gpus: int  # the largest count of the curve (the knee may be it)


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
    curve = fastest_per_count(frame, strategies)
    if curve.empty:
        return None
    curve = parallel_efficiency(curve, by_strategy=False)
    eff = curve["efficiency"].to_numpy(dtype=float)
    gpus = curve["gpus"].to_numpy()
    start = int(np.flatnonzero(gpus == curve["baseline_gpus"].iloc[0])[0])
    k = start
    while k + 1 < len(curve) and eff[k + 1] >= threshold:
        k += 1
    row = curve.iloc[k]
    return Knee(gpus=int(row["gpus"]), strategy=str(row.get("strategy", "")),
                efficiency=float(eff[k]), baseline_gpus=int(gpus[start]),
                threshold=float(threshold), row=row, baseline=curve.iloc[start],
                largest_gpus=int(gpus[-1]))
