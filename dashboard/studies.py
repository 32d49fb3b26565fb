"""The dashboard's larger studies of a scenario: the model on nine systems, the HBM sweep, and why
nothing fits. Each is sized before it runs (:mod:`dashboard.budget`) and stops at a wall-time
budget, with a message saying how to narrow it; results are cached like every view
(:func:`dashboard.compute.cached_frame`)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from model import ModelError, search
from model.explore.design import leanest
from model.explore.sweep import best_frame, sweep

from . import budget
from .compute import _how, _inputs, _strategies, cached_frame
from .scenario import build_inputs, gpu_counts, preset_system

COMPARE_SYSTEMS = ("a100", "h200", "b200")
COMPARE_NVS = (4, 8, 64)
MAX_GPUS = 10_000_000  # the estimator's limit of a search
# a background job (Compare systems, HBM sweep) runs this long at most
SWEEP_TIME_BUDGET_S = float(os.environ.get("PERF_SWEEP_TIME_BUDGET_S", 300))


def systems(scn: dict[str, Any], names: tuple[str, ...] = COMPARE_SYSTEMS,
            domains: tuple[int, ...] = COMPARE_NVS,
            time_budget_s: float | None = None) -> pd.DataFrame:
    """The scenario's model on several GPU generations × NVLink domain sizes (the paper's
    9-system figure): the best over strategies per GPU count, with a ``system`` label.
    ModelError when over budget (``time_budget_s``: the request's by default)."""
    payload = {**_inputs(scn), "names": names, "domains": domains,
               "counts": gpu_counts(scn), "strategies": _strategies(scn)}
    seconds = budget.TIME_BUDGET_S if time_budget_s is None else time_budget_s

    def compute() -> pd.DataFrame:
        m, s = build_inputs(scn)
        counts = gpu_counts(scn)
        if not counts:
            return pd.DataFrame()
        narrow = "narrow the GPU range or choose one strategy"
        for nvs in domains:  # each sweep on its own, the time of all of them together
            budget.check_searches(f"The comparison (NVLink domain {nvs})", m, s, counts,
                                  scn["global_batch"], _strategies(scn), **_how(scn),
                                  narrow=narrow, repeat=len(names) * len(domains),
                                  time_budget_s=seconds, nvs=nvs)
        deadline, frames = time.monotonic() + seconds, []
        for name in names:
            base = preset_system(name)
            for nvs in domains:
                if time.monotonic() > deadline:
                    raise ModelError(f"the comparison ran out of its {seconds:g} s time budget; "
                                     + narrow)
                best = best_frame(sweep(m, base, counts, scn["global_batch"],
                                        _strategies(scn), **_how(scn), nvs=nvs))
                if best.empty:
                    continue
                best = best.loc[best.groupby("gpus")["iteration_time_s"].idxmin()]
                best.insert(0, "system", f"{name.upper()} · NVS {nvs}")
                frames.append(best)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return cached_frame("systems", payload, compute)


def memory_floor(scn: dict[str, Any]) -> dict[str, Any]:
    """Why nothing fits: the least memory any configuration needs at the largest GPU count, its
    breakdown, and the first GPU count (doubling up to 64× further, within the estimator's
    limit of 10,000,000 GPUs and the request's budget) where something fits."""
    m, s = build_inputs(scn)
    counts = gpu_counts(scn)
    n = counts[-1] if counts else scn["gpus_max"]
    strategy = "context" if scn["strategy"] == "all" else scn["strategy"]
    narrow = "narrow the GPU range"
    budget.check_searches("Explaining why nothing fits", m, s, [n],
                          scn["global_batch"], [strategy], **_how(scn), narrow=narrow)
    lean = leanest(m, s, n, scn["global_batch"], strategy, **_how(scn))
    out: dict[str, Any] = {"gpus": n, "strategy": strategy, "capacity_gb": s.hbm_capacity_gb}
    if lean is None:  # no configuration at all: the GPU count does not factor
        # what dp (| GBS) and tp (| heads, hidden) cannot take is left to pp (≤ layers)
        out["no_candidates"] = True
        out["pipeline_needs"] = n // math.gcd(n, scn["global_batch"] * math.gcd(m.heads,
                                                                                 m.hidden))
        return out
    parts = {k: lean[k] for k in ("weights_gb", "gradients_gb", "optimizer_gb",
                                  "activations_gb")}
    out.update(min_memory_gb=lean["memory_gb"], parts=parts, dominant=max(parts, key=parts.get))
    for more in (2, 4, 8, 16, 32, 64):
        if n * more > MAX_GPUS:
            break
        try:
            budget.check_searches("", m, s, [n * more],
                                  scn["global_batch"], [strategy], **_how(scn), narrow=narrow)
        except ModelError:  # larger counts only get larger: stop looking
            break
        res = search(m, s, n * more, scn["global_batch"], strategy, **_how(scn), top_k=1)
        if res.best is not None:
            out["fits_at_gpus"] = n * more
            break
    return out


