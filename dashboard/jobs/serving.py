"""What the Serving page asks the estimator (:mod:`model.serving.serve`): the best layout of
its form's workload and every layout searched, the offline Pareto front (the same request
offline), the latency against load of the best layout and the cost against a TPOT limit — all
from one :class:`~model.engine.request.Request` built by :func:`serving_request`, with the
scenario's model and system (the control panel's hardware what-ifs move it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dashboard.controls.scenario import build_inputs
from model import ServeResult, serve
from model.engine.request import Request
from model.serving.serve import cost_versus_sla, load_curve
from model.specs.serving import Serving, ServingLayout, ServingWorkload

TPOT_LIMITS_S = np.geomspace(0.005, 0.5, 25)  # the $-vs-SLA view's limits
LOAD_POINTS = 40  # request rates of the latency-against-load curve


@dataclass(frozen=True)
class ServingAnswer:
    """The Serving page's numbers: ``result`` of the form's request, ``offline`` (the same
    request offline: its Pareto front and its cost against a TPOT limit, ``cost``), and the
    best layout's latency against load (``curve``, ``knee_rate_per_s``; None when no layout
    fits)."""

    result: ServeResult
    offline: ServeResult
    cost: pd.DataFrame
    curve: pd.DataFrame | None
    knee_rate_per_s: float | None


def serving_request(scn: dict[str, Any], gpus: int, workload: ServingWorkload,
                    pins: ServingLayout, stack: str) -> Request:
    """The scenario's model and system serving ``workload`` on ``gpus`` GPUs with the layout
    ``pins`` and the serving ``stack``, as one request."""
    model, system = build_inputs(scn)
    return Request(model, system, Serving(workload, gpus, pins), stack=stack)


def serving(scn: dict[str, Any], gpus: int, workload: ServingWorkload, pins: ServingLayout,
            stack: str) -> ServingAnswer:
    """Every number the Serving page shows for the scenario and its form's request."""
    request = serving_request(scn, gpus, workload, pins, stack)
    result = serve(request)
    offline = result if workload.mode == "offline" else serve(request.replace(
        workload=Serving(workload.with_overrides(mode="offline", concurrency=None,
                                                 request_rate_per_s=None), gpus, pins)))
    curve = knee = None
    if result.best.get("fits"):
        curve, knee = load_curve(request.model, request.system, workload, result.best,
                                 stack=stack, points=LOAD_POINTS)
    return ServingAnswer(result, offline, cost_versus_sla(offline.frame, TPOT_LIMITS_S),
                         curve, knee)
