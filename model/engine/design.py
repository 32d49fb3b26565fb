"""The whole design space at one GPU count, for maps of where the fast configurations are.

:func:`design_space_request` returns every candidate of a strategy (not only the top k) with
its memory, whether it fits and, for those that fit, its iteration time; :func:`best_per_cell`
reduces it to the best configuration per pair of parallel dimensions (e.g. TP × PP), which is
how the paper shows the non-convexity of the space. :func:`design_cells_request` gives the same
cells with bounded memory: it evaluates the space in chunks and keeps only each chunk's best per
cell; :func:`leanest_request` is the least-memory configuration, computed per shape. (The
keyword forms: :mod:`model.api`.)
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from model.engine.cells import cell_column, chunk_cells, merge_cells
from model.engine.evaluate import ShapeCounts, evaluate_space, fits_on, shape_memory
from model.engine.report import GB, MEMORY_COLUMNS, result_frame
from model.engine.request import Request
from model.engine.rules import Problem
from model.engine.space import COLUMNS, Space, build_shapes, build_space, placement_mask
from model.engine.tight import kept_bytes
from model.errors import ModelError
from model.physics.context import Ctx
from model.physics.strategies import build_strategy
from model.specs.execution import Execution
from model.specs.execution_variants import execution_columns
from model.specs.hardware import System
from model.specs.modes import Mode
from model.specs.transformer import Transformer

AXES = ("tp1", "tp2", "pp", "dp", "ep", "etp", "microbatch", "nb", "nv_tp1", "nv_tp2", "nv_dp",
        "nv_pp")  # ep, etp: expert (tensor) parallel, 1 for a dense model


def design_space_request(req: Request) -> pd.DataFrame:
    """Every candidate of the request's strategy on its one GPU count: one row each, result
    columns as in a search (times are those of the configuration even when it does not fit;
    ``fits`` says, and ``tight`` whether one that does not fit is within the memory model's
    interval of the usable HBM: :mod:`model.engine.tight`)."""
    gpus, mode, pins = _one_count(req), req.mode, dict(req.pins)
    res = req.resolve()
    system, ex = res.system, res.one_execution
    strat = build_strategy(req.strategy, req.model, mode, ex)
    space = build_space(Problem.of(req.model, strat, gpus, req.global_batch, mode=mode,
                                   execution=ex, system=system, pins=pins), req.budget)
    return _frame(req.model, system, strat, space, gpus, req.global_batch, mode, ex)


def _one_count(req: Request) -> int:
    work = req.training()
    if len(work.gpus) != 1 or not isinstance(req.strategy, str) or req.strategy == "all":
        raise ModelError("the design space takes one GPU count and one strategy")
    return work.gpus[0]


def _frame(model: Transformer, system: System, strat, space: Space, gpus: int,
           global_batch: int, mode: Mode, ex: Execution) -> pd.DataFrame:
    res = evaluate_space(model, system, strat, space, global_batch, mode, execution=ex)
    frame = result_frame(model, system, strat.name, gpus, global_batch, res,
                         np.arange(len(space)), execution_columns(ex))
    frame["tight"] = fits_on(res, system, kept_bytes(system, mode)) & ~frame["fits"].to_numpy()
    return frame


# a cell's best row: these result columns (iteration_time_s named best_time_s)
BEST_COLUMNS = {"iteration_time_s": "best_time_s", "samples_per_s": "samples_per_s",
                "train_days": "train_days", "memory_gb": "memory_gb"}
CHUNK = 20_000  # candidates evaluated at once by design_cells (a few kB of arrays each)


def design_cells_request(req: Request, x: str = "tp1", y: str = "pp", *, chunk: int = CHUNK,
                         deadline: float | None = None) -> pd.DataFrame:
    """``best_per_cell(design_space_request(req), x, y)`` evaluated ``chunk`` candidates at a
    time: the same rows, with memory bounded by the chunk instead of the whole space.

    ``deadline`` (a ``time.monotonic()`` value): ModelError once it has passed between chunks,
    saying how far the evaluation got.
    """
    _check_axes(x, y)
    gpus, mode, global_batch, model = _one_count(req), req.mode, req.global_batch, req.model
    res = req.resolve()
    system, ex = res.system, res.one_execution
    strat = build_strategy(req.strategy, model, mode, ex)
    space = build_space(Problem.of(model, strat, gpus, global_batch, mode=mode, execution=ex,
                                   system=system, pins=req.pins), req.budget)
    if len(space) == 0:
        return best_per_cell(_frame(model, system, strat, space, gpus, global_batch, mode, ex),
                             x, y)
    parts = []
    for start in range(0, len(space), chunk):
        if deadline is not None and time.monotonic() > deadline:
            raise ModelError(
                f"the design space ran out of its time budget after {start:,} of "
                f"{len(space):,} configurations; choose a GPU count with fewer divisors, "
                "another strategy, or fewer GPUs")
        part = Space({k: v[start:start + chunk] for k, v in space.cols.items()})
        res = evaluate_space(model, system, strat, part, global_batch, mode, execution=ex)
        parts.append(chunk_cells(res, fits_on(res, system), x, y,
                                 fits_on(res, system, kept_bytes(system, mode))))
    cells = merge_cells(parts)
    has = ~np.isnan(cells.time_s)
    best = result_frame(model, system, strat.name, gpus, global_batch, cells.rows,
                        np.arange(int(has.sum())), execution_columns(ex))
    data = {x: cells.x, y: cells.y, "candidates": cells.candidates, "feasible": cells.feasible,
            "tight": cells.tight}
    for col in [c for c in COLUMNS if c not in (x, y)] + list(BEST_COLUMNS):
        data[BEST_COLUMNS.get(col, col)] = cell_column(best[col].to_numpy(), has)
    return pd.DataFrame(data)


def _check_axes(x: str, y: str) -> None:
    for axis in (x, y):
        if axis not in AXES:
            raise ModelError(f"unknown axis '{axis}'; choose from {', '.join(AXES)}")
    if x == y:
        raise ModelError("choose two different axes")


def best_per_cell(frame: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per (x, y) cell: the fastest configuration that fits, else the fastest tight one (a
    ``tight`` column: :func:`design_space_request`), or the cell marked infeasible.

    Columns: x, y, ``candidates`` (how many configurations the cell holds), ``feasible`` (how many
    fit), ``tight`` (how many may not fit: within the memory model's interval of the limit),
    ``best_time_s`` (NaN when none fits nor is tight), and the best row's other dimensions.
    A cell with ``feasible`` 0 and ``tight`` > 0 shows its fastest tight configuration.
    """
    _check_axes(x, y)
    frame = frame if "tight" in frame.columns else frame.assign(tight=False)
    counts = frame.groupby([x, y]).agg(candidates=("fits", "size"), feasible=("fits", "sum"),
                                       tight=("tight", "sum"))
    fit = frame[frame["fits"]]
    tight = frame[frame["tight"]]
    tight = tight[~tight.set_index([x, y]).index.isin(fit.set_index([x, y]).index)]
    fit = pd.concat([fit, tight]) if len(tight) else fit
    best = fit.loc[fit.groupby([x, y])["iteration_time_s"].idxmin()] if len(fit) else fit
    keep = [c for c in COLUMNS if c not in (x, y)] + list(BEST_COLUMNS)
    best = best.set_index([x, y])[keep].rename(columns=BEST_COLUMNS)
    return counts.join(best, how="left").reset_index()


