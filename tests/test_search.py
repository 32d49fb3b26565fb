"""The search: space sizes (docs/model.md §11), pins, budget, determinism, ranking, bad
inputs, feasibility (that evaluate() reproduces a search row: tests/test_search_rows.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from model import ModelError, load_model, load_system
from model.engine.tight import memory_radius
from tests.unstacked import evaluate, search

REL = 1e-12
DIMS = ("tp1", "tp2", "pp", "dp", "microbatch", "nb")
PLACEMENT = ("nv_tp1", "nv_tp2", "nv_dp", "nv_pp")


@pytest.fixture(scope="module")
def h200():
    return load_system("paper-h200")


@pytest.fixture(scope="module")
def gpt3():
    return load_model("gpt3-1t")


@pytest.fixture(scope="module")
def vit():
    return load_model("vit-era5")


def evaluate_row(model, system, row, mode, nvs=None):
    """evaluate() of a search row's configuration, every dimension and placement given."""
    kw = {k: int(row[k]) for k in DIMS + PLACEMENT}
    return evaluate(model, system, int(row["gpus"]), GBS, row["strategy"], mode=mode,
                    nvs=nvs, **kw)


GBS = 4096


# ---------------------------------------------------------------------------------------------
# Search-space sizes (model/data/reference/paper_results.json 'candidate_counts': candidates
# after all filters, before the memory check)


@pytest.mark.parametrize("name,nvs,gpus,strategy,count", [
    ("gpt3-1t", 8, 4096, "1d", 2544),
    ("gpt3-1t", 8, 4096, "summa", 59390),
    ("gpt3-1t", 8, 4096, "context", 22712),
    ("gpt3-1t", 8, 512, "1d", 2324),
    ("vit-era5", 64, 16384, "1d", 1984),
    ("vit-era5", 64, 16384, "summa", 70867),
    ("vit-era5", 64, 16384, "context", 45355),
])
def test_candidate_counts_match_the_paper(h200, name, nvs, gpus, strategy, count):
    res = search(load_model(name), h200, gpus, GBS, strategy, mode="paper", nvs=nvs)
    assert res.candidates == count
    assert 0 <= res.feasible <= res.candidates


# ---------------------------------------------------------------------------------------------
# Pins


@pytest.mark.parametrize("pins", [
    {"tp1": 4}, {"tp2": 2}, {"pp": 32}, {"dp": 16}, {"microbatch": 2}, {"nb": 8},
    {"nv_pp": 2}, {"nv_tp1": 1, "nv_dp": 8}, {"tp1": 8, "tp2": 4, "microbatch": 1},
])
def test_every_top_row_has_the_pinned_values(h200, gpt3, pins):
    free = search(gpt3, h200, 4096, GBS, "summa", mode="paper", nvs=8)
    res = search(gpt3, h200, 4096, GBS, "summa", mode="paper", nvs=8, pins=pins)
    assert len(res.top) > 0
    for key, value in pins.items():
        assert (res.top[key] == value).all(), key
    assert res.candidates < free.candidates
    # a pinned search looks at a subset: it can never beat the free one
    assert res.best["samples_per_s"] <= free.best["samples_per_s"] * (1 + REL)


def test_pinning_every_dimension_leaves_one_placement_family(h200, gpt3):
    pins = dict(tp1=4, pp=64, dp=2, microbatch=1)
    res = search(gpt3, h200, 512, GBS, "1d", mode="paper", nvs=8, pins=pins, top_k=100)
    # (nv_tp1, nv_dp, nv_pp) with product 8 dividing (4, 2, 64), nv_tp2 = 1: six placements
    assert res.candidates == 6
    top = res.top
    for key, value in {**pins, "tp2": 1, "nb": 1}.items():
        assert (top[key] == value).all()
    assert len(top) == res.feasible
    placements = {tuple(int(x) for x in r) for r in top[list(PLACEMENT)].to_numpy()}
    assert len(placements) == len(top)
    for a, b, c, d in placements:
        assert a * b * c * d == 8 and 4 % a == 0 and b == 1 and 2 % c == 0 and 64 % d == 0
    # the best of the family is the paper's 512-GPU optimum (docs/model.md §12.1)
    assert tuple(top.iloc[0][["nv_tp1", "nv_dp", "nv_pp"]]) == (4, 1, 2)
    one = search(gpt3, h200, 512, GBS, "1d", mode="paper", nvs=8,
                 pins={**pins, "nv_tp1": 4, "nv_tp2": 1, "nv_dp": 1, "nv_pp": 2})
    assert one.candidates == 1
    pd.testing.assert_series_equal(one.best, top.iloc[0], check_names=False)


