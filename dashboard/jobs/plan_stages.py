"""The Plan & cost page's plan in stages that each fit the request's budgets (issue 29, item 3).

``tperf plan`` (:func:`model.studies.plan.plan_request`) searches every multiple of the node size
in windows of 512, 1,024, … counts, one vectorized search per window; for a mixture-of-experts
model one window evaluates millions of configurations (DeepSeek-V3: about 7 million in its first
512 counts, over 2 GB by :mod:`dashboard.jobs.budget`'s measured costs), over this server's
memory budget per request, so the page refused every MoE preset. Here the same counts are
searched in chunks that each fit the budgets, and the answer is the same:

1. coarse: the node size times 1, 2, 4, … (up to the largest count), in increasing order; for a
   days-only plan it stops at the first that meets the target, an upper bound on the answer;
2. refine: every other multiple of the node size below that bound (all of them with a budget,
   whose answer is the fastest within it), in increasing order, stopping after the first chunk
   that meets the target.

Every multiple below the answer is searched and misses the target, as in ``tperf plan``, so the
fewest GPUs is the CLI's (the ``fastest`` row of a plan without an answer is the fastest count
searched, as there). A chunk is the longest run of consecutive counts whose shapes and
candidates (counted exactly, :func:`dashboard.jobs.budget.count`) fit the memory and time
budgets of one request; each chunk's rows are cached as they are found (a plan stopped half-way
resumes where it stopped), and ``stage`` hears each chunk. Before the refine stage its
candidates are counted and its time refused, in words, over :data:`PLAN_TIME_BUDGET_S`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dashboard.jobs import budget, compute
from model import ModelError
from model.engine.counts import CHUNK, best_per_count, count_range, possible
from model.engine.request import Request
from model.studies.plan import PlanResult, check_targets, choose, cost_unknown, plan_columns

# the whole plan's time (the background job's own budget, dashboard.jobs.studies)
PLAN_TIME_BUDGET_S = 300.0
class NotQuick(Exception):  # noqa: N818 - a signal to the caller, not an error shown
    """Raised by a caller's ``stage`` past its own deadline: the plan goes to a job (the
    chunks searched so far stay cached)."""


Stage = Callable[[int, int, str], None]  # (counts done, counts to search, what is running)
Frames = Callable[[Sequence[int], Callable[[], pd.DataFrame]], pd.DataFrame]


def coarse_counts(counts: np.ndarray) -> np.ndarray:
    """The node size times 1, 2, 4, … among ``counts`` (the multiples of the node size up to
    the largest, increasing), and the largest."""
    idx = (1 << np.arange(int(np.log2(len(counts))) + 1)) - 1
    return np.unique(np.append(counts[idx[idx < len(counts)]], counts[-1]))


def sized(req: Request, counts: Sequence[int], counted: tuple | None = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """(shapes, candidates) of the plan's searches at each of ``counts``, every strategy
    (``counted``: :func:`dashboard.jobs.budget.counted` of the request, when known)."""
    ex, strategies = counted or budget.counted(req)
    shapes, cands = np.zeros(len(counts), np.int64), np.zeros(len(counts), np.int64)
    if len(counts) == 0:
        return shapes, cands
    for strategy in strategies:
        # a count no tp1·tp2·pp·dp of the strategy's rules makes has no configuration: its
        # space is empty (0, 0) without being counted (most counts of a large model)
        made = possible(req.model, strategy.name, req.global_batch, int(max(counts)),
                        mode=req.mode, ends_count_as_layers=ex.ends_count_as_layers)
        for i in np.flatnonzero(np.isin(np.asarray(counts, dtype=np.int64), made)):
            s, c = budget.count(req, ex, strategy, int(counts[i]))
            shapes[i] += s
            cands[i] += c
    return shapes, cands


def _need(shapes: int, cands: int, strategies: int) -> tuple[float, float]:
    """(bytes, seconds) of one vectorized search per strategy over a chunk."""
    size = budget.Size(shapes, cands, strategies)
    return size.search_bytes(), budget.SEARCH_FIXED_S * strategies + \
        budget.SEARCH_S_PER_CANDIDATE * cands


def chunks(req: Request, counts: Sequence[int], shapes: np.ndarray, cands: np.ndarray
           ) -> Iterator[list[int]]:
    """Runs of consecutive ``counts`` (with their ``shapes`` and candidates, :func:`sized`)
    whose searches fit one request's budgets, in order; a single count over them: OverBudget
    naming it."""
    strategies = len(budget.counted(req)[1])
    run: list[int] = []
    total_shapes = total_cands = 0
    for n, s, c in zip(counts, shapes.tolist(), cands.tolist(), strict=True):
        need_b, need_s = _need(total_shapes + s, total_cands + c, strategies)
        if run and (need_b > budget.MEMORY_BUDGET_BYTES or need_s > budget.TIME_BUDGET_S):
            yield run
            run, total_shapes, total_cands = [], 0, 0
        run.append(int(n))
        total_shapes, total_cands = total_shapes + s, total_cands + c
        need_b, need_s = _need(total_shapes, total_cands, strategies)
        budget.check(f"The plan's search at {n:,} GPUs", need_b, need_s,
                     budget.Size(total_shapes, total_cands, strategies),
                     "choose a smaller model or batch")
    if run:
        yield run


def search(req: Request, counts: Sequence[int], failures: bool) -> pd.DataFrame:
    """The best row of each of ``counts`` that has one, with the plan's columns."""
    frame, _ = best_per_count(req.resolve(), list(counts))
    return plan_columns(frame, failures) if len(frame) else frame


