"""Search every parallel configuration for the fastest that fits, and evaluate one configuration.

:func:`run_counts` (several counts in one evaluation, under :func:`model.search` of
:mod:`model.engine.api` and :func:`search_counts`) resolves the request once (the software
stack applied: :meth:`~model.engine.request.Request.resolve`), runs one
:func:`~model.engine.variant.variant_frontier` per execution choice (the candidate space of
:mod:`model.engine.space`, evaluated at once, pruned and cached:
:mod:`model.engine.variant`) and returns the top k as a DataFrame with every breakdown column
(:mod:`model.engine.report`). :func:`evaluate` is a search with every dimension pinned: its
numbers are exactly that configuration's search row, plus a per-op table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from model.engine.evaluate import evaluate_ops, evaluate_space, fits_on, shards_of
from model.engine.frontier import Origin
from model.engine.report import op_table, result_frame
from model.engine.request import Request
from model.engine.resolved import Resolved
from model.engine.rules import Problem, explain
from model.engine.space import build_space
from model.engine.tight import kept_bytes
from model.engine.variant import variant_frontier
from model.errors import ModelError
from model.physics.context import Ctx
from model.physics.op_sac_scope import MODE as OP_SAC
from model.physics.op_sac_scope import applies as op_sac_applies
from model.physics.strategies import build_strategy, canonical_strategy
from model.specs.execution import Execution
from model.specs.execution_variants import describe_executions, execution_columns

__all__ = ["Evaluation", "SearchResult", "evaluate_request", "run_counts", "search_resolved"]


@dataclass
class SearchResult:
    """The top configurations of one search, with how many were evaluated and fit."""

    gpus: int
    strategy: str
    top: pd.DataFrame  # best first; every column of model.engine.report.result_frame
    candidates: int
    feasible: int
    elapsed_s: float
    # the executions searched (model.execution.Execution); each row's columns say which it is
    executions: tuple[Execution, ...] = ()
    # search(..., max_gpus=N): the bound; ``gpus`` is then what the best uses (rows say theirs)
    max_gpus: int | None = None
    # the frame ``top`` was sliced from and its first row there (model.engine.frontier.Origin),
    # when ``top`` is such a slice as it is: best_frame takes a sweep's best rows from these
    origin: Origin | None = field(default=None, repr=False, compare=False)

    @property
    def searched(self) -> str:
        """What was searched besides the parallel configurations, in words."""
        return describe_executions(list(self.executions)) if self.executions else ""

    @property
    def best(self) -> pd.Series | None:
        return None if self.top.empty else self.top.iloc[0]


def only_request(request: Request, *others: object) -> Request:
    """The request, when an entry point was given one and nothing else positional."""
    if any(o is not None for o in others):
        raise ModelError("give a Request alone, or the model, system, GPUs and global batch")
    return request


def run_counts(req: Request) -> list[SearchResult]:
    """The top ``req.top_k`` configurations at each of ``req.workload.gpus``."""
    return search_resolved(req.resolve())


def search_resolved(res: Resolved) -> list[SearchResult]:
    """:func:`run_counts` of a resolved request (the stack applied once, by the caller)."""
    counts = list(res.training().gpus)
    if not counts:
        raise ModelError("give at least one GPU count")
    if not isinstance(res.strategy, str) or res.strategy == "all":
        canonical_strategy(str(res.strategy))  # a search takes one: the error names the others
    strategy = res.strategy
    start = time.perf_counter()
    variants = list(res.variants)
    if len(variants) > 1 and not op_sac_applies(res.model):  # a list: op-SAC left out here
        variants = [v for v in variants if v.recompute != OP_SAC] or variants
    per_variant = []
    for ex in variants:  # a few execution choices, each a vectorized search of its own
        used = sum(c for frames in per_variant for _, c, _, _ in frames)
        front, ctx = variant_frontier(res, strategy, counts, ex, res.budget - used)
        per_variant.append(front.tops(res.model, res.system, res.global_batch, res.top_k,
                                      execution_columns(ctx.execution),
                                      kept_bytes(res.system, res.mode)))
    elapsed = time.perf_counter() - start
    total = max(sum(c for frames in per_variant for _, c, _, _ in frames), 1)
    out = []
    for i, n in enumerate(counts):
        # an execution where nothing fits has an empty (object-typed) frame: concatenated, it
        # would turn the other frames' integer and boolean columns into floats
        found = [frames[i] for frames in per_variant if len(frames[i][0])] or [
            per_variant[0][i]]
        tops = [f[0] for f in found]
        top = pd.concat(tops, ignore_index=True) if len(tops) > 1 else tops[0]
        origin = found[0][3] if len(tops) == 1 else None
        if len(tops) > 1:
            top = top.sort_values("samples_per_s", ascending=False, kind="stable")
            top = top.head(res.top_k).reset_index(drop=True)
        count = sum(frames[i][1] for frames in per_variant)
        fit = sum(frames[i][2] for frames in per_variant)
        out.append(SearchResult(n, strategy, top, count, fit, elapsed * count / total,
                                tuple(variants), origin=origin))
    return out


@dataclass
class Evaluation:
    """One configuration: its result row (same numbers as its search row) and per-op table."""

    row: pd.Series
    ops: pd.DataFrame
    fits: bool


DIMENSIONS = ("tp1", "tp2", "pp", "dp", "microbatch", "nb", "nv_tp1", "nv_tp2", "nv_dp", "nv_pp",
              "ep", "etp")  # evaluate's pins: every one given, or its default below
EVALUATE_DEFAULTS = {"tp2": 1, "nb": None, "nv_tp1": None, "nv_tp2": None, "nv_dp": None,
                      "nv_pp": None, "ep": 1, "etp": 1}


def check_dimensions(pins: dict, strategy: str) -> None:
    missing = [k for k in ("tp1", "tp2", "pp", "dp", "microbatch") if pins.get(k) is None]
    if missing:
        raise ModelError(f"evaluate needs every dimension; missing: {', '.join(missing)}")
    if strategy == "1d" and pins["tp2"] != 1:
        raise ModelError("the 1d strategy has no tp2; leave it at 1")


def evaluate_request(req: Request) -> Evaluation:
    """The configuration ``req.pins`` names, on ``req.workload``'s one GPU count."""
    work = req.training()
    pins = {**EVALUATE_DEFAULTS, **req.pins}
    key = canonical_strategy(req.strategy)
    check_dimensions(pins, key)
    if len(work.gpus) != 1:
        raise ModelError("evaluate takes one GPU count")
    [gpus] = work.gpus
    global_batch, mode = req.global_batch, req.mode
    tp1, tp2, pp, dp = (pins[k] for k in ("tp1", "tp2", "pp", "dp"))
    if tp1 * tp2 * pp * dp != gpus:
        raise ModelError(
            f"tp1·tp2·pp·dp = {tp1}·{tp2}·{pp}·{dp} = {tp1 * tp2 * pp * dp} must equal"
            f" gpus = {gpus}")
    resolved = req.resolve()
    sysm, ex = resolved.system, resolved.one_execution
    strat = build_strategy(key, req.model, mode, ex)
    model = req.model
    problem = Problem.of(model, strat, gpus, global_batch, mode=mode, execution=ex,
                         system=sysm, pins=pins)
    space = build_space(problem)
    if len(space) == 0:
        raise ModelError(explain(replace(problem, pins=pins)))
    res = evaluate_space(model, sysm, strat, space, global_batch, mode, execution=ex)
    fits = fits_on(res, sysm)
    thr = np.where(fits, global_batch / res["iteration_time_s"], -res["iteration_time_s"])
    i = int(np.argmax(thr))  # best placement / nb: fitting first, then fastest
    row = result_frame(model, sysm, strat.name, gpus, global_batch, res, np.array([i]),
                       execution_columns(ex)).iloc[0]
    one = {k: v[i:i + 1] for k, v in space.cols.items()}
    ctx = Ctx.make(model, sysm, mode, ex)
    sh = shards_of(one)
    table = op_table(
        [("pre", r) for r in evaluate_ops(strat.pre, sh, ctx)]
        + [("block", r) for r in evaluate_ops(strat.block, sh, ctx)]
        + [("post", r) for r in evaluate_ops(strat.post, sh, ctx)],
        n_microbatches=int(row["n_microbatches"]), layers_per_stage=int(row["layers_per_stage"]),
        sh=sh, ctx=ctx,
    )
    return Evaluation(row, table, bool(fits[i]))
