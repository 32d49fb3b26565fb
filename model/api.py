"""The keyword forms of the estimator's questions, in one place: each builds a
:class:`~model.engine.request.Request` (:meth:`Request.build
<model.engine.request.Request.build>` declares and documents every keyword: ``mode``,
``nvs``, ``pins``, ``top_k``, ``budget``, ``execution``, ``stack``, ``costs``, ``max_gpus``,
``gpu_step``, ``pruning``) and asks the one engine or study function that takes a request.
Each also takes a ready request in place of the model (``search(request)``).

    search(m, s, 4096, 4096, "summa", top_k=5)      # = search_request(Request.build(...))

Below the CLI and the dashboard nothing calls these: the engine and the studies take the
request (:func:`~model.engine.api.search_request`, :func:`~model.engine.search.run_counts`,
:func:`~model.studies.plan.plan_request`, …).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from model.engine.api import search_request
from model.engine.counts import at_most, count_range
from model.engine.design import design_cells_request, design_space_request, leanest_request
from model.engine.request import Request
from model.engine.search import (
    DIMENSIONS,
    EVALUATE_DEFAULTS,
    Evaluation,
    SearchResult,
    check_dimensions,
    evaluate_request,
    only_request,
    run_counts,
)
from model.errors import ModelError
from model.physics.strategies import STRATEGIES, canonical_strategy
from model.serving.serve import ServeResult, serve_request
from model.specs.hardware import System
from model.specs.serving import Serving, ServingLayout, ServingWorkload
from model.specs.serving_stack import ServingStack
from model.specs.transformer import Transformer
from model.specs.workload import MAX_GPUS, positive_int
from model.studies.codesign import CodesignResult, batches_of, codesign_requests
from model.studies.lost_node import DEFAULT_CLIFF_RATIO, lost_node_request
from model.studies.pareto import pareto_request
from model.studies.plan import DEFAULT_MAX_GPUS, PlanResult, check_targets, plan_request
from model.studies.sweep import PAPER_GPU_COUNTS, sweep_request

__all__ = ["codesign", "design_cells", "design_space", "evaluate", "leanest", "lost_node_frame",
           "pareto_frame", "plan", "search", "search_at_most", "search_counts", "serve", "sweep"]

Model = Transformer | Request


def search(model: Model, system: System | None = None, gpus: int | None = None,
           global_batch: int | None = None, strategy: str = "1d", **options: Any
           ) -> SearchResult:
    """The ``top_k`` fastest configurations of ``strategy`` on ``gpus`` GPUs that fit in HBM
    (:func:`~model.engine.api.search_request`); with ``max_gpus`` (and ``gpus`` None) those
    using at most that many, in steps of ``gpu_step``. ``options``: the keywords of
    :meth:`Request.build <model.engine.request.Request.build>`."""
    if isinstance(model, Request):
        return search_request(only_request(model, system, gpus, global_batch))
    if gpus is not None:
        positive_int("gpus", gpus, MAX_GPUS)
    return search_request(Request.build(model, system, global_batch=global_batch, gpus=gpus,
                                        strategy=strategy, **options))


def search_counts(model: Model, system: System | None = None,
                  gpu_counts: Iterable[int] | None = None, global_batch: int | None = None,
                  strategy: str = "1d", **options: Any) -> list[SearchResult]:
    """:func:`search` at several GPU counts in one evaluation (a strong-scaling sweep:
    :func:`~model.engine.search.run_counts`)."""
    if isinstance(model, Request):
        return run_counts(only_request(model, system, gpu_counts, global_batch))
    if isinstance(gpu_counts, (str, bytes)) or not hasattr(gpu_counts, "__iter__"):
        raise ModelError(f"GPU counts must be a list of integers, got {gpu_counts!r:.80}")
    return run_counts(Request.build(model, system, global_batch=global_batch,
                                    gpus=tuple(gpu_counts), strategy=strategy, **options))


def search_at_most(model: Model, system: System | None = None, max_gpus: int | None = None,
                   global_batch: int | None = None, strategy: str = "1d", **options: Any
                   ) -> SearchResult:
    """The ``top_k`` fastest configurations using at most ``max_gpus`` GPUs
    (:func:`~model.engine.counts.at_most`; ``gpu_step``: the counts' step, default 1)."""
    if isinstance(model, Request):
        return at_most(only_request(model, system, max_gpus, global_batch))
    options.setdefault("gpu_step", 1)
    return at_most(Request.build(model, system, global_batch=global_batch, max_gpus=max_gpus,
                                 strategy=strategy, **options))


def evaluate(model: Model, system: System | None = None, gpus: int | None = None,
             global_batch: int | None = None, strategy: str = "1d", **options: Any
             ) -> Evaluation:
    """One configuration (:func:`~model.engine.search.evaluate_request`): ``options`` name
    every dimension (tp1, pp, dp, microbatch; tp2, nb, nv_*, ep, etp as in
    :data:`~model.engine.search.DIMENSIONS`) and any keyword of :meth:`Request.build
    <model.engine.request.Request.build>` but ``pins``, ``top_k`` and ``budget``."""
    if isinstance(model, Request):
        return evaluate_request(only_request(model, system, gpus, global_batch))
    pins = {k: options.pop(k, EVALUATE_DEFAULTS.get(k)) for k in DIMENSIONS}
    check_dimensions(pins, canonical_strategy(strategy))
    if isinstance(gpus, (list, tuple)):
        raise ModelError(f"'gpus' must be a positive integer, got {gpus!r:.80}")
    return evaluate_request(Request.build(model, system, global_batch=global_batch, gpus=gpus,
                                          strategy=strategy, pins=pins, top_k=1, **options))


def _one_count(model: Model, system: System | None, gpus: int | None,
               global_batch: int | None, strategy: str, **options: Any) -> Request:
    """The request a design-map function was given, or the one its keywords build."""
    if isinstance(model, Request):
        return only_request(model, system, gpus, global_batch)
    if isinstance(gpus, (list, tuple)):
        raise ModelError(f"'gpus' must be a positive integer, got {gpus!r:.80}")
    return Request.build(model, system, global_batch=global_batch, gpus=gpus,
                         strategy=strategy, top_k=1, **options)


def design_space(model: Model, system: System | None = None, gpus: int | None = None,
                 global_batch: int | None = None, strategy: str = "1d", **options: Any
                 ) -> pd.DataFrame:
    """Every candidate on ``gpus`` GPUs (:func:`~model.engine.design.design_space_request`)."""
    return design_space_request(_one_count(model, system, gpus, global_batch, strategy,
                                           **options))


def design_cells(model: Model, system: System | None = None, gpus: int | None = None,
                 global_batch: int | None = None, strategy: str = "1d", x: str = "tp1",
                 y: str = "pp", **options: Any) -> pd.DataFrame:
    """The best configuration per (x, y) cell, in chunks
    (:func:`~model.engine.design.design_cells_request`; ``chunk`` and ``deadline`` go to it)."""
    how = {k: options.pop(k) for k in ("chunk", "deadline") if k in options}
    req = _one_count(model, system, gpus, global_batch, strategy, **options)
    return design_cells_request(req, x, y, **how)


def leanest(model: Model, system: System | None = None, gpus: int | None = None,
            global_batch: int | None = None, strategy: str = "1d", **options: Any
            ) -> dict[str, float] | None:
    """The least-memory configuration (:func:`~model.engine.design.leanest_request`)."""
    return leanest_request(_one_count(model, system, gpus, global_batch, strategy, **options))


def sweep(model: Model, system: System | None = None,
          gpu_counts: Iterable[int] = PAPER_GPU_COUNTS, global_batch: int = 4096,
          strategies: Iterable[str] | None = None, **options: Any) -> list[SearchResult]:
    """One search per (strategy, GPU count) (:func:`~model.studies.sweep.sweep_request`); a
    request's own strategy, or every one for "all"; the keyword form's default: every
    strategy, ``top_k`` 1."""
    if isinstance(model, Request):
        req = only_request(model, system)
        names = strategies or (STRATEGIES if req.strategy == "all" else (req.strategy,)
                               if isinstance(req.strategy, str) else req.strategy)
        return sweep_request(req, names)
    if isinstance(gpu_counts, (str, bytes)) or not hasattr(gpu_counts, "__iter__"):
        raise ModelError(f"GPU counts must be a list of integers, got {gpu_counts!r:.80}")
    options.setdefault("top_k", 1)
    req = Request.build(model, system, global_batch=global_batch, gpus=tuple(gpu_counts),
                        strategy="all", **options)
    return sweep_request(req, req.strategy if strategies is None else strategies)


def plan(model: Model, system: System | None = None, global_batch: int | None = None, *,
         days: float | None = None, budget_usd: float | None = None, failures: bool = True,
         progress: Callable[[int, int], None] | None = None, **options: Any) -> PlanResult:
    """The fewest GPUs that train within ``days``, or the fastest within ``budget_usd``
    (:func:`~model.studies.plan.plan_request`); the keyword form's strategy is "all" and its
    ``max_gpus`` :data:`~model.studies.plan.DEFAULT_MAX_GPUS` unless given."""
    if isinstance(model, Request):
        req = only_request(model, system, global_batch)
    else:
        check_targets(days, budget_usd, model)
        options = {"strategy": "all", "max_gpus": DEFAULT_MAX_GPUS, **options}
        req = Request.build(model, system, global_batch=global_batch, **options)
    return plan_request(req, days=days, budget_usd=budget_usd, failures=failures,
                        progress=progress)


def lost_node_frame(model: Model, system: System | None = None, gpus: int | None = None,
                    global_batch: int | None = None, strategy: str = "1d", *, lost: int = 8,
                    node: int | None = None, cliff_ratio: float = DEFAULT_CLIFF_RATIO,
                    **options: Any) -> pd.DataFrame:
    """One row per number of nodes lost (:func:`~model.studies.lost_node.lost_node_request`)."""
    if isinstance(model, Request):
        req = only_request(model, system, gpus, global_batch)
    else:
        count_range(gpus, 1)  # validates gpus in its own words first
        req = Request.build(model, system, global_batch=global_batch, gpus=gpus,
                            strategy=strategy, **options)
    return lost_node_request(req, lost=lost, node=node, cliff_ratio=cliff_ratio)


def pareto_frame(model: Model, systems: Sequence[System] | None = None,
                 global_batch: int | None = None, max_gpus: int | None = None,
                 strategy: str = "1d", *, max_counts: int | None = None, costs: object = None,
                 **options: Any) -> pd.DataFrame:
    """The cost/time frontier over ``systems`` (:func:`~model.studies.pareto.pareto_request`;
    ``costs`` applied to every system)."""
    if isinstance(model, Request):
        return pareto_request(only_request(model, global_batch, max_gpus), systems,
                              max_counts=max_counts)
    if not systems:
        raise ModelError("give at least one system")
    systems = [s.with_costs(costs) for s in systems]
    req = Request.build(model, systems[0], global_batch=global_batch, max_gpus=max_gpus,
                        strategy=strategy, **options)
    return pareto_request(req, systems, max_counts=max_counts)


def codesign(models: Sequence[Transformer] | Sequence[Request], system: System | None = None,
             budget_usd: float | None = None, vary: Mapping[str, Sequence[float]] | None = None,
             prices: object = None, global_batch: int | Sequence[int] | None = None, *,
             progress: Callable[[int, int], None] | None = None, **options: Any
             ) -> CodesignResult:
    """The best system design under a budget (:func:`~model.studies.codesign.
    codesign_requests`): requests, or ``models`` on ``system`` with ``global_batch`` one for
    all models or one each."""
    if len(models) and all(isinstance(m, Request) for m in models):
        if system is not None or global_batch is not None:
            raise ModelError("give the requests alone, or the models, system and global batch")
        return codesign_requests(models, budget_usd, vary, prices, progress=progress)
    batches = batches_of(models, global_batch)
    reqs = [Request.build(m, system, global_batch=gbs, **options)
            for m, gbs in zip(models, batches)]
    return codesign_requests(reqs, budget_usd, vary, prices, progress=progress)


def serve(model: Model, system: System | None = None, gpus: int | None = None,
          workload: ServingWorkload | dict | None = None,
          layout: ServingLayout | dict | None = None,
          stack: ServingStack | str | None = None) -> ServeResult:
    """Serving: the pinned layout evaluated, or what is not pinned searched
    (:func:`~model.serving.serve.serve_request`): ``workload`` on ``gpus`` GPUs of
    ``system``."""
    if not isinstance(model, Request):
        model = Request(model, system, Serving(workload, gpus, layout), stack=stack)
    return serve_request(model)
