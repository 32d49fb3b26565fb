"""The inverse question: how many GPUs train a model within D days, or fastest within a budget.

Exact, not fitted: the best configuration of every GPU count that is a multiple of the node size
(``gpu_step``) is searched (:func:`model.engine.counts.best_per_count`) and the answer read off:

* ``days`` only: the fewest GPUs whose best configuration trains the budget within D days
  (every smaller multiple was searched and does not);
* ``budget_usd`` only: the fastest configuration whose cost is at most the budget;
* both: the fewest GPUs within D days whose cost is at most the budget.

One question, one answer: ``tperf plan`` (:mod:`model.cli.planning`) and the dashboard's Plan &
cost page (:mod:`dashboard.jobs.planner`) both call :func:`plan` through :func:`plan_strategies` and
:func:`plan_execution`, so they share its defaults: the days with failures meet the target
(``failures`` True: "within 30 days" means the wall time a job with checkpoints and restarts
takes, not the failure-free one), the production strategies (1D tensor parallelism and context
parallelism, Megatron-Core's TP, CP, PP and DP; the idealised 2D SUMMA only when asked for by
name), and the interleaving and recomputed layers searched, not fixed.

For ``days`` alone counts are searched in windows that double (up to ``max_gpus``) until one
meets it; with a budget every multiple up to ``max_gpus`` is searched. At each count the fastest
configuration is also the cheapest (cost and energy are proportional to GPUs × days). With
``failures`` the days with failures (:mod:`model.physics.goodput`) must meet D, and GPU-hours,
energy and cost are those of the expected wall time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from model.engine.counts import best_per_count, count_range
from model.engine.economics import power_and_prices
from model.engine.request import Request
from model.errors import ModelError
from model.physics.strategies import PRODUCTION, supported_strategies
from model.specs.execution_variants import DEFAULT_SEARCH
from model.specs.hardware import System
from model.specs.transformer import Transformer

PRODUCTION_STRATEGIES = PRODUCTION  # what Megatron-Core runs (1d, context); SUMMA is idealised
DEFAULT_MAX_GPUS = 131_072  # 2^17: beyond the largest training clusters built by 2025 (~100k)
FIRST_WINDOW = 512  # node-size multiples in the first window of a days-only plan
Progress = Callable[[int, int], None]  # (GPU counts done, GPU counts in range), both in counts


@dataclass
class PlanResult:
    """The answer of :func:`plan` (``row`` None when nothing in range meets the target)."""

    row: pd.Series | None  # the chosen configuration's result row (every column of a search)
    gpu_step: int
    max_gpus: int
    target_days: float | None
    budget_usd: float | None
    failures: bool
    per_count: pd.DataFrame  # the best row of every count searched that has one
    counts_searched: int  # multiples of gpu_step searched
    elapsed_s: float

    @property
    def gpus(self) -> int | None:
        return None if self.row is None else int(self.row["gpus"])

    def summary(self) -> dict[str, Any]:
        """The answer's figures: gpus, days (and with failures), GPU-hours, cost, energy."""
        if self.row is None:
            return {"gpus": None, "gpu_step": self.gpu_step}
        r = self.row
        return {"gpus": int(r["gpus"]), "days": float(r["train_days"]),
                "days_with_failures": float(r["train_days_with_failures"]),
                "gpu_step": self.gpu_step, "gpu_hours": float(r["plan_gpu_hours"]),
                "cost_usd": _num(r["plan_cost_usd"]), "energy_mwh": _num(r["plan_energy_mwh"]),
                "pricing": r["pricing"], "samples_per_s": float(r["samples_per_s"]),
                "mfu": float(r["mfu"])}


    def budget_note(self, global_batch: int) -> str:
        """Why a plan for the fastest within a budget spends less than 90 % of it ('' when it
        spends more, or the plan has no budget or no answer): a faster job needs more GPUs,
        and either the largest count searched stops it, or no larger count is faster — the
        global batch caps data parallelism (dp ≤ the batch in sequences), so more GPUs go to
        tensor and pipeline parallelism, which add communication and bubbles."""
        if self.row is None or self.budget_usd is None or self.target_days is not None:
            return ""
        cost = float(self.row["plan_cost_usd"])
        if not math.isfinite(cost) or cost >= 0.9 * self.budget_usd:
            return ""
        spent = (f"the fastest plan spends ${cost:,.0f} of the ${self.budget_usd:,.0f} "
                 f"budget ({100 * cost / self.budget_usd:.0f} %)")
        largest = int(self.per_count["gpus"].max())
        if self.gpus >= largest:
            return (f"{spent}: it uses the largest GPU count searched ({largest:,}); raise the "
                    "largest count to buy more speed")
        return (f"{spent}: no count up to {self.max_gpus:,} GPUs is faster — at a global "
                f"batch of {global_batch:,} sequences data parallelism stops at "
                f"{global_batch:,}, and more GPUs only add tensor and pipeline parallelism "
                f"(MFU {100 * float(self.row['mfu']):.1f} % here); a larger batch scales "
                "further, up to the critical batch")


def _num(value: object) -> float | None:
    v = float(value)
    return v if math.isfinite(v) else None


def plan_columns(frame: pd.DataFrame, failures: bool) -> pd.DataFrame:
    """``frame`` with the days, GPU-hours, cost and energy a plan compares (``plan_*``): the
    model's, or with ``failures`` those of the expected wall time (scaled by its ratio)."""
    out = frame.copy()
    scale = (out["train_days_with_failures"] / out["train_days"]) if failures else 1.0
    out["plan_days"] = out["train_days"] * scale
    for name in ("gpu_hours", "cost_usd", "energy_mwh"):
        out[f"plan_{name}"] = out[name] * scale
    return out


