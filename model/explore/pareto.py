"""Cost against time to train over GPU counts and systems, with the Pareto-optimal points.

For each system, the best configuration of every multiple of its node size up to ``max_gpus``
(:func:`model.explore.counts.best_per_count`), or of at most ``max_counts`` of them evenly
spaced (a figure's bounded sample: :func:`sampled_counts`); a point is Pareto-optimal when no
other point (any system) trains at most as long for at most the cost and is better in one of
them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import ModelError
from ..specs.execution import Execution
from ..specs.hardware import System
from ..specs.stack import Stack
from ..specs.transformer import Transformer
from .counts import best_per_count, count_range
from .search import DEFAULT_BUDGET

COLUMNS = ("system", "gpus", "train_days", "train_days_with_failures", "cost_usd",
           "energy_mwh", "gpu_hours", "samples_per_s", "mfu", "strategy", "tp1", "tp2", "pp",
           "dp", "microbatch", "interleave", "recompute_layers")


def pareto_mask(days: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Points no other point dominates (at most as long and as costly, better in one); a
    NaN in either is never optimal."""
    days, cost = np.asarray(days, dtype=float), np.asarray(cost, dtype=float)
    ok = np.isfinite(days) & np.isfinite(cost)
    order = np.lexsort((cost, days))  # by days, then cost
    best_cost, keep = np.inf, np.zeros(len(days), dtype=bool)
    for i in order[ok[order]]:
        if cost[i] < best_cost:
            keep[i], best_cost = True, cost[i]
    return keep


def sampled_counts(max_gpus: int, node: int, max_counts: int | None = None) -> np.ndarray:
    """The multiples of ``node`` up to ``max_gpus``; with ``max_counts``, every k-th of them
    (the smallest k giving at most that many), always ending at the largest multiple."""
    counts = count_range(max_gpus, node)
    if max_counts is None or len(counts) <= max_counts:
        return counts
    if isinstance(max_counts, bool) or not isinstance(max_counts, int) or max_counts < 2:
        raise ModelError(f"'max_counts' must be an integer of at least 2, got {max_counts!r}")
    k = -(-(len(counts) - 1) // (max_counts - 1))  # ceil: n-1 steps in max_counts-1 gaps
    return counts[::-1][::k][::-1]


def pareto_frame(model: Transformer, systems: Sequence[System], global_batch: int,
                 max_gpus: int, strategy: str = "1d", *,
                 execution: Execution | dict | None = None, stack: str | Stack | None = None,
                 costs: object = None, budget: int = DEFAULT_BUDGET,
                 max_counts: int | None = None) -> pd.DataFrame:
    """One row per (system, GPU count) with a configuration: :data:`COLUMNS` and ``pareto``.
    ``max_counts``: at most that many counts per system (:func:`sampled_counts`)."""
    frames = []
    for system in systems:
        frame, _ = best_per_count(model, system,
                                  sampled_counts(max_gpus, system.node_size, max_counts),
                                  global_batch, strategy, execution=execution, stack=stack,
                                  costs=costs, budget=budget)
        if len(frame):
            frames.append(frame.assign(system=system.name)[list(COLUMNS)])
    if not frames:
        return pd.DataFrame(columns=[*COLUMNS, "pareto"])
    out = pd.concat(frames, ignore_index=True)
    out["pareto"] = pareto_mask(out["train_days"].to_numpy(), out["cost_usd"].to_numpy())
    return out
