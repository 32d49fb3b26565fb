"""The command line's plain JSON (``--json``): numpy values unboxed, context parallelism
named ``cp``, the error bar's ranges and the memory model's fit state beside each row. Nothing
here computes a result; every number comes from a :class:`~model.engine.search.SearchResult`
or an :class:`~model.engine.search.Evaluation` (columns described in
:mod:`model.engine.report`). The readable tables are :mod:`model.cli.format`'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from model.engine.search import Evaluation, SearchResult
from model.specs.conformal import COVERAGE
from model.validation.error_bars import ErrorBar, common_bar
from model.validation.memory_error import fit_status

CONFIG_KEYS = ("gpus", "strategy", "dp", "tp1", "tp2", "cp", "pp", "microbatch", "nb",
               "nv_tp1", "nv_tp2", "nv_cp", "nv_dp", "nv_pp", "n_microbatches",
               "layers_per_stage")
BREAKDOWN = (("compute", "t_compute_s"), ("memory", "t_memory_s"), ("tp_comm", "t_tp_comm_s"),
             ("ep_comm", "t_ep_comm_s"),
             ("pp_comm", "t_pp_comm_s"), ("dp_comm", "t_dp_comm_s"), ("bubble", "t_bubble_s"),
             ("optimizer", "t_optimizer_s"), ("offload", "t_offload_s"))
MEMORY = (("weights", "weights_gb"), ("gradients", "gradients_gb"),
          ("optimizer", "optimizer_gb"), ("activations", "activations_gb"))
# columns given as ranges under the error bar: durations, and rates (whose range is inverted)
RANGED_TIMES = ("iteration_time_s", "train_days", "days_per_1t_tokens")
RANGED_RATES = ("samples_per_s", "tokens_per_s", "tflops_per_gpu")
# the context strategy's second axis shards the sequence: context parallelism, shown as cp
CP_NAMES = {"tp2": "cp", "nv_tp2": "nv_cp"}


def plain(value: Any) -> Any:
    """A JSON-safe Python scalar: numpy ints/floats/bools unboxed, NaN and ±inf become None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def with_cp(frame: pd.DataFrame) -> pd.DataFrame:
    """Result rows with context parallelism named ``cp``/``nv_cp``: the context strategy's
    second axis (the model's ``tp2``, which shards the sequence) moves there and its tp2 reads
    1; other strategies have cp 1. Frames without a strategy column come back as they are."""
    if "strategy" not in frame.columns or "tp2" not in frame.columns:
        return frame
    context = (frame["strategy"] == "context").to_numpy()
    out = frame.copy()
    for old, new in CP_NAMES.items():
        if old in out.columns:
            values = out[old].to_numpy()
            out.insert(out.columns.get_loc(old) + 1, new, np.where(context, values, 1))
            out[old] = np.where(context, 1, values)
    return out


def row_cp(row: pd.Series) -> pd.Series:
    """One result row with context parallelism named cp (:func:`with_cp`)."""
    return with_cp(row.to_frame().T).iloc[0] if "strategy" in row.index else row


def row_dict(row: pd.Series) -> dict[str, Any]:
    """One result row (a configuration) as a dict of plain JSON values (cp named)."""
    return {str(k): plain(v) for k, v in row_cp(row).items()}


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Every row of a DataFrame as a dict of plain JSON values (cp named)."""
    return [{str(k): plain(v) for k, v in row.items()} for _, row in with_cp(frame).iterrows()]


def search_hint(result: SearchResult, reason: str | None) -> str | None:
    """Why a search has no best configuration, or None when it has one."""
    if result.candidates == 0:
        return reason or "no valid configuration"
    if result.feasible == 0:
        return "no configuration fits in HBM; try more GPUs"
    return None


def ranges(row: pd.Series, bar: ErrorBar | None) -> dict[str, list[float]] | None:
    """[low, high] of a row's predicted times and rates under the error bar (None: no bar, or
    a prediction not validated)."""
    if bar is None or not bar.validated:
        return None
    out = {col: list(bar.time_range(float(row[col]))) for col in RANGED_TIMES}
    out.update({col: list(bar.rate_range(float(row[col]))) for col in RANGED_RATES})
    return {k: [plain(v) for v in pair] for k, pair in out.items()}


def search_json(results: list[SearchResult], reasons: list[str | None], elapsed_s: float,
                meta: dict[str, Any], bars: dict[str, ErrorBar] | None = None,
                usable_gb: float | None = None) -> dict[str, Any]:
    """The ``search --json`` object: totals over all searches, then one entry per search (its
    best row with the ranges of its strategy's error bar, ``bars[strategy]``; None: no
    bar)."""
    entries = []
    for res, reason in zip(results, reasons, strict=True):
        bar = bars.get(res.strategy) if bars else None
        top = records(res.top)
        for rec, (_, row) in zip(top, res.top.iterrows(), strict=True):
            state = fits_json(row, usable_gb, bar.coverage if bar else COVERAGE)
            rec["fits_state"], rec["fits_text"] = state["fits"], state["fits_text"]
        entries.append({
            "gpus": int(res.gpus), "max_gpus": res.max_gpus, "strategy": res.strategy,
            "feasible": res.feasible > 0,
            "candidates": int(res.candidates), "feasible_count": int(res.feasible),
            "elapsed_s": float(res.elapsed_s), "best": top[0] if top else None,
            "best_range": ranges(res.best, bar) if top else None,
            "best_fits": fits_json(res.best, usable_gb,
                                   bar.coverage if bar else COVERAGE) if top else None,
            "error_bar": bar.to_dict() if bar else None,
            "top": top,
            "hint": search_hint(res, reason),
        })
    common = common_bar(bars)
    return {"candidates": sum(int(r.candidates) for r in results),
            "feasible": sum(int(r.feasible) for r in results),
            "elapsed_s": float(elapsed_s), **meta,
            "error_bar": common.to_dict() if common else None, "results": entries}


def fits_json(row: pd.Series, usable_gb: float | None, coverage: float = COVERAGE
              ) -> dict[str, Any]:
    """``fits`` ("fits" | "tight" | "no", with the memory model's interval:
    :func:`model.validation.memory_error.fit_status`), ``fits_bool`` (the point estimate, as
    before) and ``fits_text``."""
    point = bool(row["fits"])
    if usable_gb is None:
        return {"fits": "fits" if point else "no", "fits_bool": point, "fits_text": None}
    state, words = fit_status(float(row["memory_gb"]), usable_gb, coverage)
    if not point and state == "fits":  # the host tier (offload) does not fit
        state, words = "no", "does not fit: the host memory tier is too small"
    return {"fits": state, "fits_bool": point, "fits_text": words}


def evaluation_json(ev: Evaluation, bar: ErrorBar | None = None,
                    usable_gb: float | None = None) -> dict[str, Any]:
    """The ``evaluate --json`` object: every result column at top level plus grouped views."""
    row = row_dict(ev.row)
    coverage = bar.coverage if bar is not None else COVERAGE
    return {
        **row,
        "error_bar": bar.to_dict() if bar else None, "range": ranges(ev.row, bar),
        **fits_json(ev.row, usable_gb, coverage),
        "config": {k: row[k] for k in CONFIG_KEYS},
        "breakdown_s": {name: row[col] for name, col in BREAKDOWN},
        "memory_breakdown_gb": {name: row[col] for name, col in MEMORY},
        "ops": records(ev.ops),
    }
