"""The Plan & cost page without a browser (dashboard/pages/plan.py, dashboard/jobs/planner.py,
dashboard/figures/plan.py): its answer is the API's plan for the same inputs, its controls come
from the control table and are validated on the server, its searches are bounded, bad input and
no answer are messages, and the figures plot the frames they are given."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-plan-page-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import app  # noqa: E402, F401 - registers the pages and their callbacks
from dashboard import figures  # noqa: E402
from dashboard.controls import presets as PR  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.controls.control_table import BY_KEY  # noqa: E402
from dashboard.jobs import compute, planner  # noqa: E402
from dashboard.pages import plan as page  # noqa: E402
from model import load_model, load_system  # noqa: E402
from model.api import lost_node_frame, pareto_frame, plan  # noqa: E402
from model.specs.cost import DEFAULT_COSTS  # noqa: E402
from model.specs.stack import default_stack_name  # noqa: E402
from model.studies.plan import DEFAULT_MAX_GPUS, plan_execution  # noqa: E402

SCN = {**S.default_scenario(), "strategy": "1d"}  # one strategy: quick
EXECUTION = S.execution_of(S.default_scenario())  # what the panel shows for the default stack


def api_plan(**over):
    """model.studies.plan.plan for the default scenario's inputs, named without the dashboard."""
    kw = dict(days=30.0, strategy=("1d",), execution=plan_execution(EXECUTION),
              stack=default_stack_name(), max_gpus=DEFAULT_MAX_GPUS)  # the page's defaults
    return plan(load_model("gpt3-1t"), load_system("h200"), 4096, **{**kw, **over})


def outputs(scn):
    """The page's outputs by name (the callback's order)."""
    names = ["headline", "message", *(k for k, _ in page.ANSWER), *page.INPUTS, "sources",
             "pareto", "lost"]
    return dict(zip(names, page.update(scn), strict=True))


def test_the_answer_is_the_api_plan():
    res = api_plan()
    out = outputs(SCN)
    assert out["message"] == ""
    assert out["gpus"].startswith(f"{res.gpus:,} (")
    assert f"{res.row['plan_days']:.2f} days" in out["headline"]  # with failures (default)
    assert out["cost"] == f"${res.summary()['cost_usd']:,.0f} (rental)"
    assert res.failures and res.summary()["cost_usd"] == res.row["plan_cost_usd"]
    assert out["energy"] == f"{res.summary()['energy_mwh']:,.0f} MWh"
    star = [t for t in out["pareto"]["data"] if str(t.get("name", "")).startswith("plan:")]
    assert star and star[0]["y"][0] == pytest.approx(res.row["cost_usd"])  # failure-free axes
    assert out["lost"]["data"][0]["y"][0] == pytest.approx(1.0)  # the full job


def test_targets_and_cost_inputs_reach_the_plan():
    """A shorter target needs more GPUs; a budget is never exceeded; the site inputs are the
    estimator's Costs (a purchase's cost changes, its GPUs do not)."""
    longer, shorter = api_plan(), api_plan(days=15.0)
    assert shorter.gpus > longer.gpus
    frame = planner.answer({**SCN, "target_days": 15.0})
    assert int(frame.set_index("role").loc["answer", "gpus"]) == shorter.gpus
    days = []
    for budget in (1.5e7, 2.0e7, 2.5e7, 5e7):  # about $20M at any count: GPU-hours barely move
        roles = planner.answer({**SCN, "plan_goal": "budget", "budget_usd": budget}
                               ).set_index("role")
        if "answer" in roles.index:
            assert roles.loc["answer", "plan_cost_usd"] <= budget
            days.append(roles.loc["answer", "plan_days"])
        else:  # nothing in range is that cheap
            assert (roles.loc["fastest", "plan_cost_usd"] > budget) and not days
    assert len(days) >= 2 and days == sorted(days, reverse=True)  # more money: never slower
    assert S.costs_of(SCN) == {k: getattr(DEFAULT_COSTS, k) for k in (
        "pricing", "pue", "usd_per_kwh", "amortization_years", "failures_per_gpu_hour")}
    bought = planner.answer({**SCN, "pricing": "purchase", "pue": 1.2}).set_index("role")
    api = api_plan(costs={"pricing": "purchase", "pue": 1.2})
    assert bought.loc["answer", "plan_cost_usd"] == pytest.approx(api.row["plan_cost_usd"])
    assert int(bought.loc["answer", "gpus"]) == api_plan().gpus


