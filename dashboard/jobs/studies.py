"""The dashboard's larger studies of a scenario: the model on nine systems, the HBM sweep, and why
nothing fits. Each is sized before it runs (:mod:`dashboard.jobs.budget`) and stops at a wall-time
budget, with a message saying how to narrow it; results are cached like every view
(:func:`dashboard.jobs.compute.cached_frame`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from dashboard.controls.presets import preset_system, system_values
from dashboard.controls.scenario import build_inputs, estimator_inputs, gpu_counts, request_of
from dashboard.jobs import budget
from dashboard.jobs.compute import cached_frame, how_of, strategies_of
from dashboard.jobs.sweep_parts import check_sweep, sweep_in_parts
from dashboard.settings import SETTINGS
from model import ModelError, search
from model.api import leanest
from model.engine.request import Request
from model.physics.strategies import PRODUCTION, supports
from model.specs.hardware import System
from model.specs.transformer import Transformer
from model.studies.sweep import best_frame

COMPARE_SYSTEMS = ("a100", "h100", "b200", "b300", "gb200-nvl72", "mi300x")
COMPARE_NVS = (0,)  # 0: each system's own NVLink domain
EDITED = "edited"  # the scenario's system, as edited in the control panel
MAX_GPUS = 10_000_000  # the estimator's limit of a search
# a background job (Compare systems, HBM sweep) runs this long at most
SWEEP_TIME_BUDGET_S = SETTINGS.sweep_time_budget_s


def system_label(name: str, nvs: int, scn: dict[str, Any]) -> str:
    """A compared system's label: 'H100 · NVS 8'; the control panel's system is 'H200 (control
    panel) · NVS 8', or 'H200 (edited) · NVS 8' once a value differs from its preset."""
    if name != EDITED:
        return f"{name.upper()} · NVS {nvs}"
    preset = system_values(scn["system"])
    edited = any(scn.get(k) != v for k, v in preset.items() if k != "nvs")
    return f"{scn['system'].upper()} ({'edited' if edited else 'control panel'}) · NVS {nvs}"


def production_strategies(scn: dict[str, Any]) -> tuple[str, ...]:
    """The strategies a comparison of systems ranks: with 'all', the production ones
    (:data:`model.physics.strategies.PRODUCTION`; the idealised SUMMA only when chosen by
    name, and then labelled so by the figure), else the one chosen."""
    return PRODUCTION if scn["strategy"] == "all" else (scn["strategy"],)


def systems(scn: dict[str, Any], names: tuple[str, ...] = COMPARE_SYSTEMS,
            domains: tuple[int, ...] = COMPARE_NVS,
            time_budget_s: float | None = None) -> pd.DataFrame:
    """The scenario's model on several systems (presets by name, or :data:`EDITED`: the
    scenario's own) × NVLink domain sizes (0: the system's own): the best over strategies per
    GPU count, with a ``system`` label (:func:`system_label`). A system the scenario cannot
    run on (e.g. FP8 on a GPU without an FP8 rate) is one row with the reason in ``skipped``.
    ModelError when over budget (``time_budget_s``: the request's by default)."""
    payload = {**estimator_inputs(scn), "names": list(names), "domains": list(domains),
               "counts": gpu_counts(scn), "strategies": production_strategies(scn)}
    seconds = budget.TIME_BUDGET_S if time_budget_s is None else time_budget_s

    def compute() -> pd.DataFrame:
        m, edited = build_inputs(scn)
        counts = gpu_counts(scn)
        if not counts:
            return pd.DataFrame()
        bases = {name: edited if name == EDITED else preset_system(name) for name in names}
        curves = [(name, nvs) for name, base in bases.items()
                  for nvs in dict.fromkeys(base.nvlink_domain_size if n == 0 else n
                                           for n in domains)]
        narrow = "compare fewer systems or domain sizes, narrow the GPU range or choose one " \
            "strategy"
        systems_of = {curve: bases[curve[0]] for curve in curves}
        groups = _compare_groups(scn, m, systems_of, narrow, seconds)
        deadline, frames = time.monotonic() + seconds, []
        for name, nvs in curves:
            if time.monotonic() > deadline:
                raise ModelError(f"the comparison ran out of its {seconds:g} s time budget; "
                                 + narrow)
            try:
                request = _compare_request(scn, m, bases[name], counts, nvs)
                best = best_frame(sweep_in_parts(request, groups[name, nvs]))
            except ModelError as exc:  # e.g. FP8 on a GPU without an FP8 rate: say so
                frames.append(pd.DataFrame([{"system": system_label(name, nvs, scn),
                                             "skipped": str(exc)}]))
                continue
            if best.empty:
                continue
            best = best.loc[best.groupby("gpus")["iteration_time_s"].idxmin()]
            best.insert(0, "system", system_label(name, nvs, scn))
            frames.append(best)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return cached_frame("systems", payload, compute)