def leanest_request(req: Request) -> dict[str, float] | None:
    """The configuration needing the least memory per GPU on the request's GPUs (whether it
    fits or not): ``memory_gb`` and its parts (``weights_gb``, ``gradients_gb``,
    ``optimizer_gb``, ``activations_gb``) — the ``memory_gb``-minimal row of
    :func:`design_space_request`, computed per shape (memory does not depend on the NVLink
    placement). None when no configuration exists.
    """
    gpus, mode, global_batch, model = _one_count(req), req.mode, req.global_batch, req.model
    res = req.resolve()
    system, strategy = res.system, req.strategy
    ctx = Ctx.make(model, system, mode, res.execution)
    ex = ctx.execution
    strat = build_strategy(strategy, model, mode, ex)
    problem = Problem.of(model, strat, gpus, global_batch, mode=mode, execution=ex,
                         system=system)
    shapes = build_shapes(problem)
    mask, _ = placement_mask(shapes, gpus, problem.nvs, {}, problem.exact_domain_fill,
                             problem.production_node > 0)
    placed = np.flatnonzero(mask.any(axis=1))
    if len(placed) == 0:
        return None
    shapes = {k: v[placed] for k, v in shapes.items()}
    mem = shape_memory(model, strat, shapes, global_batch, ShapeCounts.of(strat, shapes, ctx),
                       ctx, system.usable_hbm_bytes)  # as design_space's rows
    i = int(np.argmin(mem["memory_bytes"]))
    out = {"memory_gb": float(mem["memory_bytes"][i] / GB)}
    for name, key in zip(MEMORY_COLUMNS, ("weights_bytes", "gradients_bytes", "optimizer_bytes",
                                          "activations_bytes")):
        out[name] = float(mem[key][i] / GB)
    return out
