"""The training-time figure's ideal-scaling line and idealised strategies (issue 29, item 6): on
the default scenario 2D SUMMA (idealised) fits at 128 GPUs only with TP across nodes, at
148,753 days, 274× its 256-GPU value; it started the ideal line there and stretched the axis
over five decades."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dashboard.figures import training_time_figure
from dashboard.figures.maker import plain

# the default scenario's best rows (gpt3-1t on H200, 1T tokens), rounded
DAYS = {"1d": {256: 516.2, 512: 256.3, 1024: 132.6, 2048: 70.4, 4096: 38.0},
        "context": {256: 516.2, 512: 256.3, 1024: 132.6, 2048: 70.4, 4096: 37.9},
        "summa": {128: 148752.9, 256: 542.2, 512: 269.3, 1024: 139.2, 2048: 74.2, 4096: 41.7}}


def _frame() -> pd.DataFrame:
    return pd.DataFrame([dict(strategy=s, gpus=n, train_days=d, iteration_time_s=d / 100,
                              samples_per_s=1e5 / d, mfu=0.4, dp=1, tp1=8, tp2=1, pp=1,
                              microbatch=1)
                         for s, days in DAYS.items() for n, d in days.items()])


def _figure() -> dict:
    return plain(training_time_figure(_frame()))


def test_one_ideal_line_from_the_best_strategy_first_count():
    fig = _figure()
    ideal = [t for t in fig["data"] if (t.get("meta") or {}).get("group") == "ideal"]
    assert len(ideal) == 1
    x, y = np.asarray(ideal[0]["x"], float), np.asarray(ideal[0]["y"], float)
    assert x[0] == 256 and y[0] == DAYS["context"][256]  # context: the fastest at 4,096
    np.testing.assert_allclose(y, 516.2 * 256 / x)
    assert "context" in ideal[0]["name"].lower()
    dashed = [t for t in fig["data"] if (t.get("line") or {}).get("dash") == "dash"]
    assert dashed == ideal  # no per-strategy ideal lines (SUMMA's from 128 GPUs)


def test_idealised_summa_never_anchors_the_axes():
    fig = _figure()
    summa = next(t for t in fig["data"] if t["name"].startswith("2D SUMMA"))
    assert min(summa["x"]) == 256  # not at 128 GPUs, 148,753 days
    ticks = fig["layout"]["yaxis"]["tickvals"]
    assert max(ticks) < 2000 and max(ticks) / min(ticks) < 1000  # under three decades
    assert min(fig["layout"]["xaxis"]["tickvals"]) == 256


def test_only_idealised_strategies_are_drawn_whole():
    frame = _frame()
    fig = plain(training_time_figure(frame[frame["strategy"] == "summa"]))
    summa = next(t for t in fig["data"] if t["name"].startswith("2D SUMMA"))
    assert min(summa["x"]) == 128
