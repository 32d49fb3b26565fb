"""The search space: every parallel configuration of a strategy on n GPUs, as numpy arrays.

Spec/paper-model.md §5. Per GPU count n, with GBS the global batch in samples:

* tp1 | n, tp1 | h, tp1 | e; 1D needs (3e)//tp1 ≥ 128, 2D needs e//tp1 ≥ 128; with GQA also
  tp1 | k or k | tp1 (KV heads are split or replicated).
* tp2 | n/tp1 (SUMMA: also tp2 | e), l//tp2 ≥ 128; 1D has tp2 = 1.
* pp | depth and pp | n/(tp1·tp2); dp = n/(tp1·tp2·pp) with dp | GBS.
* microbatch b | GBS/dp with (b·l) divisible by tp1 (1D), tp2 (SUMMA) or tp1·tp2 (context).
* SUMMA panels nb = st·2^j, st = max(tp1, tp2): only st if e/st < 512, else every such nb with
  j < ceil(log2(e//st)), nb | e and e//nb ≥ 512.
* NVLink placement (nv_tp1, nv_tp2, nv_dp, nv_pp): the identity when n ≤ NVS, else every ordered
  tuple with product NVS whose entries divide their dimension. (Outside paper mode a GPU count
  that NVS does not divide fills each domain with the largest divisor of n not above NVS:
  128 GPUs of NVL72 racks are 2 × 64, as a scheduler would place them.)

The grid is built axis by axis: a boolean mask of (rows × new axis values), then only the valid
pairs are kept, so memory stays proportional to the valid candidates. Order is deterministic
(lexicographic in tp1, tp2, pp, b, nb, placement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ModelError
from .modes import resolve_mode
from .strategies import Strategy
from .transformer import Transformer

COLUMNS = ("tp1", "tp2", "pp", "dp", "microbatch", "nb", "nv_tp1", "nv_tp2", "nv_dp", "nv_pp")
PIN_NAMES = COLUMNS


def divisors(n: int) -> np.ndarray:
    """All positive divisors of n, increasing."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return np.array(sorted(set(small + [n // d for d in small])), dtype=np.int64)


