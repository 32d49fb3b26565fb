"""Dashboard figures, continued: the per-op views (roofline, op breakdown), the systems
comparison, what holds across every figure (strategy colours, presentation fonts, JSON and
Plotly validation) and empty or degenerate input. The figures and their inputs are
tests/test_figures.py's fixtures (its searches are answered from the per-process cache)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import test_figures
from test_figures import LINE_NAMES, REL, col, traces

from dashboard.figures import (
    efficiency_figure,
    empty_figure,
    figure_table,
    hbm_contour_figure,
    heatmap_figure,
    memory_figure,
    ops_breakdown_figure,
    optimal_config_figure,
    parse_system_label,
    roofline_figure,
    systems_figure,
    theme,
    time_breakdown_figure,
    training_time_figure,
)
from dashboard.figures.common import strategy_name, strategy_title

# test_figures' fixtures, found here by pytest (module-scoped: built again for this module)
system, scaling, cells, ops = (test_figures.system, test_figures.scaling, test_figures.cells,
                               test_figures.ops)
systems_frame, hbm_frame, figs = (test_figures.systems_frame, test_figures.hbm_frame,
                                  test_figures.figs)


# --- per-op views -------------------------------------------------------------------------------
def test_roofline_roofs_and_points(figs, ops, system):
    fig = figs["roofline"]
    roofs = {t.name.split()[0]: t for t in traces(fig, "roof")}
    assert set(roofs) == {"HBM", "matrix", "vector"}
    assert set(roofs["matrix"].y) == {system.matrix_tflops_fp16}
    assert set(roofs["vector"].y) == {system.vector_tflops_fp16}
    hbm = roofs["HBM"]
    np.testing.assert_allclose(np.array(hbm.y) / np.array(hbm.x),
                               system.hbm_bandwidth_gb_per_s / 1000.0, rtol=REL)
    ridge = system.matrix_tflops_fp16 * 1000.0 / system.hbm_bandwidth_gb_per_s
    assert roofs["matrix"].x[0] == pytest.approx(ridge) == hbm.x[-1]
    flops = ops["flop_fwd"] + ops["flop_bwd"]
    nbytes = ops["hbm_bytes_fwd"] + ops["hbm_bytes_bwd"]
    kept = ops[(flops > 0) & (nbytes > 0)]
    points = [t for t in fig.data if (t.meta or {}).get("group") != "roof"]
    assert sum(len(t.x) for t in points) == len(kept)
    for t in points:
        assert t.marker.color == theme.BOUND_COLORS[t.meta["group"]]
        for name, x, y, size in zip(t.text, t.x, t.y, t.marker.size):
            row = kept[kept["op"] == name].iloc[0]
            f = row["flop_fwd"] + row["flop_bwd"]
            assert x == pytest.approx(f / (row["hbm_bytes_fwd"] + row["hbm_bytes_bwd"]))
            assert y == pytest.approx(f / (row["t_compute_s"] + row["t_memory_exposed_s"]) / 1e12)
            assert size == pytest.approx(row["t_iteration_s"])
            assert row["bound"] == t.meta["group"]
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    # ops without FLOPs or without HBM bytes are left out
    some = ops.copy()
    some.loc[0, ["flop_fwd", "flop_bwd"]] = 0.0
    some.loc[1, ["hbm_bytes_fwd", "hbm_bytes_bwd"]] = 0.0
    fewer = roofline_figure(some, 989.4, 133.8, 4800.0)
    names = {n for t in fewer.data if t.meta["group"] != "roof" for n in t.text}
    assert len(names) == len(ops) - 2 and not {ops["op"][0], ops["op"][1]} & names


def test_ops_breakdown_sums_to_op_time(figs, ops):
    fig = figs["ops"]
    assert [t.name for t in fig.data] == ["compute", "exposed memory", "communication"]
    assert [t.marker.color for t in fig.data] == [  # a dense model: no EP all-to-all
        theme.OP_COMPONENT_COLORS[c] for c in theme.OP_COMPONENT_ORDER if c != "t_ep_comm_s"]
    table = figure_table(fig)
    totals = table.groupby("y")["x"].sum()
    np.testing.assert_allclose(totals[ops["op"]], ops["t_iteration_s"], rtol=REL)
    order = list(fig.layout.yaxis.categoryarray)
    assert order == list(ops.sort_values("t_iteration_s", kind="stable")["op"])  # slowest on top
    assert all(t.orientation == "h" for t in fig.data)
    # tall enough for every op's label: grows with the ops, never below the 430 px card
    assert fig.layout.height >= max(430, 1.5 * theme.FONT_SIZE * len(ops))
    assert ops_breakdown_figure(ops.iloc[:3]).layout.height == 430


# --- systems ------------------------------------------------------------------------------------
def test_parse_system_label():
    assert parse_system_label("H200 · NVS 8") == ("H200", 8)
    assert parse_system_label("GB200-NVL72 · NVS 72") == ("GB200", 72)
    assert parse_system_label("PAPER-B200-NEXT · NVS 64") == ("B200", 64)
    assert parse_system_label("custom") == ("custom", None)


def test_systems_figure_best_over_strategies(figs, systems_frame):
    fig = figs["systems"]
    assert [t.name for t in fig.data] == ["A100 · NVS 4", "A100 · NVS 64", "H200 · NVS 4",
                                          "H200 · NVS 64"]
    for t in fig.data:
        part = systems_frame[systems_frame["system"] == t.name]
        best = part.loc[part.groupby("gpus")["train_days"].idxmin()].sort_values("gpus")
        np.testing.assert_array_equal(t.x, best["gpus"])
        np.testing.assert_allclose(t.y, best["train_days"], rtol=REL)
        assert col(t, "strategy_name") == [strategy_name(s) for s in best["strategy"]]
    a4, a64, h4, h64 = fig.data
    assert a4.line.color == a64.line.color != h4.line.color == h64.line.color
    assert a4.line.dash == h4.line.dash != a64.line.dash == h64.line.dash


def test_systems_figure_gives_every_system_its_own_colour(systems_frame):
    """A100 and B200 once shared a blue (colour by generation); an edited H200 is not the
    preset: one distinct colour per system shown, the domain in the dash."""
    part = systems_frame[systems_frame["system"] == "A100 · NVS 4"]
    heads = ["A100", "H100", "B200", "B300", "GB200-NVL72", "MI300X", "H200 (edited)"]
    frame = pd.concat([part.assign(system=f"{h} · NVS 8") for h in heads]
                      + [part.assign(system="GB200-NVL72 · NVS 72")], ignore_index=True)
    fig = systems_figure(frame)
    colour = {t.name: t.line.color for t in fig.data}
    assert len({colour[f"{h} · NVS 8"] for h in heads}) == len(heads)
    nvl8, nvl72 = (next(t for t in fig.data if t.name == f"GB200-NVL72 · NVS {n}")
                   for n in (8, 72))
    assert nvl8.line.color == nvl72.line.color and nvl8.line.dash != nvl72.line.dash


# --- across figures -----------------------------------------------------------------------------
def test_strategy_colours_identical_across_figures(figs):
    seen: dict[str, set[str]] = {}
    for fig in (figs["training"], figs["efficiency"]):
        for t in fig.data:
            group = (t.meta or {}).get("group")
            if group in theme.STRATEGY_COLORS:
                seen.setdefault(group, set()).add(t.line.color)
    for fig in (figs["breakdown"], figs["memory"], figs["config"]):  # subplot title colours
        for ann in fig.layout.annotations[:3]:
            label = ann.text.replace("<b>", "").replace("</b>", "")
            key = {strategy_title(k): k for k in theme.STRATEGY_LABELS}[label]
            seen.setdefault(key, set()).add(ann.font.color)
    assert {k: v for k, v in seen.items()} == {k: {c} for k, c in theme.STRATEGY_COLORS.items()}


def build_all(scaling, cells, ops, system, systems_frame, hbm_frame, presentation):
    args = dict(presentation=presentation)
    return [
        training_time_figure(scaling, **args), time_breakdown_figure(scaling, **args),
        memory_figure(scaling, 141.0, **args), optimal_config_figure(scaling, **args),
        efficiency_figure(scaling, **args), heatmap_figure(cells, "tp1", "pp", **args),
        roofline_figure(ops, 989.4, 133.8, 4800.0, **args), ops_breakdown_figure(ops, **args),
        systems_figure(systems_frame, **args), hbm_contour_figure(hbm_frame, **args),
        empty_figure("nothing", **args),
    ]


def test_presentation_mode_enlarges_fonts(scaling, cells, ops, system, systems_frame, hbm_frame):
    inputs = (scaling, cells, ops, system, systems_frame, hbm_frame)
    for small, big in zip(build_all(*inputs, False), build_all(*inputs, True)):
        assert big.layout.template.layout.font.size > small.layout.template.layout.font.size
        for a, b in zip(small.layout.annotations, big.layout.annotations):
            assert b.font.size == pytest.approx(1.5 * a.font.size)


def test_figures_serialise(figs):
    for name, fig in figs.items():
        assert fig.to_dict()["data"], name
        html = fig.to_html(include_plotlyjs=False, full_html=False)
        assert "Plotly.newPlot" in html, name
        assert fig.layout.xaxis.title.text, name  # every view has axis titles
        assert fig.layout.yaxis.title.text, name


def _json(fig: go.Figure) -> dict:
    return json.loads(fig.to_json(), parse_constant=str)  # NaN as 'NaN', comparable


def test_figures_are_what_plotly_validation_gives(scaling, cells, ops, system, systems_frame,
                                                  hbm_frame):
    """The builders skip plotly's (slow) property validation: validating each figure again
    raises nothing and changes nothing."""
    inputs = (scaling, cells, ops, system, systems_frame, hbm_frame)
    for presentation in (False, True):
        for fig in build_all(*inputs, presentation):
            assert _json(go.Figure(fig.to_dict())) == _json(fig)


# --- empty and degenerate input -----------------------------------------------------------------
def is_message(fig: go.Figure) -> bool:
    return len(fig.data) == 0 and len(fig.layout.annotations) == 1 and bool(
        fig.layout.annotations[0].text)


@pytest.mark.parametrize("frame", [
    pd.DataFrame(), None, pd.DataFrame({"foo": [1]}),
])
def test_empty_or_unusable_frames_give_a_message(frame):
    for fig in (training_time_figure(frame), time_breakdown_figure(frame),
                memory_figure(frame, 141.0), optimal_config_figure(frame),
                efficiency_figure(frame), heatmap_figure(frame, "tp1", "pp"),
                roofline_figure(frame, 989.0, 134.0, 4800.0), ops_breakdown_figure(frame),
                systems_figure(frame), hbm_contour_figure(frame)):
        assert is_message(fig)
        assert figure_table(fig).empty


def _drawn(scaling: pd.DataFrame) -> pd.DataFrame:
    """The rows the training-time figure draws: every production strategy's; the idealised
    SUMMA's from the fastest production strategy's smallest count on (issue 29)."""
    production = scaling[scaling["strategy"] != "summa"]
    best = production.loc[production["train_days"].idxmin(), "strategy"]
    start = production.loc[production["strategy"] == best, "gpus"].min()
    return scaling[(scaling["strategy"] != "summa") | (scaling["gpus"] >= start)]


def test_nan_rows_are_skipped_not_fatal(scaling, cells, ops):
    broken = scaling.copy()
    broken.loc[broken.index[:3], ["train_days", "samples_per_s", "t_compute_s"]] = np.nan
    fig = training_time_figure(broken)
    assert sum(len(t.x) for t in fig.data if t.name in LINE_NAMES) == len(
        _drawn(broken.dropna(subset=["train_days"])))
    for f in (efficiency_figure(broken), time_breakdown_figure(broken), memory_figure(broken)):
        f.to_dict()
    all_nan = scaling.assign(train_days=np.nan)
    assert is_message(training_time_figure(all_nan))
    assert not is_message(heatmap_figure(cells.assign(best_time_s=np.nan), "tp1", "pp"))
    zero = ops.assign(flop_fwd=0.0, flop_bwd=0.0)
    assert is_message(roofline_figure(zero, 989.0, 134.0, 4800.0))
    single = scaling.iloc[:1]
    assert len(training_time_figure(single).data[0].x) == 1
    assert efficiency_figure(single).data[0].y[0] == 1.0


def test_figure_table_round_trips(figs, scaling):
    table = figure_table(figs["training"])
    assert {"trace", "type", "group", "x", "y", "dp", "tp1", "placement"} <= set(table.columns)
    lines = table[table["trace"].isin(LINE_NAMES)]
    merged = lines.merge(scaling, left_on=["group", "x"], right_on=["strategy", "gpus"])
    assert len(merged) == len(_drawn(scaling))
    np.testing.assert_allclose(merged["y"], merged["train_days_y"], rtol=REL)
    # through the browser's JSON figure, as the CSV export receives it
    for fig in figs.values():
        direct = figure_table(fig)
        pd.testing.assert_frame_equal(figure_table(go.Figure(fig.to_dict())), direct)
        via_json = figure_table(go.Figure(json.loads(fig.to_json())))
        pd.testing.assert_frame_equal(via_json, direct, check_dtype=False)
    heat = figure_table(figs["heatmap"])
    assert {"z", "text", "best_time_s", "candidates", "feasible"} <= set(heat.columns)
