"""Serving's held-out residuals and the coverage a conformal serving bar would keep (issue 32,
item 5; model/validation/serving_residuals.py): the coverage arithmetic on hand-made scores,
and the stored leave-one-model-out scores of the TensorRT-LLM fit data."""

from __future__ import annotations

import pytest

from model.serving.validity import population
from model.validation import serving_residuals as sr


def _scores(values, models):
    return tuple({"population": "dense/hopper", "model": m, "score": v}
                 for v, m in zip(values, models, strict=True))


def test_coverage_by_model_and_by_run_on_hand_made_scores():
    # five runs of two models; at 50 % the radius of n others is the ⌈(n+1)/2⌉-th smallest
    scores = _scores([0.01, 0.02, 0.03, 0.50, 0.60], ["a", "a", "a", "b", "b"])
    [row] = sr.serving_coverage(0.5, scores).to_dict("records")
    # model left out: a's runs against b's (r = 0.60), b's against a's (r = 0.02)
    assert (row["n"], row["models"], row["tested"]) == (5, 2, 5)
    assert row["empirical_coverage"] == pytest.approx(3 / 5)
    # run left out: each against the other four (r = 3rd smallest of four)
    assert row["loo_coverage"] == pytest.approx(3 / 5)


def test_the_stored_serving_scores_cover_every_run_of_the_fit_data():
    from model.validation import serving as sv
    stored = sr.stored_scores()
    assert len(stored) == len(sv.runs()) > 200
    assert all(s["score"] >= 0 for s in stored)
    keys = {population(moe, gen) for moe in (False, True)
            for gen in ("ampere", "hopper", "blackwell", "blackwell-ultra")}
    assert {s["population"] for s in stored} <= keys


@pytest.mark.parametrize("q", [0.5, 0.8, 0.9])
def test_run_left_out_coverage_keeps_the_conformal_promise(q):
    table = sr.serving_coverage(q)
    for row in table.to_dict("records"):
        if row["n"] - 1 >= round(q / (1 - q)):
            assert q - 1e-9 <= row["loo_coverage"] < q + 1 / row["n"] + 1e-9, row