def test_system_price_and_power_come_from_the_preset_and_override():
    scn = S.validate_scenario({**S.default_scenario(), **PR.system_values("b200")})[0]
    b200 = load_system("b200")
    assert (scn["usd_per_gpu_hour"], scn["tdp_w"], scn["node_gpus"]) == (
        b200.usd_per_gpu_hour, b200.tdp_w, b200.node_gpus)
    _, system = S.build_inputs({**scn, "usd_per_gpu_hour": 2.0, "node_gpus": 16})
    assert system.usd_per_gpu_hour == 2.0 and system.node_size == 16


def test_no_answer_and_bad_input_are_messages():
    out = outputs({**SCN, "target_days": 0.5})
    assert out["message"].startswith("No GPU count up to 131,072 (multiples of 8) trains gpt3-1t")
    assert "the fastest takes" in out["message"] and out["gpus"] == "–"
    bad = outputs({**SCN, "budget_usd": -5})
    assert bad["message"] == ("The scenario is invalid (budget_usd: Budget must be positive); "
                              "nothing was computed from it.")  # the one trust boundary
    assert outputs({**SCN, "mode": "paper"})["message"].startswith("Plan & cost needs the "
                                                                     "default model mode")
    unpriced = outputs({**SCN, "plan_goal": "budget", "usd_per_gpu_hour": 0.0})
    assert "has no price" in unpriced["message"]


def test_searches_are_bounded_server_side():
    """The largest count is capped by the control (the model's own cap); the Pareto figure
    samples at most PARETO_COUNTS counts per system; lost nodes at most 64."""
    assert BY_KEY["plan_max_gpus"].hi == DEFAULT_MAX_GPUS
    for key, value in (("plan_max_gpus", DEFAULT_MAX_GPUS + 1), ("lost_nodes", 65),
                       ("target_days", 0), ("plan_max_gpus", 1.5)):
        scn, errors = S.validate_scenario({**S.default_scenario(), key: value})
        assert scn is None and key in errors, (key, value)
    frame = planner.pareto({**SCN, "plan_max_gpus": 131_072})
    per_system = frame.groupby("system")["gpus"].nunique()
    assert (per_system <= planner.PARETO_COUNTS).all() and len(per_system) == 4


def test_every_plan_input_is_in_the_cache_key():
    base = compute.cache_key("page-plan", planner.payload(SCN))
    changed = {"plan_goal": "both", "target_days": 31.0, "budget_usd": 1e7,
               "plan_failures": False, "plan_max_gpus": 4096, "lost_nodes": 2,
               "pricing": "purchase", "pue": 1.3, "usd_per_kwh": 0.1,
               "amortization_years": 4.0, "failures_per_gpu_hour": 0.0, "strategy": "all",
               "usd_per_gpu_hour": 1.0}
    assert set(S.PLAN_KEYS) <= set(changed)
    for key, value in changed.items():
        assert SCN[key] != value, key
        assert compute.cache_key("page-plan", planner.payload({**SCN, key: value})) != base, key


# --------------------------------------------------------------------------- figures


@pytest.fixture(scope="module")
def frames():
    m, s = load_model("gpt3-175b"), load_system("h100")
    pareto = pareto_frame(m, [s, load_system("b200")], 1536, 1024)
    lost = lost_node_frame(m, s, 1024, 1536, lost=4)
    return pareto, lost


def test_pareto_figure_plots_the_frame(frames):
    pareto, _ = frames
    answer = pareto.iloc[3]
    fig = figures.pareto_figure(pareto, answer, target_days=20.0, budget_usd=1e6)
    names = [t.name for t in fig.data]
    assert names[:2] == ["h100", "b200"] and "Pareto front" in names
    front = next(t for t in fig.data if t.name == "Pareto front")
    np.testing.assert_allclose(sorted(front.y, reverse=True),
                               pareto[pareto["pareto"]].sort_values("train_days")["cost_usd"])
    star = fig.data[-1]
    assert star.x[0] == answer["train_days"] and star.y[0] == answer["cost_usd"]
    assert len(fig.layout.shapes) == 2
    assert "No cost against time" in figures.pareto_figure(pd.DataFrame()).layout.annotations[
        0].text


def test_lost_node_figure_marks_the_cliff(frames):
    _, lost = frames
    fig = figures.lost_node_figure(lost, 0.9)
    best, every, cliff = fig.data
    np.testing.assert_allclose(best.x, lost["available_gpus"])
    np.testing.assert_allclose(best.y, lost["relative_efficiency"].fillna(0.0))
    assert len(cliff.x) == int(lost["cliff"].sum())
    assert every.y[0] == pytest.approx(1.0)  # the full job uses every GPU
    assert fig.layout.shapes[0].y0 == 0.9