def hbm_sweep(scn: dict[str, Any], capacities_gb: list[float], bandwidths_tb_per_s: list[float],
              progress: Callable[[int, int], None] | None = None,
              time_budget_s: float | None = None) -> pd.DataFrame:
    """Training days of the best configuration (any strategy of the scenario) at ``gpus`` GPUs
    over a grid of HBM capacity × bandwidth (the paper's HBM sweep), cached.

    Raises ModelError, saying how to narrow it, when its size is over budget, or once it has
    run longer than ``time_budget_s`` (default ``SWEEP_TIME_BUDGET_S``).
    """
    seconds = SWEEP_TIME_BUDGET_S if time_budget_s is None else time_budget_s
    payload = {**_inputs(scn), "gpus": scn["gpus"], "strategies": _strategies(scn),
               "capacities_gb": [float(c) for c in capacities_gb],
               "bandwidths_tb_per_s": [float(b) for b in bandwidths_tb_per_s]}
    narrow = ("use fewer points per axis, fewer strategies or a GPU count with fewer "
              "configurations")

    def compute() -> pd.DataFrame:
        m, s = build_inputs(scn)
        total = len(capacities_gb) * len(bandwidths_tb_per_s)
        budget.check_searches(f"The sweep at {scn['gpus']:,} GPUs", m, s,
                              [scn["gpus"]], scn["global_batch"], _strategies(scn),
                              **_how(scn), narrow=narrow, repeat=total, time_budget_s=seconds)
        start, rows = time.perf_counter(), []
        for i, cap in enumerate(capacities_gb):
            for j, bw in enumerate(bandwidths_tb_per_s):
                if time.perf_counter() - start > seconds:
                    raise ModelError(
                        f"the sweep ran out of its {seconds:g} s time budget after {len(rows)} "
                        f"of {total} systems; {narrow}")
                rows.append(_hbm_point(m, s, scn, float(cap), float(bw)))
                if progress is not None:
                    progress(i * len(bandwidths_tb_per_s) + j + 1, total)
        return pd.DataFrame(rows)
    return cached_frame("hbm-sweep", payload, compute)


def _hbm_point(m, s, scn: dict[str, Any], cap_gb: float, bw_tb_per_s: float) -> dict:
    sys_ij = s.with_overrides(hbm_capacity_gb=cap_gb, hbm_bandwidth_gb_per_s=bw_tb_per_s * 1e3)
    best = np.inf
    for strategy in _strategies(scn):
        res = search(m, sys_ij, scn["gpus"], scn["global_batch"], strategy, **_how(scn),
                     top_k=1)
        if res.best is not None:
            best = min(best, float(res.best["train_days"]))
    return {"hbm_capacity_gb": cap_gb, "hbm_bandwidth_gb_per_s": bw_tb_per_s * 1000.0,
            "train_days": best if np.isfinite(best) else np.nan}
