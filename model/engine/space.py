"""The search space: every parallel configuration of a strategy on n GPUs, as numpy arrays.

docs/model.md §11. Per GPU count n, with GBS the global batch in samples:

* tp1 | n, tp1 | h, tp1 | e; 1D needs (3e)//tp1 ≥ 128, 2D needs e//tp1 ≥ 128; with GQA also
  tp1 | k or k | tp1 (KV heads are split or replicated).
* tp2 | n/tp1 (SUMMA: also tp2 | e), l//tp2 ≥ 128; 1D has tp2 = 1.
* pp | depth and pp | n/(tp1·tp2); dp = n/(tp1·tp2·pp) with dp | GBS.
* MoE models: etp and ep divide the stage's tp1·tp2·dp GPUs together (ep·etp | tp1·tp2·dp),
  ep | experts, etp | expert FFN leaving ≥ 128 columns; dense models have ep = etp = 1.
* microbatch b | GBS/dp with (b·l) divisible by tp1 (1D), tp2 (SUMMA) or tp1·tp2 (context).
* SUMMA panels nb = st·2^j, st = max(tp1, tp2): only st if e/st < 512, else every such nb with
  j < ceil(log2(e//st)), nb | e and e//nb ≥ 512.
* NVLink placement (nv_tp1, nv_tp2, nv_dp, nv_pp): the identity when n ≤ NVS, else every ordered
  tuple with product NVS whose entries divide their dimension. (Outside paper mode a GPU count
  that NVS does not divide fills each domain with the largest divisor of n not above NVS:
  128 GPUs of NVL72 racks are 2 × 64, as a scheduler would place them.) The expert groups'
  members per domain follow from it (:func:`expert_placement`).

The grid is built axis by axis: a boolean mask of (rows × new axis values), then only the valid
pairs are kept, so memory stays proportional to the valid candidates. Order is deterministic
(lexicographic in tp1, tp2, pp, b, nb, placement).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.engine.production import tp_inside, whole_nodes
from model.engine.rules import Problem, divisors, mask, stage_layout
from model.errors import ModelError
from model.specs import memo
from model.specs.transformer import Transformer

COLUMNS = ("tp1", "tp2", "pp", "dp", "ep", "etp", "microbatch", "nb", "nv_tp1", "nv_tp2",
           "nv_dp", "nv_pp")
PIN_NAMES = COLUMNS


@memo.lru("NVLink placements", 64)
def placements(domain: int) -> np.ndarray:
    """Every ordered 4-tuple of positive integers with product ``domain`` (shape [k, 4];
    read-only: remembered per domain)."""
    ds = [int(x) for x in divisors(domain)]
    out = np.array([(a, b, c, domain // (a * b * c))
                    for a in ds for b in ds if (domain // a) % b == 0
                    for c in ds if (domain // (a * b)) % c == 0], dtype=np.int64).reshape(-1, 4)
    out.flags.writeable = False
    return out


@dataclass
class Space:
    """Candidate configurations (equal-length int64 arrays named as in ``COLUMNS``)."""

    cols: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.cols["tp1"])


def _expand(cols: dict[str, np.ndarray], name: str, values: np.ndarray, mask: np.ndarray) -> dict:
    """Cross the rows with a new column's ``values``, keeping pairs where ``mask`` [rows, k]."""
    r, k = np.nonzero(mask)
    out = {key: v[r] for key, v in cols.items()}
    out[name] = values[k] if values.ndim == 1 else values[r, k]
    return out


def _pin(values: np.ndarray, pins: dict, name: str) -> np.ndarray:
    return values[values == pins[name]] if pins.get(name) is not None else values


def build_space(problem: Problem, budget: int = 20_000_000) -> Space:
    """All candidates of the ``problem``'s strategy on its GPUs that satisfy the rules and its
    pins (and the production rules with ``production_node`` > 0:
    :mod:`model.engine.production`), each shape with every NVLink placement it allows.

    Raises ModelError when more than ``budget`` candidates would be built.
    """
    shapes = build_shapes(problem)
    mask, table = placement_mask(shapes, problem.gpus, problem.nvs, problem.pins,
                                 problem.exact_domain_fill, problem.production_node > 0)
    check_budget(int(mask.sum()), budget)
    return Space(expand_placements(shapes, mask, table))


