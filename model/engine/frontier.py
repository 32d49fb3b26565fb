"""Search results that outlive one HBM capacity: per GPU count, the candidates any capacity needs.

The HBM capacity only decides which configurations fit
(:func:`model.physics.memory.fits_in_memory`); a configuration's times, FLOPs and memory are the
same at every capacity. So a search evaluates the candidates that fit in some usable capacity U (at
least the one asked for) and keeps, per GPU count, only those that can be among the ``top_k``
fastest at a capacity up to U: taken fastest first (ties in candidate order), a candidate is
dropped when ``top_k`` faster ones need no more memory than it does. Any search that differs only
in a capacity up to U is answered from these rows — the first ``top_k`` of them that fit, which are
exactly the rows, in the order, of a search from scratch — without evaluating anything.

:class:`FrontierCache` keeps such results per process, least recently used out first, keyed by
every other input of the search (:func:`frontier_key`). A first evaluation covers a little more
than the asked capacity (``FIRST_HEADROOM``), and a search above the evaluated capacity evaluates
again with headroom (``HEADROOM`` × the capacity evaluated before), so a capacity raised step by
step is re-evaluated only every so often. Threads that need the same evaluation at once wait for
the first one (:meth:`FrontierCache.evaluating`) instead of repeating it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from model.engine.report import result_frame
from model.specs import memo
from model.specs.execution import Execution
from model.specs.hardware import COST_FIELDS, System
from model.specs.modes import Mode
from model.specs.transformer import Transformer

FIRST_HEADROOM = 1.1  # a first evaluation covers this much more usable HBM than asked (+~9 % work)
HEADROOM = 1.25  # a re-evaluation covers this much more usable HBM than the previous one
CACHE_ENTRIES = 64  # searches kept per process (a few hundred kB each)
LOCK_STRIPES = 16  # evaluations of the same search wait for each other (keys share stripes)
# system fields a search's candidates do not depend on: the capacity (the frontier covers it),
# the node size, power and prices, and the site inputs (they only add cost columns)
_NOT_TIMED = frozenset(("hbm_capacity_gb", "costs", *COST_FIELDS))


def frontier_key(model: Transformer, system: System, counts: list[int], global_batch: int,
                 strategy: str, mode: Mode, execution: Execution, pins: dict) -> str:
    """Every input of a search except the HBM capacity, power and prices (and ``top_k``,
    ``budget``), as text."""
    return repr((_specs_text(model, system), [int(n) for n in counts],
                 int(global_batch), strategy, mode, execution, sorted(pins.items())))


@memo.lru("search keys' specs text", 64)
def _specs_text(model: Transformer, system: System) -> str:
    """The model and the system's timed fields as text, remembered per process (the same
    specs are searched again and again; both are frozen)."""
    hw = [(f.name, getattr(system, f.name)) for f in fields(system)
          if f.name not in _NOT_TIMED]
    return repr((model, hw))


def keep_positions(thr: np.ndarray, memory: np.ndarray, depth: int) -> np.ndarray:
    """Positions of the candidates that can be among the ``depth`` fastest at some capacity,
    fastest first (ties in position order).

    Peels ``depth`` layers: each keeps, of the candidates left (fastest first), those that need
    less memory than every faster one left. A candidate among the ``depth`` fastest that fit at
    some capacity has fewer than ``depth`` faster candidates needing no more memory, so it lies
    in one of the first ``depth`` layers. ``thr`` must have no NaN, ``memory`` must be finite.
    """
    order = np.argsort(-thr, kind="stable")
    mem = memory[order]
    kept = np.zeros(len(order), dtype=bool)
    rest = np.arange(len(order))
    for _ in range(depth):
        if rest.size == 0:
            break
        m = mem[rest]
        lowest_before = np.empty_like(m)
        lowest_before[0] = np.inf
        np.minimum.accumulate(m[:-1], out=lowest_before[1:])
        layer = m < lowest_before
        kept[rest[layer]] = True
        rest = rest[~layer]
    return order[kept]


def shape_leaders(thr: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Positions of the fastest candidate (the first on ties) of each run of equal ``shape``.

    A shape's candidates (its NVLink placements) need the same memory, so only its leader can
    be the fastest that fits at any capacity: :func:`keep_positions` with depth 1 of the
    leaders keeps what it keeps of all candidates, sorting far fewer.
    """
    n = len(thr)
    starts = np.flatnonzero(np.concatenate([[True], shape[1:] != shape[:-1]]))
    best = np.maximum.reduceat(thr, starts)
    run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    return np.minimum.reduceat(np.where(thr == best[run], np.arange(n), n), starts)


@dataclass(frozen=True)
class CountShapes:
    """What a GPU count's candidate and feasible counts need at any capacity."""

    candidates: int  # every placed candidate, whether it fits or not
    shape_memory: np.ndarray  # memory (bytes) of the shapes that fit when evaluated, increasing
    placed: np.ndarray  # placed[i]: placements of the first i of those shapes (length + 1)

    @classmethod
    def of(cls, memory: np.ndarray, fits: np.ndarray, placements: np.ndarray) -> CountShapes:
        """From each shape's memory, whether it fits (HBM and host tier) at the evaluated
        capacity, and its number of placements."""
        order = np.argsort(memory[fits], kind="stable")
        placed = np.concatenate([[0], np.cumsum(placements[fits][order])])
        return cls(int(placements.sum()), memory[fits][order], placed.astype(np.int64))

    def feasible(self, usable: float) -> int:
        """Placed candidates that fit in ``usable`` bytes of HBM (at most the evaluated)."""
        return int(self.placed[np.searchsorted(self.shape_memory, usable, side="right")])