def _compare_request(scn: dict[str, Any], model: Transformer, system: System,
                     counts: list[int], nvs: int) -> Request:
    """The scenario's production strategies at ``counts`` on ``system`` with NVLink domains of
    ``nvs``, the best of each (a ModelError when the system cannot have it)."""
    return Request.build(model, system, global_batch=scn["global_batch"], gpus=tuple(counts),
                         strategy=production_strategies(scn), nvs=nvs, top_k=1, **how_of(scn))


def _compare_groups(scn: dict[str, Any], model: Transformer,
                    systems_of: dict[tuple[str, int], System], narrow: str,
                    seconds: float) -> dict[tuple[str, int], tuple[tuple[int, ...], ...]]:
    """Each compared sweep's groups of counts, each sized on its own against the memory budget
    and all of them together against the time budget (OverBudget otherwise); a system that
    cannot run the scenario gets one group (its sweep says why)."""
    counts, groups = gpu_counts(scn), {}
    for (name, nvs), system in systems_of.items():
        try:
            groups[name, nvs] = check_sweep(
                f"The comparison ({system_label(name, nvs, scn)})",
                _compare_request(scn, model, system, counts, nvs), narrow,
                repeat=len(systems_of), time_budget_s=seconds).groups
        except budget.OverBudget:
            raise
        except ModelError:  # the system cannot run the scenario: its sweep below says why
            groups[name, nvs] = (tuple(counts),)
    return groups


def memory_floor(scn: dict[str, Any]) -> dict[str, Any]:
    """Why nothing fits: the least memory any configuration needs at the largest GPU count, its
    breakdown, and the first GPU count (doubling up to 64× further, within the estimator's
    limit of 10,000,000 GPUs and the request's budget) where something fits."""
    counts = gpu_counts(scn)
    n = counts[-1] if counts else scn["gpus_max"]
    strategy = "context" if scn["strategy"] == "all" else scn["strategy"]
    narrow = "narrow the GPU range"
    asked = request_of(scn, gpus=(n,), strategy=strategy)
    m, s = asked.model, asked.system
    budget.check_searches("Explaining why nothing fits", asked, narrow)
    lean = leanest(asked)
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
            larger = asked.with_workload(gpus=(n * more,))
            budget.check_searches("", larger, narrow)
        except ModelError:  # larger counts only get larger: stop looking
            break
        res = search(larger)
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
    payload = {**estimator_inputs(scn), "gpus": scn["gpus"], "strategies": strategies_of(scn),
               "capacities_gb": [float(c) for c in capacities_gb],
               "bandwidths_tb_per_s": [float(b) for b in bandwidths_tb_per_s]}
    narrow = ("use fewer points per axis, fewer strategies or a GPU count with fewer "
              "configurations")

    def compute() -> pd.DataFrame:
        m, s = build_inputs(scn)
        total = len(capacities_gb) * len(bandwidths_tb_per_s)
        budget.check_searches(f"The sweep at {scn['gpus']:,} GPUs",
                              request_of(scn, gpus=(scn["gpus"],), strategy=strategies_of(scn)),
                              narrow, repeat=total, time_budget_s=seconds)
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
    frame = cached_frame("hbm-sweep", payload, compute)
    if progress is not None:  # also when the results cache had it: the page shows it done
        total = len(capacities_gb) * len(bandwidths_tb_per_s)
        progress(total, total)
    return frame


def _hbm_point(m, s, scn: dict[str, Any], cap_gb: float, bw_tb_per_s: float) -> dict:
    sys_ij = s.with_overrides(hbm_capacity_gb=cap_gb, hbm_bandwidth_gb_per_s=bw_tb_per_s * 1e3)
    best = np.inf
    strategies = strategies_of(scn)
    if len(strategies) > 1:  # as the sweep: leave out those that cannot model the model (SUMMA
        strategies = tuple(x for x in strategies if supports(x, m))  # has no MoE op table)
    for strategy in strategies:
        res = search(m, sys_ij, scn["gpus"], scn["global_batch"], strategy, **how_of(scn),
                     top_k=1)
        if res.best is not None:
            best = min(best, float(res.best["train_days"]))
    return {"hbm_capacity_gb": cap_gb, "hbm_bandwidth_gb_per_s": bw_tb_per_s * 1000.0,
            "train_days": best if np.isfinite(best) else np.nan}
