"""Search every parallel configuration for the fastest that fits, and evaluate one configuration.

:func:`search` builds the candidate space of a strategy (:mod:`model.explore.space`), drops what
does not fit in HBM, evaluates the rest at once (:mod:`model.explore.evaluate`) and returns the top
k as a DataFrame with every breakdown column (:mod:`model.explore.report`). Candidates that provably
cannot be among the top k (a lower bound of their time,
:func:`~model.explore.evaluate.shape_lower_bound`, is beaten by k faster candidates needing no more
memory) are not priced: see :mod:`model.explore.pruning`.
:func:`evaluate` is a search with every dimension pinned: its numbers are exactly that
configuration's search row, plus a per-op table.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ModelError
from ..physics.block import Ctx
from ..physics.strategies import Strategy, build_strategy, canonical_strategy
from ..specs.execution import (
    DEFAULT_SEARCH,
    Execution,
    describe_executions,
    execution_columns,
    execution_variants,
    resolve_execution,
)
from ..specs.hardware import System
from ..specs.modes import DEFAULT as DEFAULT_MODE
from ..specs.modes import Mode, resolve_mode
from ..specs.stack import NO_STACK, Stack, load_stack
from ..specs.transformer import Transformer
from .evaluate import (
    ShapeCounts,
    candidate_times,
    evaluate_ops,
    evaluate_space,
    fits_on,
    shape_lower_bound,
    shape_memory,
    shards_of,
)
from .frontier import (
    CACHE,
    CountShapes,
    Frontier,
    frontier_key,
)
from .pruning import kept_rows, pruned
from .report import op_table, result_frame
from .rules import explain
from .space import (
    PIN_NAMES,
    build_shapes,
    build_space,
    check_budget,
    expand_placements,
    placement_mask,
)

DEFAULT_BUDGET = 20_000_000  # candidates per search; about 20 s of evaluation
PRUNE = True  # price only the shapes that can be kept (tests compare with False: the same rows)
PRUNE_FROM = 20_000  # fitting candidates; fewer are priced at once (as fast as a bound)


def with_stack(system: System, execution: object, stack: str | Stack | None, mode: Mode
               ) -> tuple[System, object]:
    """The system with the stack's calibrated values for its generation, and the execution over
    the stack's defaults and the default search (:data:`DEFAULT_SEARCH`: every interleaving,
    the fewest recomputed layers that fit); explicit options win, an :class:`Execution` record
    is kept as it is. No stack ("none") applies none of it; the paper mode, which models one
    execution with the paper's constants, takes no stack."""
    if mode != DEFAULT_MODE:
        return system, execution
    found = load_stack(stack)
    if found.name == NO_STACK.name:
        return system, execution
    if execution is None or isinstance(execution, dict):
        execution = {**DEFAULT_SEARCH, **(execution or {})}
    return found.apply(system), found.execution_for(execution)


@dataclass
class SearchResult:
    """The top configurations of one search, with how many were evaluated and fit."""

    gpus: int
    strategy: str
    top: pd.DataFrame  # best first; every column of model.explore.report.result_frame
    candidates: int
    feasible: int
    elapsed_s: float
    # the executions searched (model.execution.Execution); each row's columns say which it is
    executions: tuple[Execution, ...] = ()

    @property
    def searched(self) -> str:
        """What was searched besides the parallel configurations, in words."""
        return describe_executions(list(self.executions)) if self.executions else ""

    @property
    def best(self) -> pd.Series | None:
        return None if self.top.empty else self.top.iloc[0]


def check_args(gpus: int, global_batch: int, compat: object, top_k: int, pins: dict,
               budget: int = DEFAULT_BUDGET) -> None:
    if not isinstance(pins, dict):
        raise ModelError(f"pins must be a dict of dimension → value, got {type(pins).__name__}")
    for name, value in (("gpus", gpus), ("global_batch", global_batch), ("top_k", top_k),
                        ("budget", budget)):
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
    top_k: int = 10, budget: int = DEFAULT_BUDGET, execution: Execution | dict | None = None,
    stack: str | Stack | None = None,
) -> SearchResult:
    """The ``top_k`` fastest configurations of ``strategy`` on ``gpus`` GPUs that fit in HBM.

    ``nvs`` overrides the system's NVLink domain size; ``pins`` fixes any of tp1, tp2, pp, dp,
    ep, etp, microbatch, nb, nv_tp1, nv_tp2, nv_dp, nv_pp; ``compat='paper'`` reproduces the
    paper's model with its bugs (docs/model.md, "The paper mode"); ``execution`` sets recompute,
    sequence parallelism, interleaving, ZeRO stage, precision, TP and EP overlap, MoE routing
    load … (:class:`~model.specs.execution.Execution`) over the software ``stack``'s defaults
    and the default search (every interleaving, the fewest recomputed layers that fit), with
    the stack's calibrated efficiencies (a name of ``model/data/stacks``; None: the newest;
    "none": the system's own values and the one Execution default; :func:`with_stack`). A dict
    whose values are lists searches every combination (``result.searched`` says what was
    searched). Ties keep the deterministic candidate order.
    """
    return search_counts(model, system, [gpus], global_batch, strategy, compat=compat, nvs=nvs,
                         pins=pins, top_k=top_k, budget=budget, execution=execution,
                         stack=stack)[0]


