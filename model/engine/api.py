"""The search's front door: :func:`search_request` of one GPU count
(:func:`~model.engine.search.run_counts`) or of at most N (:func:`~model.engine.counts.at_most`),
from a :class:`~model.engine.request.Request` (the keyword form, ``search(model, system, …)``,
is :func:`model.api.search`).

It sits above both engines so that neither imports the other's caller (the import graph runs
one way: request → search → counts → api).
"""

from __future__ import annotations

from model.engine.counts import at_most
from model.engine.request import Request
from model.engine.search import SearchResult, run_counts
from model.errors import ModelError


def search_request(req: Request) -> SearchResult:
    """The fastest configurations of a request that fit in HBM: at most its ``max_gpus``, or
    its one GPU count (``top_k`` rows, best first)."""
    if req.training().max_gpus is not None:
        return at_most(req)
    if len(req.workload.gpus) != 1:
        raise ModelError("give 'gpus' (a GPU count) or 'max_gpus' (at most that many)")
    return run_counts(req)[0]
