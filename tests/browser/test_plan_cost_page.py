"""The Plan & cost page in a browser: its answer is the API's plan for the same inputs, a shorter
target takes more GPUs, a budget is never exceeded (and more money is never slower), bad input
and an unreachable target are inline messages, and the figures show the plan and the lost-node
view of the planned job."""

from __future__ import annotations

import pytest

from dashboard.controls import scenario as S
from model import load_model, load_system
from model.api import plan
from model.specs.stack import default_stack_name
from model.studies.plan import DEFAULT_MAX_GPUS, plan_execution

FRAGMENT = "strategy=1d"  # one strategy: each plan takes well under a second


def api_plan(**targets):
    """model.studies.plan.plan for the default scenario (gpt3-1t, 1e12 tokens, H200, batch 4096,
    the default stack with the execution its preset shows in the panel, the interleaving and
    recomputed layers searched as tperf plan does), one strategy, failures counted."""
    return plan(load_model("gpt3-1t"), load_system("h200"), 4096, strategy=("1d",),
                execution=plan_execution(S.execution_of(S.default_scenario())),
                stack=default_stack_name(), max_gpus=DEFAULT_MAX_GPUS, **targets)


def gpus_of(text: str) -> int:
    return int(text.split(" ")[0].replace(",", ""))


def usd_of(text: str) -> float:
    return float(text.split(" ")[0].lstrip("$").replace(",", ""))


def open_plan(ui) -> None:
    """A fresh page on /plan with the one-strategy scenario, every callback settled."""
    ui.driver.get("about:blank")  # a new fragment alone does not reload the page
    ui.driver.get(f"{ui.duo.server_url}/plan#{FRAGMENT}")
    ui.until(lambda: ui.fragment().get("strategy") == "1d", "the scenario in the URL")
    ui.idle(timeout=90)
    ui.wait_text("#plan-gpus", lambda t: t[:1].isdigit(), "a planned GPU count", timeout=60)


@pytest.mark.own_page  # it opens a link first
def test_the_page_answers_as_the_api_plans(ui) -> None:
    expected = api_plan(days=30.0)
    s = expected.summary()
    open_plan(ui)
    ui.wait_text("#plan-gpus", lambda t: t.startswith(f"{s['gpus']:,} ("), "the API's GPUs")
    assert f"{s['days_with_failures']:.2f} days" in ui.text("#plan-headline")
    assert ui.text("#plan-cost") == f"${s['cost_usd']:,.0f} (rental)"
    assert ui.text("#plan-energy") == f"{s['energy_mwh']:,.0f} MWh"
    assert ui.text("#plan-gpu-hours") == f"{s['gpu_hours']:,.0f}"
    assert ui.text("#plan-pricing-text").startswith("Rental: $5.408 per GPU-hour")
    traces = ui.wait_figure("plan-pareto", lambda t: any(
        str(tr["name"]).startswith("plan:") for tr in t), "the plan starred")
    star = next(tr for tr in traces if str(tr["name"]).startswith("plan:"))
    assert star["x"][0] == pytest.approx(s["days"]) and star["y"][0] == pytest.approx(
        float(expected.row["cost_usd"]))  # the figure's axes are the failure-free ones
    assert {"h200", "h100", "b200", "gb200-nvl72", "Pareto front"} <= {tr["name"] for tr in traces}
    lost = ui.wait_data("plan-lost")
    best = next(tr for tr in lost if tr["name"] == "best on the GPUs left")
    assert best["x"][0] == s["gpus"] and best["y"][0] == pytest.approx(1.0)
    assert len(best["x"]) == 9  # the full job and 1 … 8 nodes lost
    assert all(b < a for a, b in zip(best["x"], best["x"][1:]))
    assert ui.severe_logs() == []
    ui.screenshot("plan")


@pytest.mark.own_page  # it opens a link first
def test_a_shorter_target_takes_more_gpus(ui) -> None:
    open_plan(ui)
    before = gpus_of(ui.wait_text("#plan-gpus", lambda t: t.startswith(
        f"{api_plan(days=30.0).gpus:,} ("), "the 30-day plan"))
    ui.set_input("target_days", 15)
    expected = api_plan(days=15.0)
    after = gpus_of(ui.wait_text("#plan-gpus", lambda t: t[:1].isdigit() and gpus_of(t) != before,
                                 "a new plan for 15 days"))
    assert after > before and after == expected.gpus
    assert f"{expected.summary()['days_with_failures']:.2f} days" in ui.text("#plan-headline")
    assert expected.summary()["days_with_failures"] <= 15.0


@pytest.mark.own_page  # it opens a link first
def test_a_budget_is_never_exceeded_and_bad_input_is_a_message(ui) -> None:
    open_plan(ui)
    ui.duo.find_element("#ctl-plan_goal input[value='budget']").click()
    days = []
    for budget in (20_000_000, 25_000_000):
        ui.set_input("budget_usd", budget)
        ui.wait_text("#plan-headline", lambda t, b=budget: f"for at most ${b:,}" in t
                     and "GPUs" in t, f"a plan within ${budget:,}")
        cost = usd_of(ui.text("#plan-cost"))
        expected = api_plan(budget_usd=float(budget)).summary()
        assert cost <= budget and cost == pytest.approx(expected["cost_usd"], abs=0.5)
        assert gpus_of(ui.text("#plan-gpus")) == expected["gpus"]
        days.append(expected["days"])
    assert days[1] <= days[0]  # more money is never slower
    shown = ui.text("#plan-cost")
    ui.set_input("budget_usd", -5)
    ui.wait_text("#err-budget_usd", lambda t: t == "Budget must be positive", "the message")
    ui.steady(lambda: ui.text("#plan-cost"), shown)  # the last valid plan stays
    ui.set_input("budget_usd", 1_000_000)
    message = ui.wait_text("#plan-message", lambda t: t.startswith("No GPU count"),
                           "no plan within $1M")
    assert "for at most $1,000,000" in message and "the fastest takes" in message
    assert ui.text("#plan-gpus") == "–" and ui.text("#err-budget_usd") == ""
