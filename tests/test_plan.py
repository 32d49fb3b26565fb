"""Any GPU count, at most N GPUs, the plan (fewest GPUs within D days, fastest within a budget),
the lost-node view and the Pareto frame (model/engine/counts.py, plan.py, lost_node.py,
pareto.py): every answer checked against searches of single counts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from model import ModelError, Request, load_model, load_system, search
from model.api import lost_node_frame, pareto_frame, plan, search_counts
from model.engine.counts import best_per_count, count_range, possible
from model.engine.dominance import pareto_mask
from model.engine.space import filled_domain
from model.studies.pareto import sampled_counts

GBS = 1536


@pytest.fixture(scope="module")
def gpt3():
    return load_model("gpt3-175b")


@pytest.fixture(scope="module")
def h100():
    return load_system("h100")


def best_of(model, system, n, gbs=GBS, **kw):
    return search(model, system, n, gbs, "1d", top_k=1, **kw).best


# --- any count ----------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["1d", "context", "summa"])
def test_possible_counts_hold_every_count_with_a_configuration(strategy):
    """possible() is a necessary condition: a count outside it has no candidate."""
    m = load_model("llama3-8b").with_overrides(layers=12)
    counts = list(range(1, 400))
    results = search_counts(m, load_system("h100"), counts, 96, strategy, top_k=1,
                            stack="none")
    with_candidates = {r.gpus for r in results if r.candidates}
    allowed = set(possible(m, strategy, 96, 399).tolist())
    assert with_candidates <= allowed
    assert len(with_candidates) > 30  # the check has teeth: many counts have configurations


def test_best_per_count_equals_searches_of_single_counts(gpt3, h100):
    counts = count_range(512, 8)
    frame, _ = best_per_count(Request.build(gpt3, h100, global_batch=GBS).resolve(), counts)
    assert list(frame["gpus"]) == sorted(frame["gpus"])
    for n in (8, 64, 96, 136, 256, 384, 504, 512):
        one = best_of(gpt3, h100, n)
        rows = frame[frame["gpus"] == n]
        if one is None:
            assert rows.empty
        else:
            assert len(rows) == 1
            assert rows["samples_per_s"].iloc[0] == one["samples_per_s"]
            for k in ("tp1", "pp", "dp", "microbatch", "interleave", "recompute_layers"):
                assert rows[k].iloc[0] == one[k], k


def test_odd_counts_and_partly_filled_domains(gpt3, h100):
    """1023 GPUs (3·11·31) and 4088 GPUs of NVL72 racks (56 per rack) have configurations."""
    # partial nodes: only with the production rules relaxed (model/engine/production.py)
    loose = {"production_layout": False}
    assert search(gpt3, h100, 1023, 2046, "1d", top_k=1).candidates == 0
    odd = search(gpt3, h100, 1023, 2046, "1d", top_k=1, execution=loose).best
    assert odd is not None and odd["tp1"] * odd["pp"] * odd["dp"] == 1023
    nvl = search(load_model("gpt3-1t"), load_system("gb200-nvl72"), 4088, 4088, "1d", top_k=1,
                 execution=loose)
    best = nvl.best
    assert best is not None and filled_domain(4088, 72) == 56
    assert best["nv_tp1"] * best["nv_tp2"] * best["nv_dp"] * best["nv_pp"] == 56


# --- at most N ----------------------------------------------------------------------------------
def test_max_gpus_is_the_best_of_every_count_up_to_n(gpt3, h100):
    n = 300
    res = search(gpt3, h100, None, GBS, "1d", max_gpus=n, top_k=5)
    singles = [best_of(gpt3, h100, k) for k in range(1, n + 1)]
    fastest = max(r["samples_per_s"] for r in singles if r is not None)
    assert res.best["samples_per_s"] == fastest
    assert res.gpus == int(res.best["gpus"]) <= n and res.max_gpus == n
    assert list(res.top["samples_per_s"]) == sorted(res.top["samples_per_s"], reverse=True)
    assert (res.top["gpus"] <= n).all() and len(res.top) == 5


def test_max_gpus_uses_fewer_gpus_when_the_count_itself_has_no_layout():
    """4,088 GPUs (a 4,096-GPU job without one node): no configuration uses all of them with a
    power-of-two batch, so the best idles some."""
    m, s = load_model("gpt3-1t"), load_system("b200")
    assert search(m, s, 4088, 4096, "1d").candidates == 0
    res = search(m, s, None, 4096, "1d", max_gpus=4088, gpu_step=8, top_k=1)
    assert res.gpus < 4088 and res.gpus % 8 == 0
    assert res.best["samples_per_s"] == best_of(m, s, res.gpus, 4096)["samples_per_s"]


@pytest.mark.parametrize("kwargs, words", [
    ({"gpus": 64, "max_gpus": 64}, "not both"), ({"gpus": None}, "max_gpus"),
    ({"gpus": None, "max_gpus": 0}, "max_gpus"), ({"gpus": None, "max_gpus": 64, "gpu_step": 0},
                                                   "gpu_step"),
    ({"gpus": None, "max_gpus": 10**8}, "GPU counts"),
])
def test_bad_at_most_arguments(gpt3, h100, kwargs, words):
    with pytest.raises(ModelError, match=words):
        search(gpt3, h100, global_batch=GBS, **kwargs)


# --- plan ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("days", [30.0, 10.0])
def test_plan_trains_within_d_days_and_one_node_fewer_does_not(gpt3, h100, days):
    res = plan(gpt3, h100, GBS, days=days, max_gpus=2048, failures=False)  # the model's days
    n, step = res.gpus, res.gpu_step
    assert step == h100.node_size == 8 and n % step == 0
    assert res.row["train_days"] <= days
    fewer = best_of(gpt3, h100, n - step)
    assert fewer is None or fewer["train_days"] > days
    for k in range(step, n, step):  # no smaller multiple does it either
        row = res.per_count[res.per_count["gpus"] == k]
        assert row.empty or (row["train_days"] > days).all()
    summary = res.summary()
    assert summary["gpus"] == n and summary["days"] == res.row["train_days"]
    assert summary["cost_usd"] == pytest.approx(n * summary["days"] * 24 * 4.916)


def test_plan_within_a_budget_is_the_fastest_that_never_exceeds_it(gpt3, h100):
    budget = 9e5
    res = plan(gpt3, h100, GBS, budget_usd=budget, max_gpus=1024)
    assert res.row["cost_usd"] <= budget
    faster = res.per_count[res.per_count["train_days"] < res.row["train_days"]]
    assert len(faster) and (faster["cost_usd"] > budget).all()  # faster ones cost more
    check = best_of(gpt3, h100, int(faster["gpus"].iloc[0])) if len(faster) else None
    assert check is None or check["cost_usd"] > budget  # confirmed by a search of its own


def test_plan_with_days_and_budget_and_with_failures(gpt3, h100):
    both = plan(gpt3, h100, GBS, days=20.0, budget_usd=9e5, max_gpus=1024)
    assert both.row["train_days"] <= 20 and both.row["cost_usd"] <= 9e5
    failing = plan(gpt3, h100, GBS, days=20.0, failures=True, max_gpus=1024)
    assert failing.row["train_days_with_failures"] <= 20
    assert failing.gpus >= plan(gpt3, h100, GBS, days=20.0, max_gpus=1024).gpus
    ratio = failing.row["train_days_with_failures"] / failing.row["train_days"]
    assert failing.summary()["cost_usd"] == pytest.approx(failing.row["cost_usd"] * ratio)


def test_plan_steps_by_the_node_and_refuses_what_it_cannot_answer(gpt3):
    gb200 = load_system("gb200-nvl72")
    assert plan(gpt3, gb200, GBS, days=30.0, max_gpus=1024).gpu_step == 4
    with pytest.raises(ModelError, match="target"):
        plan(gpt3, gb200, GBS)
    with pytest.raises(ModelError, match="no training budget"):
        plan(gpt3.with_overrides(tokens=None), gb200, GBS, days=3.0)
    with pytest.raises(ModelError, match="no price"):
        plan(gpt3, load_system("paper-h200"), GBS, budget_usd=1e6)
    assert plan(gpt3, gb200, GBS, days=0.01, max_gpus=256).row is None


# --- lost nodes and the Pareto frame -------------------------------------------------------------
def test_lost_node_view_without_any_fitting_job_is_a_clear_error():
    """Found by the CLI fuzz test: DeepSeek-V3 fits on no count up to 16 A100s; the view said
    KeyError (no columns to show) instead of why."""
    with pytest.raises(ModelError, match="no configuration of deepseek-v3 fits on 16 GPUs"):
        lost_node_frame(load_model("deepseek-v3"), load_system("a100"), 16, 4096, lost=1)


def test_lost_node_view_marks_the_cliff():
    m, s = load_model("gpt3-1t"), load_system("b200")
    frame = lost_node_frame(m, s, 4096, 4096, lost=3)
    assert list(frame["available_gpus"]) == [4096, 4088, 4080, 4072]
    assert (frame["gpus"] <= frame["available_gpus"]).all()
    assert not frame["cliff"].iloc[0] and frame["relative_efficiency"].iloc[0] == 1.0
    # no configuration uses 4,088 GPUs with a batch of 4,096: the best idles many: a cliff
    assert np.isnan(frame["all_used_samples_per_s"].iloc[1]) and frame["cliff"].iloc[1]
    best = search(m, s, None, 4096, "1d", max_gpus=4088, top_k=1).best
    assert frame["samples_per_s"].iloc[1] == best["samples_per_s"]
    smooth = lost_node_frame(m, s, 4096, 4096, lost=1, cliff_ratio=0.5)
    assert not smooth["cliff"].any()


def test_pareto_mask_and_frame():
    days = np.array([10.0, 20.0, 15.0, 10.0, np.nan])
    cost = np.array([5.0, 1.0, 6.0, 4.0, 0.1])
    assert list(pareto_mask(days, cost)) == [False, True, False, True, False]
    gpt3 = load_model("gpt3-175b")
    frame = pareto_frame(gpt3, [load_system("h100"), load_system("h200")], GBS, 512)
    assert set(frame["system"]) == {"h100", "h200"} and frame["pareto"].any()
    front = frame[frame["pareto"]]
    for _, row in frame.iterrows():  # every point is dominated by, or is, a Pareto point
        assert ((front["train_days"] <= row["train_days"])
                & (front["cost_usd"] <= row["cost_usd"])).any()
    assert isinstance(frame, pd.DataFrame)


def test_pareto_of_sampled_counts_is_the_full_frame_at_those_counts(gpt3):
    """A figure's bounded sample: every k-th count that may have a configuration, ending at
    the largest; its rows are the full frame's rows at those counts."""
    eights = np.arange(8, 81, 8)
    assert list(sampled_counts(eights)) == list(eights)
    assert list(sampled_counts(eights, 4)) == [8, 32, 56, 80]  # 9 gaps in 3: every 3rd
    assert list(sampled_counts(eights, 10)) == list(eights)  # already few enough
    assert len(sampled_counts(count_range(131072, 8), 256)) <= 256
    with pytest.raises(ModelError, match="max_counts"):
        sampled_counts(eights, 1)
    systems = [load_system("h100")]
    full = pareto_frame(gpt3, systems, GBS, 1024)
    some = pareto_frame(gpt3, systems, GBS, 1024, max_counts=16)
    assert 8 <= len(some) <= 16 and set(some["gpus"]) <= set(full["gpus"])
    expected = full.set_index("gpus").loc[some["gpus"], "train_days"].to_numpy()
    np.testing.assert_array_equal(some["train_days"].to_numpy(), expected)


