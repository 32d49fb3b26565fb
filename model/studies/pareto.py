"""Cost against time to train over GPU counts and systems, with the Pareto-optimal points.

For each system, the best configuration of every multiple of its node size up to ``max_gpus``
(:func:`model.engine.counts.best_per_count`), or of at most ``max_counts`` of them evenly
spaced among those that may have a configuration (a figure's bounded sample); a point is
Pareto-optimal when no other point (any system) trains at most as long for at most the cost and
is better in one of them.

:func:`pareto_request` takes a :class:`~model.engine.request.Request` (its model, global batch,
``max_gpus``, strategy, execution, stack, budget) and the systems to compare (default the
request's); :func:`pareto_frame` is also the keyword form, an adapter that builds it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from model.engine.counts import best_per_count, count_range, searchable, strategy_names
from model.engine.dominance import pareto_mask
from model.engine.request import Request
from model.engine.resolved import Resolved
from model.errors import ModelError
from model.specs.hardware import System

COLUMNS = ("system", "gpus", "train_days", "train_days_with_failures", "cost_usd",
           "energy_mwh", "gpu_hours", "samples_per_s", "mfu", "strategy", "tp1", "tp2", "pp",
           "dp", "microbatch", "interleave", "recompute_layers")


def sampled_counts(counts: np.ndarray, max_counts: int | None = None) -> np.ndarray:
    """``counts`` (increasing); with ``max_counts``, every k-th of them (the smallest k giving
    at most that many), always ending at the largest."""
    counts = np.asarray(counts, dtype=np.int64)
    if max_counts is None or len(counts) <= max_counts:
        return counts
    if isinstance(max_counts, bool) or not isinstance(max_counts, int) or max_counts < 2:
        raise ModelError(f"'max_counts' must be an integer of at least 2, got {max_counts!r}")
    k = -(-(len(counts) - 1) // (max_counts - 1))  # ceil: n-1 steps in max_counts-1 gaps
    return counts[::-1][::k][::-1]


def _counts(res: Resolved, max_counts: int | None) -> np.ndarray:
    """The multiples of the node size up to ``max_gpus``; with ``max_counts``, a sample of
    those that may have a configuration (:func:`~model.engine.counts.searchable`): the
    others would only be searched to find nothing."""
    counts = count_range(res.training().max_gpus, res.system.node_size)
    if max_counts is None:
        return counts
    live = [searchable(res, counts, s) for s in strategy_names(res.strategy)]
    return sampled_counts(np.unique(np.concatenate([np.asarray(c, dtype=np.int64)
                                                    for c in live])), max_counts)


def pareto_request(req: Request, systems: Sequence[System] | None = None, *,
                   max_counts: int | None = None) -> pd.DataFrame:
    """One row per (system, GPU count) with a configuration: :data:`COLUMNS` and ``pareto``.
    The request's model and workload (``max_gpus``) on each of ``systems`` (default the
    request's own). ``max_counts``: at most that many counts per system, sampled from those
    that may have a configuration (:func:`sampled_counts`)."""
    if req.training().max_gpus is None:
        raise ModelError("the cost/time frontier needs 'max_gpus' (every count up to it)")
    frames = []
    for system in (req.system,) if systems is None else systems:
        res = req.replace(system=system).resolve()  # one question per system
        counts = _counts(res, max_counts)
        frame, _ = best_per_count(res, counts)
        if len(frame):
            frames.append(frame.assign(system=system.name)[list(COLUMNS)])
    if not frames:
        return pd.DataFrame(columns=[*COLUMNS, "pareto"])
    out = pd.concat(frames, ignore_index=True)
    out["pareto"] = pareto_mask(out["train_days"].to_numpy(), out["cost_usd"].to_numpy())
    return out