def search_counts(
    model: Transformer, system: System, gpu_counts: list[int], global_batch: int,
    strategy: str = "1d", *, compat: str | Mode | None = None, nvs: int | None = None,
    pins: dict | None = None, top_k: int = 10, budget: int = DEFAULT_BUDGET,
    execution: Execution | dict | None = None, stack: str | Stack | None = None,
) -> list[SearchResult]:
    """:func:`search` at several GPU counts in one evaluation (a strong-scaling sweep).

    The candidates of every count are evaluated together, so a block shared by several counts is
    costed once. ``budget`` bounds the candidates of all counts together; each result's
    ``elapsed_s`` is its share (by candidates) of the batch's wall time.
    """
    if not isinstance(pins, (dict, type(None))):
        raise ModelError(f"pins must be a dict of dimension → value, got {type(pins).__name__}")
    pins = dict(pins or {})
    if isinstance(gpu_counts, (str, bytes)) or not hasattr(gpu_counts, "__iter__"):
        raise ModelError(f"GPU counts must be a list of integers, got {gpu_counts!r:.80}")
    counts = [int(n) if isinstance(n, (int, np.integer)) and not isinstance(n, bool) else n
              for n in gpu_counts]
    if not counts:
        raise ModelError("give at least one GPU count")
    for n in counts:
        check_args(n, global_batch, compat, top_k, pins, budget)
    start = time.perf_counter()
    mode = resolve_mode(compat)
    if nvs is not None:
        system = system.with_overrides(nvlink_domain_size=nvs)
    system, execution = with_stack(system, execution, stack, mode)
    variants = execution_variants(execution)
    per_variant = []
    for ex in variants:  # a few execution choices, each a vectorized search of its own
        used = sum(c for frames in per_variant for _, c, _ in frames)
        per_variant.append(_search_variant(model, system, counts, global_batch, strategy, mode,
                                           ex, pins, top_k, budget - used))
    elapsed = time.perf_counter() - start
    total = max(sum(c for frames in per_variant for _, c, _ in frames), 1)
    out = []
    for i, n in enumerate(counts):
        # an execution where nothing fits has an empty (object-typed) frame: concatenated, it
        # would turn the other frames' integer and boolean columns into floats
        tops = [frames[i][0] for frames in per_variant if len(frames[i][0])] or [
            per_variant[0][i][0]]
        top = pd.concat(tops, ignore_index=True) if len(tops) > 1 else tops[0]
        if len(tops) > 1:
            top = top.sort_values("samples_per_s", ascending=False, kind="stable")
            top = top.head(top_k).reset_index(drop=True)
        count = sum(frames[i][1] for frames in per_variant)
        fit = sum(frames[i][2] for frames in per_variant)
        out.append(SearchResult(n, canonical_strategy(strategy), top, count, fit,
                                elapsed * count / total, tuple(variants)))
    return out


def _search_variant(model: Transformer, system: System, counts: list[int], global_batch: int,
                    strategy: str, mode: Mode, ex: Execution, pins: dict, top_k: int,
                    budget: int) -> list[tuple[pd.DataFrame, int, int]]:
    """(top frame, candidates, feasible) per GPU count for one execution choice.

    Answered from the process's :data:`~model.explore.frontier.CACHE` when the same search (any HBM
    capacity up to the one evaluated) ran before; else evaluated and cached.
    """
    ctx = Ctx.make(model, system, mode, ex)  # validates the execution on this system
    strat = build_strategy(strategy, model, mode, ctx.execution)
    key = frontier_key(model, system, counts, global_batch, strat.name, mode, ctx.execution,
                       pins)
    usable = system.usable_hbm_bytes
    front = CACHE.get(key, usable, top_k)
    if front is None:
        with CACHE.evaluating(key):
            front = CACHE.get(key, usable, top_k)  # evaluated meanwhile by another thread?
            if front is None:
                cover, depth = CACHE.plan(key, usable, top_k)
                if ctx.execution.fewest_recomputed:  # which layers recompute depends on it
                    cover, depth = usable, top_k
                front = _evaluate_variant(model, system, counts, global_batch, strat, ctx,
                                          pins, budget, cover, depth, top_k)
                CACHE.put(key, front)
    for i in range(len(counts)):  # the same refusal as an evaluation, at the same count
        check_budget(sum(front.candidates()[:i + 1]), budget)
    return front.tops(model, system, global_batch, top_k, execution_columns(ctx.execution))


