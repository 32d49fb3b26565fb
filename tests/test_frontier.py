"""The per-process search cache (model.engine.frontier): a search answered from a search at
another HBM capacity gives exactly what a search from scratch gives."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pandas as pd
import pytest

from model import load_model, load_system
from model.engine.frontier import CACHE, FrontierCache, keep_positions, shape_leaders
from tests.unstacked import search, sweep

COUNTS = [8, 16, 32, 64, 128, 256, 512, 1024]


def same(a, b) -> None:
    """Two lists of search results are identical: rows, dtypes and counts."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.gpus, x.strategy, x.candidates, x.feasible) == (
            y.gpus, y.strategy, y.candidates, y.feasible)
        pd.testing.assert_frame_equal(x.top, y.top, check_exact=True)
        assert list(x.top.dtypes) == list(y.top.dtypes)


def fresh(fn):
    """``fn()`` with an empty cache (a search from scratch), the cache restored after."""
    saved = dict(CACHE._items)
    CACHE.clear()
    try:
        return fn()
    finally:
        CACHE.clear()
        CACHE._items.update(saved)


@pytest.mark.parametrize("mode,strategies,top_k,execution", [
    (None, ("1d", "summa", "context"), 1, None),
    (None, ("summa",), 5, None),
    (None, ("1d", "context"), 2, {"recompute": ["selective", "full"], "interleave": [1, 2]}),
    ("paper", ("1d", "summa", "context"), 1, None),
])
def test_cached_sweeps_equal_fresh_ones(mode, strategies, top_k, execution):
    model = load_model("gpt3-175b")
    base = load_system("paper-h200" if mode else "h200")
    CACHE.clear()
    # down (answered from the first), up a little and a lot (re-evaluated), then down again
    for cap in (80.0, 79.5, 40.0, 80.0, 85.0, 84.0, 300.0, 20.0, 150.0):
        system = base.with_overrides(hbm_capacity_gb=cap)

        def run(system=system):
            return sweep(model, system, COUNTS, 1024, strategies, mode=mode, top_k=top_k,
                         execution=execution)
        same(run(), fresh(run))


def test_deeper_search_after_a_shallow_one():
    model, system = load_model("gpt3-175b"), load_system("h200")
    CACHE.clear()
    for top_k in (1, 10, 3, 50):
        def run(top_k=top_k):
            return [search(model, system, 512, 1024, "summa", top_k=top_k)]
        same(run(), fresh(run))


def test_other_inputs_are_not_shared():
    model, system = load_model("gpt3-175b"), load_system("h200")
    CACHE.clear()
    a = sweep(model, system, COUNTS, 1024, ("1d",))
    b = sweep(model, system.with_overrides(nic_bandwidth_gb_per_s=5.0), COUNTS, 1024, ("1d",))
    assert len(CACHE._items) == 2
    assert [r.top["iteration_time_s"].tolist() for r in a] != [
        r.top["iteration_time_s"].tolist() for r in b]


@pytest.mark.parametrize("seed", range(20))
def test_kept_positions_hold_the_top_k_at_every_capacity(seed):
    rng = np.random.default_rng(seed)
    n, depth = int(rng.integers(1, 300)), int(rng.integers(1, 6))
    thr = rng.integers(1, 20, n).astype(float)  # many ties
    memory = rng.integers(1, 30, n).astype(float)
    kept = keep_positions(thr, memory, depth)
    order = np.argsort(-thr, kind="stable")
    assert list(kept) == [i for i in order if i in set(kept.tolist())]  # fastest first
    for usable in range(0, 32):
        want = [i for i in order if memory[i] <= usable][:depth]
        got = [i for i in kept if memory[i] <= usable][:depth]
        assert got == want


@pytest.mark.parametrize("seed", range(10))
def test_shape_leaders_keep_what_depth_one_keeps(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    shape = np.sort(rng.integers(0, 30, n))  # runs of equal shape, as candidates come
    thr = rng.integers(1, 6, n).astype(float)  # many ties
    memory = rng.integers(1, 40, 30).astype(float)[shape]  # one memory per shape
    lead = shape_leaders(thr, shape)
    for s in np.unique(shape):
        run = np.flatnonzero(shape == s)
        assert run[np.argmax(thr[run])] in lead  # argmax: the first on ties
    assert list(lead[keep_positions(thr[lead], memory[lead], 1)]) == list(
        keep_positions(thr, memory, 1))


class Stub:
    """Stands in for a Frontier: cacheable, answers everything."""

    cacheable, usable, depth = True, 1.0, 1

    def serves(self, usable: float, top_k: int) -> bool:
        return True


def test_the_cache_is_bounded_and_least_recently_used_goes_first():
    cache = FrontierCache(entries=2)
    a, b, c = Stub(), Stub(), Stub()
    cache.put("a", a)
    cache.put("b", b)
    assert cache.get("a", 1.0, 1) is a  # now b is the least recently used
    cache.put("c", c)
    assert list(cache._items) == ["a", "c"]
    assert cache.get("b", 1.0, 1) is None


def test_threads_asking_the_same_search_evaluate_it_once(monkeypatch):
    module = sys.modules["model.engine.variant"]  # where a search evaluates
    real, calls = module._evaluate_variant, []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "_evaluate_variant", counted)
    model, system = load_model("gpt3-175b"), load_system("h200")
    CACHE.clear()
    results: list = [None] * 4

    def run(i: int) -> None:
        results[i] = sweep(model, system, COUNTS, 1024, ("summa",))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    for other in results[1:]:
        same(results[0], other)
