"""What the figures must let a reader see (issue 21): the 1D line and the context line are
both visible where they coincide (the context strategy with no context parallelism is 1D, and
its line hid 1D's), and the design heatmap's colours separate cells a few percent apart (a
linear scale painted everything within ~15 % of the best the same yellow)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dashboard.figures import efficiency_figure, heatmap_figure, training_time_figure
from dashboard.figures.common import strategy_name
from dashboard.figures.design import RATIO_EDGES


def _frame() -> pd.DataFrame:
    """1D and context with the same best configuration at every count (the common case)."""
    rows = []
    for s in ("1d", "context"):
        for n, days in ((8, 40.0), (16, 21.0), (32, 11.5)):
            rows.append(dict(strategy=s, gpus=n, train_days=days, iteration_time_s=days / 10,
                             samples_per_s=1e3 * n / days, mfu=0.4, dp=n // 8, tp1=8, tp2=1,
                             pp=1, microbatch=1))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("build", [training_time_figure, efficiency_figure])
def test_coinciding_1d_and_context_lines_are_both_visible(build):
    fig = build(_frame())
    lines = {t.name: (i, t) for i, t in enumerate(fig.data) if t.mode == "lines+markers"}
    (i1, one), (ic, ctx) = lines[strategy_name("1d")], lines[strategy_name("context")]
    np.testing.assert_allclose(np.asarray(one.y, float), np.asarray(ctx.y, float))  # same data
    assert i1 < ic  # context is drawn over 1D …
    assert ctx.line.width < one.line.width and ctx.line.dash not in (None, "solid")  # … thinner
    assert ctx.marker.size < one.marker.size and ctx.marker.symbol != one.marker.symbol
    assert one.line.dash in (None, "solid")
    ideal = {t.line.dash for t in fig.data if t.mode == "lines" and t.name
             and t.name.endswith("ideal")}
    assert ctx.line.dash not in ideal  # not mistaken for an ideal-scaling line


def _cells(times: list[float]) -> pd.DataFrame:
    return pd.DataFrame([dict(tp1=2 ** i, pp=1, best_time_s=t, candidates=1, feasible=1)
                         for i, t in enumerate(times)])


def _colors(fig) -> tuple[list[str], dict]:
    """The colour each feasible cell is painted (its z through the stepped scale) and the
    colour bar."""
    good = next(t for t in fig.data if t.type == "heatmap" and t.name != "does not fit")
    scale = [(float(p), c) for p, c in good.colorscale]
    out = []
    for z in np.asarray(good.z, float).ravel():
        if not math.isfinite(z):
            continue
        pos = z / good.zmax
        out.append(next(c for (p0, c), (p1, _) in zip(scale, scale[1:])
                        if p0 <= pos <= p1 and p1 > p0))
    return out, good.colorbar


def test_heatmap_cells_a_few_percent_apart_get_different_colours():
    """Best, +1.5 %, +4 %, +8 %, +14 %, 3× and 30×: seven cells in seven bins (the linear scale
    gave the first five one colour); the colour bar says what it encodes."""
    times = [1.0, 1.015, 1.04, 1.08, 1.14, 3.0, 30.0]
    colors, bar = _colors(heatmap_figure(_cells(times), "tp1", "pp"))
    assert len(colors) == len(times) and len(set(colors)) == len(times)
    assert "slower than the best" in bar.title.text
    assert list(bar.ticktext[:4]) == ["best", "+1 %", "+2 %", "+5 %"]
    # every edge up to 30× (9) and the best: ten bins, one unit each (equal heights)
    assert list(bar.tickvals) == list(range(10))
    assert list(bar.ticktext[4:]) == ["+10 %", "+20 %", "+50 %", "2×", "5×", "10×"]
    assert RATIO_EDGES[:6] == (1.01, 1.02, 1.05, 1.1, 1.2, 1.5)


def test_heatmap_of_one_cell_or_a_narrow_range():
    """One cell (zmax at least +1 %), and a range within 1 % (one bin: one colour)."""
    colors, bar = _colors(heatmap_figure(_cells([2.0]), "tp1", "pp"))
    assert len(colors) == 1 and list(bar.ticktext) == ["best"]
    colors, _ = _colors(heatmap_figure(_cells([2.0, 2.01]), "tp1", "pp"))
    assert len(set(colors)) == 1
