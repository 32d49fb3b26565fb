"""One execution choice's search at several GPU counts: the frontier of the configurations that
fit, evaluated at once, remembered per process.

:func:`variant_frontier` is the engine under :func:`model.engine.search.search_counts` (one call
per execution choice) and :func:`model.engine.counts.best_per_count`: it builds the candidate
shapes of every count (remembered per process: :func:`_shape_space`), drops what does not fit in
HBM, prices the rest at once (:mod:`model.engine.evaluate`) and keeps the rows that can be among
the fastest at any capacity up to the one evaluated (:class:`~model.engine.frontier.Frontier`,
cached in :data:`~model.engine.frontier.CACHE`). Candidates that provably cannot be among the
top k (a lower bound of their time, :func:`~model.engine.evaluate.shape_lower_bound`, is beaten
by k faster candidates needing no more memory) are not priced: see :mod:`model.engine.pruning`.
"""

from __future__ import annotations

import numpy as np

from model.engine.evaluate import (
    ShapeCounts,
    candidate_times,
    fits_on,
    shape_lower_bound,
    shape_memory,
)
from model.engine.frontier import CACHE, CountShapes, Frontier, frontier_key
from model.engine.production import production_node
from model.engine.pruning import kept_rows, pruned
from model.engine.resolved import Resolved
from model.engine.rules import Problem
from model.engine.space import (
    PLACEMENT,
    SHAPES,
    Placements,
    build_shapes,
    check_budget,
    expert_placement,
    shape_placements,
)
from model.engine.tight import kept_bytes
from model.physics.context import Ctx
from model.physics.strategies import Strategy, build_strategy
from model.specs import memo
from model.specs.execution import Execution
from model.specs.transformer import Transformer


def variant_frontier(res: Resolved, strategy: str, counts: list[int], ex: Execution,
                     budget: int) -> tuple[Frontier, Ctx]:
    """The search of one execution choice (``ex``, one of ``res.variants``) of ``strategy`` at
    every GPU count, as a :class:`~model.engine.frontier.Frontier` (rows fastest first per
    count, for any capacity up to the one evaluated), and its context. Answered from the
    process's :data:`~model.engine.frontier.CACHE` when the same search (any HBM capacity up
    to the one evaluated) ran before; else evaluated and cached (``res.pruning``: when the
    evaluation prunes; the rows are the same either way, so both share the cache).
    ``budget``: the candidates left to this search.
    """
    model, system, mode, top_k = res.model, res.system, res.mode, res.top_k
    global_batch, pins = res.global_batch, dict(res.pins)
    ctx = Ctx.make(model, system, mode, ex)  # validates the execution on this system
    strat = build_strategy(strategy, model, mode, ctx.execution)
    key = frontier_key(model, system, counts, global_batch, strat.name, mode, ctx.execution,
                       pins)
    usable = kept_bytes(system, mode)  # the tight candidates too (model.engine.tight)
    if ctx.execution.fewest_recomputed:
        # which layers recompute depends on the capacity: such a search answers that capacity
        # alone, so it is cached under it (a plan asked again with other prices, PUE or
        # target, or the page's next stage, reuses it: the same rows, evaluated once)
        key = f"{key} at {system.usable_hbm_bytes!r} bytes"
    front = CACHE.get(key, usable, top_k)
    if front is None:
        with CACHE.evaluating(key):
            front = CACHE.get(key, usable, top_k)  # evaluated meanwhile by another thread?
            if front is None:
                cover, depth = CACHE.plan(key, system.usable_hbm_bytes, top_k)
                cover = max(cover, usable)
                if ctx.execution.fewest_recomputed:  # which layers recompute depends on it
                    cover, depth = usable, top_k
                front = _evaluate_variant(res, strat, ctx, counts, budget, (cover, depth))
                CACHE.put(key, front)
    totals = np.cumsum(front.candidates())  # the same refusal as an evaluation, at the same
    over = np.flatnonzero(totals > budget)   # count (the first whose running total is over)
    if over.size:
        check_budget(int(totals[over[0]]), budget)
    return front, ctx


