"""Distinct rows without a sort (model/engine/distinct.py) give what sorting gives."""

from __future__ import annotations

import numpy as np
import pytest

from model.engine.distinct import distinct_rows


def _by_sorting(cols: dict[str, np.ndarray], names: tuple[str, ...]):
    """The reference: a stable lexicographic sort of the rows (first name first)."""
    n = len(cols[names[0]])
    order = np.lexsort([cols[name] for name in reversed(names)])
    rows = np.stack([cols[name][order] for name in names], axis=1)
    new = np.ones(n, dtype=bool)
    new[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse  # stable: each group's first row is its earliest


def _column(rng: np.random.Generator, kind: int, n: int) -> np.ndarray:
    if kind == 0:
        return rng.integers(0, 5, n)  # few small values
    if kind == 1:
        return 2 ** rng.integers(0, 14, n)  # powers of two: a sparse dense table
    if kind == 2:
        return np.full(n, 7)  # one value (a dense model's ep)
    return rng.integers(0, 2**40, n)  # too wide for a table: sorted instead


@pytest.mark.parametrize("seed", range(40))
def test_distinct_rows_match_a_sort(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 2000))
    names = tuple(f"c{i}" for i in range(int(rng.integers(1, 7))))
    cols = {name: _column(rng, int(rng.integers(0, 4)), n) for name in names}
    first, inverse = distinct_rows(cols, names)
    want_first, want_inverse = _by_sorting(cols, names)
    assert np.array_equal(first, want_first)  # each distinct row's first row, in key order
    assert np.array_equal(inverse, want_inverse)


def test_distinct_rows_of_many_wide_columns():
    """Keys wider than one 64-bit integer (six columns of about 3,000 values each: 3000⁶ >
    2⁶²) are compressed on the way, order kept."""
    rng = np.random.default_rng(1)
    names = tuple(f"c{i}" for i in range(6))
    cols = {name: rng.integers(0, 2**40, 3000) for name in names}
    assert np.prod([float(len(np.unique(c))) for c in cols.values()]) > 2.0**62
    first, inverse = distinct_rows(cols, names)
    want_first, want_inverse = _by_sorting(cols, names)
    assert np.array_equal(first, want_first) and np.array_equal(inverse, want_inverse)