def placements(domain: int) -> np.ndarray:
    """Every ordered 4-tuple of positive integers with product ``domain`` (shape [k, 4])."""
    ds = [int(x) for x in divisors(domain)]
    out = [(a, b, c, domain // (a * b * c))
           for a in ds for b in ds if (domain // a) % b == 0
           for c in ds if (domain // (a * b)) % c == 0]
    return np.array(out, dtype=np.int64).reshape(-1, 4)


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


def build_space(model: Transformer, strategy: Strategy, gpus: int, global_batch: int,
                nvs: int, pins: dict | None = None, compat: object = None,
                budget: int = 20_000_000, interleave: int = 1) -> Space:
    """All candidates of ``strategy`` on ``gpus`` GPUs that satisfy the rules and the ``pins``.

    Raises ModelError when more than ``budget`` candidates would be built.
    """
    shapes = build_shapes(model, strategy, gpus, global_batch, pins, interleave,
                          resolve_mode(compat).equal_pipeline_stages)
    mask, table = placement_mask(shapes, gpus, nvs, pins, resolve_mode(compat).exact_domain_fill)
    check_budget(int(mask.sum()), budget)
    return Space(expand_placements(shapes, mask, table))


def stage_layers(layers: int, pp):
    """Blocks on the fullest pipeline stage: ceil(layers / pp) (uneven stages put the extra
    blocks on some stages; with pp | layers it is layers / pp)."""
    return -(-layers // pp)


def build_shapes(model: Transformer, strategy: Strategy, gpus: int, global_batch: int,
                 pins: dict | None = None, interleave: int = 1,
                 equal_stages: bool = True) -> dict[str, np.ndarray]:
    """Every (tp1, tp2, pp, dp, microbatch, nb) allowed on ``gpus`` GPUs, before placement.

    Memory does not depend on the placement, so the search can drop shapes that do not fit
    before multiplying them by their placements.
    """
    pins = {k: v for k, v in (pins or {}).items() if v is not None}
    cols = stage_rows(model, strategy, gpus, global_batch, pins, equal_stages)
    l = model.seq_len
    mb = _pin(divisors(global_batch), pins, "microbatch")
    split = microbatch_split(cols, strategy)
    ok = ((global_batch // cols["dp"])[:, None] % mb[None, :] == 0) & (
        (mb[None, :] * l) % split[:, None] == 0)
    cols = _expand(cols, "microbatch", mb, ok)
    if interleave > 1:  # V stages per GPU: pp > 1, V | layers per stage, pp | microbatches
        n_mb = global_batch // cols["dp"] // cols["microbatch"]
        keep = (interleavable(model, cols["pp"], interleave) & (n_mb % cols["pp"] == 0))
        cols = {k: v[keep] for k, v in cols.items()}
    return _panels(cols, model.hidden, strategy.has_panels, pins)


def stage_rows(model: Transformer, strategy: Strategy, gpus: int, global_batch: int,
               pins: dict, equal_stages: bool = True) -> dict[str, np.ndarray]:
    """Every (tp1, tp2, pp, dp) allowed on ``gpus`` GPUs: the shapes before the microbatch and
    the SUMMA panels are chosen (``pins`` without None values)."""
    n, e, h, kv, l = gpus, model.hidden, model.heads, model.kv_heads, model.seq_len
    div_n = divisors(n)
    tp1 = _pin(div_n, pins, "tp1")
    min_cols = (3 * e) // tp1 if strategy.name == "1d" else e // tp1
    tp1 = tp1[(h % tp1 == 0) & (e % tp1 == 0) & (min_cols >= 128)
              & ((kv % tp1 == 0) | (tp1 % kv == 0))]
    cols = {"tp1": tp1}
    # a strategy without tp2 has tp2 = 1: a pin of anything else matches nothing
    tp2 = _pin(div_n if strategy.has_tp2 else np.ones(1, dtype=np.int64), pins, "tp2")
    ok = (n % (tp1[:, None] * tp2[None, :]) == 0)
    if strategy.has_tp2:
        ok &= (l // tp2 >= 128)[None, :]
    if strategy.name == "summa":
        ok &= (e % tp2 == 0)[None, :]
    cols = _expand(cols, "tp2", tp2, ok)
    tp = cols["tp1"] * cols["tp2"]
    # stages: equal (pp | layers, as in the paper) or uneven (any pp ≤ layers, fullest stage
    # ceil(layers / pp) blocks, as Megatron's uneven first/last stages allow)
    pp_values = divisors(model.layers) if equal_stages else div_n[div_n <= model.layers]
    pp = _pin(pp_values, pins, "pp")
    cols = _expand(cols, "pp", pp, n % (tp[:, None] * pp[None, :]) == 0)
    dp = n // (cols["tp1"] * cols["tp2"] * cols["pp"])
    keep = (global_batch % dp == 0) & (dp <= global_batch)
    if pins.get("dp") is not None:
        keep &= dp == pins["dp"]
    cols = {k: v[keep] for k, v in cols.items()}
    cols["dp"] = dp[keep]
    return cols


def microbatch_split(cols: dict[str, np.ndarray], strategy: Strategy) -> np.ndarray:
    """What each row's microbatch × sequence must be divisible by (tp1, tp2 or tp1·tp2)."""
    split = np.ones_like(cols["tp1"])
    for a in strategy.microbatch_divides:
        split = split * cols[a]
    return split


def interleavable(model: Transformer, pp: np.ndarray, interleave: int) -> np.ndarray:
    """Rows whose pipeline can run ``interleave`` virtual stages per GPU (pp > 1, and the
    layers of a stage split into them); the microbatch count must be a multiple of pp too."""
    return (pp > 1) & (stage_layers(model.layers, pp) % interleave == 0)


def _panels(cols: dict, e: int, searched: bool, pins: dict) -> dict:
    """Add the SUMMA panel count nb (1 where the strategy has no panels)."""
    if not searched:  # nb = 1; a pin of anything else matches nothing
        keep = np.ones(len(cols["tp1"]), dtype=bool) if pins.get("nb") in (None, 1) else (
            np.zeros(len(cols["tp1"]), dtype=bool))
        cols = {k: v[keep] for k, v in cols.items()}
        cols["nb"] = np.ones_like(cols["tp1"])
        return cols
    st = np.maximum(cols["tp1"], cols["tp2"])
    j_max = int(np.ceil(np.log2(max(e, 2))))
    nb = st[:, None] * (2 ** np.arange(max(j_max, 1), dtype=np.int64))[None, :]
    small = (e / st < 512)[:, None]
    upper = np.ceil(np.log2(np.maximum(e // st, 1)))[:, None]
    j = np.arange(nb.shape[1])[None, :]
    ok = np.where(small, j == 0, (j < upper) & (e % nb == 0) & (e // nb >= 512))
    if pins.get("nb") is not None:
        ok &= nb == pins["nb"]
    return _expand(cols, "nb", nb, ok)


PLACEMENT = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")


def filled_domain(n: int, nvs: int) -> int:
    """GPUs per NVLink domain a job of n > NVS GPUs uses: the largest divisor of n that is at
    most NVS (every domain equally filled; NVS itself when it divides n)."""
    ds = divisors(n)
    return int(ds[ds <= nvs].max())


def placement_mask(cols: dict, n: int, nvs: int, pins: dict | None, exact: bool
                   ) -> tuple[np.ndarray, np.ndarray | None]:
    """Which placements each shape allows: a boolean [shapes, k] mask and the [k, 4] table.

    With n ≤ NVS the only placement is the identity (everything in one domain): the table is
    ``None`` and the mask has one column. Otherwise the table lists every ordered
    (nv_tp1, nv_tp2, nv_dp, nv_pp) with product NVS (unless ``exact``: the largest divisor of
    n not above NVS, see :func:`filled_domain`).
    """
    pins = {k: v for k, v in (pins or {}).items() if v is not None}
    dims = np.stack([cols["tp1"], cols["tp2"], cols["dp"], cols["pp"]], axis=1)
    if n <= nvs:
        ok = np.ones((len(dims), 1), dtype=bool)
        for i, name in enumerate(PLACEMENT):
            if pins.get(name) is not None:
                ok[:, 0] &= dims[:, i] == pins[name]
        return ok, None
    table = placements(nvs if exact else filled_domain(n, nvs))
    for i, name in enumerate(PLACEMENT):
        if pins.get(name) is not None:
            table = table[table[:, i] == pins[name]]
    # shapes differing only in microbatch or nb share their placements: test distinct dims once
    radix = int(dims.max(initial=0)) + 1
    key = ((dims[:, 0] * radix + dims[:, 1]) * radix + dims[:, 2]) * radix + dims[:, 3]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    distinct = dims[first]
    ok = np.ones((len(distinct), len(table)), dtype=bool)
    for i in range(4):
        ok &= distinct[:, i, None] % table[None, :, i] == 0
    return ok[inverse], table


def expand_placements(cols: dict, mask: np.ndarray, table: np.ndarray | None) -> dict:
    """The candidates: each shape repeated once per placement its ``mask`` row allows."""
    r, k = np.nonzero(mask)
    out = {key: v[r] for key, v in cols.items()}
    if table is None:  # identity placement
        dims = (out["tp1"], out["tp2"], out["dp"], out["pp"])
        out.update({name: d.copy() for name, d in zip(PLACEMENT, dims)})
    else:
        out.update({name: table[k, i] for i, name in enumerate(PLACEMENT)})
    return out


def check_budget(count: int, budget: int) -> None:
    """Refuse a search of more than ``budget`` candidates, saying how to narrow it."""
    if count > budget:
        raise ModelError(
            f"the search would evaluate {count:,} candidates, more than the budget of {budget:,};"
            " pin a dimension (tp, tp2, pp, dp, microbatch) or raise the budget"
        )
