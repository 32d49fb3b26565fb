"""Co-design under a budget: which system, bought for B dollars, trains each model fastest?

For every combination of the varied system fields (a *design*), the price per GPU comes from a
price table (:mod:`model.specs.prices`); the budget buys ``max_gpus`` = ⌊B / price / node⌋ · node
GPUs (whole nodes); the best configuration of every multiple of the node size up to it is
searched (:func:`model.engine.counts.best_per_count`) and the fastest kept: the cluster size a
designer would use (Calculon's Study 5, Isaev et al. SC23). Designs with host memory also search
offload (optimizer, activations, weights, all). Each row gives samples/s and samples/s per
million dollars of the GPUs used.

Speed: the HBM capacity only decides what fits, so designs that differ only in it share one
evaluation — searched largest capacity first over the same GPU counts, the others are answered
from the per-process search cache (:mod:`model.engine.frontier`). The default execution
therefore searches selective and full recompute and every interleaving, but not the per-
configuration fewest recomputed layers (that depends on the capacity); an ``execution`` given
replaces it.

:func:`codesign_requests` takes one :class:`~model.engine.request.Request` per model (its model,
global batch, strategy, execution, stack and candidate budget; the system, with its costs, shared
by all); :func:`codesign` is also the keyword form, an adapter that builds them.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from model.engine.counts import best_per_count, count_range
from model.engine.request import Request
from model.errors import ModelError
from model.specs.execution import Execution
from model.specs.execution_fields import OFFLOAD
from model.specs.hardware import System
from model.specs.prices import PriceTable, check_vary, load_prices
from model.specs.transformer import Transformer
from model.specs.workload import DEFAULT_PRUNING

EXECUTION: dict[str, Any] = {"recompute": ["selective", "full"], "recompute_layers": 0,
                             "interleave": 0}
OFFLOADS = [o for o in OFFLOAD if o != "none"]
BEST = ("strategy", "tp1", "tp2", "pp", "dp", "microbatch", "interleave", "recompute",
        "recompute_layers", "offload", "nv_tp1", "nv_dp", "nv_pp", "mfu", "memory_gb",
        "host_memory_gb", "train_days", "iteration_time_s")
RENAME = {"memory_gb": "hbm_used_gb", "host_memory_gb": "host_memory_used_gb"}
MAX_MODELS = 16


@dataclass
class CodesignResult:
    rows: pd.DataFrame  # one row per (model, design); see codesign()
    varied: tuple[str, ...]
    budget_usd: float
    elapsed_s: float


def designs(vary: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
    """Every combination of the varied values in the order given, except that the HBM capacity
    varies fastest and largest first: designs sharing everything else follow each other, the
    one evaluated first covering the others (see the module docstring)."""
    keys = [k for k in vary if k != "hbm_capacity_gb"]
    values = [list(vary[k]) for k in keys]
    if "hbm_capacity_gb" in vary:
        keys.append("hbm_capacity_gb")
        values.append(sorted(vary["hbm_capacity_gb"], reverse=True))
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _execution(execution: Mapping | None, offload: bool) -> dict[str, Any]:
    """The default execution of a co-design search, with the options given over it, and every
    offload choice where the design has host memory (unless the options fix it)."""
    ex = {**EXECUTION, **(execution or {})}
    if offload and "offload" not in ex:
        ex["offload"] = ["none", *OFFLOADS]
    return ex


def codesign_requests(requests: Sequence[Request], budget_usd: float | None,
                      vary: Mapping[str, Sequence[float]] | None,
                      prices: PriceTable | Mapping | str | None, *,
                      progress: Callable[[int, int], None] | None = None) -> CodesignResult:
    """One row per (model, design): ``model``, the varied fields, ``price_per_gpu_usd``,
    ``max_gpus``, ``gpus`` (the best cluster size up to it; 0 when nothing fits),
    ``samples_per_s``, ``samples_per_s_per_musd`` (per million USD of the GPUs used) and the
    best configuration (:data:`BEST`, memory columns renamed as in :data:`RENAME`), ``best``
    marking each model's fastest design. One request per model, all on one system (the
    designs vary it). ``progress(done, total)`` is called after each row (a caller may raise
    to stop)."""
    start = time.perf_counter()
    _check_requests(requests)
    if vary is None or prices is None:
        raise ModelError("give the fields to vary ('vary') and a price table ('prices')")
    table = prices if isinstance(prices, PriceTable) else load_prices(prices)
    vary = check_vary(vary, table)
    if not (isinstance(budget_usd, (int, float)) and 0 < budget_usd < 1e15):
        raise ModelError(f"'budget_usd' must be a positive number, got {budget_usd!r}")
    system = requests[0].system
    node = system.node_size
    plans = []
    for design in designs(vary):
        price = table.price(design)
        plans.append((design, price, int(budget_usd // price // node * node)))
    group_max: dict[tuple, int] = {}  # designs sharing all but HBM search the same counts
    for design, _, most in plans:
        group_max[_group(design)] = max(group_max.get(_group(design), 0), most)
    reach = (max(m for _, _, m in plans), group_max)
    rows = []
    for req in requests:
        for design, price, most in plans:
            rows.append(_best(req, design, price, most, reach))
            if progress is not None:
                progress(len(rows), len(requests) * len(plans))
    frame = pd.DataFrame(rows)
    frame["best"] = frame.groupby("model")["samples_per_s"].transform("max").eq(
        frame["samples_per_s"]) & (frame["samples_per_s"] > 0)
    return CodesignResult(frame, tuple(vary), float(budget_usd), time.perf_counter() - start)


def _check_requests(requests: Sequence[Request]) -> None:
    """1 to MAX_MODELS training requests on one system, each with execution options as a dict
    (the co-design's defaults go under them)."""
    if not requests or len(requests) > MAX_MODELS:
        raise ModelError(f"give 1 to {MAX_MODELS} models")
    for req in requests:
        req.training()
        if req.system != requests[0].system:
            raise ModelError("the requests of one co-design share one system (the designs "
                             "vary it)")
        if isinstance(req.execution, Execution):
            raise ModelError("a co-design takes execution options as a dict, not an Execution")


def _group(design: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, v) for k, v in design.items() if k != "hbm_capacity_gb"))


