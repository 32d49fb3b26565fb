"""What the dashboard's views say, without a browser (issue 12: realistic headlines and readable
figures; issue 13: the cross-validated error per source): the headline's production strategy,
the idealised one beside it and the knee at a threshold; the log-axis breakdown; GPU ticks that
fit; captions of exported figures; the system comparison's choices and colours; the
cross-validation table and figure against their JSON."""

from __future__ import annotations

import datetime
import json
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import app  # noqa: F401 - creates the Dash app (use_pages) before the pages are imported
from dashboard import figures
from dashboard.controls import presets as PR
from dashboard.controls import scenario as S
from dashboard.figures import theme
from dashboard.figures.axes import count_label, every_nth, gpu_ticks, room_for_titles
from dashboard.figures.common import strategy_name, strategy_title
from dashboard.jobs import compute, studies
from dashboard.pages import hbm, scaling, systems, validation
from dashboard.server import export
from model import load_model, load_system
from model.engine.efficiency import knee
from model.studies.sweep import best_frame
from model.validation.cross_validation import cross_validation_runs, cross_validation_sources
from model.validation.error_bars import CROSS_VALIDATION
from tests.unstacked import sweep


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    """The module's results cache in a temporary directory (never the repository's)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compute, "CACHE_DIR", tmp_path_factory.mktemp("cache"))
        patch.setattr(compute.HANDLE, "store", None)
        yield


def valid(**over) -> dict:
    scn, errors = S.validate_scenario({**S.default_scenario(), **over})
    assert scn is not None, errors
    return scn


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return compute.scaling(valid())


# --------------------------------------------------------------------------- headline, knee
def test_headline_is_a_production_strategy_with_the_idealised_one_beside(frame):
    summary, ideal = scaling.summary_text(frame), scaling.idealised_text(frame)
    production = frame[frame["strategy"].isin(["1d", "context"])]
    best = production.loc[production["train_days"].idxmin()]
    assert f"on {int(best['gpus']):,} GPUs — {best['train_days']:.1f} days" in summary
    assert "Megatron-LM" in summary and "(idealised)" not in summary
    summa = frame[frame["strategy"] == "summa"]
    fastest = summa.loc[summa["train_days"].idxmin()]
    assert ideal.startswith("Beside it, idealised") and "2D SUMMA (idealised)" in ideal
    assert f"{fastest['train_days']:.1f} days" in ideal
    only = frame[frame["strategy"] == "summa"]  # the strategy control set to SUMMA
    assert "idealised strategies only" in scaling.summary_text(only)
    assert scaling.idealised_text(only) == ""


def test_knee_text_moves_with_the_threshold(frame):
    texts = {t: scaling.knee_text(frame, t) for t in (0.3, 0.6, 0.9)}
    sizes = {t: at[0] for t, (_, at) in texts.items()}
    assert sizes[0.9] <= sizes[0.6] <= sizes[0.3] and sizes[0.9] < sizes[0.3]
    for t, (text, at) in texts.items():
        k = knee(frame, t, ("1d", "context"))
        assert at == (k.gpus, k.strategy)
        assert text.startswith(f"Recommended size: {k.gpus:,} GPUs")
        assert f"at or above {100 * t:.0f}%" in text and f"({k.baseline_gpus} GPUs" in text


@pytest.mark.parametrize("value, ok", [(50, True), ("75", True), (1, True), (100, True),
                                       (0, False), (101, False), (None, False), ("x", False)])
def test_threshold_box(value, ok):
    assert (scaling.parse_threshold(value) is not None) == ok
    assert (scaling.threshold_error(value) == "") == ok


def test_scaling_callback_follows_threshold_and_breakdown_scale():
    scn = valid()
    half, most = scaling.update(scn, 50, "log"), scaling.update(scn, 95, "log")
    assert half[2] != most[2]  # the knee's text
    breakdown = len(scaling.TEXTS) + scaling.GRAPHS.index("scaling-breakdown")
    assert half[breakdown]["layout"]["yaxis"]["type"] == "log"
    share = scaling.update(scn, 50, "share")
    assert share[breakdown]["layout"]["yaxis"]["tickformat"] == ".0%"


# --------------------------------------------------------------------------- figures
def test_breakdown_is_on_a_log_axis_that_shows_every_bar(frame):
    fig = figures.time_breakdown_figure(frame)
    lo, hi = fig.layout.yaxis.range
    assert fig.layout.yaxis.type == "log" and "log" in fig.layout.yaxis.title.text
    first = frame["t_compute_s"][frame["t_compute_s"] > 0].min()
    assert 10 ** lo <= first / 1.99 and 10 ** hi >= frame["iteration_time_s"].max()
    assert frame["iteration_time_s"].max() / frame["iteration_time_s"].min() > 100


def test_gpu_tick_labels_are_compact_and_few():
    assert [count_label(n) for n in (4, 512, 1024, 9216, 16384, 1 << 20)] == [
        "4", "512", "1K", "9K", "16K", "1M"]
    assert count_label(1152) == "1152"
    assert every_nth(13, 4) == [0, 4, 8, 12] and every_nth(3, 4) == [0, 1, 2]
    ticks = gpu_ticks([2 ** k for k in range(2, 21)], 6)
    assert len(ticks["tickvals"]) <= 6 and ticks["tickvals"][-1] == 2 ** 20
    assert ticks["tickangle"] == 0


def test_small_multiples_label_few_counts_and_make_room_for_two_line_titles(frame):
    for fig in (figures.time_breakdown_figure(frame), figures.memory_figure(frame)):
        for axis in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.xaxis3):
            assert len(axis.tickvals) <= 4 and axis.tickvals[-1] == axis.categoryarray[-1]
            assert axis.tickangle == 0
        titles = [a.text for a in fig.layout.annotations[:3]]
        assert titles[1] == "<b>2D SUMMA<br>(idealised)</b>"
        assert fig.layout.margin.t > theme.base_layout("x")["margin"]["t"]
    assert strategy_title("1d") == "1D TP" and strategy_name("summa") == "2D SUMMA (idealised)"
    layout = {"margin": {"t": 70}}
    assert room_for_titles(layout, ["a", "b<br>c"])["margin"]["t"] > 70
    assert room_for_titles({"margin": {"t": 70}}, ["a"])["margin"]["t"] == 70


def test_launch_overhead_has_its_colour_and_legend_name():
    ops = pd.DataFrame([{"op": "mlp/dropout", "where": "block", "kind": "dropout",
                         "flop_fwd": 1e6, "flop_bwd": 1e6, "hbm_bytes_fwd": 5e6,
                         "hbm_bytes_bwd": 5e6, "t_compute_s": 8e-5, "t_memory_exposed_s": 0.0,
                         "t_comm_s": 0.0, "bound": "overhead", "t_iteration_s": 0.01}])
    fig = figures.roofline_figure(ops, 989.4, 133.8, 4800.0)
    point = next(t for t in fig.data if (t.meta or {}).get("group") == "overhead")
    assert point.name == "launch-overhead-bound"
    assert point.marker.color == theme.BOUND_COLORS["overhead"]


def test_nvl72_is_no_slower_than_nvl8_at_equal_counts():
    """The scaling axis is the same for every domain; on gpt3-1t on H100 the larger domain
    never loses at an equal count (it did look slower: 72·2^k counts, issue 12)."""
    counts = S.gpu_counts(valid(nvs=72))
    assert counts == S.gpu_counts(valid(nvs=8)) and 1024 in counts and 16384 in counts
    m = load_model("gpt3-1t")
    days = {}
    for nvs in (8, 72):
        best = best_frame(sweep(m, load_system("h100"), counts, 4096, nvs=nvs))
        days[nvs] = best.groupby("gpus")["train_days"].min()
    assert list(days[8].index) == list(days[72].index) and len(days[8]) >= 6
    assert (days[72] <= days[8] * (1 + 1e-12)).all()


# --------------------------------------------------------------------------- export captions
def test_export_caption_names_model_system_budget_and_date():
    day = datetime.date(2026, 3, 5)
    scn = valid()
    text = export.caption(scn, "scaling-time", today=day)
    assert text.startswith("gpt3-1t · h200, NVLink domain 8, 150.75 GB HBM, bf16")
    assert "budget 1T tokens, global batch 4096" in text and text.endswith("2026-03-05")
    edited = export.caption(valid(layers=96, hbm_gb=80.0), "design-heatmap", today=day)
    assert "gpt3-1t (edited)" in edited and "h200 (edited)" in edited and "4,096 GPUs" in edited
    assert "exported 2026-03-05" in export.caption(scn, "validation-time", today=day)
    fig = {"data": [{"name": "H100 · NVS 8"}, {"name": "MI300X · NVS 8"}]}
    assert "systems H100 · NVS 8, MI300X · NVS 8" in export.caption(scn, "systems-compare", fig)
    assert export.si(1.5e13) == "15T" and export.si(3e8) == "300M"


def test_exports_carry_the_caption():
    fig = figures.training_time_figure(compute.scaling(valid())).to_dict()
    text = "gpt3-1t on h200, budget 1T tokens, 2026-03-05"
    html, _ = export.render(fig, "html", text)
    assert html.count(text) == 1 and '"subtitle"' in html
    captioned = export._with_caption(go.Figure(fig), text)
    assert captioned.layout.title.subtitle.text == text
    assert captioned.layout.margin.t > go.Figure(fig).layout.margin.t  # room for it
    png, _ = export.render(fig, "png", "caption")
    assert png.startswith(b"\x89PNG") and int.from_bytes(png[16:20], "big") == 3600
    csv, _ = export.render(fig, "csv", "caption")
    assert csv.startswith("trace,type") and "caption" not in csv  # data only


def test_hbm_sweep_shows_a_placeholder_before_its_first_run():
    graph = _find(hbm.layout, {"type": "graph", "name": "hbm-contour"})
    assert graph is not None and "Run sweep" in graph.figure.layout.annotations[0].text
    assert len(graph.figure.data) == 0


def _find(node, ident):
    if getattr(node, "id", None) == ident:
        return node
    children = getattr(node, "children", None)
    if children is None:
        return None
    for child in children if isinstance(children, (list, tuple)) else [children]:
        hit = _find(child, ident)
        if hit is not None:
            return hit
    return None


# --------------------------------------------------------------------------- compare systems
def test_compare_offers_presets_and_the_edited_system():
    values = [o["value"] for o in systems._options()]
    assert {"h100", "gb200-nvl72", "mi300x", "b300", studies.EDITED} <= set(values)
    assert systems.choice_error([], [0]) and systems.choice_error(["h100"], [])
    assert "at most 24" in systems.choice_error(["h100"] * 9, [0, 4, 8])
    assert systems.choice_error(["h100"], [0, 72]) == ""


def test_compare_edited_system_and_domains():
    scn = valid(hbm_gb=100.0, gpus_min=512, gpus_max=4096)
    fig, error, skipped = systems.build(scn, ["gb200-nvl72", studies.EDITED], [0, 8])
    assert error == "" and skipped == ""
    names = [t.name for t in fig.data]
    # H200 with the default stack: in the scored Hopper population (issue 32's error bars)
    edited = "H200 (edited) · NVS 8"
    assert names == ["GB200-NVL72 · NVS 8", "GB200-NVL72 · NVS 72", edited]
    colours = {t.name: t.line.color for t in fig.data}
    assert colours["GB200-NVL72 · NVS 8"] == colours["GB200-NVL72 · NVS 72"]
    assert colours[edited] != colours["GB200-NVL72 · NVS 8"]
    nvl8, nvl72 = fig.data[0], fig.data[1]
    assert list(nvl8.x) == list(nvl72.x)  # equal counts
    assert all(b <= a * (1 + 1e-12) for a, b in zip(nvl8.y, nvl72.y))


def test_compare_says_which_system_cannot_run_the_scenario():
    scn = valid(system="h100", **{k: v for k, v in PR.system_values("h100").items()
                                  if k != "system"}, precision="fp8", gpus_min=1024,
                gpus_max=2048)
    fig, error, skipped = systems.build(scn, ["a100", "h100"], [0])
    assert error == "" and "A100 · NVS 8" in skipped and "FP8" in skipped
    assert [t.name for t in fig.data] == ["H100 · NVS 8"]


# --------------------------------------------------------------------------- cross-validation
def test_validation_page_cross_validation_equals_the_json():
    stored = {s["source"]: s for s in json.loads(CROSS_VALIDATION.read_text())["sources"]}
    rows, fig, message = validation.build_cross_validation()
    assert message == "" and [r["source"] for r in rows][-1] == "all firm runs"
    for row in rows:
        for key in ("in_sample_mean_pct", "in_sample_max_pct", "cross_validated_mean_pct",
                    "cross_validated_max_pct", "runs"):
            assert row[key] == stored[row["source"]][key]
        assert row["confidence"] == ("uncertain" if stored[row["source"]]["uncertain"]
                                     else "firm")
    json.dumps(rows, allow_nan=False)
    bars = {t.legendgroup: t for t in fig.data if t.type == "bar"}
    sources = [r["source"] for r in rows]
    np.testing.assert_array_equal(bars["cross_validated"].x,
                                  [stored[s]["cross_validated_mean_pct"] for s in sources])
    np.testing.assert_array_equal(bars["in_sample"].x,
                                  [stored[s]["in_sample_mean_pct"] for s in sources])
    dots = next(t for t in fig.data if t.legendgroup == "cross_validated-runs")
    runs = cross_validation_runs()
    assert len(dots.x) == len(runs) + int((~runs["uncertain"]).sum())  # + the summary row
    band = [a.text for a in fig.layout.annotations]
    assert any("releases of the same recipes" in t and "repeatability" in t for t in band)
    hatched = dict(zip(sources, bars["cross_validated"].marker.pattern.shape))
    assert hatched["narayanan-2021"] == "/" and hatched["korthikanti-2022"] == ""


def test_validation_page_moe_cross_validation_equals_the_json():
    """The MoE section: one row per release and the summary, the numbers of the moe part of
    the stored table, a bar per row and a dot per run (and per firm run on the summary row)."""
    stored = json.loads(CROSS_VALIDATION.read_text())["moe"]
    by_source = {s["source"]: s for s in stored["sources"]}
    rows, fig, message = validation.build_cross_validation(part="moe")
    assert message == "" and [r["source"] for r in rows][-1] == "all firm runs"
    assert {r["source"] for r in rows} == set(by_source)
    assert all(r["source"].startswith("megatron-bridge-") for r in rows[:-1])
    for row in rows:
        for key in ("in_sample_mean_pct", "cross_validated_max_pct", "runs"):
            assert row[key] == by_source[row["source"]][key]
    bars = {t.legendgroup: t for t in fig.data if t.type == "bar"}
    np.testing.assert_array_equal(bars["cross_validated"].x,
                                  [by_source[r["source"]]["cross_validated_mean_pct"]
                                   for r in rows])
    dots = next(t for t in fig.data if t.legendgroup == "cross_validated-runs")
    assert len(dots.x) == 2 * len(stored["runs"]) == 2 * 61
    assert cross_validation_runs(part="moe")["id"].tolist() == [r["id"] for r in stored["runs"]]
    with pytest.raises(ValueError, match="unknown cross-validation part"):
        cross_validation_sources(part="sparse")


def test_validation_page_cross_validation_callback_fills_both_sections():
    out = validation.update_cross_validation.__wrapped__(True, {"presentation": False}, None)
    dense_rows, dense_fig, moe_rows, moe_fig, message, shown = out
    assert message == "" and shown is False
    assert dense_rows[-1]["source"] == moe_rows[-1]["source"] == "all firm runs"
    assert dense_fig.data and moe_fig.data
    assert [r["source"] for r in moe_rows[:-1]] == [
        f"megatron-bridge-{r}" for r in ("25.09", "25.11", "26.02", "26.04", "26.06", "26.08")]
    assert sum(r["runs"] for r in moe_rows[:-1]) == moe_rows[-1]["runs"] == 61


def test_cross_validation_figure_without_data_says_so():
    fig = figures.cross_validation_figure(pd.DataFrame(), pd.DataFrame())
    assert len(fig.data) == 0 and fig.layout.annotations
    table = cross_validation_sources()
    fig = figures.cross_validation_figure(table, pd.DataFrame())  # runs missing: bars only
    assert sum(t.type == "bar" for t in fig.data) == 2
    assert isinstance(fig, go.Figure) and math.isfinite(fig.layout.xaxis.range[1])
