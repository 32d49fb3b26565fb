"""Searches over many GPU counts: any count, at most N GPUs, the best of every count in a range.

A configuration uses n = tp1·tp2·pp·dp GPUs, so a count has a configuration only if it is such a
product of values each dimension allows on its own (tp1 divides the heads and the hidden size,
dp divides the global batch, pp ≤ the layers, …; :mod:`model.explore.rules`). :func:`possible`
computes that set of products at once — a necessary condition, cheap — and the searches here
run :func:`~model.explore.search.search_counts` (one vectorized evaluation of every count, with
exact pruning) only over the counts in it: the others have no candidate at all, which is what a
search of them would report.

* :func:`best_per_count`: the best configuration of every count of a range, one row per count
  that has one;
* :func:`search_at_most`: the best configurations using at most N GPUs (idle GPUs allowed),
  each row saying how many it uses — ``search(..., max_gpus=N)``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ..errors import ModelError
from ..physics.strategies import STRATEGIES, build_strategy, canonical_strategy
from ..specs.execution import Execution, execution_variants
from ..specs.hardware import System
from ..specs.modes import resolve_mode
from ..specs.stack import Stack
from ..specs.transformer import Transformer
from .rules import MIN_ROWS, Problem, mask
from .search import DEFAULT_BUDGET, SearchResult, search_counts, with_stack
from .space import divisors

MAX_COUNTS = 1_000_000  # GPU counts one multi-count search may span
CHUNK = 4096  # counts evaluated per batch (bounds the memory of one evaluation)


def _allowed(axis: str, values: np.ndarray, problem: Problem, dims: dict | None = None
             ) -> np.ndarray:
    """``values`` of one dimension that obey its rules on their own. The problem's GPU count is
    0, so the rules "… divides n" hold: n is the product being built."""
    given = {**(dims or {}), axis: values}
    return values[np.broadcast_to(mask(axis, given, problem), values.shape)]


def possible(model: Transformer, strategy: str, global_batch: int, upto: int, *,
             compat: object = None, pins: dict | None = None,
             ends_count_as_layers: bool = False) -> np.ndarray:
    """Every GPU count up to ``upto`` that is tp1·tp2·pp·dp for values each dimension allows
    (increasing). A count outside it has no configuration; one inside may still have none (the
    microbatch and interleaving rules are not checked here)."""
    mode = resolve_mode(compat)
    strat = build_strategy(canonical_strategy(strategy), model, mode)
    problem = Problem(model, strat, 0, global_batch, 1, mode.equal_pipeline_stages,
                      ends_count_as_layers)
    pins = {k: v for k, v in (pins or {}).items() if v is not None}

    def pinned(name: str, values: np.ndarray) -> np.ndarray:
        return values[values == pins[name]] if name in pins else values

    tp1 = _allowed("tp1", pinned("tp1", divisors(model.heads)), problem)
    tp2 = np.arange(1, max(model.seq_len // MIN_ROWS, 1) + 1, dtype=np.int64)
    pairs = mask("tp2", {"tp1": tp1[:, None], "tp2": pinned("tp2", tp2)[None, :]}, problem)
    pairs = np.broadcast_to(pairs, (len(tp1), len(pinned("tp2", tp2))))
    tensor = np.unique((tp1[:, None] * pinned("tp2", tp2)[None, :])[pairs])
    pp = _allowed("pp", pinned("pp", np.arange(1, model.layers + 1, dtype=np.int64)), problem,
                  {"tp1": 1, "tp2": 1})
    dp = _allowed("dp", pinned("dp", divisors(global_batch)), problem)
    out = np.unique((tensor[:, None] * pp[None, :]).ravel())
    out = out[out <= upto]
    out = np.unique((out[:, None] * dp[None, :]).ravel())
    return out[out <= upto]


def count_range(upto: int, step: int = 1, start: int | None = None) -> np.ndarray:
    """The counts step, 2·step, … up to ``upto`` (from ``start`` if given), validated."""
    for name, value in (("max_gpus", upto), ("gpu_step", step)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ModelError(f"'{name}' must be a positive integer, got {value!r}")
    if upto // step > MAX_COUNTS:
        raise ModelError(f"{upto // step:,} GPU counts is more than one search spans "
                         f"({MAX_COUNTS:,}); raise gpu_step or lower max_gpus")
    first = step if start is None else max(step, -(-start // step) * step)
    return np.arange(first, upto + 1, step, dtype=np.int64)


def _strategies(strategy: str | Iterable[str]) -> list[str]:
    if isinstance(strategy, str):
        return list(STRATEGIES) if strategy == "all" else [canonical_strategy(strategy)]
    return [canonical_strategy(s) for s in strategy]


def searchable(model: Transformer, system: System, counts: Sequence[int], global_batch: int,
               strategy: str, *, compat: object = None, pins: dict | None = None,
               execution: Execution | dict | None = None, stack: str | Stack | None = None
               ) -> list[int]:
    """Of ``counts``, those that may have a configuration of ``strategy`` (:func:`possible`
    under every execution searched)."""
    counts = np.asarray(list(counts), dtype=np.int64)
    if counts.size == 0:
        return []
    _, ex = with_stack(system, execution, stack, resolve_mode(compat))
    ends = {v.ends_count_as_layers for v in execution_variants(ex)}
    keep = np.zeros(len(counts), dtype=bool)
    for flag in ends:
        ok = possible(model, strategy, global_batch, int(counts.max()), compat=compat,
                      pins=pins, ends_count_as_layers=flag)
        keep |= np.isin(counts, ok)
    return [int(n) for n in counts[keep]]


def best_per_count(model: Transformer, system: System, counts: Sequence[int], global_batch: int,
                   strategy: str | Iterable[str] = "1d", *, top_k: int = 1,
                   compat: object = None, pins: dict | None = None,
                   execution: Execution | dict | None = None, stack: str | Stack | None = None,
                   costs: object = None, budget: int = DEFAULT_BUDGET
                   ) -> tuple[pd.DataFrame, list[SearchResult]]:
    """The ``top_k`` best configurations of each of ``counts`` over the strategies (rows of
    every count that has one, by count then fastest first), and the searches run (only of the
    counts :func:`searchable` keeps, in batches of ``CHUNK`` counts)."""
    results: list[SearchResult] = []
    for strat in _strategies(strategy):
        todo = searchable(model, system, counts, global_batch, strat, compat=compat, pins=pins,
                          execution=execution, stack=stack)
        for i in range(0, len(todo), CHUNK):
            used = sum(r.candidates for r in results)
            results += search_counts(model, system, todo[i:i + CHUNK], global_batch, strat,
                                     compat=compat, pins=pins, top_k=top_k,
                                     budget=max(budget - used, 1), execution=execution,
                                     stack=stack, costs=costs)
    tops = [r.top for r in results if len(r.top)]
    if not tops:
        empty = results[0].top if results else pd.DataFrame()
        return empty, results
    frame = pd.concat(tops, ignore_index=True)
    frame = frame.sort_values(["gpus", "samples_per_s"], ascending=[True, False], kind="stable")
    frame = frame.groupby("gpus", sort=False).head(top_k).reset_index(drop=True)
    return frame, results


def search_at_most(model: Transformer, system: System, max_gpus: int, global_batch: int,
                   strategy: str = "1d", *, gpu_step: int = 1, top_k: int = 10,
                   compat: object = None, pins: dict | None = None,
                   execution: Execution | dict | None = None, stack: str | Stack | None = None,
                   costs: object = None, budget: int = DEFAULT_BUDGET) -> SearchResult:
    """The ``top_k`` fastest configurations using at most ``max_gpus`` GPUs (any multiple of
    ``gpu_step``; the rest idle), fastest first; ``result.gpus`` is the count the best uses and
    ``result.max_gpus`` the bound."""
    start = time.perf_counter()
    counts = count_range(max_gpus, gpu_step)
    frame, results = best_per_count(model, system, counts, global_batch, strategy,
                                    top_k=top_k, compat=compat, pins=pins, execution=execution,
                                    stack=stack, costs=costs, budget=budget)
    if len(frame):
        frame = frame.sort_values("samples_per_s", ascending=False, kind="stable")
        frame = frame.head(top_k).reset_index(drop=True)
    used = int(frame["gpus"].iloc[0]) if len(frame) else 0
    executions = results[0].executions if results else ()
    return SearchResult(used, canonical_strategy(strategy) if strategy != "all" else "all",
                        frame, sum(r.candidates for r in results),
                        sum(r.feasible for r in results), time.perf_counter() - start,
                        executions, max_gpus=int(max_gpus))