def _mask_of(axis: str, dims: dict, problem: Problem, shape: tuple) -> np.ndarray:
    """:func:`model.engine.rules.mask` as a boolean array of ``shape``."""
    ok = mask(axis, dims, problem)
    if isinstance(ok, np.ndarray) and ok.shape == shape:
        return ok
    return np.broadcast_to(ok, shape)


def _grow(cols: dict, axis: str, values: np.ndarray, problem: Problem) -> dict:
    """Cross the rows with ``values`` of a new dimension, keeping the pairs that obey its rules
    (:func:`model.engine.rules.mask` on [rows, 1] × [1, values] arrays)."""
    if len(values) == 1:  # one value (a dense model's ep, a pin): a mask of the rows
        ok = _mask_of(axis, {**cols, axis: values[0]}, problem, (len(cols["tp1"]),))
        if ok.all():
            return {**cols, axis: np.full(len(ok), values[0], dtype=values.dtype)}
        return {**{k: v[ok] for k, v in cols.items()},
                axis: np.full(int(ok.sum()), values[0], dtype=values.dtype)}
    dims = {k: v[:, None] for k, v in cols.items()}
    dims[axis] = values[None, :]
    ok = _mask_of(axis, dims, problem, (len(cols["tp1"]), len(values)))
    return _expand(cols, axis, values, ok)


MAX_INTERLEAVE = 64  # virtual stages per GPU searched at most
KEPT_ROWS = 4_096  # the shapes of a count are kept per process up to this many rows
# the shapes of one strategy at one GPU count, once built or counted whole
# (:func:`model.engine.size.space_size`): the Plan & cost page sizes every count before it
# searches it (issue 29); a few kB to a few hundred kB each, 64 MB in all at most
SHAPES = memo.Table("shapes per count", 8_192, memo.RESULTS,
                    weigh=lambda cols: sum(v.nbytes for v in cols.values()),
                    max_bytes=64 * 2**20)


def shapes_key(problem: Problem) -> tuple | None:
    """What :func:`build_shapes` reads of ``problem``: neither the NVLink domain nor the
    placement rule (they decide the placements), and of the production rules only whether
    the count is whole nodes (the rule on tp1 that keeps every shape or none). None when a
    value cannot be a key (a spec holding a list: its shapes are not remembered)."""
    pins = tuple(sorted((k, int(v)) for k, v in problem.pins.items() if v is not None))
    key = (problem.model, problem.strategy.name, int(problem.gpus), int(problem.global_batch),
           int(problem.interleave), bool(problem.equal_stages),
           bool(problem.ends_count_as_layers),
           whole_nodes(int(problem.gpus), int(problem.production_node)), pins)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def keep_shapes(key: tuple | None, cols: dict[str, np.ndarray]) -> None:
    """Remember the whole shapes under ``key`` (:func:`shapes_key`) when there are at most
    :data:`KEPT_ROWS`, read-only (every caller indexes them, none writes into them)."""
    if key is not None and len(cols["tp1"]) <= KEPT_ROWS:
        for v in cols.values():
            v.flags.writeable = False
        SHAPES.put(key, cols)


def build_shapes(problem: Problem) -> dict[str, np.ndarray]:
    """Every (tp1, tp2, pp, dp, etp, ep, microbatch, interleave, nb) allowed on the
    ``problem``'s GPUs, before placement (``interleave`` 0 searches every virtual-stage count
    the stages allow): each dimension's candidate values (divisors; pinned values only),
    filtered by the rules of :mod:`model.engine.rules` as it is added. Remembered per count
    (:data:`SHAPES`; read-only).

    Memory does not depend on the placement, so the search can drop shapes that do not fit
    before multiplying them by their placements.
    """
    key = shapes_key(problem)
    found = None if key is None else SHAPES.get(key)
    if found is not None:
        return found
    cols = stage_rows(problem)
    for step in shape_steps(problem):
        cols = step(cols)
    keep_shapes(key, cols)
    return cols


