"""Strong-scaling sweeps: the best configuration of each strategy at each GPU count."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

import pandas as pd

from model.engine.request import Request
from model.engine.search import SearchResult, run_counts
from model.physics.strategies import STRATEGIES, canonical_strategy, supported_strategies

PAPER_GPU_COUNTS = tuple(2 ** k for k in range(2, 15))  # 4 … 16384, as in the paper's figures


def sweep_request(req: Request, strategies: str | Iterable[str]) -> list[SearchResult]:
    """:func:`sweep` of a request over ``strategies`` ("all": every one). Of several, those
    the request's stack runs (:mod:`model.engine.layouts`) and that model the model."""
    names = list(STRATEGIES) if strategies == "all" else [
        canonical_strategy(s) for s in ([strategies] if isinstance(strategies, str)
                                        else strategies)]
    if len(names) > 1:
        supported = supported_strategies(req.model)
        names = [s for s in names if s in supported]
        runs = req.replace(strategy=tuple(names)).strategy if names else ()
        names = list(runs) if isinstance(runs, tuple) else [runs]
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