def _evaluate_variant(res: Resolved, strat: Strategy, ctx: Ctx, counts: list[int], budget: int,
                      cover: tuple[float, int]) -> Frontier:
    """Evaluate the candidates that fit in ``usable`` HBM bytes, at every GPU count at once,
    and keep those that can be among the ``depth`` fastest at a capacity up to ``usable``
    (``cover``: (usable, depth)).

    Should a throughput be NaN (no order to keep), only the ``top_k`` of the system's own
    capacity are kept, as a search always picked them, and the result is not cached.
    """
    usable, depth = cover
    model, system, global_batch = res.model, res.system, res.global_batch
    pins, top_k, pruning = dict(res.pins), res.top_k, res.pruning
    shapes, merged, places = _shape_space(model, strat, counts, global_batch, pins, ctx,
                                          system.nvlink_domain_size)
    op_counts = ShapeCounts.of(strat, merged, ctx)
    # the fewest recomputed layers are those that fit the system's usable HBM; a shape over it
    # even so is kept up to ``usable`` (its tight band, model.engine.tight)
    mem = shape_memory(model, strat, merged, global_batch, op_counts, ctx,
                       system.usable_hbm_bytes)
    keep = kept_bytes(system, ctx.mode)
    fits = fits_on(mem, system, usable)
    per_count, placing, offset, total = [], [], 0, 0
    placed = np.concatenate([p.counts() for p in places])
    for n, cols, place in zip(counts, shapes, places):
        span = slice(offset, offset + len(cols["tp1"]))
        per_count.append(CountShapes.of(mem["memory_bytes"][span], fits[span], placed[span]))
        total += per_count[-1].candidates
        check_budget(total, budget)
        placing.append((n, offset, span.stop, place))
        offset = span.stop

    def price(chosen: np.ndarray) -> tuple[dict, dict]:
        """(columns, result columns) of every placement of the ``chosen`` shapes (increasing),
        in candidate order: GPU count, shape, placement."""
        cands = _placed(merged, placing, chosen)
        for name in ("params_bytes", "expert_params_bytes", "recompute_layers"):
            cands[name] = mem[name][cands["shape"]]
        return cands, candidate_times(strat, cands, global_batch, ctx, op_counts,
                                      cands["shape"])

    todo = np.flatnonzero(fits & (placed > 0))
    count_of = np.repeat(np.arange(len(counts)), [stop - start for _, start, stop, _ in placing])
    if pruning.applies(int(placed[todo].sum())):
        lower = np.full(len(fits), np.inf)  # only the shapes to price are ever looked at
        lower[todo] = shape_lower_bound(strat, merged, global_batch, ctx, op_counts,
                                        {k: mem[k] for k in ("params_bytes", "recompute_layers",
                                                             "expert_params_bytes")}, todo)
        with np.errstate(divide="ignore"):  # a zero bound: never pruned
            bound = global_batch / lower
        cands, res = pruned(price, todo, bound, np.isfinite(lower), mem["memory_bytes"],
                            count_of, global_batch, depth)
    else:
        cands, res = price(todo)
    shape = cands.pop("shape")  # each candidate's row in the shapes: its counts and memory
    thr = global_batch / res["iteration_time_s"]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(count_of[shape],
                                                        minlength=len(counts)))])
    finite = not np.isnan(thr).any()
    asked = keep
    sel, starts = kept_rows(thr, mem["memory_bytes"][shape], shape, bounds,
                            depth if finite else None, top_k, asked)
    rows = {k: v[sel] for k, v in res.items()}
    rows.update({k: v[shape[sel]] for k, v in mem.items()})
    rows.update({k: v[sel] for k, v in cands.items()})
    return Frontier(strat.name, usable if finite else asked, depth if finite else top_k,
                    tuple(int(n) for n in counts), starts, rows, tuple(per_count),
                    cacheable=finite)


def _placed(merged: dict, placing: list[tuple], chosen: np.ndarray) -> dict:
    """The candidates of the ``chosen`` shapes (increasing rows of ``merged``): each shape once
    per placement it allows, GPU count by GPU count (``placing``: (GPUs, first row, end row,
    :class:`~model.engine.space.Placements`) per count), with the placement's columns and the
    expert groups' (:func:`~model.engine.space.expand_placements`, gathered once)."""
    rows, gpus, nv = [], [], []
    for n, start, stop, place in placing:
        mine = chosen[(chosen >= start) & (chosen < stop)]
        r, k = np.nonzero(place.rows(mine - start))
        rows.append(mine[r])
        gpus.append(np.full(len(r), n, dtype=np.int64))
        if place.table is None:  # the identity: each dimension inside one domain
            nv.append([merged[name][rows[-1]] for name in ("tp1", "tp2", "dp", "pp")])
        else:
            nv.append([place.table[k, i] for i in range(len(PLACEMENT))])
    idx = np.concatenate(rows)
    out = {key: v[idx] for key, v in merged.items()}
    out["gpus"] = np.concatenate(gpus)
    out.update({name: np.concatenate([part[i] for part in nv])
                for i, name in enumerate(PLACEMENT)})
    out.update(expert_placement(out))
    return out


# shape spaces kept per process (a few hundred kB each)
SHAPE_SPACES = memo.Table("shape spaces", 32, memo.RESULTS)


def _shape_space(model: Transformer, strat: Strategy, counts: list[int], global_batch: int,
                 pins: dict, ctx: Ctx, nvs: int) -> tuple[list[dict], dict, list[Placements]]:
    """(shapes per GPU count, all shapes merged with a ``shape`` column, each count's
    placements): what :func:`~model.engine.space.build_shapes` and
    :func:`~model.engine.space.shape_placements` give, remembered per process. They do not
    depend on the system beyond its NVLink domain, so a what-if of a bandwidth or the HBM capacity
    reuses them, nor on the execution beyond its interleaving and lighter ends (the strategy's
    rules are its name's), so searches of other recompute or offload choices share them.
    Read-only: callers index them, never write into them."""
    mode = ctx.mode
    ex = ctx.execution
    node = production_node(ex, mode, ctx.system.node_size)
    key = repr((model, strat.name, mode, ex.stage_interleave, ex.ends_count_as_layers, node,
                [int(n) for n in counts], int(global_batch), sorted(pins.items()), int(nvs)))
    found = SHAPE_SPACES.get(key)
    if found is not None:
        return found
    shapes = [build_shapes(Problem.of(model, strat, n, global_batch, mode=mode, execution=ex,
                                      system=ctx.system, pins=pins)) for n in counts]
    merged = {k: np.concatenate([sh[k] for sh in shapes]) for k in shapes[0]}
    merged["shape"] = np.arange(len(merged["tp1"]))
    places = [shape_placements(cols, n, nvs, pins, mode.exact_domain_fill, node > 0)
              for n, cols in zip(counts, shapes)]
    found = (shapes, merged, places)
    SHAPE_SPACES.put(key, found)
    return found


def clear_shape_spaces() -> None:
    """Forget the remembered shape spaces and each count's shapes (benchmarks of searches
    from scratch)."""
    SHAPE_SPACES.clear()
    SHAPES.clear()
