"""The model side of the inspection views against closed forms: the iteration timeline (the
pipeline schedule played out), the memory breakdown, the sensitivity rows and the comparison
of two rows (model/studies/timeline.py, memory_parts.py, sensitivity.py, compare.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from model import ModelError, evaluate, load_model, load_system, search
from model.engine.report import TIME_COLUMNS
from model.studies.compare import compare_frame, headline, layout_text
from model.studies.memory_parts import FREE, HOST, OVER, RESERVE, memory_frame
from model.studies.sensitivity import INPUTS, present, searches, sensitivity_frame
from model.studies.timeline import (
    BACKWARD,
    FORWARD,
    IDLE,
    MAX_PASSES,
    _idle,
    bubble_s,
    forward_share,
    play,
    stage_order,
    timeline_frame,
)

MODEL, SYSTEM = load_model("llama3-8b"), load_system("h100")
GPUS, BATCH = 64, 256


@pytest.mark.parametrize(("pp", "n_mb", "v"), [
    (p, n, v) for p, n, v in itertools.product((1, 2, 4, 6), (1, 3, 4, 6, 8, 12), (1, 2, 3))
    if v == 1 or (p > 1 and n % p == 0)])
def test_schedule_makespan_and_bubble_are_the_pipeline_formula(pp, n_mb, v) -> None:
    """(n_mb·V + pp − 1)·(τ_f + τ_b) in all, (pp − 1)·(τ_f + τ_b) idle on every stage (the
    estimator's bubble), with a backward pass 2.3× the forward."""
    tf, tb = 0.7, 1.61
    frame = play(pp, n_mb, v, tf, tb)
    assert frame["end_s"].max() == pytest.approx((n_mb * v + pp - 1) * (tf + tb), rel=1e-12)
    idle = bubble_s(pd.concat([frame, _idle(frame, float(frame["end_s"].max()))]))
    assert np.allclose(idle.to_numpy(), (pp - 1) * (tf + tb), rtol=1e-12, atol=1e-12)


def test_schedule_runs_every_chunk_once_in_dependency_order() -> None:
    pp, n_mb, v = 4, 8, 2
    frame = play(pp, n_mb, v, 1.0, 2.0)
    assert len(frame) == 2 * pp * n_mb * v
    assert not frame.duplicated(["stage", "phase", "microbatch", "virtual_stage"]).any()
    at = {(r.phase, r.microbatch, r.virtual_stage, r.stage): (r.start_s, r.end_s)
          for r in frame.itertuples()}
    for (phase, mb, vs, stage), (start, _) in at.items():
        if phase == FORWARD and stage > 0:  # after the previous stage's forward
            assert start >= at[(FORWARD, mb, vs, stage - 1)][1] - 1e-12
        if phase == BACKWARD:  # after its own forward and the next stage's backward
            assert start >= at[(FORWARD, mb, vs, stage)][1] - 1e-12
            if stage < pp - 1:
                assert start >= at[(BACKWARD, mb, vs, stage + 1)][1] - 1e-12
    for _, g in frame.groupby("stage"):  # a stage runs one chunk at a time
        assert (g["start_s"].to_numpy()[1:] >= g["end_s"].to_numpy()[:-1] - 1e-12).all()


def test_one_f_one_b_warms_up_pp_minus_rank_minus_one_forwards() -> None:
    order = stage_order(4, 8, 1, 0)
    assert [p for p, _, _ in order[:4]] == [FORWARD] * 3 + [FORWARD]
    assert order[4][0] == BACKWARD and order[3][0] == FORWARD
    assert [p for p, _, _ in stage_order(4, 8, 1, 3)[:2]] == [FORWARD, BACKWARD]
    # interleaved: (pp − r − 1)·2 + (V − 1)·pp warm-up forwards, then one more before the
    # first backward; with n_mb = pp every forward comes first
    assert [p for p, _, _ in stage_order(4, 8, 2, 1)].index(BACKWARD) == 2 * 2 + 4 + 1
    assert [p for p, _, _ in stage_order(4, 4, 2, 3)].index(BACKWARD) == 8
    assert stage_order(4, 8, 2, 0)[:6] == [(FORWARD, m, v) for v, m in
                                           ((0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1))]


def test_a_timeline_too_large_to_draw_is_refused_by_its_size() -> None:
    with pytest.raises(ModelError, match="more than the 40,000"):
        play(64, MAX_PASSES, 1, 1.0, 2.0)


@pytest.fixture(scope="module")
def evaluation():
    return evaluate(MODEL, SYSTEM, GPUS, BATCH, "1d", tp1=4, pp=4, dp=4, microbatch=1,
                    stack="none", execution={"interleave": 1})


@pytest.fixture(scope="module")
def interleaved():
    return evaluate(MODEL, SYSTEM, GPUS, BATCH, "1d", tp1=4, pp=4, dp=4, microbatch=2,
                    stack="none", execution={"interleave": 2})


@pytest.mark.parametrize("which", ["evaluation", "interleaved"])
def test_timeline_of_a_row_adds_up_to_its_iteration(which, request) -> None:
    ev = request.getfixturevalue(which)
    row = ev.row
    share = forward_share(ev.ops, int(row["pp"]))
    assert 0.2 < share < 0.5  # a backward pass costs about twice a forward one
    frame = timeline_frame(row, share)
    assert int(row["interleave"]) == (2 if which == "interleaved" else 1)
    assert frame["end_s"].max() == pytest.approx(row["iteration_time_s"], rel=1e-12)
    assert row["iteration_time_s"] == pytest.approx(sum(row[c] for c in TIME_COLUMNS))
    assert np.allclose(bubble_s(frame), row["t_bubble_s"], rtol=1e-9)
    # the bubble is (pp − 1)/(n_mb·V) of the stage's busy time, T_loc + t_pp
    busy = frame[frame["phase"].isin([FORWARD, BACKWARD])].groupby("stage")["duration_s"].sum()
    pp, n_mb, v = int(row["pp"]), int(row["n_microbatches"]), int(row["interleave"])
    assert np.allclose(bubble_s(frame), busy * (pp - 1) / (n_mb * v), rtol=1e-9)
    fwd = frame[frame["phase"] == FORWARD].groupby("stage")["duration_s"].sum()
    local = sum(row[c] for c in ("t_compute_s", "t_memory_s", "t_tp_comm_s", "t_ep_comm_s"))
    assert np.allclose(fwd, share * local + row["t_pp_comm_s"] / 2, rtol=1e-9)
    tail = frame[frame["phase"] == "data-parallel sync (exposed)"]
    assert len(tail) == pp and np.allclose(tail["duration_s"], row["t_dp_comm_s"])
    assert (frame[frame["phase"] == IDLE]["duration_s"] > 0).all()


def test_memory_parts_add_up_to_the_row_and_the_capacity(evaluation) -> None:
    row = evaluation.row
    parts = memory_frame(row, reserve_gb=5.0).set_index("part")["memory_gb"]
    model_parts = parts[["weights", "gradients", "optimizer state", "activations"]]
    assert model_parts.sum() == pytest.approx(row["memory_gb"], rel=1e-12)
    assert parts[RESERVE] == 5.0
    assert model_parts.sum() + parts[RESERVE] + parts[FREE] == pytest.approx(
        row["hbm_capacity_gb"])
    assert OVER not in parts and HOST not in parts
    # ZeRO-1, fp32 gradients off: the optimizer's 12 B per parameter over dp, 6 × the weights
    assert parts["optimizer state"] == pytest.approx(6 * parts["weights"] / 4, rel=0.02)


def test_memory_over_capacity_and_offloaded_parts_are_shown() -> None:
    row = {"weights_gb": 40.0, "gradients_gb": 40.0, "optimizer_gb": 10.0,
           "activations_gb": 5.0, "memory_gb": 95.0, "hbm_capacity_gb": 80.0,
           "host_memory_gb": 120.0}
    parts = memory_frame(row, 4.0).set_index("part")
    assert parts.loc[FREE, "memory_gb"] == 0 and parts.loc[OVER, "memory_gb"] == 19.0
    assert parts.loc[HOST, "tier"] == "host" and parts.loc[HOST, "memory_gb"] == 120.0
    with pytest.raises(ModelError, match="reserve"):
        memory_frame(row, 90.0)


def test_sensitivity_closed_form_with_a_time_inverse_to_the_peak() -> None:
    """days ∝ 1 / matrix peak and nothing else matters: −x % → +x/(1−x), +x % → −x/(1+x)."""
    class Result:
        def __init__(self, days: float):
            self.top = pd.DataFrame({"train_days": [days]})

    def run(model, system, gpus, batch, strategy, top_k, **_):
        return Result(1000.0 / system.matrix_tflops_fp16)

    x = 0.2
    system = SYSTEM.with_overrides(host_bandwidth_gb_per_s=0.0)  # no GPU–host link
    frame = sensitivity_frame(MODEL, system, GPUS, BATCH, "1d", x, run=run).set_index("input")
    assert frame.loc["matrix_peak", "low_change_pct"] == pytest.approx(100 * x / (1 - x))
    assert frame.loc["matrix_peak", "high_change_pct"] == pytest.approx(-100 * x / (1 + x))
    assert frame.index[0] == "matrix_peak"
    assert (frame.drop(index="matrix_peak")["swing_pct"] == 0).all()
    assert set(frame.index) == {i.key for i in present(system)}
    assert "host_bandwidth" not in frame.index  # no link: nothing to scale
    assert searches(system) == 1 + 2 * len(frame) == 1 + 2 * (len(INPUTS) - 1)
    with pytest.raises(ModelError, match="at most 90"):
        sensitivity_frame(MODEL, SYSTEM, GPUS, BATCH, "1d", 0.95, run=run)


def test_an_input_that_leaves_nothing_fitting_ranks_first() -> None:
    """Less HBM than the best configuration needs: no configuration (infinite days), shown as
    the largest swing and labelled, not dropped."""
    from dashboard.figures.scenarios import tornado_figure

    class Result:
        def __init__(self, days: float | None):
            self.top = pd.DataFrame({"train_days": [] if days is None else [days]})

    def run(model, system, gpus, batch, strategy, top_k, **_):
        return Result(None if system.hbm_capacity_gb < SYSTEM.hbm_capacity_gb else 10.0)

    frame = sensitivity_frame(MODEL, SYSTEM, GPUS, BATCH, "1d", 0.1, run=run)
    assert frame["input"].iloc[0] == "hbm_capacity"
    assert math.isinf(frame["low_days"].iloc[0]) and frame["high_change_pct"].iloc[0] == 0
    low = tornado_figure(frame, 0.1).data[0]
    assert low.text[0] == "nothing fits" and low.x[0] == 0


def test_sensitivity_reruns_the_search() -> None:
    frame = sensitivity_frame(MODEL, SYSTEM, GPUS, BATCH, "1d", 0.1, stack="none")
    rows = frame.set_index("input")
    assert rows.loc["matrix_peak", "high_days"] < rows.loc["matrix_peak", "base_days"]
    assert rows.loc["matrix_peak", "low_days"] > rows.loc["matrix_peak", "base_days"]
    # more HBM never slows the best configuration down; latencies never speed it up
    assert rows.loc["hbm_capacity", "high_days"] <= rows.loc["hbm_capacity", "base_days"]
    assert rows.loc["network_latency", "high_days"] >= rows.loc["network_latency", "base_days"]
    best = search(MODEL, SYSTEM, GPUS, BATCH, "1d", stack="none", top_k=1).top.iloc[0]
    assert rows["base_days"].iloc[0] == pytest.approx(best["train_days"])
    assert list(frame["swing_pct"]) == sorted(frame["swing_pct"], reverse=True)
    assert {i.key for i in INPUTS} >= set(rows.index)


def test_compare_two_rows(evaluation, interleaved) -> None:
    a, b = evaluation.row, interleaved.row
    frame = compare_frame(a, b).set_index("metric")
    assert frame.loc["train_days", "delta"] == pytest.approx(b["train_days"] - a["train_days"])
    assert frame.loc["train_days", "delta_pct"] == pytest.approx(
        100 * (b["train_days"] / a["train_days"] - 1))
    assert headline(a)["tokens_per_s_per_gpu"] == pytest.approx(a["tokens_per_s"] / GPUS)
    assert frame.loc["gpus", "delta"] == 0
    assert layout_text(b) == "1d · dp 4 · tp1 4 · pp 4 · mb 2 · V 2"
    assert layout_text({**a.to_dict(), "strategy": "context", "tp2": 2}) == \
        "context · dp 4 · tp1 4 · cp 2 · pp 4 · mb 1"
    same = compare_frame(a, a)
    assert (same["delta"].abs() < 1e-12).all()
    assert math.isnan(compare_frame({**a, "cost_usd": 0.0}, b).set_index("metric").loc[
        "cost_usd", "delta_pct"])
