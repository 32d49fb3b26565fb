"""What happens when a job loses nodes: the best configuration at N, N − node, N − 2·node, …

Calculon's Study 3 question (Isaev et al., SC23): after losing a node, can the job be re-planned
on what is left and slow down gracefully, or does it fall off a cliff? For each number of GPUs
left, A = N − k·node, this gives the best configuration using at most A GPUs (some may idle:
:func:`model.engine.counts.best_per_count` over every count up to N, then the best at or below
each A) and the best using all A. The throughput per GPU left, relative to the full job's, is
``relative_efficiency``; ``cliff`` marks the counts where it falls below ``cliff_ratio`` (no
layout of what is left keeps the job nearly as efficient) or where nothing runs at all.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from model.engine.counts import best_per_count, count_range
from model.engine.production import whole_nodes
from model.engine.request import Request
from model.engine.resolved import Resolved
from model.errors import ModelError

DEFAULT_CLIFF_RATIO = 0.9  # a view's threshold (not a model input): 10 % worse per GPU left
CONFIG = ("strategy", "tp1", "tp2", "pp", "dp", "microbatch", "interleave", "recompute_layers",
          "nv_tp1", "nv_tp2", "nv_dp", "nv_pp")


def lost_node_request(req: Request, *, lost: int = 8, node: int | None = None,
                      cliff_ratio: float = DEFAULT_CLIFF_RATIO) -> pd.DataFrame:
    """One row per number of nodes lost, 0 … ``lost`` (``node`` GPUs each; default the
    system's node size): ``available_gpus``, the best configuration using at most that many
    (``gpus`` it uses, its columns and cost columns), ``all_used_samples_per_s`` (the best
    using every GPU left; NaN when none), ``relative_efficiency`` and ``cliff``; the job is
    the request's one GPU count (the keyword form: :func:`model.api.lost_node_frame`)."""
    res = req.resolve()
    counts = lost_node_counts(req, lost=lost, node=node, cliff_ratio=cliff_ratio, res=res)
    frame, _ = best_per_count(res, counts)
    return lost_node_view(req, frame, lost=lost, node=node, cliff_ratio=cliff_ratio)


def lost_node_counts(req: Request, *, lost: int = 8, node: int | None = None,
                     cliff_ratio: float = DEFAULT_CLIFF_RATIO, res: Resolved | None = None
                     ) -> list[int]:
    """The GPU counts whose best configurations :func:`lost_node_request` compares (its
    arguments checked first, in their words); ``res``: the request resolved, if it was."""
    work = req.training()
    if len(work.gpus) != 1:
        raise ModelError("the lost-node view takes one GPU count: the job's")
    [gpus] = work.gpus
    node = req.system.node_size if node is None else node
    counts = _counts(res or req.resolve(), gpus)  # validates gpus
    if isinstance(lost, bool) or not isinstance(lost, int) or not 0 <= lost < gpus // node:
        raise ModelError(f"'lost' must be an integer in [0, {gpus // node - 1}] nodes of "
                         f"{node} GPUs, got {lost!r}")
    if not 0 < cliff_ratio <= 1:
        raise ModelError(f"'cliff_ratio' must be in (0, 1], got {cliff_ratio!r}")
    return counts


def lost_node_view(req: Request, frame: pd.DataFrame, *, lost: int = 8,
                   node: int | None = None, cliff_ratio: float = DEFAULT_CLIFF_RATIO
                   ) -> pd.DataFrame:
    """:func:`lost_node_request`'s rows from ``frame``, the best configuration of each of
    :func:`lost_node_counts` that has one (``best_per_count``'s rows, searched at once or in
    parts, e.g. by the dashboard within its memory budget)."""
    [gpus] = req.training().gpus
    node = req.system.node_size if node is None else node
    if frame.empty:  # a question without an answer at any count: say so, not an empty view
        raise ModelError(f"no configuration of {req.model.name} fits on {gpus:,} GPUs of "
                         f"{req.system.name} or fewer (strategy {_names(req.strategy)}): there "
                         "is no job to lose nodes from; try more GPUs, more HBM or "
                         "memory-saving options")
    available = gpus - node * np.arange(lost + 1)
    rows, exact = [], []
    for a in available:
        upto = frame[frame["gpus"] <= a]
        rows.append(upto.loc[upto["samples_per_s"].idxmax()] if len(upto) else None)
        same = frame[frame["gpus"] == a]
        exact.append(float(same["samples_per_s"].max()) if len(same) else np.nan)
    return _frame(available, node, rows, exact, cliff_ratio)


def _counts(res: Resolved, gpus: int) -> list[int]:
    """The counts whose best configurations the view compares: every count up to ``gpus``, or,
    under the production rules (:mod:`model.engine.production`: whole nodes of the system's
    node size, which also decide which counts have a configuration at all), the divisors of
    one node and the multiples of it — the same answer from a fraction of the searches."""
    every = count_range(gpus, 1)
    node = res.system.node_size
    if not all(v.production_layout for v in res.variants) or node <= 1:
        return every
    return [n for n in every if whole_nodes(n, node)]


def _names(strategy: str | tuple[str, ...]) -> str:
    return strategy if isinstance(strategy, str) else ", ".join(strategy)


def _frame(available: np.ndarray, node: int, rows: list, exact: list[float],
           cliff_ratio: float) -> pd.DataFrame:
    """The view's rows from the best row at or below each available count."""
    template = next((r for r in rows if r is not None), None)
    columns = list(template.index) if template is not None else ["gpus", "samples_per_s"]
    data = pd.DataFrame([r if r is not None else pd.Series(np.nan, index=columns)
                         for r in rows]).reset_index(drop=True)
    data.insert(0, "lost_nodes", np.arange(len(available)))
    data.insert(1, "available_gpus", available)
    data.insert(2, "node_gpus", node)
    data["all_used_samples_per_s"] = exact
    full = data["samples_per_s"].iloc[0]
    per_gpu = data["samples_per_s"] / data["available_gpus"]
    data["relative_efficiency"] = per_gpu / (full / available[0])
    data["cliff"] = ~(data["relative_efficiency"] >= cliff_ratio)  # NaN (nothing runs): cliff
    return data
