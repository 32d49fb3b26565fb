"""The search's front door: :func:`search` of one GPU count (:func:`~model.engine.search.
run_counts`) or of at most N (:func:`~model.engine.counts.at_most`), from a
:class:`~model.engine.request.Request` or the keywords that build one.

It sits above both engines so that neither imports the other's caller (the import graph runs
one way: request → search → counts → api).
"""

from __future__ import annotations

from model.engine.counts import at_most
from model.engine.request import DEFAULT_BUDGET, Request
from model.engine.search import SearchResult, only_request, run_counts
from model.errors import ModelError
from model.specs.execution import Execution
from model.specs.hardware import System
from model.specs.modes import Mode
from model.specs.stack import Stack
from model.specs.transformer import Transformer
from model.specs.workload import MAX_GPUS, positive_int


def search(
    model: Transformer | Request, system: System | None = None, gpus: int | None = None,
    global_batch: int | None = None, strategy: str = "1d", *,
    compat: str | Mode | None = None, nvs: int | None = None, pins: dict | None = None,
    top_k: int = 10, budget: int = DEFAULT_BUDGET, execution: Execution | dict | None = None,
    stack: str | Stack | None = None, costs: object = None, max_gpus: int | None = None,
    gpu_step: int = 1,
) -> SearchResult:
    """The ``top_k`` fastest configurations of ``strategy`` on ``gpus`` GPUs that fit in HBM:
    ``search(request)``, or the keyword form below (an adapter that builds the request).

    ``nvs`` overrides the system's NVLink domain size; ``pins`` fixes any of tp1, tp2, pp, dp,
    ep, etp, microbatch, nb, nv_tp1, nv_tp2, nv_dp, nv_pp; ``compat='paper'`` reproduces the
    paper's model with its bugs (docs/model.md, "The paper mode"); ``execution`` sets recompute,
    sequence parallelism, interleaving, ZeRO stage, precision, TP and EP overlap, MoE routing
    load … (:class:`~model.specs.execution.Execution`) over the software ``stack``'s defaults
    and the default search (every interleaving, the fewest recomputed layers that fit), with
    the stack's calibrated efficiencies (a name of ``model/data/stacks``; None: the newest;
    "none": the system's own values and the one Execution default;
    :func:`~model.engine.resolved.with_stack`). A dict whose values are lists searches every
    combination (``result.searched`` says what was searched). Ties keep the deterministic
    candidate order. ``costs`` changes the site, pricing or failure inputs of the cost columns
    (:class:`~model.specs.cost.Costs`, a dict of its fields).

    With ``max_gpus`` (and ``gpus`` None) the search covers every count up to it in steps of
    ``gpu_step`` and returns the fastest configurations using at most that many GPUs, the rest
    idle (:func:`model.engine.counts.search_at_most`); ``result.gpus`` is what the best uses.
    """
    if isinstance(model, Request):
        return search_request(only_request(model, system, gpus, global_batch))
    if gpus is not None:
        positive_int("gpus", gpus, MAX_GPUS)
    return search_request(Request.build(
        model, system, global_batch=global_batch, gpus=gpus, max_gpus=max_gpus,
        gpu_step=gpu_step, strategy=strategy, compat=compat, nvs=nvs, pins=pins, top_k=top_k,
        budget=budget, execution=execution, stack=stack, costs=costs))


def search_request(req: Request) -> SearchResult:
    """:func:`search` of a request: at most ``max_gpus``, or its one GPU count."""
    if req.training().max_gpus is not None:
        return at_most(req)
    if len(req.workload.gpus) != 1:
        raise ModelError("give 'gpus' (a GPU count) or 'max_gpus' (at most that many)")
    return run_counts(req)[0]
