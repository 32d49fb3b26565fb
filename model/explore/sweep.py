"""Strong-scaling sweeps: the best configuration of each strategy at each GPU count."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..errors import ModelError
from ..physics.strategies import STRATEGIES, canonical_strategy, supported_strategies
from ..specs.execution import Execution
from ..specs.hardware import System
from ..specs.transformer import Transformer
from .search import DEFAULT_BUDGET, SearchResult, search_counts

PAPER_GPU_COUNTS = tuple(2 ** k for k in range(2, 15))  # 4 … 16384, as in the paper's figures


def sweep(model: Transformer, system: System, gpu_counts: Iterable[int] = PAPER_GPU_COUNTS,
          global_batch: int = 4096, strategies: Iterable[str] = STRATEGIES, *,
          compat: str | None = None, nvs: int | None = None, pins: dict | None = None,
          execution: Execution | dict | None = None, stack: str | None = None,
          top_k: int = 1, budget: int = DEFAULT_BUDGET) -> list[SearchResult]:
    """One :func:`~model.explore.search.search` per (strategy, GPU count), strategies outermost.
    Of several strategies those that cannot model the model are left out (SUMMA has no MoE,
    MLA or MTP op table); a single one that cannot is an error."""
    if isinstance(gpu_counts, (str, bytes)) or not hasattr(gpu_counts, "__iter__"):
        raise ModelError(f"GPU counts must be a list of integers, got {gpu_counts!r:.80}")
    counts = list(gpu_counts)
    strategies = [canonical_strategy(s) for s in strategies]
    if len(strategies) > 1:
        supported = supported_strategies(model)
        strategies = [s for s in strategies if s in supported]
    return [r for s in strategies
            for r in search_counts(model, system, counts, global_batch, s,
                                   compat=compat, nvs=nvs, pins=pins, top_k=top_k, budget=budget,
                                   execution=execution, stack=stack)]


def best_frame(results: list[SearchResult]) -> pd.DataFrame:
    """The best row of each search that found a feasible configuration, as one DataFrame."""
    rows = [r.top.iloc[:1] for r in results if not r.top.empty]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