def _evaluate_variant(model: Transformer, system: System, counts: list[int], global_batch: int,
                      strat: Strategy, ctx: Ctx, pins: dict, budget: int, usable: float,
                      depth: int, top_k: int) -> Frontier:
    """Evaluate the candidates that fit in ``usable`` HBM bytes, at every GPU count at once,
    and keep those that can be among the ``depth`` fastest at a capacity up to ``usable``.

    Should a throughput be NaN (no order to keep), only the ``top_k`` of the system's own
    capacity are kept, as a search always picked them, and the result is not cached.
    """
    shapes, merged, masks = _shape_space(model, strat, counts, global_batch, pins, ctx,
                                         system.nvlink_domain_size)
    op_counts = ShapeCounts.of(strat, merged, ctx)
    mem = shape_memory(model, strat, merged, global_batch, op_counts, ctx, usable)
    fits = fits_on(mem, system, usable)
    per_count, placing, offset = [], [], 0
    for n, cols, (mask, table) in zip(counts, shapes, masks):
        span = slice(offset, offset + len(cols["tp1"]))
        per_count.append(CountShapes.of(mem["memory_bytes"][span], fits[span],
                                        mask.sum(axis=1)))
        check_budget(sum(c.candidates for c in per_count), budget)
        placing.append((n, offset, mask, table))
        offset = span.stop

    def price(chosen: np.ndarray) -> tuple[dict, dict]:
        """(columns, result columns) of every placement of the ``chosen`` shapes (increasing),
        in candidate order: GPU count, shape, placement."""
        parts = []
        for n, start, mask, table in placing:
            rows = chosen[(chosen >= start) & (chosen < start + len(mask))]
            kept = {k: v[rows] for k, v in merged.items()}
            kept["gpus"] = np.full(len(rows), n, dtype=np.int64)
            parts.append(expand_placements(kept, mask[rows - start], table))
        cands = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        for name in ("params_bytes", "expert_params_bytes", "recompute_layers"):
            cands[name] = mem[name][cands["shape"]]
        return cands, candidate_times(model, system, strat, cands, global_batch, ctx, op_counts,
                                      cands["shape"])

    placed = np.concatenate([mask.sum(axis=1) for _, _, mask, _ in placing])
    todo = np.flatnonzero(fits & (placed > 0))
    count_of = np.repeat(np.arange(len(counts)), [len(m) for _, _, m, _ in placing])
    if PRUNE and placed[todo].sum() >= PRUNE_FROM:
        lower = np.full(len(fits), np.inf)  # only the shapes to price are ever looked at
        lower[todo] = shape_lower_bound(model, system, strat, merged, global_batch, ctx,
                                        op_counts, mem["params_bytes"], todo,
                                        mem["recompute_layers"], mem["expert_params_bytes"])
        with np.errstate(divide="ignore"):  # a zero bound: never pruned
            bound = global_batch / lower
        cands, res = pruned(price, todo, bound, np.isfinite(lower), mem["memory_bytes"],
                            count_of, len(counts), global_batch, depth)
    else:
        cands, res = price(todo)
    shape = cands.pop("shape")  # each candidate's row in the shapes: its counts and memory
    thr = global_batch / res["iteration_time_s"]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(count_of[shape],
                                                        minlength=len(counts)))])
    finite = not np.isnan(thr).any()
    asked = system.usable_hbm_bytes
    sel, starts = kept_rows(thr, mem["memory_bytes"][shape], shape, bounds,
                            depth if finite else None, top_k, asked)
    rows = {k: v[sel] for k, v in res.items()}
    rows.update({k: v[shape[sel]] for k, v in mem.items()})
    rows.update({k: v[sel] for k, v in cands.items()})
    return Frontier(strat.name, usable if finite else asked, depth if finite else top_k,
                    tuple(int(n) for n in counts), starts, rows, tuple(per_count),
                    cacheable=finite and not ctx.execution.fewest_recomputed)


SHAPE_SPACES = 32  # shape spaces kept per process (a few hundred kB each)
_shape_spaces: OrderedDict[str, tuple] = OrderedDict()
_shape_lock = threading.Lock()


