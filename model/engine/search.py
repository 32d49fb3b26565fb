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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from model.engine.evaluate import evaluate_ops, evaluate_space, fits_on, shards_of
from model.engine.frontier import Origin
from model.engine.production import production_node
from model.engine.report import op_table, result_frame
from model.engine.request import DEFAULT_BUDGET, Request
from model.engine.resolved import Resolved
from model.engine.rules import explain
from model.engine.space import build_space
from model.engine.variant import variant_frontier
from model.errors import ModelError
from model.physics.block import Ctx
from model.physics.op_sac_scope import MODE as OP_SAC
from model.physics.op_sac_scope import applies as op_sac_applies
from model.physics.strategies import build_strategy, canonical_strategy
from model.specs.execution import (
    Execution,
    describe_executions,
    execution_columns,
)
from model.specs.hardware import System
from model.specs.modes import Mode
from model.specs.stack import Stack
from model.specs.transformer import Transformer

__all__ = ["Evaluation", "SearchResult", "evaluate", "evaluate_request", "run_counts",
           "search_counts", "search_resolved"]


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


def search_counts(
    model: Transformer | Request, system: System | None = None,
    gpu_counts: list[int] | None = None, global_batch: int | None = None,
    strategy: str = "1d", *, compat: str | Mode | None = None, nvs: int | None = None,
    pins: dict | None = None, top_k: int = 10, budget: int = DEFAULT_BUDGET,
    execution: Execution | dict | None = None, stack: str | Stack | None = None,
    costs: object = None,
) -> list[SearchResult]:
    """:func:`model.search` at several GPU counts in one evaluation (a strong-scaling sweep):
    ``search_counts(request)``, or the keyword form (an adapter that builds the
    :class:`~model.engine.request.Request`).

    The candidates of every count are evaluated together, so a block shared by several counts is
    costed once. ``budget`` bounds the candidates of all counts together; each result's
    ``elapsed_s`` is its share (by candidates) of the batch's wall time.
    """
    if isinstance(model, Request):
        return run_counts(only_request(model, system, gpu_counts, global_batch))
    if isinstance(gpu_counts, (str, bytes)) or not hasattr(gpu_counts, "__iter__"):
        raise ModelError(f"GPU counts must be a list of integers, got {gpu_counts!r:.80}")
    return run_counts(Request.build(
        model, system, global_batch=global_batch, gpus=tuple(gpu_counts), strategy=strategy,
        compat=compat, nvs=nvs, pins=pins, top_k=top_k, budget=budget, execution=execution,
        stack=stack, costs=costs))


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
                                      execution_columns(ctx.execution)))
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
_EVALUATE_DEFAULTS = {"tp2": 1, "nb": None, "nv_tp1": None, "nv_tp2": None, "nv_dp": None,
                      "nv_pp": None, "ep": 1, "etp": 1}


def evaluate(
    model: Transformer | Request, system: System | None = None, gpus: int | None = None,
    global_batch: int | None = None, strategy: str = "1d", *,
    tp1: int | None = None, pp: int | None = None, dp: int | None = None,
    microbatch: int | None = None, tp2: int = 1, nb: int | None = None,
    nv_tp1: int | None = None, nv_tp2: int | None = None, nv_dp: int | None = None,
    nv_pp: int | None = None, compat: str | Mode | None = None, nvs: int | None = None,
    execution: Execution | dict | None = None, stack: str | Stack | None = None,
    ep: int = 1, etp: int = 1, costs: object = None,
) -> Evaluation:
    """Evaluate one configuration: ``evaluate(request)`` (its pins give every dimension and its
    workload one GPU count), or the keyword form (an adapter that builds the request). A
    placement or nb left out is the best one for it; ``ep`` and ``etp``: expert parallel and
    expert tensor parallel (a MoE model's expert layers).

    Raises ModelError naming the rule a configuration breaks (see :mod:`model.engine.space`).
    """
    if isinstance(model, Request):
        return evaluate_request(only_request(model, system, gpus, global_batch))
    pins = dict(tp1=tp1, tp2=tp2, pp=pp, dp=dp, microbatch=microbatch, nb=nb, nv_tp1=nv_tp1,
                nv_tp2=nv_tp2, nv_dp=nv_dp, nv_pp=nv_pp, ep=ep, etp=etp)
    _check_dimensions(pins, canonical_strategy(strategy))
    if isinstance(gpus, (list, tuple)):
        raise ModelError(f"'gpus' must be a positive integer, got {gpus!r:.80}")
    return evaluate_request(Request.build(
        model, system, global_batch=global_batch, gpus=gpus, strategy=strategy, compat=compat,
        nvs=nvs, pins=pins, top_k=1, execution=execution, stack=stack, costs=costs))


def _check_dimensions(pins: dict, strategy: str) -> None:
    missing = [k for k in ("tp1", "tp2", "pp", "dp", "microbatch") if pins.get(k) is None]
    if missing:
        raise ModelError(f"evaluate needs every dimension; missing: {', '.join(missing)}")
    if strategy == "1d" and pins["tp2"] != 1:
        raise ModelError("the 1d strategy has no tp2; leave it at 1")


def evaluate_request(req: Request) -> Evaluation:
    """The configuration ``req.pins`` names, on ``req.workload``'s one GPU count."""
    work = req.training()
    pins = {**_EVALUATE_DEFAULTS, **req.pins}
    key = canonical_strategy(req.strategy)
    _check_dimensions(pins, key)
    if len(work.gpus) != 1:
        raise ModelError("evaluate takes one GPU count")
    [gpus] = work.gpus
    global_batch, mode = req.global_batch, req.compat
    tp1, tp2, pp, dp = (pins[k] for k in ("tp1", "tp2", "pp", "dp"))
    if tp1 * tp2 * pp * dp != gpus:
        raise ModelError(
            f"tp1·tp2·pp·dp = {tp1}·{tp2}·{pp}·{dp} = {tp1 * tp2 * pp * dp} must equal"
            f" gpus = {gpus}")
    resolved = req.resolve()
    sysm, ex = resolved.system, resolved.one_execution
    strat = build_strategy(key, req.model, mode, ex)
    model = req.model
    node = production_node(ex, mode, sysm.node_size)
    space = build_space(model, strat, gpus, global_batch, sysm.nvlink_domain_size, pins, mode,
                        interleave=ex.stage_interleave,
                        ends_count_as_layers=ex.ends_count_as_layers, production_node=node)
    if len(space) == 0:
        raise ModelError(explain(model, strat, gpus, global_batch, sysm.nvlink_domain_size, pins,
                                 mode, ex.stage_interleave, ex.ends_count_as_layers, node))
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
