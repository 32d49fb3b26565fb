"""A strong-scaling sweep (the scaling views, Compare systems) run in parts of GPU counts that
each fit the request's memory budget, with the same answer as one sweep.

:func:`~model.engine.search.search_counts` evaluates every GPU count of a strategy together,
so a sweep holds the candidates of all its counts at once; the strategies run one after the
other and keep only their top rows. The search of one count does not depend on the others, so
splitting the counts into groups changes no result, only the peak memory (what a block shared
by several counts costs is computed once per group instead of once). Before this, a sweep was
priced as one evaluation of every strategy and count together, and every MoE preset's defaults
were refused ("~5M configurations over this server's memory budget": deepseek-v3 estimated at
1.37 GB on 4…16,384 GPUs).

Memory of one evaluation: the larger of :data:`~dashboard.jobs.budget.SEARCH_BYTES_PER_SHAPE` ×
shapes and :data:`~dashboard.jobs.budget.SEARCH_BYTES_PER_CANDIDATE` × candidates (plus the fixed
cost). Each constant bounds every measured case's whole growth on its own (growth / shapes and
growth / candidates, each the largest over ``bench/request_budget.py``'s cases, rounded up), so
their sum counted every byte twice. The MoE cases (``bench/request_budget.py deepseek-v3``,
the default stack's searched interleave): the context sweep over 4…16,384 GPUs, 1.33M shapes and
15.3M candidates, grew by 1,301 MB (979 B per shape, 85 B per candidate); the 1D one, 277,106
shapes and 1.80M candidates, by 210 MB (756 and 116 B). Time: every part's, as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dashboard.jobs import budget
from model.api import sweep
from model.engine.request import Request
from model.engine.search import SearchResult
from model.physics.strategies import STRATEGIES, canonical_strategy

# the bytes one evaluation may take beyond the fixed cost
ROOM_BYTES = budget.MEMORY_BUDGET_BYTES - budget.FIXED_BYTES


def evaluation_bytes(shapes: int, candidates: int) -> int:
    """Memory of one evaluation of ``shapes`` and ``candidates`` (beyond the fixed cost)."""
    return max(budget.SEARCH_BYTES_PER_SHAPE * shapes,
               budget.SEARCH_BYTES_PER_CANDIDATE * candidates)


@dataclass(frozen=True)
class Parts:
    """A sweep's size and its groups of counts (each group: one evaluation per strategy)."""

    size: budget.Size
    groups: tuple[tuple[int, ...], ...]
    peak_bytes: int  # of the largest evaluation, fixed cost included


def per_count(request: Request) -> list[list[tuple[int, int]]]:
    """(shapes, candidates) of each strategy (that models the model) at each of the request's
    counts, counted as :func:`dashboard.jobs.budget.size` counts (each stops past
    :data:`budget.COUNT_LIMIT`)."""
    ex, strategies = budget.counted(request)
    return [[budget.count(request, ex, strategy, n) for n in request.training().gpus]
            for strategy in strategies]


def group(counts: list[int], sizes: list[list[tuple[int, int]]],
          room_bytes: int = ROOM_BYTES) -> tuple[tuple[int, ...], ...]:
    """Consecutive counts, grouped while every strategy's evaluation of the group fits
    ``room_bytes`` (a count that does not fit alone is a group of its own)."""
    groups: list[list[int]] = []
    totals = [(0, 0)] * len(sizes)
    for i, n in enumerate(counts):
        added = [(s + per[i][0], c + per[i][1]) for (s, c), per in zip(totals, sizes)]
        if groups and all(evaluation_bytes(*t) <= room_bytes for t in added):
            groups[-1].append(n)
            totals = added
        else:
            groups.append([n])
            totals = [per[i] for per in sizes]
    return tuple(tuple(g) for g in groups)


def parts(request: Request, room_bytes: int = ROOM_BYTES) -> Parts:
    """The sweep's size, its groups (each evaluation within ``room_bytes`` beyond the fixed
    cost) and the peak memory of its largest evaluation."""
    counts = list(request.training().gpus)
    sizes = per_count(request)
    groups = group(counts, sizes, room_bytes)
    index = {n: i for i, n in enumerate(counts)}
    peak = max((evaluation_bytes(sum(per[index[n]][0] for n in g),
                                 sum(per[index[n]][1] for n in g))
                for per in sizes for g in groups), default=0)
    shapes = sum(s for per in sizes for s, _ in per)
    candidates = sum(c for per in sizes for _, c in per)
    more = any(c > budget.COUNT_LIMIT for per in sizes for _, c in per)
    return Parts(budget.Size(shapes, candidates, len(sizes) * len(groups), more), groups,
                 budget.FIXED_BYTES + peak)


def check_sweep(what: str, request: Request, narrow: str, repeat: int = 1,
                time_budget_s: float | None = None) -> Parts:
    """Refuse ``repeat`` sweeps of the request (its strategies at its counts) whose largest
    evaluation is over the memory budget or whose evaluations together are over the time
    budget (:class:`dashboard.jobs.budget.OverBudget`)."""
    sized = parts(request)
    budget.check(what, sized.peak_bytes, repeat * sized.size.search_s(), sized.size, narrow,
                 time_budget_s)
    return sized


def sweep_in_parts(request: Request, groups: Iterable[Iterable[int]]) -> list[SearchResult]:
    """:func:`~model.studies.sweep.sweep` of the request at each group of counts, in the order
    one sweep of every count gives (strategies outermost, then counts)."""
    results = [r for g in groups for r in sweep(request.with_workload(gpus=tuple(g)))]
    return sorted(results, key=lambda r: (STRATEGIES.index(canonical_strategy(r.strategy)),
                                          r.gpus))
