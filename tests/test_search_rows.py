"""evaluate() reproduces a search row exactly: every time, memory and op column of the
configuration's row, and the per-op table's sums against the row's breakdown (the search's
other tests: tests/test_search.py, whose fixtures and helpers these share)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import test_search
from test_search import GBS, REL, evaluate_row

from model import load_model
from model.engine.report import TIME_COLUMNS
from tests.unstacked import evaluate, search

h200, gpt3 = test_search.h200, test_search.gpt3  # its fixtures, found here by pytest


def assert_same_row(row: pd.Series, ref: pd.Series) -> None:
    assert list(row.index) == list(ref.index)
    for key in ref.index:
        a, b = row[key], ref[key]
        if isinstance(b, (float, np.floating)):
            # NaN in both: a cost column of a system without a power or price figure
            assert a == pytest.approx(b, rel=REL, abs=0.0, nan_ok=True), key
        else:
            assert a == b, key


CASES = [
    ("gpt3-1t", {}, 512, "1d", "paper", 8),
    ("gpt3-1t", {}, 512, "summa", "paper", 8),
    ("gpt3-1t", {}, 512, "context", "paper", 8),
    ("gpt3-1t", {}, 512, "1d", None, 8),
    ("gpt3-1t", {"vocab": 0}, 1024, "summa", None, 8),
    ("gpt3-1t", {}, 1024, "context", None, 64),
    ("vit-era5", {}, 1024, "summa", None, 8),
    ("vit-era5", {}, 2048, "context", "paper", 64),
    ("llama3-8b", {}, 64, "1d", None, 8),
    ("llama3-8b", {"layers": 8}, 16, "summa", None, 8),
    ("llama3-70b", {}, 256, "context", None, 8),
]


def op_sums(ops: pd.DataFrame, where: str) -> pd.Series:
    numeric = ["t_fwd_s", "t_bwd_s", "t_compute_s", "t_memory_exposed_s", "t_comm_s",
               "weight_bytes", "activation_bytes"]
    return ops.loc[ops["where"] == where, numeric].sum()


def check_breakdown(row: pd.Series, ops: pd.DataFrame, dp_group: int) -> None:
    """The row's numbers from the per-op table, as the pipeline model combines them
    (docs/model.md §8).

    Block ops repeat n_mb × layers-per-stage times, the ops outside the blocks n_mb times; with
    pp = 1 one stage runs both ends, otherwise the slower end sets the pace. Memory is that of
    the binding stage: the first holds the embedding and min(pp, n_mb) microbatches in flight,
    the last the head and one.
    """
    n_mb, layers, pp = int(row["n_microbatches"]), int(row["layers_per_stage"]), int(row["pp"])
    # an op's time is t_comp + exposed memory time + its communication
    np.testing.assert_allclose(ops["t_fwd_s"] + ops["t_bwd_s"],
                               ops["t_compute_s"] + ops["t_memory_exposed_s"] + ops["t_comm_s"],
                               rtol=REL)
    repeat = np.where(ops["where"] == "block", n_mb * layers, n_mb)
    np.testing.assert_allclose(ops["t_iteration_s"], (ops["t_fwd_s"] + ops["t_bwd_s"]) * repeat,
                               rtol=REL)
    block, pre, post = (op_sums(ops, w) for w in ("block", "pre", "post"))
    if pp == 1:
        edge = pre + post
    else:
        t_pre, t_post = pre["t_fwd_s"] + pre["t_bwd_s"], post["t_fwd_s"] + post["t_bwd_s"]
        edge = pre if t_pre >= t_post else post
    for col, op_col in (("t_compute_s", "t_compute_s"), ("t_memory_s", "t_memory_exposed_s"),
                        ("t_tp_comm_s", "t_comm_s")):
        expected = n_mb * (layers * block[op_col] + edge[op_col])
        assert row[col] == pytest.approx(expected, rel=REL), col
    t_loc = n_mb * (layers * (block["t_fwd_s"] + block["t_bwd_s"]) + edge["t_fwd_s"]
                    + edge["t_bwd_s"])
    assert row["t_compute_s"] + row["t_memory_s"] + row["t_tp_comm_s"] == pytest.approx(
        t_loc, rel=REL)
    assert ops.loc[ops["where"] == "block", "t_iteration_s"].sum() == pytest.approx(
        n_mb * layers * (block["t_fwd_s"] + block["t_bwd_s"]), rel=REL)
    assert row["t_bubble_s"] == pytest.approx((pp - 1) * (t_loc + row["t_pp_comm_s"]) / n_mb,
                                              rel=REL, abs=0.0)
    assert row["iteration_time_s"] == pytest.approx(sum(row[c] for c in TIME_COLUMNS), rel=REL)
    # memory of the binding stage
    in_flight = min(pp, n_mb)
    w_blocks, a_blocks = layers * block["weight_bytes"], layers * block["activation_bytes"]
    if pp == 1:
        stages = [(w_blocks + pre["weight_bytes"] + post["weight_bytes"],
                   a_blocks + pre["activation_bytes"] + post["activation_bytes"])]
    else:
        stages = [(w_blocks + pre["weight_bytes"],
                   (a_blocks + pre["activation_bytes"]) * in_flight),
                  (w_blocks + post["weight_bytes"], a_blocks + post["activation_bytes"])]
    mems = [(2 + 6 / dp_group) * w + a for w, a in stages]
    w, a = stages[int(np.argmax(mems))]
    assert row["weights_gb"] * 1e9 == pytest.approx(w, rel=REL)
    assert row["activations_gb"] * 1e9 == pytest.approx(a, rel=REL)
    assert row["memory_gb"] * 1e9 == pytest.approx(max(mems), rel=REL)


@pytest.mark.parametrize("name,changes,gpus,strategy,mode,nvs", CASES)
def test_evaluate_equals_the_search_row(h200, name, changes, gpus, strategy, mode, nvs):
    model = load_model(name)
    if changes:
        model = model.with_overrides(**changes)
    assert not model.tied_embeddings
    res = search(model, h200, gpus, GBS, strategy, mode=mode, nvs=nvs, top_k=3)
    assert len(res.top) > 0
    for i in range(len(res.top)):
        ref = res.top.iloc[i]
        ev = evaluate_row(model, h200, ref, mode, nvs)
        assert ev.fits == bool(ref["fits"])  # a tight row too (model.engine.tight)
        assert_same_row(ev.row, ref)
        dp_group = int(ref["dp"]) * (int(ref["tp2"]) if res.strategy == "context" else 1)
        check_breakdown(ref, ev.ops, dp_group)
        edges = set(ev.ops["where"]) - {"block"}
        assert edges == (set() if mode == "paper" or model.vocab == 0 else {"pre", "post"})


def test_evaluate_picks_the_best_placement_when_left_out(h200, gpt3):
    """A placement left out is the fastest fitting one: the search's best for those dims."""
    pins = dict(tp1=4, pp=64, dp=2, microbatch=1)
    best = search(gpt3, h200, 512, GBS, "1d", mode="paper", nvs=8, pins=pins).best
    ev = evaluate(gpt3, h200, 512, GBS, "1d", mode="paper", nvs=8, **pins)
    assert_same_row(ev.row, best)