@pytest.mark.parametrize("kw,message", [
    (dict(gpus=384, tp1=3, pp=64, dp=2, microbatch=1), "does not divide heads"),
    (dict(gpus=512, tp1=4, pp=16, dp=8, microbatch=1, nv_pp=3), "nv_pp=3 does not divide"),
    (dict(gpus=384, tp1=4, pp=3, dp=32, microbatch=1), "pp=3 does not divide layers=128"),
    (dict(gpus=512, tp1=4, pp=64, dp=2, microbatch=3), "microbatch=3 does not divide"),
    (dict(gpus=768, tp1=4, pp=64, dp=3, microbatch=1), "dp=3 does not divide"),
])
def test_evaluate_names_the_broken_rule(h200, gpt3, kw, message):
    with pytest.raises(ModelError, match=message):
        evaluate(gpt3, h200, global_batch=GBS, strategy="1d", mode="paper", nvs=8, **kw)


def test_evaluate_checks_the_gpu_product(h200, gpt3):
    with pytest.raises(ModelError, match="must equal gpus"):
        evaluate(gpt3, h200, 512, GBS, "1d", tp1=4, pp=64, dp=4, microbatch=1)


def test_pin_that_matches_nothing_gives_an_empty_search(h200, gpt3):
    res = search(gpt3, h200, 512, GBS, "1d", mode="paper", nvs=8, pins={"tp1": 3})
    assert res.candidates == 0 and res.feasible == 0
    assert res.best is None and res.top.empty


def test_budget(h200, gpt3):
    with pytest.raises(ModelError, match="budget"):
        search(gpt3, h200, 4096, GBS, "summa", mode="paper", nvs=8, budget=10)
    # the budget counts candidates: exactly the space size passes, one less fails
    res = search(gpt3, h200, 4096, GBS, "1d", mode="paper", nvs=8, budget=2544)
    assert res.candidates == 2544
    with pytest.raises(ModelError, match="budget"):
        search(gpt3, h200, 4096, GBS, "1d", mode="paper", nvs=8, budget=2543)


# ---------------------------------------------------------------------------------------------
# Determinism and ranking


@pytest.mark.parametrize("strategy", ["1d", "summa", "context"])
@pytest.mark.parametrize("mode", [None, "paper"])
def test_search_is_deterministic_and_ranked(h200, gpt3, strategy, mode):
    a = search(gpt3, h200, 1024, GBS, strategy, mode=mode, nvs=8, top_k=25)
    b = search(gpt3, h200, 1024, GBS, strategy, mode=mode, nvs=8, top_k=25)
    pd.testing.assert_frame_equal(a.top, b.top)
    assert (a.candidates, a.feasible) == (b.candidates, b.feasible)
    top = a.top
    assert len(top) == min(25, a.feasible) > 0
    assert 0 < a.feasible <= a.candidates
    thr = top["samples_per_s"].to_numpy()
    assert (np.diff(thr) <= 0).all()
    # fits, or tight: within the memory model's interval of the usable HBM (model.engine.tight)
    assert (top["memory_gb"] <= top["hbm_capacity_gb"] * math.exp(memory_radius())).all()
    assert (top["hbm_capacity_gb"] == h200.hbm_capacity_gb).all()
    assert top["fits"].any()
    assert (top["gpus"] == 1024).all()
    assert (top["tp1"] * top["tp2"] * top["pp"] * top["dp"] == 1024).all()
    assert (top["n_microbatches"] * top["microbatch"] * top["dp"] == GBS).all()
    np.testing.assert_allclose(thr * top["iteration_time_s"], GBS, rtol=REL)


