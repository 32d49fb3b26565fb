"""What the Scenarios page asks the estimator: a scenario's headline configuration and the
sensitivity of its training time to each hardware input — each a request built by
:func:`~dashboard.controls.scenario.request_of`, sized against the request's budget first and
cached (:func:`dashboard.jobs.compute.cached_frame`).

A scenario's headline is the fastest configuration at its Design GPUs count of its Run
strategies — the production ones when it has any, as the Scaling page's headline — with the
cost columns of its own Plan & cost inputs (pricing, failures). The Design page's selected
configuration asks for the HBM reserve its search used (:func:`reserve_gb`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from dashboard.controls.scenario import (
    build_inputs,
    costs_of,
    estimator_inputs,
    request_of,
)
from dashboard.jobs import budget, compute
from model import ModelError, search
from model.engine.economics import cost_columns
from model.physics.strategies import PRODUCTION, STRATEGIES
from model.studies.sensitivity import searches, sensitivity_frame

NARROW = ("choose fewer Design GPUs or a count with fewer divisors (a power of two), one "
          "strategy, or a global batch with fewer divisors")


def strategies(scn: dict[str, Any]) -> tuple[str, ...]:
    """The Run strategies, the production ones only when there are any."""
    chosen = STRATEGIES if scn["strategy"] == "all" else (scn["strategy"],)
    production = tuple(s for s in chosen if s in PRODUCTION)
    return production or chosen


def best(scn: dict[str, Any]) -> pd.DataFrame:
    """The headline row (one row; none when nothing fits), with the scenario's cost inputs."""
    names = strategies(scn)
    payload = {**estimator_inputs(scn), "gpus": scn["gpus"], "strategies": names,
               "costs": costs_of(scn)}

    def run() -> pd.DataFrame:
        budget.check_searches(f"The headline at {scn['gpus']:,} GPUs",
                              request_of(scn, gpus=(scn["gpus"],), strategy=names), NARROW)
        frames = []
        for name in names:
            try:
                found = search(request_of(scn, gpus=(scn["gpus"],), strategy=name)).top
                if not found.empty:
                    frames.append(found)
            except ModelError:
                if len(names) == 1:
                    raise
        rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if rows.empty:
            return rows
        top = rows.sort_values("train_days", kind="stable").head(1).reset_index(drop=True)
        m, s = build_inputs(scn)
        costs = cost_columns(m, s.with_costs(costs_of(scn)), top["gpus"].to_numpy(),
                             top["train_days"].to_numpy())
        for key, value in costs.items():
            top[key] = value
        return top
    return compute.cached_frame("scenario-best", payload, run)


def sensitivity(scn: dict[str, Any], strategy: str, fraction: float) -> pd.DataFrame:
    """The sensitivity rows of ``strategy`` at the Design GPUs (sized first)."""
    payload = {**estimator_inputs(scn), "gpus": scn["gpus"],
               "strategy": strategy, "fraction": fraction}

    def run() -> pd.DataFrame:
        m, s = build_inputs(scn)
        budget.check_searches(f"The sensitivity at {scn['gpus']:,} GPUs",
                              request_of(scn, gpus=(scn["gpus"],), strategy=strategy), NARROW,
                              repeat=searches(s))
        return sensitivity_frame(m, s, scn["gpus"], scn["global_batch"], strategy, fraction,
                                 **compute.how_of(scn))
    return compute.cached_frame("sensitivity", payload, run)


def reserve_gb(scn: dict[str, Any]) -> float:
    """The HBM reserve the search used: the system's, or its software stack's figure (the
    scenario's request resolved: the stack applied as the search applied it)."""
    return float(request_of(scn).resolve().system.memory_reserve_gb)
