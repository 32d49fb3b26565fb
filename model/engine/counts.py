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
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from model.engine.frontier import Frontier
from model.engine.report import result_frame
from model.engine.request import Request
from model.engine.resolved import Resolved
from model.engine.rules import MIN_ROWS, Problem, divisors, mask
from model.engine.search import SearchResult, search_resolved
from model.engine.tight import kept_bytes
from model.engine.variant import variant_frontier
from model.errors import ModelError
from model.physics.strategies import STRATEGIES, build_strategy, canonical_strategy
from model.specs import memo
from model.specs.execution import Execution
from model.specs.execution_variants import execution_columns
from model.specs.modes import Mode, resolve_mode
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
             mode: object = None, pins: dict | None = None,
             ends_count_as_layers: bool = False) -> np.ndarray:
    """Every GPU count up to ``upto`` that is tp1·tp2·pp·dp for values each dimension allows
    (increasing). A count outside it has no configuration; one inside may still have none (the
    microbatch and interleaving rules are not checked here). Remembered per process (a plan
    asks the same counts again at every stage and for every price; read-only)."""
    given = tuple(sorted((k, int(v)) for k, v in (pins or {}).items() if v is not None))
    return _possible(model, canonical_strategy(strategy), int(global_batch), int(upto),
                     resolve_mode(mode), given, bool(ends_count_as_layers))


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


def searchable(res: Resolved, counts: Sequence[int], strategy: str) -> list[int]:
    """Of ``counts``, those that may have a configuration of ``strategy`` (:func:`possible`
    under every execution ``res`` searches)."""
    counts = np.asarray(list(counts), dtype=np.int64)
    if counts.size == 0:
        return []
    ends = {v.ends_count_as_layers for v in res.variants}
    keep = np.zeros(len(counts), dtype=bool)
    for flag in ends:
        ok = possible(res.model, strategy, res.global_batch, int(counts.max()), mode=res.mode,
                      pins=dict(res.pins), ends_count_as_layers=flag)
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


def best_per_count(res: Resolved, counts: Sequence[int], top_k: int = 1
                   ) -> tuple[pd.DataFrame, Searched]:
    """The ``top_k`` best configurations of each of ``counts`` over ``res``'s strategies (rows
    of every count that has one, by count then fastest first: the rows
    :func:`~model.engine.search.search_counts` gives for each count), and what was searched.
    Only the counts :func:`searchable` keeps are searched, in batches of ``CHUNK``; each
    execution's search is read as arrays and turned into one frame, not one per count."""
    frames, done = [], Searched()
    res = res if res.top_k == top_k else res.replace(top_k=top_k)
    for strat in strategy_names(res.strategy):
        todo = searchable(res, counts, strat)
        for i in range(0, len(todo), CHUNK):
            part, searched = _bests(res, todo[i:i + CHUNK], strat,
                                    max(res.budget - done.candidates, 1))
            frames += part
            done = done + searched
    if not frames:
        return _empty(res), done
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values(["gpus", "samples_per_s", "_strategy", "_variant", "_rank"],
                              ascending=[True, False, True, True, True], kind="stable")
    frame = frame.groupby("gpus", sort=False).head(top_k)
    return frame.drop(columns=["_strategy", "_variant", "_rank"]).reset_index(drop=True), done


def _bests(res: Resolved, counts: list[int], strategy: str, budget: int
           ) -> tuple[list[pd.DataFrame], Searched]:
    """search_counts' rows of every count (and what it searched), read from each execution's
    :class:`~model.engine.frontier.Frontier` as arrays: one result frame per execution."""
    model, system, top_k = res.model, res.system, res.top_k
    usable = kept_bytes(system, res.mode)  # tight rows too, as search's (model.engine.tight)
    frames, done = [], Searched(executions=res.variants)
    for v, ex in enumerate(res.variants):
        front, ctx = variant_frontier(res, strategy, counts, ex, budget - done.candidates)
        done = done + Searched(sum(front.candidates()),
                               sum(c.feasible(usable) for c in front.shapes))
        pos, rank, gpus = _first_fitting(front, usable, top_k)
        if not len(pos):
            continue
        rows = {k: values[pos] for k, values in front.rows.items()}
        frame = result_frame(model, system, front.strategy, gpus, res.global_batch, rows,
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


def _empty(res: Resolved) -> pd.DataFrame:
    """The frame of a search where no count has a configuration (the search schema): that of a
    search whose pin (tp1 above the GPU count) nothing matches."""
    n = res.system.node_size
    work = replace(res.training(), gpus=(n,), max_gpus=None)
    nothing = res.replace(strategy=strategy_names(res.strategy)[0], pins={"tp1": n + 1},
                          workload=work, top_k=10)
    return search_resolved(nothing)[0].top.iloc[:0]


def at_most(req: Request) -> SearchResult:
    """The ``top_k`` fastest configurations using at most the request's ``max_gpus`` GPUs (any
    multiple of its ``gpu_step``; the rest idle), fastest first; ``result.gpus`` is the count
    the best uses and ``result.max_gpus`` the bound (the keyword form:
    :func:`model.api.search_at_most`)."""
    max_gpus, strategy, top_k = req.training().max_gpus, req.strategy, req.top_k
    if max_gpus is None:
        raise ModelError("give 'max_gpus' (at most that many GPUs)")
    start = time.perf_counter()
    counts = count_range(max_gpus, req.training().gpu_step or 1)
    frame, done = best_per_count(req.resolve(), counts, top_k)
    if len(frame):
        frame = frame.sort_values("samples_per_s", ascending=False, kind="stable")
        frame = frame.head(top_k).reset_index(drop=True)
    used = int(frame["gpus"].iloc[0]) if len(frame) else 0
    return SearchResult(used, canonical_strategy(strategy) if strategy != "all" else "all",
                        frame, done.candidates, done.feasible, time.perf_counter() - start,
                        done.executions, max_gpus=int(max_gpus))
