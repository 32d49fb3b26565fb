"""Properties over random models, systems and GPU counts (hypothesis).

Each property follows from the model's structure: evaluate() is a search with every dimension
pinned; more bandwidth of any kind can only shorten every configuration's iteration (every time
term is non-decreasing in the time of a transfer, docs/model.md §4–§8); memory does not depend on
the HBM capacity, so more capacity keeps every feasible configuration feasible.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from model import load_model, load_system
from model.engine.tight import keep_bytes
from tests.unstacked import evaluate, search

GBS = 1024
REL = 1e-12
STRATEGIES = ("1d", "summa", "context")
GPUS = st.sampled_from([8, 16, 32, 64, 128, 256, 512, 1024, 2048])
DIMS = ("tp1", "tp2", "pp", "dp", "microbatch", "nb", "nv_tp1", "nv_tp2", "nv_dp", "nv_pp")
# presets shrunk to 16 layers (they differ in e, h, GQA, SwiGLU, vocab, bias/dropout, seq_len)
PRESETS = ("gpt3-1t", "gpt3-175b", "vit-era5", "llama3-8b", "llama3-70b")
SYSTEMS = ("paper-h200", "paper-b200", "h100", "b200", "gb200-nvl72", "mi300x")

FAST = settings(max_examples=25, deadline=None)


@cache
def model(name: str):
    return load_model(name).with_overrides(layers=16)


@cache
def system(name: str):
    return load_system(name)


def best_time(res) -> float | None:
    return None if res.best is None else float(res.best["iteration_time_s"])


def assert_not_slower(faster, slower) -> None:
    """The best time of ``faster`` (more bandwidth) is at most that of ``slower``."""
    a, b = best_time(faster), best_time(slower)
    assert (a is None) == (b is None)  # feasibility does not depend on bandwidth
    assert faster.feasible == slower.feasible
    if a is not None:
        assert a <= b * (1 + REL)


@FAST
@given(name=st.sampled_from(PRESETS), strategy=st.sampled_from(STRATEGIES), gpus=GPUS,
       mode=st.sampled_from([None, "paper"]), sysname=st.sampled_from(SYSTEMS),
       pick=st.integers(0, 4))
def test_evaluate_equals_a_search_row(name, strategy, gpus, mode, sysname, pick):
    m, s = model(name), system(sysname)
    res = search(m, s, gpus, GBS, strategy, mode=mode, top_k=5)
    if res.best is None:
        return
    ref = res.top.iloc[min(pick, len(res.top) - 1)]
    ev = evaluate(m, s, gpus, GBS, strategy, mode=mode, **{k: int(ref[k]) for k in DIMS})
    assert ev.fits == bool(ref["fits"])  # a search keeps tight rows too (model.engine.tight)
    for key in ref.index:
        if isinstance(ref[key], (float, np.floating)):
            same_nan = np.isnan(ref[key]) and np.isnan(ev.row[key])  # a cost without a price
            close = ev.row[key] == ref[key] or abs(ev.row[key] / ref[key] - 1) <= REL
            assert same_nan or close, key
        else:
            assert ev.row[key] == ref[key], key


@FAST
@given(name=st.sampled_from(PRESETS), strategy=st.sampled_from(STRATEGIES), gpus=GPUS,
       mode=st.sampled_from([None, "paper"]), sysname=st.sampled_from(SYSTEMS),
       which=st.sampled_from(["hbm_bandwidth_gb_per_s", "nvlink_bandwidth_gb_per_s",
                              "nic_bandwidth_gb_per_s"]),
       k=st.floats(1.0, 16.0))
def test_more_bandwidth_never_slows_the_best(name, strategy, gpus, mode, sysname, which, k):
    m, s = model(name), system(sysname)
    more = s.with_overrides(**{which: getattr(s, which) * k})
    slow = search(m, s, gpus, GBS, strategy, mode=mode, top_k=1)
    fast = search(m, more, gpus, GBS, strategy, mode=mode, top_k=1)
    assert_not_slower(fast, slow)
    if slow.best is not None:
        # and the old best configuration itself is no slower on the faster system
        pins = {d: int(slow.best[d]) for d in DIMS}
        again = search(m, more, gpus, GBS, strategy, mode=mode, pins=pins)
        assert again.candidates == 1
        assert again.best["iteration_time_s"] <= slow.best["iteration_time_s"] * (1 + REL)


@FAST
@given(name=st.sampled_from(PRESETS), strategy=st.sampled_from(STRATEGIES), gpus=GPUS,
       mode=st.sampled_from([None, "paper"]), capacity=st.floats(20.0, 200.0),
       k=st.floats(1.0, 4.0))
def test_more_hbm_capacity_keeps_everything_feasible(name, strategy, gpus, mode, capacity, k):
    m, s = model(name), system("paper-h200")
    small = s.with_overrides(hbm_capacity_gb=capacity)
    large = s.with_overrides(hbm_capacity_gb=capacity * k)
    a = search(m, small, gpus, GBS, strategy, mode=mode, top_k=5)
    b = search(m, large, gpus, GBS, strategy, mode=mode, top_k=5)
    assert a.candidates == b.candidates
    assert a.feasible <= b.feasible
    if a.best is None:
        return
    assert b.best["iteration_time_s"] <= a.best["iteration_time_s"] * (1 + REL)
    for _, row in a.top.iterrows():  # each configuration that fit still fits, unchanged
        pins = {d: int(row[d]) for d in DIMS}
        again = search(m, large, gpus, GBS, strategy, mode=mode, pins=pins)
        assert again.candidates == 1 and again.feasible == 1
        assert again.best["memory_gb"] == row["memory_gb"]
        assert again.best["iteration_time_s"] == row["iteration_time_s"]


@FAST
@given(name=st.sampled_from(PRESETS), strategy=st.sampled_from(STRATEGIES), gpus=GPUS,
       sysname=st.sampled_from(SYSTEMS), nvs=st.sampled_from([None, 4, 8, 72]))
def test_default_results_are_finite(name, strategy, gpus, sysname, nvs):
    m, s = model(name), system(sysname)
    res = search(m, s, gpus, GBS, strategy, nvs=nvs, top_k=10)
    top = res.top
    assert list(top.columns)  # the schema is there even when nothing fits
    numeric = top.select_dtypes(include="number")
    # what the system gives no figure for (the paper-* presets: no power or price) is NaN
    for column, unknown in (("energy_mwh", s.tdp_w == 0), ("cost_usd", s.usd_per_gpu_hour == 0)):
        if unknown:
            assert top[column].isna().all(), column
            numeric = numeric.drop(columns=column)
    assert not numeric.empty or top.empty
    assert np.isfinite(numeric.to_numpy(dtype=float)).all()
    if not top.empty:
        positive = ["samples_per_s", "iteration_time_s", "t_compute_s", "memory_gb",
                    "weights_gb", "activations_gb", "tflops_per_gpu"]
        assert (top[positive] > 0).all().all()
        nonneg = ["t_memory_s", "t_tp_comm_s", "t_pp_comm_s", "t_dp_comm_s", "t_bubble_s"]
        assert (top[nonneg] >= 0).all().all()
        assert (top["mfu"] <= top["hfu"] * (1 + REL)).all()
        assert (top["hfu"] < 1).all()  # 80 % FLOP efficiency plus overheads
        assert pd.api.types.is_bool_dtype(top["fits"])
        # each row fits, or is tight: within the memory model's interval (model.engine.tight)
        assert (top["memory_gb"] * 1e9 <= keep_bytes(s.hbm_capacity_gb * 1e9)).all()
