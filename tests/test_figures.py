"""Dashboard figures: the data each figure plots, checked against the model's frames — the
model relations they rely on, the theme, strong scaling, breakdowns and the design space (the
per-op views, systems, what holds across figures and degenerate input:
tests/test_figures_views.py, which shares these fixtures)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from dashboard.figures import (
    efficiency_figure,
    figure_table,
    hbm_contour_figure,
    heatmap_figure,
    memory_figure,
    ops_breakdown_figure,
    optimal_config_figure,
    roofline_figure,
    systems_figure,
    theme,
    time_breakdown_figure,
    training_time_figure,
)
from dashboard.figures.common import strategy_name
from model import best_per_cell, load_model, load_system
from model.engine.report import MEMORY_COLUMNS, TIME_COLUMNS
from model.studies.sweep import best_frame
from tests.unstacked import design_space, evaluate, search, sweep

COUNTS = [2 ** k for k in range(2, 15)]
REL = 1e-9
# the strategies' line names: idealised ones (no production stack ships them) say so
LINE_NAMES = {strategy_name(s) for s in theme.STRATEGY_LABELS}


# --- inputs, built once from the model ----------------------------------------------------------
@pytest.fixture(scope="module")
def system():
    return load_system("h200")


@pytest.fixture(scope="module")
def scaling(system):
    return best_frame(sweep(load_model("gpt3-1t"), system, COUNTS, 4096))


@pytest.fixture(scope="module")
def cells(system):
    # no HBM reserve: keeps the slow (tp1 = 2, pp = 1) cell feasible, a > 10× range of times
    roomy = system.with_overrides(memory_reserve_gb=0.0)
    return best_per_cell(design_space(load_model("gpt3-1t"), roomy, 4096, 4096, "summa"),
                         "tp1", "pp")


@pytest.fixture(scope="module")
def ops(system):
    return evaluate(load_model("gpt3-1t"), system, 4096, 4096, "1d", tp1=8, pp=16, dp=32,
                    microbatch=1).ops


@pytest.fixture(scope="module")
def systems_frame():
    m, frames = load_model("gpt3-175b"), []
    for name in ("a100", "h200"):
        for nvs in (4, 64):
            best = best_frame(sweep(m, load_system(name), [64, 256, 1024, 4096], 1536, nvs=nvs))
            best.insert(0, "system", f"{name.upper()} · NVS {nvs}")
            frames.append(best)  # all strategies: the figure keeps the best per point
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def hbm_frame(system):
    m, rows = load_model("gpt3-175b"), []
    for cap in (10.0, 80.0, 141.0):
        for bw in (2000.0, 4800.0, 8000.0):
            s = system.with_overrides(hbm_capacity_gb=cap, hbm_bandwidth_gb_per_s=bw)
            best = search(m, s, 256, 1536, "1d", top_k=1).best
            rows.append({"hbm_capacity_gb": cap, "hbm_bandwidth_gb_per_s": bw,
                         "train_days": np.nan if best is None else float(best["train_days"])})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def figs(scaling, cells, ops, system, systems_frame, hbm_frame):
    return {
        "training": training_time_figure(scaling),
        "breakdown": time_breakdown_figure(scaling),
        "fraction": time_breakdown_figure(scaling, normalized=True),
        "memory": memory_figure(scaling, system.hbm_capacity_gb),
        "config": optimal_config_figure(scaling),
        "efficiency": efficiency_figure(scaling),
        "heatmap": heatmap_figure(cells, "tp1", "pp"),
        "roofline": roofline_figure(ops, system.matrix_tflops_fp16, system.vector_tflops_fp16,
                                    system.hbm_bandwidth_gb_per_s),
        "ops": ops_breakdown_figure(ops),
        "systems": systems_figure(systems_frame),
        "hbm": hbm_contour_figure(hbm_frame),
    }


def traces(fig: go.Figure, group: str | None = None, kind: str | None = None) -> list:
    return [t for t in fig.data if (group is None or (t.meta or {}).get("group") == group)
            and (kind is None or t.type == kind)]


def col(trace, name: str) -> list:
    """A customdata column of a trace by the name recorded in its meta."""
    i = trace.meta["customdata"].index(name)
    return [row[i] for row in trace.customdata]


# --- the model relations the figures rely on ----------------------------------------------------
def test_time_components_add_up_to_iteration_time(scaling):
    total = scaling[list(TIME_COLUMNS)].sum(axis=1)
    np.testing.assert_allclose(total, scaling["iteration_time_s"], rtol=REL)


def test_memory_components_add_up_to_memory(scaling):
    np.testing.assert_allclose(scaling[list(MEMORY_COLUMNS)].sum(axis=1), scaling["memory_gb"],
                               rtol=REL)


@pytest.mark.parametrize("strategy, dims", [
    ("1d", dict(tp1=8, pp=16, dp=32, microbatch=1)),
    ("summa", dict(tp1=8, tp2=1, pp=16, dp=32, microbatch=1, nb=16)),
])
def test_op_components_add_up_to_op_time(system, strategy, dims):
    o = evaluate(load_model("gpt3-1t"), system, 4096, 4096, strategy, **dims).ops
    np.testing.assert_allclose(o["t_compute_s"] + o["t_memory_exposed_s"] + o["t_comm_s"],
                               o["t_fwd_s"] + o["t_bwd_s"], rtol=REL)


# --- theme --------------------------------------------------------------------------------------
def test_theme_tables():
    assert theme.STRATEGY_LABELS == {"1d": "1D TP", "summa": "2D SUMMA", "context": "2D context"}
    assert tuple(theme.COMPONENT_COLORS) == TIME_COLUMNS == theme.COMPONENT_ORDER
    assert [theme.COMPONENT_LABELS[c] for c in TIME_COLUMNS] == [
        "compute", "exposed memory", "TP comm", "EP all-to-all", "PP comm", "DP comm", "bubble",
        "optimizer step", "offload transfers"]
    assert tuple(theme.MEMORY_COLORS) == MEMORY_COLUMNS
    assert theme.MEMORY_LABELS["optimizer_gb"] == "optimizer state"
    for table in (theme.STRATEGY_COLORS, theme.COMPONENT_COLORS, theme.MEMORY_COLORS):
        assert len(set(table.values())) == len(table)
    opts = theme.CONFIG["toImageButtonOptions"]
    assert opts["format"] == "png" and opts["scale"] == 3 and theme.CONFIG["displaylogo"] is False


def test_apply_layout_presentation_scales_fonts():
    small = theme.apply_layout(go.Figure(), "t", presentation=False)
    big = theme.apply_layout(go.Figure(), "t", presentation=True)
    assert big.layout.template.layout.font.size == pytest.approx(
        1.5 * small.layout.template.layout.font.size)
    assert big.layout.title.font.size == pytest.approx(1.5 * small.layout.title.font.size)
    assert small.layout.template.layout.paper_bgcolor == "white"


# --- strong scaling -----------------------------------------------------------------------------
def test_training_time_figure_data(figs, scaling):
    fig = figs["training"]
    assert set(scaling["strategy"]) == {"1d", "summa", "context"}
    production = scaling[scaling["strategy"] != "summa"]
    best = production.loc[production["train_days"].idxmin(), "strategy"]
    start = production[production["strategy"] == best].sort_values("gpus").iloc[0]
    for s, part in scaling.groupby("strategy"):
        part = part.sort_values("gpus")
        if s == "summa":  # idealised: drawn from the best strategy's first count on
            part = part[part["gpus"] >= start["gpus"]]
        (line,) = traces(fig, s)
        assert line.name == strategy_name(s)
        assert line.name.endswith("(idealised)") == (s == "summa")  # not shipped: labelled
        assert line.marker.symbol.endswith("-open") == (s == "summa")  # idealised: hollow
        np.testing.assert_array_equal(line.x, part["gpus"])
        np.testing.assert_allclose(line.y, part["train_days"], rtol=REL)
        assert col(line, "dp") == [str(v) for v in part["dp"]]
        assert col(line, "placement") == [f"{a}×{b}×{c}×{d}" for a, b, c, d in
                                          part[["nv_tp1", "nv_tp2", "nv_dp", "nv_pp"]].values]
        assert "MFU" in line.hovertemplate and "samples/s" in line.hovertemplate
    (ideal,) = traces(fig, "ideal")  # one line, from the best strategy's first count
    assert ideal.line.dash == "dash" and ideal.x[0] == start["gpus"]
    np.testing.assert_allclose(ideal.y, start["train_days"] * start["gpus"]
                               / np.asarray(ideal.x, float), rtol=REL)
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    assert set(fig.layout.xaxis.tickvals) <= set(scaling["gpus"])
    assert fig.layout.xaxis.title.text == "GPUs"
    assert fig.layout.yaxis.title.text == "training time (days)"


def test_efficiency_figure_data(figs, scaling):
    """Against each strategy's most efficient count b (highest samples/s per GPU), not its
    smallest (memory-starved: SUMMA's 128 GPUs made the others look 10× superlinear)."""
    fig = figs["efficiency"]
    for s, part in scaling.groupby("strategy"):
        part = part.sort_values("gpus")
        speedup, ideal, eff = traces(fig, s)
        thr, n = part["samples_per_s"].to_numpy(), part["gpus"].to_numpy()
        b = int(np.argmax(thr / n))
        np.testing.assert_allclose(speedup.y, thr / thr[b], rtol=REL)
        np.testing.assert_allclose(ideal.y, n / n[b], rtol=REL)
        np.testing.assert_allclose(eff.y, (thr / n) / (thr[b] / n[b]), rtol=REL)
        assert max(eff.y) == pytest.approx(1.0) and col(eff, "baseline_gpus") == [n[b]] * len(n)
        assert eff.xaxis == "x2" and speedup.xaxis == "x"
        note = fig.layout.annotations[-1].text  # the baseline, stated under the plots
        assert "most efficient count" in note and f"{strategy_name(s)}: " in note
    assert fig.layout.yaxis.title.text == "speedup (×)"  # short: no run-in with the title


def test_efficiency_figure_threshold_and_knee(scaling):
    fig = efficiency_figure(scaling, threshold=0.6, knee=(2048, "1d"))
    assert [sh.y0 for sh in fig.layout.shapes] == [1.0, 0.6]  # ideal, threshold (dashed)
    star = next(t for t in fig.data if t.name == "recommended (knee)")
    line = next(t for t in traces(fig, "1d") if t.xaxis == "x2")
    assert star.x[0] == 2048 and star.y[0] == pytest.approx(
        line.y[list(line.x).index(2048)]) and star.xaxis == "x2"
    time = training_time_figure(scaling, knee=(2048, "1d"))
    star = next(t for t in time.data if t.name == "recommended (knee)")
    days = scaling[(scaling["gpus"] == 2048) & (scaling["strategy"] == "1d")]["train_days"]
    assert star.y[0] == pytest.approx(float(days.iloc[0]))
    assert not [t for t in efficiency_figure(scaling).data if t.name == "recommended (knee)"]


def test_optimal_config_figure_data(figs, scaling):
    fig = figs["config"]
    for s, part in scaling.groupby("strategy"):
        part = part.sort_values("gpus")
        by_dim = {t.name: t for t in traces(fig, s)}
        assert list(by_dim) == ["tp1", "tp2", "pp", "dp", "microbatch", "nb"]
        for dim, t in by_dim.items():
            np.testing.assert_array_equal(t.y, part[dim])
            assert t.line.color == theme.DIMENSION_COLORS[dim]
        assert "placement" in by_dim["tp1"].meta["customdata"]
    ticks = list(fig.layout.yaxis.tickvals)
    assert all(math.log2(t).is_integer() for t in ticks)
    assert fig.layout.yaxis.type == "log"


# --- stacked breakdowns -------------------------------------------------------------------------
def stacked_totals(fig: go.Figure, group: str) -> pd.Series:
    table = figure_table(fig)
    return table[table["group"] == group].groupby("x")["y"].sum()


def test_time_breakdown_sums_to_iteration_time(figs, scaling):
    fig = figs["breakdown"]
    assert fig.layout.barmode == "stack"
    for s, part in scaling.groupby("strategy"):
        bars = traces(fig, s)
        assert [b.name for b in bars] == [theme.COMPONENT_LABELS[c] for c in TIME_COLUMNS]
        assert [b.marker.color for b in bars] == [theme.COMPONENT_COLORS[c] for c in TIME_COLUMNS]
        totals = stacked_totals(fig, s)
        expected = part.set_index(part["gpus"].astype(str))["iteration_time_s"]
        np.testing.assert_allclose(totals[expected.index], expected, rtol=REL)
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert sorted(legend) == sorted(theme.COMPONENT_LABELS.values())  # once per component
    fractions = figs["fraction"]
    for s in set(scaling["strategy"]):
        np.testing.assert_allclose(stacked_totals(fractions, s), 1.0, rtol=REL)
    assert fractions.layout.yaxis.tickformat == ".0%"


def test_memory_figure_sums_and_capacity(figs, scaling, system):
    fig = figs["memory"]
    for s, part in scaling.groupby("strategy"):
        bars = traces(fig, s)
        assert [b.name for b in bars] == [theme.MEMORY_LABELS[c] for c in MEMORY_COLUMNS]
        expected = part.set_index(part["gpus"].astype(str))["memory_gb"]
        np.testing.assert_allclose(stacked_totals(fig, s)[expected.index], expected, rtol=REL)
    lines = [sh for sh in fig.layout.shapes if sh.type == "line"]
    assert len(lines) == scaling["strategy"].nunique()
    assert all(sh.y0 == sh.y1 == system.hbm_capacity_gb and sh.line.dash == "dash"
               for sh in lines)
    legend = [t for t in fig.data if t.name and "HBM capacity" in t.name]
    assert len(legend) == 1 and f"{system.hbm_capacity_gb:g} GB" in legend[0].name  # named
    # the capacity defaults to the frame's column
    default = memory_figure(scaling)
    assert {sh.y0 for sh in default.layout.shapes} == {system.hbm_capacity_gb}


# --- design space -------------------------------------------------------------------------------
def test_heatmap_marks_optimum_and_infeasible_cells(figs, cells):
    fig = figs["heatmap"]
    bad, good = traces(fig, kind="heatmap")
    star = next(t for t in fig.data if t.name == "optimum")
    best = cells.loc[cells["best_time_s"].idxmin()]
    assert (star.x[0], star.y[0]) == (str(int(best["tp1"])), str(int(best["pp"])))
    assert star.marker.symbol == "star"
    assert list(good.x) == [str(v) for v in sorted(set(cells["tp1"]))]  # numeric order
    assert list(good.y) == [str(v) for v in sorted(set(cells["pp"]))]
    # colour: log10 of the time relative to the best (issue 21: a linear scale hid the
    # non-convexities; tests/test_figure_visibility.py checks the bins)
    lo, hi = cells["best_time_s"].min(), cells["best_time_s"].max()
    z = np.array(good.z, dtype=float)
    assert np.nanmin(z) == pytest.approx(0.0)
    assert np.nanmax(z) == pytest.approx(good.zmax)  # the slowest cell tops the last bin
    assert hi / lo > 10 and len(good.colorbar.tickvals) == int(good.zmax)  # a tick per bin
    assert "slower than the best" in good.colorbar.title.text
    # infeasible cells: exactly those with candidates and none feasible, marked ✕
    infeasible = cells[cells["feasible"] == 0]
    table = figure_table(fig)
    marked = table[table["trace"] == "does not fit"]
    assert len(infeasible) > 0
    assert set(zip(marked["x"], marked["y"])) == {
        (str(a), str(b)) for a, b in infeasible[["tp1", "pp"]].values}
    assert set(marked["text"]) == {"✕"} and "does not fit" in bad.hovertemplate
    # hover: the best configuration's other dimensions
    ix, iy = list(good.x).index(star.x[0]), list(good.y).index(star.y[0])
    custom = dict(zip(good.meta["customdata"], good.customdata[iy][ix]))
    assert custom["best_time_s"] == pytest.approx(best["best_time_s"])
    assert custom["dp"] == str(int(best["dp"])) and custom["nb"] == str(int(best["nb"]))


def test_heatmap_axes_span_exactly_the_cells(figs, cells):
    fig = figs["heatmap"]
    good = traces(fig, "feasible")[0]
    star = next(t for t in fig.data if t.name == "optimum")
    assert star.x[0] in list(good.x) and star.y[0] in list(good.y)  # the same category strings
    for axis, cats in ((fig.layout.xaxis, good.x), (fig.layout.yaxis, good.y)):
        assert axis.type == "category" and list(axis.categoryarray) == list(cats)
        assert list(axis.range) == [-0.5, len(cats) - 0.5]  # no padding around the cells
    # the optimum's label sits above the plot, never over a cell (it covered one)
    label = fig.layout.annotations[0]
    assert (label.xref, label.yref, label.y, label.yanchor) == ("paper", "paper", 1.0, "bottom")
    assert not label.showarrow and f"tp1 = {star.x[0]}, pp = {star.y[0]}" in label.text


def test_hbm_contour_figure(figs, hbm_frame):
    fig = figs["hbm"]
    contour = fig.data[0]
    assert contour.type == "contour"
    assert list(contour.x) == [10.0, 80.0, 141.0]
    assert list(contour.y) == pytest.approx([2.0, 4.8, 8.0])  # TB/s
    z = np.array(contour.z, dtype=float)
    assert np.isnan(z[:, 0]).all()  # 10 GB: nothing fits, left blank
    expected = hbm_frame.pivot(index="hbm_bandwidth_gb_per_s", columns="hbm_capacity_gb",
                               values="train_days").to_numpy()
    np.testing.assert_allclose(z, expected, rtol=REL)
    assert fig.layout.xaxis.title.text == "HBM capacity (GB)"
    assert fig.layout.yaxis.title.text == "HBM bandwidth (TB/s)"
    few = hbm_contour_figure(hbm_frame[hbm_frame["hbm_capacity_gb"] > 10])
    assert few.data[0].type == "heatmap"