def _meets(frame: pd.DataFrame, days: float | None) -> bool:
    return days is not None and len(frame) > 0 and bool((frame["plan_days"] <= days).any())


def search_all(req: Request, counts: Sequence[int], frames: Frames) -> pd.DataFrame:
    """The best row of each of ``counts`` that has one, searched in budget-sized chunks (the
    lost-node view's counts not searched by the plan)."""
    found = [frames(run, lambda run=run: search(req, run, False))
             for run in chunks(req, counts, *sized(req, counts))] if len(counts) else []
    return _merged(found)


def memo_sized(req: Request, counts: Sequence[int], sizes: Frames | None
               ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sized` of ``counts`` through ``sizes(counts, run)`` (a cache: the shapes and
    candidates of a count depend on neither the targets nor the prices)."""
    def run() -> pd.DataFrame:
        shapes, cands = sized(req, counts)
        return pd.DataFrame({"shapes": shapes, "candidates": cands})
    frame = run() if sizes is None or len(counts) == 0 else sizes(counts, run)
    return (frame["shapes"].to_numpy(np.int64), frame["candidates"].to_numpy(np.int64)) \
        if len(frame) else (np.zeros(0, np.int64), np.zeros(0, np.int64))


def staged_plan(req: Request, *, days: float | None, budget_usd: float | None,
                failures: bool, frames: Frames, stage: Stage | None = None,
                sizes: Frames | None = None) -> tuple[PlanResult, list[int]]:
    """:func:`model.studies.plan.plan_request`'s answer, searched in budget-sized chunks (the
    module docstring), and the counts searched. ``frames(counts, run)``: the rows of a chunk
    (``run()`` unless cached); ``stage(done, total, text)`` hears each chunk (and may stop
    the plan by raising, e.g. :class:`NotQuick`: the chunks searched are cached); ``sizes``:
    the same for the counts' sizes (:func:`memo_sized`)."""
    report = stage or (lambda _d, _t, _x: None)
    start = time.perf_counter()
    check_targets(days, budget_usd, req.model)
    work = req.training()
    step = req.system.node_size if work.gpu_step is None else work.gpu_step
    counts = count_range(work.max_gpus, step)
    if len(counts) == 0:
        raise ModelError(f"the largest GPU count to plan ({work.max_gpus:,}) is smaller than "
                         f"one node ({step:,} GPUs): nothing to search")
    if cost_unknown(req.system) and budget_usd is not None:
        raise ModelError(f"system '{req.system.name}' has no price for its pricing; give "
                         "usd_per_gpu_hour (rental) or purchase_usd_per_gpu and tdp_w")
    found: list[pd.DataFrame] = []
    coarse, searched = coarse_counts(counts), []  # type: ignore[var-annotated]
    report(0, len(coarse), f"Coarse: the node size × 1, 2, 4, … up to {counts[-1]:,} GPUs")
    for run in chunks(req, coarse, *memo_sized(req, coarse, sizes)):
        found.append(frames(run, lambda run=run: search(req, run, failures)))
        searched += run
        report(len(searched), len(coarse), f"Coarse: searched up to {run[-1]:,} GPUs")
        if _meets(found[-1], days) and budget_usd is None:
            break
    best = _choose_all(found, days, budget_usd)
    top = int(best["gpus"]) if best is not None and budget_usd is None else int(counts[-1])
    rest = counts[(counts < top) & ~np.isin(counts, coarse)]
    report(0, len(rest), f"Refine: sizing every multiple of {step} below {top:,} GPUs")
    rest_shapes, rest_cands = memo_sized(req, rest, sizes)
    _check_refine(req, rest, rest_cands)
    done = 0
    for run in chunks(req, rest, rest_shapes, rest_cands):
        found.append(frames(run, lambda run=run: search(req, run, failures)))
        searched += run
        done += len(run)
        report(done, len(rest), f"Refine: searched every multiple of {step} up to "
                                f"{run[-1]:,} GPUs")
        if _meets(found[-1], days) and budget_usd is None:
            break
    per_count = _merged(found)
    return PlanResult(choose(per_count, days, budget_usd), int(step), int(work.max_gpus), days,
                      budget_usd, failures, per_count, len(searched),
                      time.perf_counter() - start), sorted(searched)


def _check_refine(req: Request, rest: np.ndarray, cands: np.ndarray) -> float:
    """The estimated seconds of the refine stage's counts (with their candidates; one fixed
    cost per strategy and chunk of at most :data:`~model.engine.counts.CHUNK` counts, as
    ``best_per_count`` runs them); OverBudget over :data:`PLAN_TIME_BUDGET_S`."""
    if len(rest) == 0:
        return 0.0
    strategies = len(budget.counted(req)[1])
    need_s = (budget.SEARCH_S_PER_CANDIDATE * float(cands.sum())
              + budget.SEARCH_FIXED_S * strategies * -(-len(rest) // CHUNK))
    if need_s > PLAN_TIME_BUDGET_S:
        raise budget.OverBudget(
            f"The plan would search {len(rest):,} more GPU counts (every multiple up to "
            f"{int(rest[-1]):,}, {int(cands.sum()):,} configurations): about {need_s:,.0f} s, "
            f"over this server's time budget of {PLAN_TIME_BUDGET_S:g} s for a plan; lower "
            "'Plan up to', or choose a smaller model or batch")
    return need_s


def _merged(found: list[pd.DataFrame]) -> pd.DataFrame:
    """Every chunk's rows by count (the order :func:`choose` reads: fewest GPUs first)."""
    rows = [f for f in found if len(f)]
    if not rows:
        return found[0] if found else pd.DataFrame()
    return pd.concat(rows, ignore_index=True).sort_values("gpus", kind="stable") \
        .reset_index(drop=True)


def _choose_all(found: list[pd.DataFrame], days: float | None,
                budget_usd: float | None) -> pd.Series | None:
    merged = _merged(found)
    return choose(merged, days, budget_usd) if len(merged) else None


def cached_frames(kind: str, payload: dict[str, Any]) -> Frames:
    """``frames`` for :func:`staged_plan`: each chunk's rows cached under (payload, counts)."""
    def frames(counts: Sequence[int], run: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        return compute.cached_frame(kind, {**payload, "chunk": [int(n) for n in counts]}, run)
    return frames
