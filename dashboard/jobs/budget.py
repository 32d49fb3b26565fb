"""Memory and time budgets of one request, checked before the arrays are built.

Every search, sweep and design-space view of the dashboard first counts its shapes and
candidates (:func:`model.engine.size.space_size`, exact, bounded in memory), estimates the
bytes and seconds they cost, and refuses with a message saying how to narrow the request when
the estimate is over the budget: ``PERF_REQUEST_MEMORY_MB`` (1024) and ``PERF_REQUEST_TIME_S``
(10) per request. The per-worker memory limit of ``gunicorn.conf.py`` and its request time limit
stay behind it for anything the estimate misses.

The costs per shape and per candidate are the largest that ``bench/request_budget.py`` measured
on this project's 2-core machine (peak resident memory growth and wall time, each case in a fresh
process), rounded up: searches grew by at most about 590 B per shape and 80 B per candidate on
large spaces (about 20 MB fixed on small ones) and took at most 0.3 µs per candidate beyond
their fixed cost; the chunked design cells (``model.engine.design.design_cells``) grew by at most
about 110 B per candidate and took 2.0–2.3 µs per candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.settings import SETTINGS
from model import ModelError
from model.engine.counts import strategy_names
from model.engine.request import Request
from model.engine.rules import Problem
from model.engine.size import space_size
from model.physics.strategies import Strategy, build_strategy
from model.specs.execution import Execution


class OverBudget(ModelError):
    """A request refused by its budget (before anything is built)."""


MEMORY_BUDGET_BYTES = SETTINGS.request_memory_bytes
TIME_BUDGET_S = SETTINGS.request_time_s
FIXED_BYTES = 64 * 2**20  # op tables, frames and the figures of any request
SEARCH_BYTES_PER_SHAPE = 1_000
SEARCH_BYTES_PER_CANDIDATE = 150
SEARCH_S_PER_CANDIDATE = 0.5e-6
SEARCH_FIXED_S = 0.05
DESIGN_BYTES_PER_CANDIDATE = 200
DESIGN_S_PER_CANDIDATE = 3e-6


@dataclass(frozen=True)
class Size:
    """Shapes and candidates of one or several searches."""

    shapes: int = 0
    candidates: int = 0
    searches: int = 0
    more: bool = False  # counting stopped early: there are more than these

    def __add__(self, other: Size) -> Size:
        return Size(self.shapes + other.shapes, self.candidates + other.candidates,
                    self.searches + other.searches)

    def search_bytes(self) -> int:
        return (FIXED_BYTES + SEARCH_BYTES_PER_SHAPE * self.shapes
                + SEARCH_BYTES_PER_CANDIDATE * self.candidates)

    def search_s(self) -> float:
        return SEARCH_FIXED_S * self.searches + SEARCH_S_PER_CANDIDATE * self.candidates

    def design_bytes(self) -> int:
        return (FIXED_BYTES + SEARCH_BYTES_PER_SHAPE * self.shapes
                + DESIGN_BYTES_PER_CANDIDATE * self.candidates)

    def design_s(self) -> float:
        return DESIGN_S_PER_CANDIDATE * self.candidates


# candidates past which any request is over the memory budget: counting stops there
COUNT_LIMIT = MEMORY_BUDGET_BYTES // SEARCH_BYTES_PER_CANDIDATE


def counted(request: Request) -> tuple[Execution, list[Strategy]]:
    """The execution a search of ``request`` runs (the stack's defaults and searched options
    included) and the strategy tables it searches: of several strategies, those that cannot
    model the model are left out, as the sweep does; a single one is an error."""
    ex = request.resolve().one_execution
    names = strategy_names(request.strategy)
    built = []
    for name in names:
        try:
            built.append(build_strategy(name, request.model, request.mode, ex))
        except ModelError:
            if len(names) == 1:
                raise
    return ex, built


def count(request: Request, ex: Execution, strategy: Strategy, gpus: int,
          limit: int = COUNT_LIMIT) -> tuple[int, int]:
    """(shapes, candidates) of one strategy's search at ``gpus`` GPUs (of the request's system,
    its NVLink domain), counting stopped past ``limit`` candidates."""
    mode = request.mode
    return space_size(Problem(request.model, strategy, int(gpus), request.global_batch,
                              ex.interleave, mode.equal_pipeline_stages,
                              ex.ends_count_as_layers, nvs=request.system.nvlink_domain_size,
                              exact_domain_fill=mode.exact_domain_fill), limit=limit)


def size(request: Request) -> Size:
    """Shapes and candidates of a search of each of the request's strategies at each of its GPU
    counts (:func:`counted`). Counting stops past :data:`COUNT_LIMIT` candidates
    (``Size.more``)."""
    ex, strategies = counted(request)
    total = Size()
    for strategy in strategies:
        for n in request.training().gpus:
            shapes, candidates = count(request, ex, strategy, n,
                                       COUNT_LIMIT - total.candidates)
            total = total + Size(shapes, candidates, 1)
            if total.candidates > COUNT_LIMIT:
                return Size(total.shapes, total.candidates, total.searches, more=True)
    return total


def check_searches(what: str, request: Request, narrow: str, repeat: int = 1,
                   time_budget_s: float | None = None) -> Size:
    """Refuse ``repeat`` runs of the request's searches (each strategy at each count) that
    would not fit the budgets (memory: one run at a time; time: all of them). Returns their
    size."""
    sized = size(request)
    check(what, sized.search_bytes(), repeat * sized.search_s(), sized, narrow, time_budget_s)
    return sized


def check_design(what: str, request: Request, narrow: str) -> Size:
    """Refuse the design heatmap's cells (:func:`model.engine.design.design_cells`) of the
    request (one strategy at one count) over budget."""
    sized = size(request)
    check(what, sized.design_bytes(), sized.design_s(), sized, narrow)
    return sized


def check(what: str, need_bytes: float, need_s: float, sized: Size, narrow: str,
          time_budget_s: float | None = None) -> None:
    """ModelError when ``need_bytes`` or ``need_s`` is over the request's budget."""
    seconds = TIME_BUDGET_S if time_budget_s is None else time_budget_s
    over = []
    if need_bytes > MEMORY_BUDGET_BYTES:
        over.append(f"about {_gb(need_bytes)} of memory, over this server's memory budget "
                    f"of {_gb(MEMORY_BUDGET_BYTES)} per request")
    if need_s > seconds:
        over.append(f"about {need_s:,.0f} s, over this server's time budget of {seconds:g} s")
    if over:
        at_least = "more than " if sized.more else ""
        raise OverBudget(f"{what} would evaluate {at_least}{sized.candidates:,} configurations "
                         f"({at_least}{sized.shapes:,} shapes): {' and '.join(over)}; {narrow}")


def _gb(n: float) -> str:
    return f"{n / 2**30:.1f} GB"
