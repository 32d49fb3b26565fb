"""Searches over many GPU counts: any count, at most N GPUs, the best of every count in a range.

A configuration uses n = tp1·tp2·pp·dp GPUs, so a count has a configuration only if it is such a
product of values each dimension allows on its own (tp1 divides the heads and the hidden size,
dp divides the global batch, pp ≤ the layers, …; :mod:`model.engine.rules`). :func:`possible`
computes that set of products at once — a necessary condition, cheap — and the searches here
run :func:`~model.engine.search.search_counts` (one vectorized evaluation of every count, with
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
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from model.engine.frontier import Frontier
from model.engine.pruning import DEFAULT_PRUNING, Pruning
from model.engine.report import result_frame
from model.engine.request import Request
from model.engine.rules import MIN_ROWS, Problem, mask
from model.engine.search import (
    DEFAULT_BUDGET,
    SearchResult,
    check_args,
    only_request,
    search_counts,
    with_stack,
)
from model.engine.space import divisors
from model.engine.tight import kept_bytes
from model.engine.variant import variant_frontier
from model.errors import ModelError
from model.physics.strategies import STRATEGIES, build_strategy, canonical_strategy
from model.specs import memo
from model.specs.execution import Execution, execution_columns, execution_variants
from model.specs.hardware import System
from model.specs.modes import Mode, resolve_mode
from model.specs.stack import Stack
from model.specs.transformer import Transformer

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
    microbatch and interleaving rules are not checked here). Remembered per process (a plan
    asks the same counts again at every stage and for every price; read-only)."""
    given = tuple(sorted((k, int(v)) for k, v in (pins or {}).items() if v is not None))
    return _possible(model, canonical_strategy(strategy), int(global_batch), int(upto),
                     resolve_mode(compat), given, bool(ends_count_as_layers))


@memo.lru("possible GPU counts", 64, memo.RESULTS)
def _possible(model: Transformer, strategy: str, global_batch: int, upto: int, mode: Mode,
              given: tuple[tuple[str, int], ...], ends_count_as_layers: bool) -> np.ndarray:
    """:func:`possible` of hashable arguments (``given``: the pins as sorted pairs)."""
    strat = build_strategy(strategy, model, mode)
    problem = Problem(model, strat, 0, global_batch, 1, mode.equal_pipeline_stages,
                      ends_count_as_layers)
    pins = dict(given)

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
    out = out[out <= upto]
    out.setflags(write=False)  # shared by every caller of the same question
    return out


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


def strategy_names(strategy: str | Iterable[str]) -> list[str]:
    """One strategy, 'all', or several, as canonical names."""
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


@dataclass(frozen=True)
class Searched:
    """What a multi-count search covered: candidates and feasible ones over every count and
    execution, and the executions searched."""

    candidates: int = 0
    feasible: int = 0
    executions: tuple[Execution, ...] = ()

    def __add__(self, other: Searched) -> Searched:
        return Searched(self.candidates + other.candidates, self.feasible + other.feasible,
                        self.executions or other.executions)


def best_per_count(model: Transformer, system: System, counts: Sequence[int], global_batch: int,
                   strategy: str | Iterable[str] = "1d", *, top_k: int = 1,
                   compat: object = None, pins: dict | None = None,
                   execution: Execution | dict | None = None, stack: str | Stack | None = None,
                   costs: object = None, budget: int = DEFAULT_BUDGET,
                   pruning: Pruning = DEFAULT_PRUNING) -> tuple[pd.DataFrame, Searched]:
    """The ``top_k`` best configurations of each of ``counts`` over the strategies (rows of
    every count that has one, by count then fastest first: the rows
    :func:`~model.engine.search.search_counts` gives for each count), and what was searched.
    Only the counts :func:`searchable` keeps are searched, in batches of ``CHUNK``; each
    execution's search is read as arrays and turned into one frame, not one per count."""
    frames, done = [], Searched()
    for strat in strategy_names(strategy):
        todo = searchable(model, system, counts, global_batch, strat, compat=compat, pins=pins,
                          execution=execution, stack=stack)
        for i in range(0, len(todo), CHUNK):
            part, searched = _bests(model, system, todo[i:i + CHUNK], global_batch, strat,
                                    compat=compat, pins=pins, top_k=top_k,
                                    budget=max(budget - done.candidates, 1),
                                    execution=execution, stack=stack, costs=costs,
                                    pruning=pruning)
            frames += part
            done = done + searched
    if not frames:
        return _empty(model, system, global_batch, strategy, compat, execution, stack,
                      costs), done
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values(["gpus", "samples_per_s", "_strategy", "_variant", "_rank"],
                              ascending=[True, False, True, True, True], kind="stable")
    frame = frame.groupby("gpus", sort=False).head(top_k)
    return frame.drop(columns=["_strategy", "_variant", "_rank"]).reset_index(drop=True), done


