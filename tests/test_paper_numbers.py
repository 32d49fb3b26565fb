"""The paper's published numbers (docs/model.md §12.1): the best 1D, 2D and ViT configurations
and their samples per second in the paper mode, and one pipeline's communication by hand.
Split from tests/test_formulas.py, whose constants and paper-h200 fixture these use."""

from __future__ import annotations

import pytest
import test_formulas
from test_formulas import REL, S

from model import load_model
from tests.unstacked import evaluate, search

h200 = test_formulas.h200  # its fixture (the paper's H200), found here by pytest


@pytest.fixture(scope="module")
def gpt3_1t():
    return load_model("gpt3-1t")


@pytest.mark.parametrize("gpus,samples,dp,tp,pp,placement", [
    (512, 28.62912724154006, 2, 4, 64, (4, 1, 2)),
    (4096, 187.46854165940235, 8, 4, 128, (4, 1, 2)),
    (16384, 550.4501567426373, 32, 8, 64, (8, 1, 1)),
])
def test_paper_1d_reference(h200, gpt3_1t, gpus, samples, dp, tp, pp, placement):
    res = search(gpt3_1t, h200, gpus, 4096, "1d", mode="paper", nvs=8)
    best = res.best
    assert best["samples_per_s"] == pytest.approx(samples, rel=REL)
    assert (best["dp"], best["tp1"], best["tp2"], best["pp"], best["microbatch"]) == (
        dp, tp, 1, pp, 1)
    assert (best["nv_tp1"], best["nv_dp"], best["nv_pp"]) == placement
    assert best["samples_per_s"] * best["iteration_time_s"] == pytest.approx(4096, rel=REL)


def test_paper_1d_512_pipeline_comm_by_hand(h200, gpt3_1t):
    """t_pp = 2·n_mb·(fast/(pp−1))·(λ_f + V/b_f), slow links free (paper bug 2),
    docs/model.md §12.1."""
    row = evaluate(gpt3_1t, h200, 512, 4096, "1d", tp1=4, pp=64, dp=2, microbatch=1, nv_tp1=4,
                   nv_dp=1, nv_pp=2, mode="paper", nvs=8).row
    volume = S * 1 * (2048 // 4) * 25600  # 0.0262144 GB: the block output on l/tp rows
    assert volume == 0.0262144e9
    n_mb, fast = 4096 // 2, (64 - 1) - int(64 / 2 - 1)
    assert fast == 32
    expected = 2 * n_mb * (fast / 63) * (2.5e-6 + volume / 315e9)
    assert row["t_pp_comm_s"] == pytest.approx(expected, rel=REL)
    assert row["t_pp_comm_s"] == pytest.approx(0.17834, abs=5e-6)
    assert row["samples_per_s"] == pytest.approx(28.62912724154006, rel=REL)


@pytest.mark.parametrize("gpus,strategy,published", [
    (512, "summa", 30.25), (512, "context", 29.38),
    (4096, "summa", 203.53), (4096, "context", 200.99),
])
def test_paper_2d_reference(h200, gpt3_1t, gpus, strategy, published):
    """docs/model.md §12.1 (published to two decimals)."""
    best = search(gpt3_1t, h200, gpus, 4096, strategy, mode="paper", nvs=8).best
    assert best["samples_per_s"] == pytest.approx(published, abs=0.005)


def test_paper_vit_reference(h200):
    vit = load_model("vit-era5")
    for strategy, published in (("summa", 31.97), ("context", 33.82)):
        best = search(vit, h200, 4096, 4096, strategy, mode="paper", nvs=8).best
        assert best["samples_per_s"] == pytest.approx(published, abs=0.005)
    res = search(vit, h200, 4096, 4096, "1d", mode="paper", nvs=8)
    assert res.best is None and res.feasible == 0 and res.candidates > 0