def stage_rows(problem: Problem) -> dict[str, np.ndarray]:
    """The (tp1, tp2, pp, dp) rows allowed on the ``problem``'s GPUs: the shapes before the
    expert, microbatch, interleaving and panel dimensions multiply them (at most the ordered
    triples of divisors of the GPU count)."""
    model, strategy, gpus = problem.model, problem.strategy, problem.gpus
    pins = {k: v for k, v in problem.pins.items() if v is not None}
    div_n = divisors(gpus)
    tp1 = _pin(div_n, pins, "tp1")
    cols = {"tp1": tp1[_mask_of("tp1", {"tp1": tp1}, problem, tp1.shape)]}
    # a strategy without tp2 has tp2 = 1: a pin of anything else matches nothing
    cols = _grow(cols, "tp2", _pin(div_n if strategy.has_tp2 else np.ones(1, dtype=np.int64),
                                   pins, "tp2"), problem)
    # stages: equal (pp | layers, as in the paper) or uneven (any pp ≤ layers, fullest stage
    # ceil(layers / pp) blocks, as Megatron's uneven first/last stages allow)
    depth = model.pipeline_layers
    pp_values = divisors(depth) if problem.equal_stages else div_n[div_n <= depth]
    cols = _grow(cols, "pp", _pin(pp_values, pins, "pp"), problem)
    dp = gpus // (cols["tp1"] * cols["tp2"] * cols["pp"])
    keep = _mask_of("dp", {"dp": dp}, problem, dp.shape)
    if pins.get("dp") is not None:
        keep = keep & (dp == pins["dp"])
    cols = {k: v[keep] for k, v in cols.items()}
    cols["dp"] = dp[keep]
    return cols


def shape_steps(problem: Problem) -> list:
    """The dimensions added to the stage rows, in order, each a function rows → rows: expert
    tensor and expert parallelism (MoE), microbatch, interleaving, SUMMA panels. Each step
    works row by row, so it can run on any subset of the rows (:mod:`model.engine.size`)."""
    model, strategy, interleave = problem.model, problem.strategy, problem.interleave
    pins = {k: v for k, v in problem.pins.items() if v is not None}
    experts = divisors(problem.gpus) if model.moe else np.ones(1, dtype=np.int64)

    def interleaving(cols: dict) -> dict:
        if interleave == 1:  # plain 1F1B: nothing to check
            return {**cols, "interleave": np.ones_like(cols["tp1"])}
        return _grow(cols, "interleave", _virtual_stages(
            model, cols, interleave, problem.ends_count_as_layers), problem)

    return [lambda c: _grow(c, "etp", _pin(experts, pins, "etp"), problem),
            lambda c: _grow(c, "ep", _pin(experts, pins, "ep"), problem),
            lambda c: _grow(c, "microbatch", _pin(divisors(problem.global_batch), pins,
                                                  "microbatch"), problem),
            interleaving,
            lambda c: _panels(c, model.hidden, strategy.has_panels, pins)]


def _virtual_stages(model: Transformer, cols: dict, interleave: int,
                    ends_count_as_layers: bool) -> np.ndarray:
    """The interleavings V to try: the one asked for, or with 0 every divisor (up to
    MAX_INTERLEAVE) of some stage's layer count (the rules keep those of each shape's own)."""
    if interleave:
        return np.array([interleave], dtype=np.int64)
    # each stage count once (a few distinct among hundreds of rows): a set, not np.unique
    stages = np.array(sorted(set(cols["pp"].tolist())), dtype=np.int64)
    layers = set(np.atleast_1d(stage_layout(model, stages, ends_count_as_layers)[0]).tolist())
    values = {int(v) for d in layers for v in divisors(int(d)) if v <= MAX_INTERLEAVE}
    return np.array(sorted(values | {1}), dtype=np.int64)