@dataclass(frozen=True)
class Frontier:
    """One execution's search at several GPU counts, for any capacity up to ``usable``."""

    strategy: str
    usable: float  # usable HBM bytes the candidates were evaluated at
    depth: int  # the largest top_k it answers
    gpus: tuple[int, ...]
    starts: np.ndarray  # rows of count i: starts[i]:starts[i + 1], fastest first
    rows: dict[str, np.ndarray]  # result columns of the kept candidates
    shapes: tuple[CountShapes, ...]
    cacheable: bool = True
    _empties: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def serves(self, usable: float, top_k: int) -> bool:
        return usable <= self.usable and top_k <= self.depth

    def candidates(self) -> list[int]:
        return [c.candidates for c in self.shapes]

    def tops(self, model: Transformer, system: System, global_batch: int, top_k: int,
             constants: dict[str, Any], keep: float | None = None
             ) -> list[tuple[pd.DataFrame, int, int, Origin | None]]:
        """(top frame, candidates, feasible, origin) per GPU count at the system's HBM capacity;
        the origin is the frame of every count's rows the top was sliced from and its first
        row there (None where nothing fits). The top holds the tight candidates too (predicted
        over the usable HBM but within the memory model's interval of it:
        ``keep`` bytes: :func:`model.engine.tight.kept_bytes`; None: none), ranked with the
        rest; ``feasible`` counts them with those predicted to fit."""
        usable = system.usable_hbm_bytes if keep is None else keep
        fit = self.rows["memory_bytes"] <= usable
        picks = [a + np.flatnonzero(fit[a:b])[:top_k]
                 for a, b in zip(self.starts[:-1], self.starts[1:])]
        sizes = [len(p) for p in picks]
        frame = result_frame(model, system, self.strategy, np.repeat(self.gpus, sizes),
                             global_batch, self.rows, np.concatenate(picks), constants)
        out, start = [], 0
        for size, shapes in zip(sizes, self.shapes):
            if size:
                top = frame if size == len(frame) else _rows(frame, start, size)
                origin: Origin | None = (frame, start)
            else:
                top = self._empty(model, system, global_batch, constants).copy()
                origin = None
            out.append((top, shapes.candidates, shapes.feasible(usable), origin))
            start += size
        return out

    def _empty(self, model: Transformer, system: System, global_batch: int,
               constants: dict[str, Any]) -> pd.DataFrame:
        """The top frame of a count where nothing fits, as a search from scratch builds it
        (no rows: the constant columns are of object dtype). The same at every capacity, so
        built once per frontier and execution."""
        key = repr(sorted(constants.items()))
        with self._lock:
            frame = self._empties.get(key)
        if frame is None:
            frame = result_frame(model, system, self.strategy, self.gpus[0], global_batch,
                                 {k: v[:0] for k, v in self.rows.items()}, np.arange(0),
                                 constants)
            with self._lock:
                self._empties[key] = frame
        return frame


# (the frame of every count's top rows, a count's first row in it): what a sweep's best rows are
# taken from at once (model.studies.sweep.best_frame) instead of concatenating one-row slices
Origin = tuple[pd.DataFrame, int]


def _rows(frame: pd.DataFrame, start: int, size: int) -> pd.DataFrame:
    """Rows ``start`` … ``start + size − 1`` of ``frame`` numbered from 0: what
    ``frame.iloc[start:start + size].reset_index(drop=True)`` gives, without building the slice
    twice (a new index on the slice changes neither ``frame`` nor its data)."""
    part = frame.iloc[start:start + size]
    part.index = pd.RangeIndex(size)
    return part


class FrontierCache:
    """A bounded, thread-safe map of :func:`frontier_key` → :class:`Frontier`."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = entries
        self._items: OrderedDict[str, Frontier] = OrderedDict()
        self._lock = threading.Lock()
        self._stripes = [threading.Lock() for _ in range(LOCK_STRIPES)]

    def get(self, key: str, usable: float, top_k: int) -> Frontier | None:
        """The cached search for ``key`` if it answers this capacity and ``top_k``."""
        with self._lock:
            found = self._items.get(key)
            if found is None or not found.serves(usable, top_k):
                return None
            self._items.move_to_end(key)
            return found

    def plan(self, key: str, usable: float, top_k: int) -> tuple[float, int]:
        """(usable bytes, depth) a new evaluation should cover: the asked capacity
        (``FIRST_HEADROOM`` × it) and ``top_k``, or more when this search was evaluated before —
        never less than before, and ``HEADROOM`` × the previous capacity when it grows."""
        with self._lock:
            found = self._items.get(key)
        if found is None:
            return _grown(usable, FIRST_HEADROOM), top_k
        depth = max(top_k, found.depth)
        if usable <= found.usable:
            return found.usable, depth
        return max(usable, _grown(found.usable, HEADROOM)), depth

    def evaluating(self, key: str) -> threading.Lock:
        """The lock to hold while evaluating ``key`` (then look it up again first: another
        thread may have just stored it)."""
        return self._stripes[hash(key) % len(self._stripes)]

    def put(self, key: str, frontier: Frontier) -> None:
        if not frontier.cacheable or self.entries <= 0:
            return
        with self._lock:
            self._items[key] = frontier
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def _grown(usable: float, factor: float) -> float:
    """``usable`` bytes with ``factor`` headroom (none when nothing is usable)."""
    return usable * factor if usable > 0 else usable


CACHE = FrontierCache()
memo.register("searches", memo.RESULTS, CACHE)
