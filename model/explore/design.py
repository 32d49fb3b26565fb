"""The whole design space at one GPU count, for maps of where the fast configurations are.

:func:`design_space` returns every candidate of a strategy (not only the top k) with its memory,
whether it fits and, for those that fit, its iteration time; :func:`best_per_cell` reduces it to
the best configuration per pair of parallel dimensions (e.g. TP × PP), which is how the paper
shows the non-convexity of the space.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ModelError
from ..physics.strategies import build_strategy
from ..specs.execution import Execution, execution_columns, resolve_execution
from ..specs.hardware import System
from ..specs.modes import Mode, resolve_mode
from ..specs.transformer import Transformer
from .evaluate import evaluate_space
from .report import result_frame
from .search import DEFAULT_BUDGET, check_args, with_stack
from .space import COLUMNS, build_space

AXES = ("tp1", "tp2", "pp", "dp", "ep", "etp", "microbatch", "nb", "nv_tp1", "nv_tp2", "nv_dp",
        "nv_pp")  # ep, etp: expert (tensor) parallel, 1 for a dense model


def design_space(model: Transformer, system: System, gpus: int, global_batch: int,
                 strategy: str = "1d", *, compat: str | Mode | None = None,
                 nvs: int | None = None, pins: dict | None = None,
                 budget: int = DEFAULT_BUDGET, execution: Execution | dict | None = None,
                 stack: str | None = None
                 ) -> pd.DataFrame:
    """Every candidate of ``strategy`` on ``gpus`` GPUs: one row each, result columns as in a
    search (times are those of the configuration even when it does not fit; ``fits`` says)."""
    if not isinstance(pins, (dict, type(None))):
        raise ModelError(f"pins must be a dict of dimension → value, got {type(pins).__name__}")
    pins = dict(pins or {})
    check_args(gpus, global_batch, compat, 1, pins, budget)
    mode = resolve_mode(compat)
    if nvs is not None:
        system = system.with_overrides(nvlink_domain_size=nvs)
    system, execution = with_stack(system, execution, stack, mode)
    ex = resolve_execution(execution)
    strat = build_strategy(strategy, model, mode, ex)
    space = build_space(model, strat, gpus, global_batch, system.nvlink_domain_size, pins, mode,
                        budget, interleave=ex.interleave,
                        ends_count_as_layers=ex.ends_count_as_layers)
    res = evaluate_space(model, system, strat, space, global_batch, mode, execution=ex)
    return result_frame(model, system, strat.name, gpus, global_batch, res,
                        np.arange(len(space)), execution_columns(ex))


def best_per_cell(frame: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per (x, y) cell: the fastest configuration that fits, or the cell marked infeasible.

    Columns: x, y, ``candidates`` (how many configurations the cell holds), ``feasible`` (how many
    fit), ``best_time_s`` (NaN when none fits), and the best row's other dimensions.
    """
    for axis in (x, y):
        if axis not in AXES:
            raise ModelError(f"unknown axis '{axis}'; choose from {', '.join(AXES)}")
    if x == y:
        raise ModelError("choose two different axes")
    counts = frame.groupby([x, y]).agg(candidates=("fits", "size"), feasible=("fits", "sum"))
    fit = frame[frame["fits"]]
    best = fit.loc[fit.groupby([x, y])["iteration_time_s"].idxmin()] if len(fit) else fit
    keep = [c for c in COLUMNS if c not in (x, y)] + ["iteration_time_s", "samples_per_s",
                                                       "train_days", "memory_gb"]
    best = best.set_index([x, y])[keep].rename(columns={"iteration_time_s": "best_time_s"})
    return counts.join(best, how="left").reset_index()