def test_top_k_is_a_prefix_of_a_longer_ranking(h200, gpt3):
    short = search(gpt3, h200, 1024, GBS, "context", mode="paper", nvs=8, top_k=3).top
    long = search(gpt3, h200, 1024, GBS, "context", mode="paper", nvs=8, top_k=30).top
    np.testing.assert_array_equal(short["samples_per_s"], long["samples_per_s"][:3])


# ---------------------------------------------------------------------------------------------
# Bad inputs


@pytest.mark.parametrize("kw,message", [
    (dict(gpus=0), "gpus"),
    (dict(gpus=-8), "gpus"),
    (dict(gpus=8.0), "gpus"),
    (dict(gpus=True), "gpus"),
    (dict(global_batch=-1), "global_batch"),
    (dict(global_batch=0), "global_batch"),
    (dict(strategy="3d"), "unknown strategy"),
    (dict(mode="foo"), "mode"),
    (dict(top_k=0), "top_k"),
    (dict(pins={"tp": 4}), "unknown pin 'tp'"),
    (dict(pins={"tp1": 0}), "pin 'tp1'"),
    (dict(pins={"pp": 2.0}), "pin 'pp'"),
])
def test_search_rejects_bad_inputs(h200, gpt3, kw, message):
    args = dict(gpus=64, global_batch=GBS, strategy="1d")
    args.update(kw)
    with pytest.raises(ModelError, match=message):
        search(gpt3, h200, **args)


@pytest.mark.parametrize("kw,message", [
    (dict(gpus=0, tp1=1, pp=1, dp=1), "gpus"),
    (dict(global_batch=-1), "global_batch"),
    (dict(strategy="foo"), "unknown strategy"),
    (dict(mode="foo"), "mode"),
    (dict(tp2=2), "no tp2"),
    (dict(microbatch=0), "microbatch"),
])
def test_evaluate_rejects_bad_inputs(h200, gpt3, kw, message):
    args = dict(gpus=8, global_batch=GBS, strategy="1d", tp1=8, pp=1, dp=1, microbatch=1,
                mode="paper")
    args.update(kw)
    with pytest.raises(ModelError, match=message):
        evaluate(gpt3, h200, **args)


def test_aliases_name_the_same_strategy(h200, gpt3):
    a = search(gpt3, h200, 512, GBS, "2d-seqp", mode="paper", nvs=8)
    b = search(gpt3, h200, 512, GBS, "context", mode="paper", nvs=8)
    assert a.strategy == b.strategy == "context"
    pd.testing.assert_frame_equal(a.top, b.top)


# ---------------------------------------------------------------------------------------------
# Feasibility


def test_vit_1d_is_infeasible_in_paper_mode(vit):
    """docs/model.md §12.1: vit_era5 with 1D never fits (activations at l = 64800)."""
    b200 = load_system("paper-b200")
    res = search(vit, b200, 4096, GBS, "1d", mode="paper")
    assert res.candidates > 0
    assert res.feasible == 0
    assert res.best is None and res.top.empty
    # the same space with unlimited HBM is all feasible: memory, not the rules, excludes it
    roomy = search(vit, b200.with_overrides(hbm_capacity_gb=1e5), 4096, GBS, "1d",
                   mode="paper")
    assert roomy.candidates == res.candidates and roomy.feasible == res.candidates


# ---------------------------------------------------------------------------------------------
# Fixes found by these tests


def test_tied_embeddings_hold_the_head_once_but_keep_the_final_norm(h200):
    from model import transformer_from_dict
    m = transformer_from_dict(dict(name="tied", layers=2, hidden=256, heads=4, seq_len=512,
                                   vocab=1000, tied_embeddings=True, tokens=1e9))
    row = evaluate(m, h200, 1, 8, "1d", tp1=1, pp=1, dp=1, microbatch=1).row
    assert row["weights_gb"] * 1e9 == pytest.approx(2 * m.params, rel=1e-12)
    # on two stages each end holds its own copy of the matrix; the binding stage is reported
    two = evaluate(m, h200, 2, 8, "1d", tp1=1, pp=2, dp=1, microbatch=1).row
    block_bytes = 2 * m.params_per_block
    first = block_bytes + 2 * m.vocab * m.hidden  # embedding
    last = block_bytes + 2 * (m.vocab * m.hidden + 2 * m.hidden)  # head and final norm
    assert two["weights_gb"] * 1e9 in (pytest.approx(first, rel=1e-12),
                                       pytest.approx(last, rel=1e-12))


