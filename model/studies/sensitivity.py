"""Which hardware input moves the training time most: each field ±x %, the search run again.

For one question (model, system, GPU count, batch, strategy, execution, stack), each input of
:data:`INPUTS` is scaled by 1 − x and by 1 + x on its own and the whole search runs again
(:func:`model.engine.api.search_request`, best configuration only): the configuration may change
with the hardware, as it would on a real cluster. Work is bounded and sized first: one search
for the baseline and two per input (at most 2·len(INPUTS) + 1), each answered from the
per-process frontier cache when it ran before; a changed HBM capacity is answered from the
baseline's frontier without any evaluation (:mod:`model.engine.frontier`: the candidates'
times do not depend on it). An input the system does not have (0: no FP4 peak, no host link) is
left out: scaling nothing changes nothing.

A latency, a peak or a bandwidth changes times; the capacity changes only what fits. The
stack's calibrated efficiencies are applied after the scaling (:func:`~model.engine.search.
with_stack` sets efficiencies, never peaks, bandwidths or latencies), so a scaled peak keeps its
calibrated efficiency.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from model.engine.api import search_request
from model.engine.request import Request
from model.errors import ModelError
from model.specs.hardware import System
from model.specs.transformer import Transformer

MAX_FRACTION = 0.9  # ±90 %: a field scaled by 0.1…1.9; every field stays positive


@dataclass(frozen=True)
class Input:
    """One hardware input: the system fields scaled together, its name and unit."""

    key: str
    label: str
    fields: tuple[str, ...]  # scaled by the same factor (the first is shown)
    unit: str


INPUTS: tuple[Input, ...] = (
    Input("matrix_peak", "matrix peak FLOP/s (every precision)",
          ("matrix_tflops_fp16", "matrix_tflops_fp8", "matrix_tflops_fp4"), "TFLOP/s"),
    Input("vector_peak", "vector (non-tensor-core) FLOP/s", ("vector_tflops_fp16",
                                                              "vector_tflops_fp32"), "TFLOP/s"),
    Input("hbm_bandwidth", "HBM bandwidth", ("hbm_bandwidth_gb_per_s",), "GB/s"),
    Input("hbm_capacity", "HBM capacity", ("hbm_capacity_gb",), "GB"),
    Input("nvlink_bandwidth", "NVLink bandwidth", ("nvlink_bandwidth_gb_per_s",), "GB/s"),
    Input("network_bandwidth", "network (NIC) bandwidth", ("nic_bandwidth_gb_per_s",), "GB/s"),
    Input("nvlink_latency", "NVLink latency per ring step", ("nvlink_latency_s",), "s"),
    Input("network_latency", "network latency per ring step", ("network_latency_s",), "s"),
    Input("kernel_overhead", "kernel launch overhead", ("kernel_overhead_s",), "s"),
    Input("host_bandwidth", "GPU–host link bandwidth", ("host_bandwidth_gb_per_s",), "GB/s"),
)
COLUMNS = ("input", "label", "unit", "base_value", "low_value", "high_value", "base_days",
           "low_days", "high_days", "low_change_pct", "high_change_pct", "swing_pct")


def scaled(system: System, item: Input, factor: float) -> System:
    """``system`` with ``item``'s fields × ``factor`` (ModelError outside their ranges)."""
    return system.with_overrides(**{f: getattr(system, f) * factor for f in item.fields
                                    if getattr(system, f)})


def present(system: System) -> list[Input]:
    """The inputs the system has (a field above zero)."""
    return [i for i in INPUTS if any(getattr(system, f) or 0 for f in i.fields)]


def searches(system: System) -> int:
    """How many searches :func:`sensitivity_frame` runs for ``system``."""
    return 1 + 2 * len(present(system))


def _days(frame: pd.DataFrame, metric: str) -> float:
    """The best row's ``metric`` (inf when nothing fits: the input made it infeasible)."""
    if frame.empty:
        return math.inf
    return float(frame.iloc[0][metric])


def keyword_search(model: Transformer, system: System, gpus: int, global_batch: int,
                   strategy: str, **options: Any) -> Any:
    """A search from keywords (those of :meth:`~model.engine.request.Request.build`)."""
    return search_request(Request.build(model, system, global_batch=global_batch, gpus=gpus,
                                        strategy=strategy, **options))


def sensitivity_frame(model: Transformer, system: System, gpus: int, global_batch: int,
                      strategy: str, fraction: float = 0.1, *, metric: str = "train_days",
                      run: Callable[..., Any] = keyword_search, **options: Any) -> pd.DataFrame:
    """One row per input the system has, largest swing first: its base, low (× 1 − x) and high
    (× 1 + x) values, the best configuration's ``metric`` (days) at each, and their change
    (%) from the base; ``swing_pct`` = the larger |change|. ``options`` go to ``run``
    (:func:`keyword_search`: mode, execution, stack, …)."""
    if not (isinstance(fraction, (int, float)) and 0 < fraction <= MAX_FRACTION):
        raise ModelError(f"the change must be above 0 and at most {100 * MAX_FRACTION:g} %, "
                         f"got {fraction!r:.20}")

    def best(sysm: System) -> float:
        return _days(run(model, sysm, gpus, global_batch, strategy, top_k=1, **options).top,
                     metric)

    base = best(system)
    if not math.isfinite(base):
        raise ModelError(f"no configuration fits on {gpus:,} GPUs as it is: nothing to vary")
    rows = []
    for item in present(system):
        value = float(getattr(system, item.fields[0]))
        low, high = (best(scaled(system, item, 1 + s * fraction)) for s in (-1, 1))
        rows.append((item.key, item.label, item.unit, value, value * (1 - fraction),
                     value * (1 + fraction), base, low, high,
                     100 * (low / base - 1), 100 * (high / base - 1)))
    frame = pd.DataFrame(rows, columns=list(COLUMNS[:-1]))
    frame["swing_pct"] = frame[["low_change_pct", "high_change_pct"]].abs().max(axis=1)
    return frame.sort_values("swing_pct", ascending=False, kind="stable").reset_index(drop=True)
