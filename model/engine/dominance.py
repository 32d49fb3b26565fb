"""The Pareto front of two costs, vectorized: one home for the cost/time frontier of the plan
studies (:mod:`model.studies.pareto`) and the throughput/speed frontier of serving
(:mod:`model.serving.serve`, which negates its two rates)."""

from __future__ import annotations

import numpy as np


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The points no other point beats (lower ``x`` and lower ``y`` are better): sorted by x,
    then y, a point is on the front when its y is below every y before it — so of equal points
    only the first is kept. A NaN or infinite coordinate is never on the front and hides
    nothing. O(n log n): one sort and a running minimum, no loop over the points."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    valid = np.isfinite(x) & np.isfinite(y)
    order = np.lexsort((y, x))  # by x, then y
    ys = np.where(valid[order], y[order], np.inf)
    lowest_before = np.minimum.accumulate(np.concatenate(([np.inf], ys[:-1])))
    keep = np.zeros(len(x), dtype=bool)
    keep[order] = (ys < lowest_before) & valid[order]
    return keep
