"""Model-side helpers of the dashboard's headlines and explanations: which strategies production
stacks ship, parallel efficiency against the most efficient count and the knee, the
launch-overhead bound of an op, why a GPU count has no configuration, and the cross-validation
table read from its JSON."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from model import ModelError, load_model, load_system
from model.engine.efficiency import fastest_per_count, knee, parallel_efficiency
from model.engine.rules import divisors, why_no_candidates
from model.physics.strategies import IDEALISED, PRODUCTION, TRAITS, build_strategy
from model.studies.sweep import best_frame
from model.validation.calibrate import ALL_FIRM_PYTORCH
from model.validation.cross_validation import (
    ALL_FIRM,
    cross_validation_runs,
    cross_validation_sources,
    release_family,
)
from model.validation.error_bars import CROSS_VALIDATION
from tests.unstacked import evaluate, sweep


# --------------------------------------------------------------------------- strategies
def test_production_and_idealised_strategies():
    assert PRODUCTION == ("1d", "context") and IDEALISED == ("summa",)
    for name in PRODUCTION:
        assert "Megatron-LM" in TRAITS[name].implemented_by and TRAITS[name].production
    assert TRAITS["summa"].implemented_by == () and "idealised" in TRAITS["summa"].provenance


# --------------------------------------------------------------------------- efficiency, knee
def _frame(rates: dict[str, list[float]], counts: list[int]) -> pd.DataFrame:
    rows = [{"strategy": s, "gpus": n, "samples_per_s": r}
            for s, values in rates.items() for n, r in zip(counts, values)]
    return pd.DataFrame(rows)


COUNTS = [64, 128, 256, 512, 1024, 2048]
# per GPU: 1d peaks at 128 GPUs (1.0), then 0.9, 0.7, 0.55, 0.4 of it; summa is faster
RATES = {"1d": [48.0, 128.0, 230.4, 358.4, 563.2, 819.2],
         "summa": [70.0, 140.0, 270.0, 500.0, 900.0, 1600.0]}


def test_efficiency_is_against_the_most_efficient_count_of_each_curve():
    eff = parallel_efficiency(_frame(RATES, COUNTS))
    one = eff[eff["strategy"] == "1d"].set_index("gpus")
    assert (one["baseline_gpus"] == 128).all()
    np.testing.assert_allclose(one["efficiency"], [0.75, 1.0, 0.9, 0.7, 0.55, 0.4])
    np.testing.assert_allclose(one["speedup"], np.array(RATES["1d"]) / 128.0)
    np.testing.assert_allclose(one["ideal_speedup"], np.array(COUNTS) / 128)
    assert eff["efficiency"].max() == pytest.approx(1.0)  # never superlinear by construction


def test_knee_moves_with_the_threshold_and_uses_production_strategies():
    frame = _frame(RATES, COUNTS)
    at = {t: knee(frame, t) for t in (0.5, 0.6, 0.8, 0.95, 1.0)}
    assert {t: k.gpus for t, k in at.items()} == {0.5: 1024, 0.6: 512, 0.8: 256, 0.95: 128,
                                                  1.0: 128}
    assert all(k.strategy == "1d" and k.baseline_gpus == 128 for k in at.values())
    assert at[0.5].efficiency == pytest.approx(0.55)
    # every strategy: the best per count is summa's, whose per-GPU rate peaks at 2048
    assert knee(frame, 0.5, strategies=None).gpus == 2048
    assert knee(frame[frame["strategy"] == "summa"], 0.5) is None  # no production row


def test_knee_stops_at_the_first_dip_below_the_threshold():
    frame = _frame({"1d": [100.0, 150.0, 400.0]}, [100, 200, 400])  # eff 1, 0.75, 1
    assert knee(frame, 0.8).gpus == 100
    assert knee(frame, 0.7).gpus == 400


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, "half", None, float("nan")])
def test_knee_threshold_is_validated(bad):
    with pytest.raises(ModelError, match="threshold"):
        knee(_frame(RATES, COUNTS), bad)


def test_fastest_per_count_keeps_the_fastest_strategy():
    best = fastest_per_count(_frame(RATES, COUNTS))
    assert best["strategy"].tolist() == ["summa"] * 6
    assert fastest_per_count(pd.DataFrame()).empty and knee(pd.DataFrame()) is None


def test_knee_of_a_real_sweep():
    m, s = load_model("gpt3-1t"), load_system("h200")
    frame = best_frame(sweep(m, s, [2 ** k for k in range(7, 15)], 4096))
    k = knee(frame, 0.5)
    assert k is not None and k.strategy in PRODUCTION
    eff = parallel_efficiency(fastest_per_count(frame, PRODUCTION), by_strategy=False)
    assert k.gpus >= k.baseline_gpus
    above = eff[(eff["gpus"] >= k.baseline_gpus) & (eff["gpus"] <= k.gpus)]
    assert (above["efficiency"] >= 0.5).all()
    nxt = eff[eff["gpus"] > k.gpus]
    assert nxt.empty or nxt["efficiency"].iloc[0] < 0.5
    assert knee(frame, 0.9).gpus <= k.gpus


# --------------------------------------------------------------------------- op bound
def test_small_elementwise_ops_are_bounded_by_launch_overhead():
    m, s = load_model("gpt3-1t"), load_system("h200")
    ops = evaluate(m, s, 4096, 4096, "summa", tp1=8, tp2=1, pp=32, dp=16,
                   microbatch=1).ops.set_index("op")
    for op in ("mlp/fc1_bias", "attn/out_bias", "mlp/dropout", "attn/dropout"):
        row = ops.loc[op]
        assert row["intensity_flop_per_byte"] < 1.0
        launch = 2 * s.kernel_overhead_s
        assert launch > row["t_compute_s"] - launch  # most of its "compute" is the launch
        assert row["bound"] == "overhead", op
    assert ops.loc["mlp/fc1", "bound"] == "compute"  # a large GEMM stays compute-bound
    assert ops.loc["mlp/act", "bound"] == "memory"  # its HBM time exceeds launch + FLOPs
    # without a launch overhead the same ops are memory-bound (0.2-0.5 FLOP/B)
    lean = evaluate(m, s.with_overrides(kernel_overhead_s=0.0), 4096, 4096, "summa", tp1=8,
                    tp2=1, pp=32, dp=16, microbatch=1).ops.set_index("op")
    assert lean.loc["mlp/dropout", "bound"] == "memory"


# --------------------------------------------------------------------------- no configuration
def test_divisors():
    assert divisors(1).tolist() == [1]
    assert divisors(1023).tolist() == [1, 3, 11, 31, 33, 93, 341, 1023]
    assert divisors(16384).tolist() == [2 ** k for k in range(15)]


@pytest.mark.parametrize("strategy", ["1d", "summa", "context"])
def test_a_count_that_cannot_be_factored_is_explained(strategy):
    m = load_model("gpt3-1t")
    text = why_no_candidates(m, build_strategy(strategy, m), 1023, 4096, 8)
    assert text.startswith(f"no {strategy} configuration exists on 1023 GPUs")
    assert "pp = 1023" in text and "more stages than layers=128" in text


def test_the_closest_factorisation_takes_what_it_can():
    m = load_model("gpt3-1t").with_overrides(layers=8)
    text = why_no_candidates(m, build_strategy("1d", m), 4608, 4096, 72)
    assert "tp1·tp2·dp = 1·1·512" in text and "pp = 9" in text and "layers=8" in text


# --------------------------------------------------------------------------- cross-validation
def test_cross_validation_table_is_the_json():
    data = json.loads(CROSS_VALIDATION.read_text())
    table = cross_validation_sources()
    assert table["source"].tolist()[-1] == ALL_FIRM
    stored = {s["source"]: s for s in data["sources"]}
    assert set(table["source"]) == set(stored)
    for row in table.to_dict("records"):
        for key in ("runs", "in_sample_mean_pct", "in_sample_max_pct",
                    "cross_validated_mean_pct", "cross_validated_max_pct"):
            assert row[key] == stored[row["source"]][key]


def test_cross_validation_readings():
    table = cross_validation_sources().set_index("source")
    assert release_family("megatron-bridge-25.11") == "megatron-bridge"
    assert release_family("korthikanti-2022") is None
    bridge = [s for s in table.index if s.startswith("megatron-bridge-")]
    assert len(bridge) >= 2
    for s in bridge:
        assert set(table.loc[s, "same_recipes"]) == set(bridge) - {s}
        assert "repeatability" in table.loc[s, "reading"]
    for s in table.index[table["uncertain"]]:
        assert not table.loc[s, "fitted"] and "never fitted" in table.loc[s, "reading"]
    runs = cross_validation_runs()
    # the summary row is the Megatron family's firm runs; the PyTorch family has its own
    pytorch = runs["family"] == "pytorch"
    firm = runs[~runs["uncertain"] & ~pytorch]
    assert firm["cross_validated_error_pct"].abs().mean() == pytest.approx(
        table.loc[ALL_FIRM, "cross_validated_mean_pct"], rel=1e-12)
    mine = runs[~runs["uncertain"] & pytorch]
    assert mine["cross_validated_error_pct"].abs().mean() == pytest.approx(
        table.loc[ALL_FIRM_PYTORCH, "cross_validated_mean_pct"], rel=1e-12)
