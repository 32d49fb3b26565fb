"""Cost, energy and goodput (docs/model.md §15): closed forms, Young and Daly against Daly's
worked examples, the inputs' validation and every result row's cost columns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model import ModelError, evaluate, load_model, load_system, search
from model.physics import energy, goodput
from model.specs.cost import LLAMA3_FAILURES_PER_GPU_HOUR, Costs, resolve_costs
from model.specs.hardware import list_systems

HOUR = 3600.0
REAL = ("a100", "h100", "h200", "h800", "b200", "b300", "gb200-nvl72", "gb300-nvl72",
        "mi300x")


# --- closed forms --------------------------------------------------------------------------
def test_gpu_hours_energy_and_rental_cost():
    hours = energy.gpu_hours(1024, 10.0)
    assert hours == 1024 * 240
    # 1000 W per GPU, node share 1.8, PUE 1.5: 2.7 kW per GPU at the meter
    assert energy.energy_mwh(hours, 1000.0, 1.8, 1.5) == pytest.approx(hours * 2.7 / 1000)
    assert energy.rental_usd(hours, 2.5) == pytest.approx(hours * 2.5)
    assert math.isnan(energy.rental_usd(hours, 0.0))  # no price: unknown, not free


def test_purchase_cost_is_amortization_plus_electricity():
    hours, mwh = 8766.0 * 5, 100.0  # one GPU for five years
    usd = energy.purchase_usd(hours, 30_000.0, 5.0, mwh, 0.1)
    assert usd == pytest.approx(30_000.0 + 100.0 * 1000 * 0.1)
    assert math.isnan(energy.purchase_usd(hours, 0.0, 5.0, mwh, 0.1))


def test_result_rows_carry_the_closed_forms():
    m, s = load_model("gpt3-175b"), load_system("h100")
    best = search(m, s, 1024, 1536, "1d", top_k=1).best
    hours = 1024 * best["train_days"] * 24
    assert best["gpu_hours"] == pytest.approx(hours)
    assert best["energy_mwh"] == pytest.approx(hours * 700 * 1.82 * 1.58 / 1e6)
    assert best["cost_usd"] == pytest.approx(hours * 4.916)
    assert best["pricing"] == "rental"


def test_purchase_pricing_and_overrides_through_the_api():
    m, s = load_model("gpt3-175b"), load_system("h100")
    costs = {"pricing": "purchase", "pue": 1.2, "usd_per_kwh": 0.1, "tdp_w": 1000.0,
             "amortization_years": 4.0}
    best = search(m, s, 1024, 1536, "1d", top_k=1, costs=costs).best
    hours = best["gpu_hours"]
    mwh = hours * 1000 * 1.82 * 1.2 / 1e6
    assert best["energy_mwh"] == pytest.approx(mwh)
    assert best["cost_usd"] == pytest.approx(hours * 30_000 / (4 * 8766) + mwh * 1000 * 0.1)
    ev = evaluate(m, s, 1024, 1536, "1d", costs=costs,
                  **{k: int(best[k]) for k in ("tp1", "pp", "dp", "microbatch")})
    assert ev.row["cost_usd"] == pytest.approx(best["cost_usd"])


def test_costs_do_not_change_times_and_share_the_search_cache(monkeypatch):
    import model.engine.variant as search_module  # where a search evaluates

    m, s = load_model("gpt3-175b"), load_system("h100")
    a = search(m, s, 512, 1536, "1d", top_k=3, execution={"recompute_layers": 0})
    evaluated = []
    real = search_module._evaluate_variant
    monkeypatch.setattr(search_module, "_evaluate_variant",
                        lambda *a, **k: evaluated.append(1) or real(*a, **k))
    b = search(m, s, 512, 1536, "1d", top_k=3, execution={"recompute_layers": 0},
               costs={"usd_per_gpu_hour": 1.0})
    np.testing.assert_array_equal(a.top["iteration_time_s"], b.top["iteration_time_s"])
    assert not evaluated  # answered from the per-process search cache
    assert b.top["cost_usd"].iloc[0] == pytest.approx(a.top["gpu_hours"].iloc[0] * 1.0)


@pytest.mark.parametrize("costs, words", [
    ({"pue": 0.5}, "pue"), ({"pricing": "lease"}, "pricing"), ({"restart": 1}, "unknown key"),
    ({"failures_per_gpu_hour": -1}, "failures_per_gpu_hour"), ("cheap", "dict"),
])
def test_bad_cost_inputs_name_the_key(costs, words):
    with pytest.raises(ModelError, match=words):
        search(load_model("gpt3-175b"), load_system("h100"), 64, 512, "1d", costs=costs)


@pytest.mark.parametrize("name", REAL)
def test_real_presets_give_node_power_and_their_sources(name):
    s = load_system(name)
    assert s.node_gpus in (4, 8) and s.nvlink_domain_size % s.node_gpus == 0
    assert 300 <= s.tdp_w <= 1500 and 1.0 <= s.node_power_factor <= 2.1
    assert "Node" in s.cost_source and "Power" in s.cost_source
    assert s.usd_per_gpu_hour > 0 or "No rental price" in s.cost_source
    assert s.purchase_usd_per_gpu > 0 or "No purchase price" in s.cost_source


def test_paper_presets_have_no_prices_and_their_node_is_the_domain():
    for name in (n for n in list_systems() if n.startswith("paper-")):
        s = load_system(name)
        assert s.tdp_w == 0 and s.usd_per_gpu_hour == 0
        assert s.node_size == s.nvlink_domain_size


# --- goodput ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mtbf_min, published_min", [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_interval_matches_daly_2006_worked_examples(mtbf_min, published_min):
    """Daly (2006): checkpoint 5 min, restart 10 min; τ_opt 117, 57 and 9.1 min for M = 24 h,
    6 h and 15 min."""
    tau = goodput.daly_interval_s(5 * 60.0, mtbf_min * 60.0) / 60
    assert tau == pytest.approx(published_min, abs=0.5 if published_min > 10 else 0.05)


def test_young_interval_is_sqrt_2_delta_m():
    assert goodput.young_interval_s(300.0, 86400.0) == pytest.approx(math.sqrt(2 * 300 * 86400))
    # Daly's higher-order terms make it shorter: √(2δM)(1 + …) − δ
    assert goodput.daly_interval_s(300.0, 86400.0) < goodput.young_interval_s(300.0, 86400.0)
    assert goodput.daly_interval_s(100.0, 40.0) == 40.0  # δ ≥ 2M: checkpoint every M


def test_daly_interval_minimises_the_expected_wall_time():
    """The interval Daly's estimate gives is within 0.5 % of the wall time's true minimum."""
    d, m, r, work = 300.0, 6 * HOUR, 600.0, 500 * HOUR
    taus = np.linspace(60, 4 * HOUR, 200_000)
    wall = goodput.expected_wall_s(work, taus, d, r, m)
    best = taus[np.argmin(wall)]
    tau = goodput.daly_interval_s(d, m)
    assert tau == pytest.approx(best, rel=0.005)
    assert goodput.expected_wall_s(work, tau, d, r, m) == pytest.approx(wall.min(), rel=1e-6)


def test_expected_wall_time_first_order_and_without_failures():
    # small δ, τ, R against M: W·(1 + δ/τ + (τ/2 + δ + R)/M) to first order
    d, tau, r, m, work = 10.0, 600.0, 60.0, 1e6, 1e6
    first = work * (1 + d / tau + (tau / 2 + d + r) / m)
    assert goodput.expected_wall_s(work, tau, d, r, m) == pytest.approx(first, rel=1e-3)
    assert goodput.expected_wall_s(work, tau, d, r, np.inf) == work


def test_llama3_failure_rate_and_mtbf():
    assert LLAMA3_FAILURES_PER_GPU_HOUR == pytest.approx(419 / (54 * 24 * 16384))
    # 16,384 GPUs fail every 3.09 h, as the 419 interruptions in 54 days did
    assert goodput.job_mtbf_s(16384, LLAMA3_FAILURES_PER_GPU_HOUR) / HOUR == pytest.approx(
        54 * 24 / 419)


def test_rows_give_days_with_failures_from_the_checkpoint_and_the_rate():
    m, s = load_model("gpt3-175b"), load_system("h100")
    best = search(m, s, 1024, 1536, "1d", top_k=1).best
    write = m.params * 14 / 2000e9
    assert best["checkpoint_write_s"] == pytest.approx(write)
    mtbf = HOUR / (1024 * LLAMA3_FAILURES_PER_GPU_HOUR)
    tau = goodput.daly_interval_s(write, mtbf)
    assert best["checkpoint_interval_s"] == pytest.approx(tau)
    wall = goodput.expected_wall_s(best["train_days"] * 86400, tau, write, 600.0, mtbf)
    assert best["train_days_with_failures"] == pytest.approx(wall / 86400)
    assert best["train_days"] < best["train_days_with_failures"] < 1.1 * best["train_days"]
    none = search(m, s, 1024, 1536, "1d", top_k=1, costs={"failures_per_gpu_hour": 0}).best
    assert none["train_days_with_failures"] == none["train_days"]
    assert math.isnan(none["checkpoint_interval_s"])


def test_costs_records_resolve_and_override():
    assert resolve_costs(None) == Costs()
    c = Costs().with_overrides(pue=1.1)
    assert c.pue == 1.1 and resolve_costs(c) is c
    s = load_system("b200").with_costs({"restart_s": 60.0})
    assert s.costs.restart_s == 60.0 and s.with_costs(None) is s
