"""Strong-scaling sweeps: the best configuration of each strategy at each GPU count."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

import pandas as pd

from model.engine.request import DEFAULT_BUDGET, Request
from model.engine.search import SearchResult, only_request, run_counts
from model.errors import ModelError
from model.physics.strategies import STRATEGIES, canonical_strategy, supported_strategies
from model.specs.execution import Execution
from model.specs.hardware import System
from model.specs.transformer import Transformer

PAPER_GPU_COUNTS = tuple(2 ** k for k in range(2, 15))  # 4 … 16384, as in the paper's figures


def sweep(model: Transformer | Request, system: System | None = None,
          gpu_counts: Iterable[int] = PAPER_GPU_COUNTS, global_batch: int = 4096,
          strategies: Iterable[str] | None = None, *,
          compat: str | None = None, nvs: int | None = None, pins: dict | None = None,
          execution: Execution | dict | None = None, stack: str | None = None,
          top_k: int = 1, budget: int = DEFAULT_BUDGET) -> list[SearchResult]:
    """One :func:`~model.engine.search.search` per (strategy, GPU count), strategies outermost:
    ``sweep(request)`` (its workload's GPU counts; its strategy, or every one for "all"), or the
    keyword form (default: every strategy), an adapter that builds the request.
    Of several strategies those that cannot model the model are left out (SUMMA has no MoE,
    MLA or MTP op table); a single one that cannot is an error."""
    if isinstance(model, Request):
        req = only_request(model, system)
        names = strategies or (STRATEGIES if req.strategy == "all" else (req.strategy,)
                               if isinstance(req.strategy, str) else req.strategy)
        return sweep_request(req, names)
    if isinstance(gpu_counts, (str, bytes)) or not hasattr(gpu_counts, "__iter__"):
        raise ModelError(f"GPU counts must be a list of integers, got {gpu_counts!r:.80}")
    req = Request.build(model, system, global_batch=global_batch, gpus=tuple(gpu_counts),
                        strategy="all", compat=compat, nvs=nvs, pins=pins, top_k=top_k,
                        budget=budget, execution=execution, stack=stack)
    return sweep_request(req, STRATEGIES if strategies is None else strategies)


def sweep_request(req: Request, strategies: Iterable[str]) -> list[SearchResult]:
    """:func:`sweep` of a request over ``strategies``."""
    names = [canonical_strategy(s) for s in strategies]
    if len(names) > 1:
        supported = supported_strategies(req.model)
        names = [s for s in names if s in supported]
    return [r for s in names for r in run_counts(req.replace(strategy=s))]


def best_frame(results: list[SearchResult]) -> pd.DataFrame:
    """The best row of each search that found a feasible configuration, as one DataFrame."""
    found = [r for r in results if not r.top.empty]
    if not found:
        return pd.DataFrame()
    if all(r.origin is not None for r in found):
        return _taken(found)
    # a one-row top (a sweep's top_k = 1) is its own first row: no slice (each costs about
    # 3 µs per column block of the frame, 15 of them)
    rows = [r.top if len(r.top) == 1 else r.top.iloc[:1] for r in found]
    # the concatenation keeps its inputs' column blocks apart (32 for 87 columns); a copy
    # consolidates them (15), so each later take of rows (every figure's) costs half as much
    return pd.concat(rows, ignore_index=True).copy()


def _taken(found: list[SearchResult]) -> pd.DataFrame:
    """:func:`best_frame` of searches whose tops are row slices of shared frames (a sweep's: one
    frame per strategy and group of counts, :meth:`model.engine.frontier.Frontier.tops`): one
    take of the best rows from each frame, not a slice per count and a concatenation of them
    all (each costs per column block: 15 of them). The same rows, dtypes and order."""
    parts = []
    for _, group in groupby(found, key=lambda r: id(r.origin[0])):
        group = list(group)
        parts.append(group[0].origin[0].take([r.origin[1] for r in group]))
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else \
        parts[0].reset_index(drop=True)
    return frame.copy()