# --- the command line --------------------------------------------------------------------------
def _run(capsys, argv):
    from model.cli.commands import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_command_json(capsys, gpt3, h100):
    code, out, err = _run(capsys, ["plan", "--model", "gpt3-175b", "--system", "h100",
                                   "--days", "20", "--global-batch", str(GBS),
                                   "--max-gpus", "2048", "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert {"gpus", "days", "gpu_step", "cost_usd", "energy_mwh", "gpu_hours",
            "days_with_failures", "configuration", "reproduce"} <= set(data)
    api = plan(gpt3, h100, GBS, days=20.0, max_gpus=2048)
    assert data["gpus"] == api.gpus and data["days"] <= 20 and data["gpu_step"] == 8
    assert data["configuration"]["tp1"] * data["configuration"]["pp"] * data[
        "configuration"]["dp"] == data["gpus"]
    fewer = data["one_node_fewer"]
    assert fewer["gpus"] == data["gpus"] - 8 and (fewer["days"] is None or fewer["days"] > 20)


def test_plan_without_an_answer_exits_3(capsys):
    """Valid input that no GPU count meets: the reason on stderr, exit 3 (docs/cli.md)."""
    code, out, err = _run(capsys, ["plan", "--model", "gpt3-175b", "--system", "h100",
                                   "--days", "0.001", "--max-gpus", "64"])
    assert code == 3 and out == "" and err.startswith("no answer: ") and err.count("\n") == 1
    assert "no GPU count up to 64" in err


@pytest.mark.parametrize("argv, words", [
    ([], "needs a target"),
    (["--days", "-3"], "positive number"),
    (["--budget-usd", "1e6", "--system", "paper-h200"], "no price"),
])
def test_plan_command_errors_are_one_line(capsys, argv, words):
    base = ["plan", "--model", "gpt3-175b", "--system", "h100"]
    code, _, err = _run(capsys, base + argv)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert words in err


def test_search_max_gpus_and_lost_node_commands(capsys):
    code, out, err = _run(capsys, ["search", "--model", "gpt3-175b", "--system", "h100",
                                   "--max-gpus", "100", "--strategy", "1d", "--global-batch",
                                   str(GBS), "--pricing", "purchase", "--json"])
    assert code == 0, err
    entry = json.loads(out)["results"][0]
    assert entry["max_gpus"] == 100 and entry["gpus"] == entry["best"]["gpus"] <= 100
    assert entry["best"]["pricing"] == "purchase" and entry["best"]["cost_usd"] > 0
    code, _, err = _run(capsys, ["search", "--model", "gpt3-175b", "--system", "h100",
                                 "--gpus", "64", "--max-gpus", "64", "--strategy", "1d"])
    assert code == 2 and "--max-gpus" in err
    code, out, err = _run(capsys, ["lost-node", "--model", "gpt3-175b", "--system", "h100",
                                   "--gpus", "512", "--lost", "2", "--global-batch", str(GBS),
                                   "--json"])
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["available_gpus"] for r in rows] == [512, 504, 496]
    assert all(isinstance(r["cliff"], bool) for r in rows)