def _shape_space(model: Transformer, strat: Strategy, counts: list[int], global_batch: int,
                 pins: dict, ctx: Ctx, nvs: int) -> tuple[list[dict], dict, list[tuple]]:
    """(shapes per GPU count, all shapes merged with a ``shape`` column, each count's
    placement mask and table): what :func:`~model.explore.space.build_shapes` and
    :func:`~model.explore.space.placement_mask` give, remembered per process. They do not depend on
    the system beyond its NVLink domain, so a what-if of a bandwidth or the HBM capacity
    reuses them. Read-only: callers index them, never write into them."""
    mode = ctx.mode
    key = repr((model, strat.name, mode, ctx.execution, [int(n) for n in counts],
                int(global_batch), sorted(pins.items()), int(nvs)))
    with _shape_lock:
        found = _shape_spaces.get(key)
        if found is not None:
            _shape_spaces.move_to_end(key)
            return found
    shapes = [build_shapes(model, strat, n, global_batch, pins, ctx.execution.interleave,
                           mode.equal_pipeline_stages, ctx.execution.ends_count_as_layers)
              for n in counts]
    merged = {k: np.concatenate([sh[k] for sh in shapes]) for k in shapes[0]}
    merged["shape"] = np.arange(len(merged["tp1"]))
    masks = [placement_mask(cols, n, nvs, pins, mode.exact_domain_fill)
             for n, cols in zip(counts, shapes)]
    found = (shapes, merged, masks)
    with _shape_lock:
        _shape_spaces[key] = found
        while len(_shape_spaces) > SHAPE_SPACES:
            _shape_spaces.popitem(last=False)
    return found


def clear_shape_spaces() -> None:
    """Forget the remembered shape spaces (benchmarks of searches from scratch)."""
    with _shape_lock:
        _shape_spaces.clear()


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
    execution: Execution | dict | None = None, stack: str | Stack | None = None,
    ep: int = 1, etp: int = 1,
) -> Evaluation:
    """Evaluate one configuration; a placement or nb left out is the best one for it. ``ep``
    and ``etp``: expert parallel and expert tensor parallel (a MoE model's expert layers).

    Raises ModelError naming the rule a configuration breaks (see :mod:`model.explore.space`).
    """
    pins = dict(tp1=tp1, tp2=tp2, pp=pp, dp=dp, microbatch=microbatch, nb=nb, nv_tp1=nv_tp1,
                nv_tp2=nv_tp2, nv_dp=nv_dp, nv_pp=nv_pp, ep=ep, etp=etp)
    key = canonical_strategy(strategy)
    missing = [k for k in ("tp1", "tp2", "pp", "dp", "microbatch") if pins[k] is None]
    if missing:
        raise ModelError(f"evaluate needs every dimension; missing: {', '.join(missing)}")
    if key == "1d" and tp2 != 1:
        raise ModelError("the 1d strategy has no tp2; leave it at 1")
    check_args(gpus, global_batch, compat, 1, pins)
    if tp1 * tp2 * pp * dp != gpus:
        raise ModelError(
            f"tp1·tp2·pp·dp = {tp1}·{tp2}·{pp}·{dp} = {tp1 * tp2 * pp * dp} must equal"
            f" gpus = {gpus}")
    sysm = system if nvs is None else system.with_overrides(nvlink_domain_size=nvs)
    mode = resolve_mode(compat)
    sysm, execution = with_stack(sysm, execution, stack, mode)
    ex = resolve_execution(execution)
    strat = build_strategy(key, model, mode, ex)
    space = build_space(model, strat, gpus, global_batch, sysm.nvlink_domain_size, pins, mode,
                        interleave=ex.interleave, ends_count_as_layers=ex.ends_count_as_layers)
    if len(space) == 0:
        raise ModelError(explain(model, strat, gpus, global_batch, sysm.nvlink_domain_size, pins,
                                 mode, ex.interleave, ex.ends_count_as_layers))
    res = evaluate_space(model, sysm, strat, space, global_batch, mode, execution=ex)
    fits = fits_on(res, sysm)
    thr = np.where(fits, global_batch / res["iteration_time_s"], -res["iteration_time_s"])
    i = int(np.argmax(thr))  # best placement / nb: fitting first, then fastest
    row = result_frame(model, sysm, strat.name, gpus, global_batch, res, np.array([i]),
                       execution_columns(ex)).iloc[0]
    one = {k: v[i:i + 1] for k, v in space.cols.items()}
    ctx = Ctx.make(model, sysm, mode, ex)
    sh = shards_of(one)
    table = op_table(
        [("pre", r) for r in evaluate_ops(strat.pre, sh, ctx)]
        + [("block", r) for r in evaluate_ops(strat.block, sh, ctx)]
        + [("post", r) for r in evaluate_ops(strat.post, sh, ctx)],
        n_microbatches=int(row["n_microbatches"]), layers_per_stage=int(row["layers_per_stage"]),
        sh=sh, ctx=ctx,
    )
    return Evaluation(row, table, bool(fits[i]))
