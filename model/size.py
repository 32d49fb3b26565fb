"""How large a search space is, counted without building it.

:func:`space_size` gives the number of shapes (tp1, tp2, pp, dp, microbatch, nb) and of
candidates (shapes × their NVLink placements) that :func:`~model.space.build_shapes` and
:func:`~model.space.build_space` would produce — exactly, from the (tp1, tp2, pp, dp) rows
alone. Those rows are few (at most the ordered triples of divisors of the GPU count); the
microbatches, SUMMA panels and placements that multiply them are counted, not enumerated. The
dashboard uses it to refuse a request whose arrays would not fit its memory budget before
allocating them.

Microbatches of a row: b | GBS/dp and (b·l) divisible by ``split`` (tp1, tp2 or tp1·tp2, see
:func:`~model.space.microbatch_split`), i.e. b is a multiple of g = split / gcd(split, l): the
divisors b = g·t of q = GBS/dp number d(q/g) when g | q, else none. With V > 1 interleaved stages
pp must also divide the microbatch count q/b, i.e. b | q/pp: d(q/(pp·g)) when pp·g | q.
"""

from __future__ import annotations

import numpy as np

from .modes import resolve_mode
from .space import (
    _panels,
    interleavable,
    microbatch_split,
    placement_mask,
    stage_rows,
)
from .strategies import Strategy
from .transformer import Transformer


def space_size(model: Transformer, strategy: Strategy, gpus: int, global_batch: int, nvs: int,
               pins: dict | None = None, compat: object = None,
               interleave: int = 1) -> tuple[int, int]:
    """(shapes, candidates) of ``strategy`` on ``gpus`` GPUs with NVLink domains of ``nvs``."""
    pins = {k: v for k, v in (pins or {}).items() if v is not None}
    mode = resolve_mode(compat)
    rows = stage_rows(model, strategy, gpus, global_batch, pins, mode.equal_pipeline_stages)
    if len(rows["tp1"]) == 0:
        return 0, 0
    per_row = _microbatches(rows, strategy, model, global_batch, pins, interleave)
    per_row = per_row * _panel_counts(rows, model.hidden, strategy.has_panels, pins)
    mask, _ = placement_mask(rows, gpus, nvs, pins, mode.exact_domain_fill)
    return int(per_row.sum()), int((per_row * mask.sum(axis=1)).sum())


def _microbatches(rows: dict[str, np.ndarray], strategy: Strategy, model: Transformer,
                  global_batch: int, pins: dict, interleave: int) -> np.ndarray:
    """Number of microbatch sizes each (tp1, tp2, pp, dp) row allows (module docstring)."""
    q = global_batch // rows["dp"]
    split = microbatch_split(rows, strategy)
    g = split // np.gcd(split, model.seq_len)
    step = g * rows["pp"] if interleave > 1 else g
    if pins.get("microbatch") is not None:
        b = int(pins["microbatch"])
        ok = (q % b == 0) & (b % g == 0) & (global_batch % b == 0)
        if interleave > 1:
            ok &= (q // b) % rows["pp"] == 0
        count = ok.astype(np.int64)
    else:
        ok = q % step == 0
        count = np.zeros(len(q), dtype=np.int64)
        count[ok] = divisor_counts(q[ok] // step[ok], global_batch)
    if interleave > 1:
        count = count * interleavable(model, rows["pp"], interleave)
    return count


def divisor_counts(values: np.ndarray, multiple_of: int) -> np.ndarray:
    """d(v) for each v of ``values``, all divisors of ``multiple_of`` (from its factorisation:
    d(v) = Π (e_p + 1) over the exponents e_p of v's primes)."""
    out = np.ones(len(values), dtype=np.int64)
    rest = np.asarray(values, dtype=np.int64).copy()
    for p in _primes(multiple_of):
        exponent = np.zeros(len(rest), dtype=np.int64)
        while True:
            hit = rest % p == 0
            if not hit.any():
                break
            exponent += hit
            rest[hit] //= p
        out *= exponent + 1
    return out


def _primes(n: int) -> list[int]:
    """The distinct prime factors of n (trial division: n ≤ 1e8 in the dashboard)."""
    primes, p = [], 2
    while p * p <= n:
        if n % p == 0:
            primes.append(p)
            while n % p == 0:
                n //= p
        p += 1
    return primes + ([n] if n > 1 else [])


def _panel_counts(rows: dict[str, np.ndarray], hidden: int, searched: bool,
                  pins: dict) -> np.ndarray:
    """Number of SUMMA panel counts nb each row allows (1 without panels)."""
    one = {k: v for k, v in rows.items() if k in ("tp1", "tp2")}
    index = np.arange(len(rows["tp1"]))
    one["row"] = index
    panels = _panels(one, hidden, searched, pins)
    return np.bincount(panels["row"], minlength=len(index)).astype(np.int64)