def _bests(model: Transformer, system: System, counts: list[int], global_batch: int,
           strategy: str, *, compat: object, pins: dict | None, top_k: int, budget: int,
           execution: Execution | dict | None, stack: str | Stack | None, costs: object,
           pruning: Pruning) -> tuple[list[pd.DataFrame], Searched]:
    """search_counts' rows of every count (and what it searched), read from each execution's
    :class:`~model.engine.frontier.Frontier` as arrays: one result frame per execution."""
    pins = dict(pins or {})
    for n in counts:
        check_args(n, global_batch, compat, top_k, pins, budget)
    mode = resolve_mode(compat)
    system, execution = with_stack(system.with_costs(costs), execution, stack, mode)
    variants = execution_variants(execution)
    usable = kept_bytes(system, mode)  # tight rows too, as search's (model.engine.tight)
    frames, done = [], Searched(executions=tuple(variants))
    for v, ex in enumerate(variants):
        front, ctx = variant_frontier(model, system, counts, global_batch, strategy, mode, ex,
                                      pins, top_k, budget - done.candidates, pruning)
        done = done + Searched(sum(front.candidates()),
                               sum(c.feasible(usable) for c in front.shapes))
        pos, rank, gpus = _first_fitting(front, usable, top_k)
        if not len(pos):
            continue
        rows = {k: values[pos] for k, values in front.rows.items()}
        frame = result_frame(model, system, front.strategy, gpus, global_batch, rows,
                             np.arange(len(pos)), execution_columns(ctx.execution))
        frames.append(frame.assign(_strategy=STRATEGIES.index(front.strategy), _variant=v,
                                   _rank=rank))
    return frames, done


def _first_fitting(front: Frontier, usable: float, top_k: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row positions, their rank among the count's fitting rows, their GPU count) of the
    first ``top_k`` rows of each count that fit in ``usable`` bytes — what
    :meth:`~model.engine.frontier.Frontier.tops` picks, for every count at once."""
    fit = front.rows["memory_bytes"] <= usable
    sizes = np.diff(front.starts)
    count = np.repeat(np.arange(len(sizes)), sizes)
    before = np.concatenate([[0], np.cumsum(fit)])[front.starts[:-1]]
    rank = np.cumsum(fit) - np.repeat(before, sizes)
    pos = np.flatnonzero(fit & (rank <= top_k))
    return pos, rank[pos], np.asarray(front.gpus, dtype=np.int64)[count[pos]]


def _empty(model: Transformer, system: System, global_batch: int, strategy: Any,
           compat: object, execution: Any, stack: Any, costs: object) -> pd.DataFrame:
    """The frame of a search where no count has a configuration (the search schema): that of a
    search whose pin (tp1 above the GPU count) nothing matches."""
    first = strategy_names(strategy)[0]
    n = system.node_size
    return search_counts(model, system, [n], global_batch, first, compat=compat,
                         pins={"tp1": n + 1}, execution=execution, stack=stack,
                         costs=costs)[0].top.iloc[:0]


def search_at_most(model: Transformer | Request, system: System | None = None,
                   max_gpus: int | None = None, global_batch: int | None = None,
                   strategy: str = "1d", *, gpu_step: int = 1, top_k: int = 10,
                   compat: object = None, pins: dict | None = None,
                   execution: Execution | dict | None = None, stack: str | Stack | None = None,
                   costs: object = None, budget: int = DEFAULT_BUDGET) -> SearchResult:
    """The ``top_k`` fastest configurations using at most ``max_gpus`` GPUs (any multiple of
    ``gpu_step``; the rest idle), fastest first; ``result.gpus`` is the count the best uses and
    ``result.max_gpus`` the bound. ``search_at_most(request)`` (its workload's ``max_gpus``), or
    the keyword form, which builds the request."""
    if not isinstance(model, Request):
        model = Request.build(model, system, global_batch=global_batch, max_gpus=max_gpus,
                              gpu_step=gpu_step, strategy=strategy, compat=compat, pins=pins,
                              top_k=top_k, budget=budget, execution=execution, stack=stack,
                              costs=costs)
    return at_most(only_request(model, system, max_gpus, global_batch))


def at_most(req: Request) -> SearchResult:
    """:func:`search_at_most` of a request."""
    max_gpus, strategy, top_k = req.training().max_gpus, req.strategy, req.top_k
    if max_gpus is None:
        raise ModelError("give 'max_gpus' (at most that many GPUs)")
    start = time.perf_counter()
    counts = count_range(max_gpus, req.training().gpu_step or 1)
    frame, done = best_per_count(req.model, req.system, counts, req.global_batch, strategy,
                                 top_k=top_k, compat=req.compat, pins=dict(req.pins),
                                 execution=req.execution_given(), stack=req.stack,
                                 budget=req.budget, pruning=req.pruning)
    if len(frame):
        frame = frame.sort_values("samples_per_s", ascending=False, kind="stable")
        frame = frame.head(top_k).reset_index(drop=True)
    used = int(frame["gpus"].iloc[0]) if len(frame) else 0
    return SearchResult(used, canonical_strategy(strategy) if strategy != "all" else "all",
                        frame, done.candidates, done.feasible, time.perf_counter() - start,
                        done.executions, max_gpus=int(max_gpus))
