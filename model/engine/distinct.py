"""Distinct rows of candidate columns, without sorting where the keys are small.

A search prices each distinct shape (``SHAPE_KEY``) and each distinct block (``BLOCK_KEY``: the
shape and its tensor-parallel placement) once and gathers the results back to the candidates.
The columns are small non-negative integers (sizes, divisors, counts per domain), so a row's key
is a mixed-radix number of its columns' ranks and the distinct keys are found by marking a dense
table instead of sorting: the same distinct rows in the same (lexicographic) order as
``np.unique`` would give, far cheaper for tens of thousands of rows.
"""

from __future__ import annotations

import numpy as np

SHAPE_KEY = ("microbatch", "tp1", "tp2", "nb", "ep", "etp")
BLOCK_KEY = SHAPE_KEY + ("nv_tp1", "nv_tp2", "nv_ep", "nv_etp")


def _dense_limit(rows: int) -> int:
    """Largest dense table (entries) worth marking for ``rows`` rows; above it, sort."""
    return 4 * rows + 1_000_000


def _codes(values: np.ndarray, low: int, top: int) -> tuple[np.ndarray, int]:
    """(rank of each value among the distinct values, how many distinct values), given the
    values' least and greatest."""
    if low >= 0 and top < _dense_limit(len(values)):
        present = np.zeros(top + 1, dtype=bool)
        present[values] = True
        rank = np.cumsum(present) - 1
        return rank[values], int(rank[-1]) + 1
    distinct, codes = np.unique(values, return_inverse=True)
    return codes.reshape(-1), len(distinct)


def _distinct_keys(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct key, increasing key; each row's distinct index) for keys in
    0…size − 1."""
    if size > _dense_limit(len(key)):  # a sparse key: sorting is cheaper
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return first, inverse.reshape(-1)
    present = np.zeros(size, dtype=bool)
    present[key] = True
    first = np.empty(size, dtype=np.int64)
    # repeated indices are assigned in order, the last one kept: reversed, each key's first row
    first[key[::-1]] = np.arange(len(key) - 1, -1, -1)
    return first[present], (np.cumsum(present) - 1)[key]


def distinct_rows(cols: dict[str, np.ndarray], names: tuple[str, ...]):
    """Indices of the distinct rows over ``names`` (each its first row, in lexicographic order
    of ``names``) and, per row, the index of its distinct row."""
    key, size = np.zeros(len(cols[names[0]]), dtype=np.int64), 1
    for name in names:
        values = cols[name]
        if not values.size:
            return _distinct_keys(key, 0)
        low, top = int(values.min()), int(values.max())
        if low == top:  # one value (a dense model's ep): it orders nothing
            continue
        codes, count = _codes(values, low, top)
        if size * count >= 2**62:  # too wide for one integer: compress what is there so far
            first, key = _distinct_keys(key, size)
            size = len(first)
        key, size = key * count + codes, size * count
    return _distinct_keys(key, size)


def distinct_blocks(cols: dict[str, np.ndarray], shape_id: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distinct_rows` over ``BLOCK_KEY`` of the candidates, given each candidate's
    distinct shape ``shape_id`` (its rank in ``SHAPE_KEY`` order): (shape_id, nv_tp1, nv_tp2,
    nv_ep, nv_etp) orders the block keys as ``BLOCK_KEY`` does. Each distinct row is
    represented by one of its candidates (all of them have the same ``BLOCK_KEY`` columns).
    """
    if "nv_tp1" not in cols:  # shapes without a placement (a bound): one block per shape
        size = int(shape_id.max(initial=-1)) + 1
        present = np.zeros(size, dtype=bool)
        present[shape_id] = True
        row = np.empty(size, dtype=np.int64)
        row[shape_id] = np.arange(len(shape_id))  # a row of each distinct shape
        return row[present], (np.cumsum(present) - 1)[shape_id]
    if len(shape_id) == 0:
        return distinct_rows(cols, BLOCK_KEY)
    nv1, nv2 = cols["nv_tp1"], cols["nv_tp2"]
    nv3, nv4 = cols["nv_ep"] - 1, cols["nv_etp"] - 1  # 0 for a dense model: radix 1
    r1, r2 = int(nv1.max()) + 1, int(nv2.max()) + 1
    r3, r4 = int(nv3.max()) + 1, int(nv4.max()) + 1
    size = (int(shape_id.max()) + 1) * r1 * r2 * r3 * r4
    if size > _dense_limit(len(shape_id)):
        return distinct_rows(cols, BLOCK_KEY)
    key = (((shape_id * r1 + nv1) * r2 + nv2) * r3 + nv3) * r4 + nv4
    present = np.zeros(size, dtype=bool)
    present[key] = True
    rank = np.cumsum(present) - 1
    row = np.empty(size, dtype=np.int64)
    row[key] = np.arange(len(key))
    return row[present], rank[key]
