"""Search every parallel configuration for the fastest that fits, and evaluate one configuration.

:func:`search` builds the candidate space of a strategy (:mod:`model.space`), evaluates it at once
(:mod:`model.evaluate`), drops what does not fit in HBM and returns the top k as a DataFrame with
every breakdown column (:mod:`model.report`). :func:`evaluate` is a search with every dimension
pinned: its numbers are exactly that configuration's search row, plus a per-op table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .block import Ctx
from .errors import ModelError
from .evaluate import evaluate_ops, evaluate_space, shards_of
from .hardware import System
from .modes import Mode, resolve_mode
from .report import op_table, result_frame
from .rules import explain
from .space import PIN_NAMES, build_space
from .strategies import build_strategy, canonical_strategy
from .transformer import Transformer

DEFAULT_BUDGET = 20_000_000  # candidates per search; about 20 s of evaluation


@dataclass
class SearchResult:
    """The top configurations of one search, with how many were evaluated and fit."""

    gpus: int
    strategy: str
    top: pd.DataFrame  # best first; every column of model.report.result_frame
    candidates: int
    feasible: int
    elapsed_s: float

    @property
    def best(self) -> pd.Series | None:
        return None if self.top.empty else self.top.iloc[0]


def _check_args(gpus: int, global_batch: int, compat: object, top_k: int, pins: dict) -> None:
    for name, value in (("gpus", gpus), ("global_batch", global_batch), ("top_k", top_k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ModelError(f"'{name}' must be a positive integer, got {value!r}")
    if gpus > 10_000_000:
        raise ModelError(f"'gpus' = {gpus} is out of range; allowed [1, 10000000]")
    if global_batch > 100_000_000:
        raise ModelError(f"'global_batch' = {global_batch} is out of range; allowed [1, 1e8]")
    resolve_mode(compat)
    for key, value in pins.items():
        if key not in PIN_NAMES:
            raise ModelError(f"unknown pin '{key}'; allowed: {', '.join(PIN_NAMES)}")
        integer = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if value is not None and (not integer or value < 1):
            raise ModelError(f"pin '{key}' must be a positive integer, got {value!r}")


def search(
    model: Transformer, system: System, gpus: int, global_batch: int, strategy: str = "1d", *,
    compat: str | Mode | None = None, nvs: int | None = None, pins: dict | None = None,
    top_k: int = 10,
    budget: int = DEFAULT_BUDGET,
) -> SearchResult:
    """The ``top_k`` fastest configurations of ``strategy`` that fit in HBM.

    ``nvs`` overrides the system's NVLink domain size; ``pins`` fixes any of tp1, tp2, pp, dp,
    microbatch, nb, nv_tp1, nv_tp2, nv_dp, nv_pp; ``compat='paper'`` reproduces the paper's model
    with its bugs (spec §7). Ties keep the deterministic candidate order.
    """
    pins = dict(pins or {})
    _check_args(gpus, global_batch, compat, top_k, pins)
    start = time.perf_counter()
    mode = resolve_mode(compat)
    if nvs is not None:
        system = system.with_overrides(nvlink_domain_size=nvs)
    strat = build_strategy(strategy, model, mode)
    space = build_space(model, strat, gpus, global_batch, system.nvlink_domain_size, pins,
                        mode, budget)
    res = evaluate_space(model, system, strat, space, global_batch, mode,
                         capacity_bytes=system.hbm_capacity_bytes)
    idx = np.arange(len(res["row"]))  # every evaluated candidate fits
    thr = global_batch / res["iteration_time_s"]
    if len(idx) > top_k:
        kth = np.partition(-thr, top_k - 1)[top_k - 1]
        sel = -thr <= kth
        idx, thr = idx[sel], thr[sel]
    order = np.argsort(-thr, kind="stable")[:top_k]
    top = result_frame(model, system, strat.name, gpus, global_batch, res, idx[order])
    return SearchResult(gpus, strat.name, top, len(space), len(res["row"]),
                        time.perf_counter() - start)


@dataclass
class Evaluation:
    """One configuration: its result row (same numbers as its search row) and per-op table."""

    row: pd.Series
    ops: pd.DataFrame
    fits: bool


def evaluate(
    model: Transformer, system: System, gpus: int, global_batch: int, strategy: str = "1d", *,
    tp1: int, pp: int, dp: int, microbatch: int, tp2: int = 1, nb: int | None = None,
    nv_tp1: int | None = None, nv_tp2: int | None = None, nv_dp: int | None = None,
    nv_pp: int | None = None, compat: str | Mode | None = None, nvs: int | None = None,
) -> Evaluation:
    """Evaluate one configuration; a placement or nb left out is the best one for it.

    Raises ModelError naming the rule a configuration breaks (see :mod:`model.space`).
    """
    pins = dict(tp1=tp1, tp2=tp2, pp=pp, dp=dp, microbatch=microbatch, nb=nb, nv_tp1=nv_tp1,
                nv_tp2=nv_tp2, nv_dp=nv_dp, nv_pp=nv_pp)
    key = canonical_strategy(strategy)
    if key == "1d" and tp2 != 1:
        raise ModelError("the 1d strategy has no tp2; leave it at 1")
    _check_args(gpus, global_batch, compat, 1, pins)
    if tp1 * tp2 * pp * dp != gpus:
        raise ModelError(
            f"tp1·tp2·pp·dp = {tp1}·{tp2}·{pp}·{dp} = {tp1 * tp2 * pp * dp} must equal"
            f" gpus = {gpus}")
    sysm = system if nvs is None else system.with_overrides(nvlink_domain_size=nvs)
    mode = resolve_mode(compat)
    strat = build_strategy(key, model, mode)
    space = build_space(model, strat, gpus, global_batch, sysm.nvlink_domain_size, pins, mode)
    if len(space) == 0:
        raise ModelError(explain(model, strat, gpus, global_batch, sysm.nvlink_domain_size, pins,
                                 mode))
    res = evaluate_space(model, sysm, strat, space, global_batch, mode)
    fits = res["memory_bytes"] <= sysm.hbm_capacity_bytes
    thr = np.where(fits, global_batch / res["iteration_time_s"], -1.0 / res["iteration_time_s"])
    i = int(np.argmax(thr))  # best placement / nb: fitting first, then fastest
    row = result_frame(model, sysm, strat.name, gpus, global_batch, res, np.array([i])).iloc[0]
    one = {k: v[i:i + 1] for k, v in space.cols.items()}
    ctx = Ctx.make(model, sysm, mode)
    sh = shards_of(one)
    table = op_table(
        [("pre", r) for r in evaluate_ops(strat.pre, sh, ctx)]
        + [("block", r) for r in evaluate_ops(strat.block, sh, ctx)]
        + [("post", r) for r in evaluate_ops(strat.post, sh, ctx)],
        n_microbatches=int(row["n_microbatches"]), layers_per_stage=int(row["layers_per_stage"]),
        sh=sh, ctx=ctx,
    )
    return Evaluation(row, table, bool(fits[i]))