def check_targets(days: float | None, budget_usd: float | None, model: Transformer) -> None:
    """A plan's targets, and the budget of the model it plans for: a ModelError in their words."""
    if days is None and budget_usd is None:
        raise ModelError("plan needs a target: days (train within D days; --days) or "
                         "budget_usd (the fastest within a budget; --budget-usd), or both")
    for name, value in (("days", days), ("budget_usd", budget_usd)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 < value < 1e15 or not math.isfinite(value)):
            raise ModelError(f"'{name}' must be a positive number, got {value!r}")
    if model.training_samples is None:
        raise ModelError(f"model '{model.name}' has no training budget: give tokens (or "
                         "samples) to plan for")


def plan_strategies(model: Transformer, strategy: str | tuple[str, ...] = "all"
                    ) -> str | tuple[str, ...]:
    """The strategies a plan searches: ``all`` (the default) means the production ones the
    model supports (:data:`PRODUCTION_STRATEGIES`); a name or names, as given."""
    if strategy != "all":
        return strategy
    return tuple(s for s in supported_strategies(model) if s in PRODUCTION_STRATEGIES)


def plan_execution(execution: dict[str, Any] | None) -> dict[str, Any] | None:
    """A plan's execution: ``execution`` with the interleaving and the recomputed layers
    searched (:data:`~model.specs.execution_variants.DEFAULT_SEARCH`), as ``tperf plan`` does unless
    told otherwise; None (the stack's defaults) stays None."""
    return None if execution is None else {**execution, **DEFAULT_SEARCH}


def plan_request(req: Request, *, days: float | None = None, budget_usd: float | None = None,
                 failures: bool = True, progress: Progress | None = None) -> PlanResult:
    """The fewest GPUs (multiples of the workload's ``gpu_step``, default the system's node
    size, up to its ``max_gpus``) that train the model's budget within ``days``, or the
    fastest within ``budget_usd`` (see the module docstring; the keyword form:
    :func:`model.api.plan`). ``progress(done, total)``, when given, is called with the
    number of GPU counts settled out of the ``total`` in range (multiples of the step up to
    the largest): 0 before the first window, the end of each window searched, and ``total``
    once the answer is known (a days-only plan stops at the first window that meets the
    target: the fewest GPUs is then in it, so the larger counts need no search)."""
    report = progress or (lambda _done, _total: None)
    start = time.perf_counter()
    model, system = req.model, req.system
    check_targets(days, budget_usd, model)
    work = req.training()
    strategy = plan_strategies(model, req.strategy)  # "all": the production ones, as the CLI
    step = system.node_size if work.gpu_step is None else work.gpu_step
    max_gpus = work.max_gpus or DEFAULT_MAX_GPUS
    counts = count_range(max_gpus, step)
    if len(counts) == 0:
        raise ModelError(f"the largest GPU count to plan ({max_gpus:,}) is smaller than one "
                         f"node ({step:,} GPUs): nothing to search")
    if cost_unknown(system) and budget_usd is not None:
        raise ModelError(f"system '{system.name}' has no price for its pricing; give "
                         "usd_per_gpu_hour (rental) or purchase_usd_per_gpu and tdp_w")
    windows = _windows(len(counts)) if budget_usd is None else [(0, len(counts))]
    frames, searched = [], 0
    res = req.replace(strategy=strategy).resolve()
    report(0, len(counts))
    for lo, hi in windows:
        frame, _ = best_per_count(res, counts[lo:hi])
        searched = hi
        frames.append(plan_columns(frame, failures) if len(frame) else frame)
        report(hi, len(counts))
        if budget_usd is None and len(frame) and (frames[-1]["plan_days"] <= days).any():
            break
    per_count = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(
        len(f) for f in frames) else frames[0]
    row = choose(per_count, days, budget_usd)
    if searched < len(counts):
        report(len(counts), len(counts))
    return PlanResult(row, int(step), int(max_gpus), days, budget_usd, failures, per_count,
                      searched, time.perf_counter() - start)


def cost_unknown(system: System) -> bool:
    """Whether the system's pricing has no price to compute a cost with."""
    p = power_and_prices(system)
    if system.costs.pricing == "rental":
        return not p["usd_per_gpu_hour"] > 0
    return not (p["purchase_usd_per_gpu"] > 0 and p["tdp_w"] > 0)


def _windows(n: int) -> list[tuple[int, int]]:
    """Index windows [lo, hi) over n counts, doubling from ``FIRST_WINDOW``."""
    out, lo, hi = [], 0, min(FIRST_WINDOW, n)
    while lo < n:
        out.append((lo, hi))
        lo, hi = hi, min(2 * hi, n)
    return out


def choose(per_count: pd.DataFrame, days: float | None, budget_usd: float | None
            ) -> pd.Series | None:
    """The row a plan answers with, or None (see the module docstring)."""
    if per_count.empty:
        return None
    ok = np.ones(len(per_count), dtype=bool)
    if days is not None:
        ok &= (per_count["plan_days"] <= days).to_numpy()
    if budget_usd is not None:
        ok &= (per_count["plan_cost_usd"] <= budget_usd).to_numpy()
    chosen = per_count[ok]
    if chosen.empty:
        return None
    if days is not None:  # the fewest GPUs (rows are by count, fastest first)
        return chosen.iloc[0]
    return chosen.loc[chosen["plan_days"].idxmin()]