def test_pins_of_dimensions_a_strategy_lacks_match_nothing(h200, gpt3):
    assert search(gpt3, h200, 512, 4096, "1d", pins={"tp2": 2}).candidates == 0
    assert search(gpt3, h200, 512, 4096, "context", pins={"nb": 4}).candidates == 0
    assert search(gpt3, h200, 512, 4096, "1d", pins={"nb": 1}).candidates > 0
    with pytest.raises(ModelError):
        evaluate(gpt3, h200, 512, 4096, "1d", tp1=4, pp=64, dp=2, microbatch=1, nb=4)


def test_overrides_keep_default_sizes_consistent():
    m = load_model("gpt3-1t")
    smaller = m.with_overrides(hidden=1024, heads=8)
    assert (smaller.ffn, smaller.kv_heads) == (4096, 8)
    llama = load_model("llama3-8b").with_overrides(heads=64)
    assert llama.kv_heads == 8 and llama.ffn == 14336  # explicit sizes stay
    assert m.with_overrides(samples=1e6).training_samples == 1e6


def test_flat_slow_rings_use_every_nic_outside_paper_mode():
    from model.physics.collectives import Collective, collective_time_s
    s = load_system("paper-h200").with_overrides(nics_per_gpu=2.0)
    one = s.with_overrides(nics_per_gpu=1.0)
    v, n = 1e9, 8
    two_nics = collective_time_s(Collective.ALLGATHER, v, n, 1, s)
    one_nic = collective_time_s(Collective.ALLGATHER, v, n, 1, one)
    lat = s.network_latency_s * (n - 1)
    assert two_nics - lat == pytest.approx((one_nic - lat) / 2, rel=1e-12)
    assert collective_time_s(Collective.ALLGATHER, v, n, 1, s, paper=True) == pytest.approx(
        one_nic, rel=1e-12)


def test_evaluate_of_a_config_that_does_not_fit_picks_its_fastest_placement():
    """A configuration over the HBM limit is still reported, with its best placement."""
    m, s = load_model("megatron-1t"), load_system("a100").with_overrides(hbm_capacity_gb=40.0)
    from tests.unstacked import design_space
    pins = dict(tp1=8, pp=64, dp=1, microbatch=1)
    every = design_space(m, s, 512, 512, "1d", pins=pins)
    assert not every["fits"].any()
    ev = evaluate(m, s, 512, 512, "1d", **pins)
    assert not ev.fits
    assert ev.row["iteration_time_s"] == pytest.approx(every["iteration_time_s"].min(), rel=1e-12)
    assert ev.row["nv_tp1"] == 8  # tensor parallelism inside the NVLink domain


def test_uneven_pipeline_stages_outside_the_paper_mode():
    """126 layers on 16 stages: the fullest stage holds ceil(126/16) = 8 blocks; the paper mode
    (equal stages) has no such configuration."""
    m, s = load_model("llama3-405b"), load_system("h100")
    ev = evaluate(m, s, 1024, 512, "1d", tp1=8, pp=16, dp=8, microbatch=1)
    assert ev.row["layers_per_stage"] == 8
    eight = evaluate(m.with_overrides(layers=128), s, 1024, 512, "1d", tp1=8, pp=16, dp=8,
                     microbatch=1).row
    assert ev.row["iteration_time_s"] == pytest.approx(eight["iteration_time_s"], rel=0.02)
    with pytest.raises(ModelError, match="does not divide layers"):
        evaluate(m, s, 1024, 512, "1d", tp1=8, pp=16, dp=8, microbatch=1, mode="paper")
    # without a stack only tp1 16 (two NVLink domains) fits: a layout the production rules
    # refuse (model/engine/production.py), so relax them to see the uneven stages searched
    assert search(m, s, 1024, 512, "1d", pins={"pp": 16},
                  execution={"production_layout": False}).best is not None
