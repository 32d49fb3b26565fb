"""Partial (block) recompute: r layers of each pipeline stage recompute fully, the rest keep
their activations (Megatron's --recompute-method block --recompute-num-layers r)."""

from __future__ import annotations

import pytest

from model import ModelError, load_model, load_system
from tests.unstacked import evaluate, search

CFG = dict(tp1=4, pp=8, dp=2, microbatch=1)  # llama3-70b: 10 layers per stage


def _row(**execution):
    m, s = load_model("llama3-70b"), load_system("h100")
    return evaluate(m, s, 64, 128, "1d", execution=execution, **CFG).row


def test_zero_layers_is_selective_and_all_layers_is_full_recompute():
    selective, full = _row(), _row(recompute="full")
    assert _row(recompute_layers=0)["iteration_time_s"] == selective["iteration_time_s"]
    for r in (10, 50):  # capped at the stage's 10 layers
        every = _row(recompute_layers=r)
        assert every["iteration_time_s"] == pytest.approx(full["iteration_time_s"], rel=1e-12)
        assert every["activations_gb"] == pytest.approx(full["activations_gb"], rel=1e-12)
        assert every["hardware_tflops_per_gpu"] == pytest.approx(
            full["hardware_tflops_per_gpu"], rel=1e-12)


def test_some_layers_lie_in_between_in_proportion():
    sel, full, half = _row(), _row(recompute="full"), _row(recompute_layers=5)
    for col in ("iteration_time_s", "activations_gb", "t_compute_s"):
        assert half[col] == pytest.approx((sel[col] + full[col]) / 2, rel=0.02), col
    assert sel["activations_gb"] > half["activations_gb"] > full["activations_gb"]
    assert half["recompute_layers"] == 5


def test_the_search_takes_a_list_and_full_recompute_refuses_it():
    m, s = load_model("llama3-70b"), load_system("h100")
    res = search(m, s, 64, 128, "1d", top_k=50, pins={"pp": 8},
                 execution={"recompute_layers": [0, 2, 10]})
    assert set(res.top["recompute_layers"]) <= {0, 2, 10} and len(res.top) > 0
    with pytest.raises(ModelError, match="recompute_layers"):
        _row(recompute="full", recompute_layers=2)
    with pytest.raises(ModelError, match="recompute_layers"):
        _row(recompute_layers=-1)


def test_the_dashboard_scenario_carries_it_and_names_the_control_on_error():
    from dashboard.controls.scenario import execution_of, validate_scenario

    scn, errors = validate_scenario({"recompute_layers": 3})
    assert errors == {} and execution_of(scn)["recompute_layers"] == 3
    scn, errors = validate_scenario({"recompute": "full", "recompute_layers": 3})
    assert scn is None and "full" in errors["recompute_layers"]