def batches_of(models: Sequence[Transformer], global_batch: int | Sequence[int] | None
             ) -> list[int]:
    if global_batch is None:
        raise ModelError("give a global batch, or one per model")
    if not models or len(models) > MAX_MODELS:
        raise ModelError(f"give 1 to {MAX_MODELS} models")
    batches = [global_batch] * len(models) if isinstance(global_batch, (int, np.integer)) \
        else list(global_batch)
    if len(batches) != len(models):
        raise ModelError(f"give one global batch, or one per model ({len(models)}), got "
                         f"{len(batches)}")
    return batches


def _searches(system: System, design: dict[str, Any], execution: Mapping | None,
              reach: tuple[int, dict]) -> list[tuple[System, dict[str, Any], int]]:
    """(system, execution, largest GPU count) of the searches a design needs. Without offload
    the host memory plays no part: that search runs without it, over the counts of every
    design, so all designs share it; offload runs on the design itself, over its group's."""
    sysd = system.with_overrides(**design)
    ex = _execution(execution, sysd.host_memory_gb > 0)
    plain = sysd.with_overrides(host_memory_gb=0.0)
    if sysd.host_memory_gb == 0 or "offload" in (execution or {}):
        return [(plain if sysd.host_memory_gb == 0 else sysd, ex,
                 reach[0] if sysd.host_memory_gb == 0 else reach[1][_group(design)])]
    return [(plain, {**ex, "offload": "none"}, reach[0]),
            (sysd, {**ex, "offload": OFFLOADS}, reach[1][_group(design)])]


def _best(req: Request, design: dict[str, Any], price: float, most: int,
          reach: tuple[int, dict]) -> dict[str, Any]:
    """The row of one (model, design): the fastest configuration on at most ``most`` GPUs
    (ties: without offload, then the fewest GPUs)."""
    row: dict[str, Any] = {"model": req.model.name, **design, "price_per_gpu_usd": price,
                           "max_gpus": most, "gpus": 0, "samples_per_s": 0.0,
                           "samples_per_s_per_musd": 0.0}
    node = req.system.node_size
    if most < node:
        return row
    frames = []
    for sysd, ex, upto in _searches(req.system, design, req.execution_given(), reach):
        res = req.replace(system=sysd, execution=ex, pins=None,
                          pruning=DEFAULT_PRUNING).resolve()  # one question per design
        frame, _ = best_per_count(res, count_range(upto, node))
        frames.append(frame[frame["gpus"] <= most])
    frame = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(
        len(f) for f in frames) else frames[0]
    if not len(frame):
        return row
    best = frame.loc[frame["samples_per_s"].idxmax()]
    row.update({"gpus": int(best["gpus"]), "samples_per_s": float(best["samples_per_s"]),
                "samples_per_s_per_musd": float(best["samples_per_s"])
                / (int(best["gpus"]) * price / 1e6)})
    row.update({RENAME.get(k, k): best[k] for k in BEST})
    return row
