"""Calibration and leave-one-source-out cross-validation (model/validation/calibrate.py): the
stored table (reference/cross_validation.json, quoted by the CLI, the dashboard and the README)
is what the code computes now, the stack presets carry the fit, and no source predicts
itself — for the dense runs' GEMM efficiency and for the MoE runs' token-kernel efficiency."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from model.specs.stack import load_stack
from model.validation import REFERENCE, measurement_case
from model.validation.calibrate import (
    FP8_RATIO,
    TOKEN_GRID,
    _eta_for,
    _training_fit,
    cross_validate,
    error_table,
    fit_by_gpu,
    stack_efficiencies,
)
from model.validation.sources import RECIPES, recipe_memory

STORED = Path(__file__).resolve().parent.parent / "model/data/reference/cross_validation.json"


@pytest.fixture(scope="module")
def curves(calibration_curves):  # [Curve.of(c) for c in time_cases()], tests/conftest.py
    return calibration_curves


@pytest.fixture(scope="module")
def rows(curves):
    return pd.DataFrame(cross_validate(curves))


@pytest.fixture(scope="module")
def moe_curves(moe_calibration_curves):  # [Curve.of(c) for c in time_cases(sets=("moe",))]
    return moe_calibration_curves


@pytest.fixture(scope="module")
def moe_rows(moe_curves):
    return pd.DataFrame(cross_validate(moe_curves))


def _assert_stored(stored_sources: list[dict], rows: pd.DataFrame) -> None:
    """A table ``scripts/calibrate --write`` stored equals what the code computes now."""
    stored = pd.DataFrame(stored_sources)
    now = error_table(rows)
    assert list(stored["source"]) == list(now["source"])
    cols = ["in_sample_mean_pct", "in_sample_max_pct", "cross_validated_mean_pct",
            "cross_validated_max_pct"]
    pd.testing.assert_frame_equal(stored[cols], now[cols], atol=0.01, check_dtype=False)


def test_stored_cross_validation_is_current(rows):
    """scripts/calibrate --write stored this table; it must match the code and the data."""
    _assert_stored(json.loads(STORED.read_text())["sources"], rows)


def test_stack_presets_carry_their_fit(curves):
    for stack, fit in stack_efficiencies(curves).items():
        preset = load_stack(stack)
        for key, eta in fit.items():
            assert preset.gemm_efficiency[key]["bf16"] == pytest.approx(eta, abs=1e-4), key
            assert preset.gemm_efficiency[key]["fp8"] == pytest.approx(FP8_RATIO * eta,
                                                                      abs=1e-4)
            assert preset.attention_efficiency[key] == pytest.approx(eta, abs=1e-4)


def test_no_source_predicts_itself(curves, rows):
    """A source's cross-validated efficiency is the fit of the other sources' firm runs."""
    for source in ("megatron-bridge-25.11", "megatron-bridge-26.02"):
        others = fit_by_gpu([c for c in curves if c.case.source != source
                             and not c.case.uncertain])
        mine = rows[rows["source"] == source]
        for _, r in mine.iterrows():
            assert r["eta_cross_validated"] == pytest.approx(others[r["system"]])


def test_cross_validated_errors(rows):
    """Every firm run is predicted from other sources. Reported, not tuned: mean |error| 4.1 %,
    max 9.6 % (the issue's target: 5 % / 12 %). The bounds are that target."""
    table = error_table(rows).set_index("source")
    firm = table.loc["all firm runs"]
    assert firm["cross_validated_runs"] == firm["runs"] == 37
    assert firm["cross_validated_mean_pct"] <= 5.0
    assert firm["cross_validated_max_pct"] <= 12.0
    assert firm["cross_validated_mean_pct"] >= firm["in_sample_mean_pct"]


def test_recipe_memory_strategies_belong_to_their_runs():
    """Every run of reference/recipes.json exists, and the recipe line it was transcribed from
    agrees with the run's published micro-batch size where it states one."""
    recipes = json.loads(RECIPES.read_text())["records"]
    runs = {r["id"]: r for name in ("measurements.json", "megatron_bridge_extra.json")
            for r in json.loads((REFERENCE / name).read_text())["records"]}
    for run_id, entry in recipes.items():
        assert run_id in runs, run_id
        stated = re.search(r"(?:mbs|micro_batch_size) (\d+)", entry["recipe"])
        if stated:
            assert int(stated.group(1)) == runs[run_id]["parallel"]["microbatch"], run_id
        case = measurement_case(runs[run_id], "x")
        assert not case.skip
        for key in ("offload_layers", "recompute_layers"):
            assert case.execution[key] == entry.get(key, 0) == recipe_memory(run_id)[key]


def test_stored_moe_cross_validation_is_current(moe_rows):
    _assert_stored(json.loads(STORED.read_text())["moe"]["sources"], moe_rows)


def test_stack_presets_carry_their_moe_token_fit(moe_curves):
    """Each release's preset carries the MoE token-kernel efficiency fitted on its own MoE runs,
    within the fit's range (a few % of the HBM rate to all of it), and leaves the experts'
    GEMMs at the dense efficiency (no expert GEMM table of its own)."""
    fits = stack_efficiencies(moe_curves)
    assert set(fits) == {f"megatron-bridge-{r}" for r in
                         ("25.09", "25.11", "26.02", "26.04", "26.06", "26.08")}
    for stack, fit in fits.items():
        preset = load_stack(stack)
        assert preset.expert_gemm_efficiency == {}
        for key, eta in fit.items():
            assert preset.moe_token_efficiency[key] == pytest.approx(eta, abs=1e-4)
            assert TOKEN_GRID[0] <= eta <= 1.0, (stack, key)


def test_no_moe_release_predicts_itself(moe_curves, moe_rows):
    """A release's cross-validated token-kernel efficiency is the fit of the other releases' MoE
    runs (its patch release is the same source)."""
    assert set(moe_rows["source"]) == {f"megatron-bridge-{r}" for r in
                                       ("25.09", "25.11", "26.02", "26.04", "26.06", "26.08")}
    for source in ("megatron-bridge-26.04", "megatron-bridge-26.06"):
        others = _training_fit([c for c in moe_curves if c.case.source != source])
        mine = [c for c in moe_curves if c.case.source == source]
        assert mine
        for c, (_, r) in zip(mine, moe_rows[moe_rows["source"] == source].iterrows()):
            assert r["id"] == c.case.id
            assert r["eta_cross_validated"] == pytest.approx(_eta_for(c.case, others))


def test_moe_errors(moe_rows):
    """Reported, not tuned: in sample (per release and GPU) mean |error| 6.9 %, max 33 %;
    leaving each release out 12.9 %, max 51 % (the issue's held-out target, 8 % / 15 %, is for
    other MoE models of the same releases, not measured here). The worst: DGX B300 runs of
    26.02 whose Qwen3 run is twice as slow as 26.04's with the same layout, and H100 runs bound
    by their all-to-alls. The bounds guard against regressions."""
    table = error_table(moe_rows).set_index("source")
    firm = table.loc["all firm runs"]
    assert firm["cross_validated_runs"] == firm["runs"] == 61
    assert firm["in_sample_mean_pct"] <= 8.0
    assert firm["cross_validated_mean_pct"] <= 16.0
    assert firm["cross_validated_mean_pct"] >= firm["in_sample_mean_pct"]


def test_the_session_curves_are_those_computed_here(curves, moe_curves):
    """The shared curves (tests/conftest.py, computed in other processes) are the runs' curves
    as this process computes them, in ``time_cases`` order: a few of each set, recomputed."""
    from model.validation import time_cases
    from model.validation.calibrate import Curve

    for computed, cases in ((curves, time_cases()), (moe_curves, time_cases(sets=("moe",)))):
        assert [c.case.id for c in computed] == [c.id for c in cases]
        for i in (0, len(cases) // 2, len(cases) - 1):
            here = Curve.of(cases[i])
            np.testing.assert_array_equal(computed[i].log_time, here.log_time)
            np.testing.assert_array_equal(computed[i].fine, here.fine)
