"""The best configuration per (x, y) cell of evaluated candidates, reduced with numpy.

:func:`model.engine.design.design_cells` evaluates a design space in chunks; each chunk is
reduced here to its cells (candidates, how many fit, how many are tight, and the fastest
fitting row's result columns — the fastest tight row's where none fits: "tight" as the
searches keep it, :mod:`model.engine.tight`) and the chunks' cells are merged, without a
DataFrame per chunk: building one (72 result columns) and grouping it cost more than
evaluating the chunk. The rows are those of ``best_per_cell(design_space(...), x, y)``: cells
sorted by (x, y), the first fastest row on a tie (as ``idxmin``), integer columns as floats
when a cell has no fitting row (as a join).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Cells:
    """Cells of some candidates: ``x``, ``y`` (sorted by x, then y), ``candidates``,
    ``feasible`` and ``tight`` (over the usable HBM by the point estimate, within the memory
    model's interval of it) per cell, ``time_s`` of the best row (the fastest that fits, else
    the fastest tight one; NaN when neither exists) and ``rows``: the result columns of the
    cells' best rows (those with a finite ``time_s``), ``FITS`` among them."""
    x: np.ndarray
    y: np.ndarray
    candidates: np.ndarray
    feasible: np.ndarray
    tight: np.ndarray
    time_s: np.ndarray
    rows: dict[str, np.ndarray]


FITS = "_fits"  # the rows' column: whether the best row fits (False: it is tight)


def _groups(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order sorting the rows by x then y, each sorted row's cell number)."""
    order = np.lexsort((y, x))
    sx, sy = x[order], y[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (sx[1:] != sx[:-1]) | (sy[1:] != sy[:-1])
    return order, np.cumsum(new) - 1


def _first_fastest(cell: np.ndarray, time_s: np.ndarray, usable: np.ndarray,
                   fits: np.ndarray, cells: int) -> np.ndarray:
    """Per cell, the index of its first row with the least ``time_s`` among ``usable`` rows,
    those that ``fits`` first (-1 when none): a stable sort by (cell, not fits, time, index)."""
    rows = np.flatnonzero(usable & ~np.isnan(time_s))
    best = np.full(cells, -1, dtype=np.int64)
    if len(rows):
        rows = rows[np.lexsort((rows, time_s[rows], ~fits[rows], cell[rows]))]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = cell[rows][1:] != cell[rows][:-1]
        best[cell[rows][first]] = rows[first]
    return best


def _reduce(x: np.ndarray, y: np.ndarray, candidates: np.ndarray, feasible: np.ndarray,
            tight: np.ndarray, time_s: np.ndarray, usable: np.ndarray,
            columns: dict[str, np.ndarray]) -> Cells:
    """Cells of rows each counting ``candidates``, ``feasible`` and ``tight`` configurations;
    the best of a cell is its first fastest ``usable`` row, one that fits (``columns[FITS]``)
    before any tight one."""
    order, sorted_cell = _groups(x, y)
    cell = np.empty(len(order), dtype=np.int64)
    cell[order] = sorted_cell
    n = int(sorted_cell[-1]) + 1 if len(order) else 0
    head = order[np.r_[True, sorted_cell[1:] != sorted_cell[:-1]]] if len(order) else order
    best = _first_fastest(cell, time_s, usable, columns[FITS].astype(bool), n)
    has = best >= 0
    times = np.full(n, np.nan)
    times[has] = time_s[best[has]]
    return Cells(x[head], y[head], np.bincount(cell, candidates, n).astype(np.int64),
                 np.bincount(cell, feasible, n).astype(np.int64),
                 np.bincount(cell, tight, n).astype(np.int64), times,
                 {k: v[best[has]] for k, v in columns.items()})


def chunk_cells(res: dict[str, np.ndarray], fits: np.ndarray, x: str, y: str,
                kept: np.ndarray | None = None) -> Cells:
    """The cells of an evaluated chunk (``evaluate_space``'s columns, ``fits`` per row and
    ``kept``: whether it fits within the memory model's interval, fits included; None: as
    ``fits``)."""
    kept = fits if kept is None else kept | fits
    ones = np.ones(len(fits), dtype=np.int64)
    return _reduce(res[x], res[y], ones, fits.astype(np.int64), (kept & ~fits).astype(np.int64),
                   res["iteration_time_s"], kept, {**res, FITS: fits})


def merge_cells(parts: list[Cells]) -> Cells:
    """One set of cells from the chunks': counts summed, the best of the earliest chunk kept
    on a tie."""
    if len(parts) == 1:
        return parts[0]
    times = np.concatenate([p.time_s for p in parts])
    usable = ~np.isnan(times)
    columns = {k: np.empty(len(times), dtype=v.dtype) for k, v in parts[0].rows.items()}
    for k, column in columns.items():  # each chunk's best rows at its cells with a time
        column[usable] = np.concatenate([p.rows[k] for p in parts])
    return _reduce(np.concatenate([p.x for p in parts]), np.concatenate([p.y for p in parts]),
                   np.concatenate([p.candidates for p in parts]),
                   np.concatenate([p.feasible for p in parts]),
                   np.concatenate([p.tight for p in parts]), times, usable, columns)


def cell_column(values: np.ndarray, has: np.ndarray) -> np.ndarray:
    """A best-row column over every cell: as it is when every cell has a best row, else as
    floats with NaN for the cells without one (what a left join of them gives)."""
    if has.all():
        return values
    out = np.full(len(has), np.nan)
    out[has] = values
    return out
