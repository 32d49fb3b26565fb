"""Two answers side by side: the headline numbers of two result rows and their differences.

Each row is a configuration of :func:`model.engine.report.result_frame` (the best of a search,
typically, for two scenarios: another GPU, another stack, another batch). The numbers are the
row's own columns, except tokens/s per GPU = tokens_per_s / gpus; Δ = B − A and
Δ % = 100·(B/A − 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from model.errors import ModelError

# (metric, label, unit): the headline numbers, in the order shown
METRICS = (
    ("train_days", "training time", "days"),
    ("train_days_with_failures", "training time with failures", "days"),
    ("tokens_per_s_per_gpu", "throughput per GPU", "tokens/s/GPU"),
    ("mfu_pct", "MFU", "% of the precision's peak"),
    ("memory_gb", "memory per GPU", "GB"),
    ("cost_usd", "cost", "USD"),
    ("gpu_hours", "GPU-hours", "GPU·h"),
    ("gpus", "GPUs", "GPUs"),
    ("iteration_time_s", "iteration time", "s"),
)
LAYOUT_KEYS = (("dp", "dp"), ("tp1", "tp1"), ("tp2", "tp2"), ("pp", "pp"), ("ep", "ep"),
               ("etp", "etp"), ("microbatch", "mb"), ("interleave", "V"))


def headline(row: Mapping[str, Any]) -> dict[str, float]:
    """The :data:`METRICS` of one result row (NaN where the row lacks a column)."""
    def get(key: str) -> float:
        value = row.get(key)
        return float(value) if value is not None else math.nan

    gpus = get("gpus")
    return {"train_days": get("train_days"),
            "train_days_with_failures": get("train_days_with_failures"),
            "tokens_per_s_per_gpu": get("tokens_per_s") / gpus if gpus > 0 else math.nan,
            "mfu_pct": 100 * get("mfu"), "memory_gb": get("memory_gb"),
            "cost_usd": get("cost_usd"), "gpu_hours": get("gpu_hours"), "gpus": gpus,
            "iteration_time_s": get("iteration_time_s")}


def layout_text(row: Mapping[str, Any]) -> str:
    """The configuration in words: 'summa · dp 32 · tp1 8 · pp 16 · mb 1' (dimensions of 1
    left out but dp, tp1, pp and mb). The context strategy's tp2 splits the sequence: 'cp'."""
    keep = {"dp", "tp1", "pp", "microbatch"}
    strategy = str(row.get("strategy", ""))
    parts = [strategy]
    for key, short in LAYOUT_KEYS:
        value = row.get(key)
        if key == "tp2" and strategy == "context":
            short = "cp"
        if value is not None and (key in keep or int(value) > 1):
            parts.append(f"{short} {int(value)}")
    return " · ".join(p for p in parts if p)


def compare_frame(a: Mapping[str, Any], b: Mapping[str, Any]) -> pd.DataFrame:
    """One row per metric: ``metric``, ``label``, ``unit``, ``a``, ``b``, ``delta`` (B − A)
    and ``delta_pct`` (100·(B/A − 1); NaN where A is 0 or missing)."""
    if a is None or b is None or len(a) == 0 or len(b) == 0:
        raise ModelError("two configurations are needed to compare")
    ha, hb = headline(a), headline(b)
    rows = []
    for key, label, unit in METRICS:
        va, vb = ha[key], hb[key]
        pct = 100 * (vb / va - 1) if math.isfinite(va) and va != 0 else math.nan
        rows.append((key, label, unit, va, vb, vb - va, pct))
    return pd.DataFrame(rows, columns=["metric", "label", "unit", "a", "b", "delta",
                                       "delta_pct"])