def _panels(cols: dict, e: int, searched: bool, pins: dict) -> dict:
    """Add the SUMMA panel count nb (1 where the strategy has no panels)."""
    if not searched:  # nb = 1; a pin of anything else matches nothing
        if pins.get("nb") not in (None, 1):
            cols = {k: v[:0] for k, v in cols.items()}
        return {**cols, "nb": np.ones_like(cols["tp1"])}
    st = np.maximum(cols["tp1"], cols["tp2"])
    # the rows come in runs of one (tp1, tp2): the panel counts are worked out once per run
    new_run = np.ones(len(st), dtype=bool)
    new_run[1:] = st[1:] != st[:-1]
    run, st = np.cumsum(new_run) - 1, st[new_run]
    j_max = int(np.ceil(np.log2(max(e, 2))))
    nb = st[:, None] * (2 ** np.arange(max(j_max, 1), dtype=np.int64))[None, :]
    small = (e / st < 512)[:, None]
    upper = np.ceil(np.log2(np.maximum(e // st, 1)))[:, None]
    j = np.arange(nb.shape[1])[None, :]
    ok = np.where(small, j == 0, (j < upper) & (e % nb == 0) & (e // nb >= 512))
    if pins.get("nb") is not None:
        ok &= nb == pins["nb"]
    r, k = np.nonzero(ok[run])
    out = {key: v[r] for key, v in cols.items()}
    out["nb"] = nb[run[r], k]
    return out


PLACEMENT = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")


def filled_domain(n: int, nvs: int) -> int:
    """GPUs per NVLink domain a job of n > NVS GPUs uses: the largest divisor of n that is at
    most NVS (every domain equally filled; NVS itself when it divides n)."""
    ds = divisors(n)
    return int(ds[ds <= nvs].max())


@dataclass(frozen=True)
class Placements:
    """Which NVLink placements each shape allows, kept per run of consecutive shapes with the
    same (tp1, tp2, dp, pp) — the shapes come in such runs, and only those four decide:
    ``ok`` [runs, k] (k placements of ``table``, or the identity's one column when ``table``
    is None) and each run's ``lengths`` (shapes)."""

    ok: np.ndarray
    lengths: np.ndarray
    table: np.ndarray | None

    def mask(self) -> np.ndarray:
        """The boolean [shapes, k] mask."""
        return np.repeat(self.ok, self.lengths, axis=0)

    def counts(self) -> np.ndarray:
        """Placements of each shape."""
        return np.repeat(np.count_nonzero(self.ok, axis=1), self.lengths)

    def total(self) -> int:
        """Placements of all the shapes: the candidates."""
        return int(np.count_nonzero(self.ok, axis=1) @ self.lengths)

    def rows(self, shapes: np.ndarray) -> np.ndarray:
        """The mask's rows of the (increasing) ``shapes``."""
        return self.ok[np.searchsorted(np.cumsum(self.lengths), shapes, side="right")]


def shape_placements(cols: dict, n: int, nvs: int, pins: dict | None, exact: bool,
                     tp_inside_domain: bool = False) -> Placements:
    """Which placements each shape allows (:class:`Placements`).

    With n ≤ NVS the only placement is the identity (everything in one domain): the table is
    ``None`` and the mask has one column. Otherwise the table lists every ordered
    (nv_tp1, nv_tp2, nv_dp, nv_pp) with product NVS (unless ``exact``: the largest divisor of
    n not above NVS, see :func:`filled_domain`). With ``tp_inside_domain`` (a production
    rule, :mod:`model.engine.production`) only the placements with nv_tp1 = tp1.
    """
    pins = {k: v for k, v in (pins or {}).items() if v is not None}
    names = ("tp1", "tp2", "dp", "pp")
    new_run = np.zeros(len(cols["tp1"]), dtype=bool)
    new_run[:1] = True
    for name in names:
        new_run[1:] |= cols[name][1:] != cols[name][:-1]
    starts = np.flatnonzero(new_run)
    lengths = np.diff(np.concatenate((starts, [len(new_run)])))
    dims = [cols[name][starts] for name in names]  # each run's
    if n <= nvs:
        ok = np.ones((len(starts), 1), dtype=bool)
        for dim, name in zip(dims, PLACEMENT):
            if pins.get(name) is not None:
                ok[:, 0] &= dim == pins[name]
        return Placements(ok, lengths, None)
    table = placements(nvs if exact else filled_domain(n, nvs))
    for i, name in enumerate(PLACEMENT):
        if pins.get(name) is not None:
            table = table[table[:, i] == pins[name]]
    ok = np.ones((len(starts), len(table)), dtype=bool)
    for i, dim in enumerate(dims):
        ok &= dim[:, None] % table[None, :, i] == 0
    if tp_inside_domain:
        ok &= tp_inside(table, dims[0])
    return Placements(ok, lengths, table)


def placement_mask(cols: dict, n: int, nvs: int, pins: dict | None, exact: bool,
                   tp_inside_domain: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Which placements each shape allows: a boolean [shapes, k] mask and the [k, 4] table
    (:func:`shape_placements`)."""
    found = shape_placements(cols, n, nvs, pins, exact, tp_inside_domain)
    return found.mask(), found.table


def expand_placements(cols: dict, mask: np.ndarray, table: np.ndarray | None) -> dict:
    """The candidates: each shape repeated once per placement its ``mask`` row allows, with
    the expert groups' members per domain (:func:`expert_placement`)."""
    r, k = np.nonzero(mask)
    out = {key: v[r] for key, v in cols.items()}
    if table is None:  # identity placement
        dims = (out["tp1"], out["tp2"], out["dp"], out["pp"])
        out.update({name: d.copy() for name, d in zip(PLACEMENT, dims)})
    else:
        out.update({name: table[k, i] for i, name in enumerate(PLACEMENT)})
    out.update(expert_placement(out))
    return out


EXPERT_PLACEMENT = ("nv_ep", "nv_etp", "nv_edp")


def expert_placement(cols: dict) -> dict[str, np.ndarray]:
    """Members per NVLink domain of the expert groups, derived from the placement.

    Megatron-Core orders a stage's ranks tp1 fastest, then tp2 (cp), then dp, and its expert
    layers regroup the same ranks etp fastest, then ep, then edp (MoE parallel folding): an
    expert group is ep·etp consecutive ranks, an etp group etp consecutive ranks. A domain
    holds an nv_tp1 × nv_tp2 × nv_dp box of the stage's rank grid; m consecutive ranks span
    min(m, tp1) along tp1, then ⌈m/tp1⌉ (at most tp2) along tp2, then along dp, and the box
    holds Π min(span, nv) of them (exact when the sizes divide each other, as the rules make
    them). So nv_etp = that of etp, nv_ep = that of ep·etp / nv_etp, and the
    expert-data-parallel group (stride ep·etp) has nv_tp1·nv_tp2·nv_dp / (that of ep·etp)."""
    ones = np.ones_like(cols["tp1"])
    ep, etp = cols.get("ep", ones), cols.get("etp", ones)
    stage = cols["nv_tp1"] * cols["nv_tp2"] * cols["nv_dp"]
    if ep.max(initial=1) == 1 and etp.max(initial=1) == 1:
        # no expert parallelism (a dense model): one-rank groups, the stage's box is the edp's
        return {"nv_ep": ones, "nv_etp": ones.copy(), "nv_edp": stage}
    grid = ((cols["tp1"], cols["nv_tp1"]), (cols["tp2"], cols["nv_tp2"]),
            (cols["dp"], cols["nv_dp"]))

    def inside(m: np.ndarray) -> np.ndarray:
        out, rest = ones, m
        for dim, nv in grid:
            out = out * np.minimum(np.minimum(rest, dim), nv)
            rest = -(-rest // dim)
        return out

    group, tensor = inside(ep * etp), inside(etp)
    return {"nv_ep": np.maximum(group // tensor, 1), "nv_etp": tensor,
            "nv_edp": np.maximum(stage // group, 1)}


def check_budget(count: int, budget: int) -> None:
    """Refuse a search of more than ``budget`` candidates, saying how to narrow it."""
    if count > budget:
        raise ModelError(
            f"the search would evaluate {count:,} candidates, more than the budget of {budget:,};"
            " pin a dimension (tp, tp2, pp, dp, microbatch) or raise the budget"
        )
