"""The one Pareto front (model.engine.dominance): the vectorized mask equals the definition
checked pair by pair."""

from __future__ import annotations

import numpy as np

from model.engine.dominance import pareto_mask


def _by_definition(x: np.ndarray, y: np.ndarray) -> list[bool]:
    """Point i is on the front when it is finite and no finite point is at most as large in
    both and smaller in one (the points here have no ties)."""
    ok = np.isfinite(x) & np.isfinite(y)
    return [bool(ok[i]) and not any(
        ok[j] and x[j] <= x[i] and y[j] <= y[i] and (x[j] < x[i] or y[j] < y[i])
        for j in range(len(x))) for i in range(len(x))]


def test_the_mask_is_the_definition_on_random_points():
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 50, 300):
        x, y = rng.random(n), rng.random(n)
        x[rng.random(n) < 0.1] = np.nan  # never on the front, hides nothing
        y[rng.random(n) < 0.05] = np.inf
        assert pareto_mask(x, y).tolist() == _by_definition(x, y)


def test_equal_points_keep_the_first():
    assert pareto_mask([1.0, 1.0, 2.0], [3.0, 3.0, 1.0]).tolist() == [True, False, True]
