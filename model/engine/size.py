"""How large a search space is, counted with bounded memory before it is built.

:func:`space_size` gives the number of shapes (:func:`~model.engine.space.build_shapes`) and of
candidates (shapes × their NVLink placements, :func:`~model.engine.space.build_space`) — exactly,
by the same rules and code: the (tp1, tp2, pp, dp) stage rows (at most the ordered triples of
divisors of the GPU count) are grown through the remaining dimensions a few rows at a time, and
each block is counted and dropped, so memory stays bounded by the block however large the space
is. With ``limit`` it stops as soon as the candidates counted exceed it (the caller only needs to
know that the space is too large). The dashboard uses it to refuse a request whose arrays would
not fit its memory budget before allocating them. The counts are remembered per process.
"""

from __future__ import annotations

from collections.abc import Hashable

from model.engine.rules import Problem
from model.engine.space import keep_shapes, shape_placements, shape_steps, shapes_key, stage_rows
from model.specs import memo

BLOCK_ROWS = 4_096  # rows grown at once: a few MB of int64 columns at most per dimension
# counts remembered per process: a what-if of a bandwidth or of the HBM capacity counts the
# same spaces again (a few hundred bytes each)
SIZES = memo.Table("space sizes", 1_024, memo.TABLES)


def space_size(problem: Problem, limit: int | None = None,
               block_rows: int = BLOCK_ROWS) -> tuple[int, int]:
    """(shapes, candidates) of the ``problem``'s strategy on its GPUs with its NVLink
    domains; with ``limit``, counting stops once more than ``limit`` candidates are found (the
    counts returned are then those found so far: both are lower bounds, candidates > limit).
    ``block_rows``: rows grown at once (the counts do not depend on it; only the memory)."""
    # the rules read the strategy's name-level traits, the model, the mode's rules and these
    pins = {k: v for k, v in problem.pins.items() if v is not None}
    key: Hashable = (problem.model, problem.strategy.name, int(problem.gpus),
                     int(problem.global_batch), int(problem.nvs), tuple(sorted(pins.items())),
                     int(problem.interleave), bool(problem.ends_count_as_layers),
                     bool(problem.equal_stages), bool(problem.exact_domain_fill), limit,
                     int(problem.production_node), int(block_rows))
    try:  # the frozen specs hash faster than they print; a spec holding a list cannot
        hash(key)
    except TypeError:
        key = repr(key)
    found = SIZES.get(key)
    if found is None:
        found = _count(problem, limit, block_rows)
        SIZES.put(key, found)
    return found


def _count(problem: Problem, limit: int | None, block_rows: int) -> tuple[int, int]:
    """:func:`space_size`, counted."""
    rows = stage_rows(problem)
    gpus, nvs = problem.gpus, problem.nvs
    pins = {k: v for k, v in problem.pins.items() if v is not None}
    steps = shape_steps(problem)
    total = [0, 0]
    whole = [True]  # no dimension was grown in blocks: the last block is every shape

    def count(cols: dict, depth: int) -> bool:
        """Grow ``cols`` from step ``depth`` on, block by block; False once over the limit."""
        n = len(cols["tp1"])
        whole[0] = whole[0] and n <= block_rows
        for start in range(0, n, block_rows):
            block = {k: v[start:start + block_rows] for k, v in cols.items()} if n > block_rows \
                else cols
            if depth < len(steps):
                if not count(steps[depth](block), depth + 1):
                    return False
                continue
            if whole[0]:  # build_shapes(problem), kept for the search that follows
                keep_shapes(shapes_key(problem), block)
            total[0] += len(block["tp1"])
            total[1] += shape_placements(block, gpus, nvs, pins, problem.exact_domain_fill,
                                         problem.production_node > 0).total()
            if limit is not None and total[1] > limit:
                return False
        return True

    count(rows, 0)
    return total[0], total[1]
