"""The Validation page without a browser: the cached validation frame, its figures (asserted on
their data) and the page's pure build function and callback.

``PERF_CACHE_DIR`` points at a temporary directory before the app is imported (app.py creates
its background cache there), and every test gets a fresh results cache (autouse fixture).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-validation-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import dash  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
from dash.exceptions import PreventUpdate  # noqa: E402

import app  # noqa: E402, F401 - creates the Dash app (use_pages): the page can register
import model.validation as mv  # noqa: E402
from dashboard import figures  # noqa: E402
from dashboard.figures import validation as fv  # noqa: E402
from dashboard.jobs import compute  # noqa: E402
from dashboard.pages import validation as page  # noqa: E402
from model.errors import ModelError  # noqa: E402

MEMORY = ("params_grads_optimizer_gib", "activations_gib")


pytestmark = pytest.mark.usefixtures("tmp_cache")  # a private results cache per test (conftest)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return mv.run_validation(sets=mv.SETS)  # what the page shows: the MoE runs too


@pytest.fixture(scope="module")
def done(frame) -> pd.DataFrame:
    """The predicted records (what the figures plot)."""
    return frame[frame["skipped"] == ""]


def traces(fig: go.Figure, name: str) -> list:
    return [t for t in fig.data if t.name == name]


def points(xs, ys) -> list[tuple[float, float]]:
    return sorted(zip(np.asarray(xs, dtype=float).tolist(), np.asarray(ys, dtype=float).tolist()))


def component_ids(component):
    """Every id in a Dash component tree."""
    if getattr(component, "id", None) is not None:
        yield component.id
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if child is not None and hasattr(child, "to_plotly_json"):
            yield from component_ids(child)


def json_of(fig: go.Figure) -> dict:
    return json.loads(fig.to_json(), parse_constant=str)


# --- compute.validation ---------------------------------------------------------------------
def test_validation_frame_is_cached_and_keyed_on_the_reference_files(tmp_path, monkeypatch,
                                                                     frame):
    folder = tmp_path / "reference"
    folder.mkdir()
    for name in ("korthikanti_validation.json", "measurements.json"):
        shutil.copy(mv.reference_dir() / name, folder / name)
    calls = []

    def counting(path=None, **kw):
        calls.append(path)
        return frame

    # compute imports them at module level (no import inside the function): patched where used
    monkeypatch.setattr(compute, "reference_dir", lambda folder_=None: folder)
    monkeypatch.setattr(compute, "run_validation", counting)
    first = compute.validation()
    again = compute.validation()
    assert len(calls) == 1  # the second call is a cache hit
    pd.testing.assert_frame_equal(again, first, check_dtype=False)
    pd.testing.assert_frame_equal(first, frame, check_dtype=False)
    stat = (folder / "measurements.json").stat()
    os.utime(folder / "measurements.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    compute.validation()
    assert len(calls) == 2  # a changed reference file is a new key


def test_validation_frame_from_the_real_reference(frame):
    cached = compute.validation()
    pd.testing.assert_frame_equal(cached, frame, check_dtype=False)
    assert {"id", "set", "metric", "measured", "predicted", "error_pct", "peer_calculon",
            "peer_error_pct", "uncertain", "skipped"} <= set(cached.columns)


# --- figures --------------------------------------------------------------------------------
def test_time_scatter_points_are_measured_vs_predicted(frame, done):
    fig = figures.validation_scatter_figure(frame, "iteration_time_s")
    rows = done[done["metric"] == "iteration_time_s"]
    plotted = 0
    for s, label in fv.SET_LABELS.items():
        part = rows[rows["set"] == s]
        found = traces(fig, label)
        if part.empty:
            assert not found
            continue
        (t,) = found
        assert points(t.x, t.y) == points(part["measured"], part["predicted"])
        symbols = list(t.marker.symbol)
        assert symbols.count("circle-open") == int(part["uncertain"].sum())
        ids = [row[0] for row in t.customdata]
        assert sorted(ids) == sorted(part["id"])
        assert "error" in t.hovertemplate and "predicted" in t.hovertemplate
        plotted += len(t.x)
    # Korthikanti, measurements, extra, PyTorch (llm-foundry, torchtitan), MoE
    assert plotted == len(rows) == 8 + 24 + 18 + 153 + 61
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "(s)" in fig.layout.xaxis.title.text and "(s)" in fig.layout.yaxis.title.text


def test_time_scatter_has_the_eight_calculon_predictions(frame, done):
    fig = figures.validation_scatter_figure(frame, "iteration_time_s")
    (t,) = traces(fig, fv.CALCULON_LABEL)
    runs = done[(done["set"] == "korthikanti") & (done["metric"] == "iteration_time_s")]
    assert len(t.x) == 8
    assert points(t.x, t.y) == points(runs["measured"], runs["peer_calculon"])
    ours = next(t for t in fig.data if t.name == fv.SET_LABELS["korthikanti"])
    assert t.marker.symbol != ours.marker.symbol[0]  # a distinct symbol


def test_identity_line_spans_the_data_and_band_is_ten_percent(frame):
    for metrics in ("iteration_time_s", MEMORY):
        fig = figures.validation_scatter_figure(frame, metrics)
        lines, bands = traces(fig, "y = x"), traces(fig, "±10% band")
        assert len(lines) == len(bands) == (1 if isinstance(metrics, str) else 2)
        for line, band in zip(lines, bands):
            data = [t for t in fig.data if t.xaxis == line.xaxis and t.x[0] is not None
                    and t.name not in ("y = x", "±10% band")]
            values = np.concatenate([np.asarray([*t.x, *t.y], dtype=float) for t in data])
            x, y = np.asarray(line.x, dtype=float), np.asarray(line.y, dtype=float)
            np.testing.assert_array_equal(x, y)
            assert x.min() <= values.min() and x.max() >= values.max()
            bx, by = np.asarray(band.x, dtype=float), np.asarray(band.y, dtype=float)
            assert band.fill == "toself"
            np.testing.assert_allclose(by[:2], 0.9 * bx[:2])  # lower edge: −10%
            np.testing.assert_allclose(by[2:4], 1.1 * bx[2:4])  # upper edge: +10%
            assert bx.min() == x.min() and bx.max() == x.max()


def test_memory_scatter_one_subplot_per_metric_in_gib(frame, done):
    fig = figures.validation_scatter_figure(frame, MEMORY)
    label = fv.SET_LABELS["korthikanti-memory"]
    ours = traces(fig, label)
    assert [t.xaxis for t in ours] == ["x", "x2"]
    for t, metric in zip(ours, MEMORY):
        rows = done[done["metric"] == metric]
        assert points(t.x, t.y) == points(rows["measured"], rows["predicted"])
    calculon = traces(fig, fv.CALCULON_LABEL)
    for t, metric in zip(calculon, MEMORY):
        rows = done[done["metric"] == metric]
        assert points(t.x, t.y) == points(rows["measured"], rows["peer_calculon"])
    assert sum(t.showlegend is not False for t in ours) == 1
    assert fig.layout.xaxis.type != "log" and "GiB" in fig.layout.yaxis.title.text
    assert [a.text for a in fig.layout.annotations] == [fv.METRIC_LABELS[m] for m in MEMORY]


def test_error_bars_equal_error_pct(frame, done):
    fig = figures.validation_error_figure(frame)
    ours = [t for t in fig.data if t.type == "bar" and t.name.startswith("ours")]
    got = {y: x for t in ours for y, x in zip(t.y, np.asarray(t.x, dtype=float))}
    assert set(got) == set(done["id"])  # skipped records have no bar
    for rid, err in zip(done["id"], done["error_pct"]):
        assert got[rid] == pytest.approx(err)
    (peer,) = traces(fig, fv.CALCULON_LABEL)
    korth = done[done["peer_error_pct"].notna()]
    assert len(peer.x) == len(korth) == 24
    for rid, x in zip(peer.y, np.asarray(peer.x, dtype=float)):
        assert x == pytest.approx(korth.set_index("id").loc[rid, "peer_error_pct"])
    # side by side: ours and Calculon's share the row without overlapping
    for t in ours:
        for rid, off, width in zip(t.y, t.offset, t.width):
            if rid in set(peer.y):
                assert off + width == pytest.approx(0.0)
    assert all(o == 0 for o in peer.offset)
    assert list(fig.layout.yaxis.categoryarray) == fv.predicted_rows(frame)["id"].tolist()


def test_error_figure_reference_lines(frame):
    fig = figures.validation_error_figure(frame)
    at = sorted(s.x0 for s in fig.layout.shapes if s.x0 == s.x1)
    assert at == [-10, -5, 0, 5, 10]
    dashes = {abs(s.x0): s.line.dash for s in fig.layout.shapes if s.x0}
    assert dashes == {5: "dot", 10: "dash"}
    lo, hi = fig.layout.xaxis.range
    assert lo < -10 and hi > 10


def test_figures_validate_serialise_and_scale(frame):
    def build(pres):
        return [figures.validation_scatter_figure(frame, "iteration_time_s", presentation=pres),
                figures.validation_scatter_figure(frame, MEMORY, presentation=pres),
                figures.validation_error_figure(frame, presentation=pres)]

    small, big = build(False), build(True)
    for a, b in zip(small, big):
        for fig in (a, b):
            assert json_of(go.Figure(fig.to_dict())) == json_of(fig)  # what validation gives
            assert fig.layout.title.text and fig.layout.xaxis.title.text
            table = figures.figure_table(fig)
            assert "id" in table.columns and not table.empty
        assert b.layout.template.layout.font.size > a.layout.template.layout.font.size


@pytest.mark.parametrize("bad", [pd.DataFrame(), None, pd.DataFrame({"foo": [1]})])
def test_unusable_frames_give_a_message(bad, frame):
    only_skipped = frame[frame["skipped"] != ""]
    for data in (bad, only_skipped):
        for fig in (figures.validation_scatter_figure(data, "iteration_time_s"),
                    figures.validation_scatter_figure(data, MEMORY),
                    figures.validation_error_figure(data)):
            assert len(fig.data) == 0 and len(fig.layout.annotations) == 1


def test_calibration_role():
    """Changed deliberately (issue 13): the calibration fits each stack's η per GPU on all its
    firm runs (scripts/calibrate), so the selective-recompute and GB300 runs are in sample too;
    the uncertain transcriptions and the memory records are never fitted. The roles follow
    model/data/reference/cross_validation.json."""
    roles = fv.calibration_role(
        ["gpt3-175B-full", "gpt3-175B-seqsel", "mbridge2511_H100_Llama_3_8B_FP8-CS_8",
         "mbridge2511_B200_Llama_3_8B_FP8-CS_8", "mbridge2511_GB200_Llama_3_8B_FP8-CS_8",
         "mbridge2511_GB300_Llama_3_8B_FP8-CS_8", "narayanan21_t2_PTD-P_174.6B_384",
         "bloom176b", "gpt3-175B-seqsel-params"],
        ["korthikanti", "korthikanti"] + ["measurements"] * 6 + ["korthikanti-memory"])
    assert roles == ["calibration"] * 6 + ["held out"] * 3


# --- the page -------------------------------------------------------------------------------
def test_page_is_registered():
    entry = dash.page_registry["dashboard.pages.validation"]
    assert (entry["path"], entry["name"], entry["order"]) == ("/validation", "Validation", 4)
    ids = list(component_ids(page.layout))
    for name in page.GRAPHS:
        assert {"type": "graph", "name": name} in ids
    assert {"validation-summary", "validation-records", "validation-load"} <= {
        i for i in ids if isinstance(i, str)}


def test_build_returns_summary_rows_figures_and_records(frame):
    summary_rows, time_fig, memory_fig, error_fig, records, message = page.build(frame)
    expected = mv.summary(frame)
    assert len(summary_rows) == len(expected) == 9  # the MoE and PyTorch sets too
    for row, (_, exp) in zip(summary_rows, expected.iterrows()):
        assert (row["set"], row["metric"], row["n"]) == (exp["set"], exp["metric"], exp["n"])
        assert row["mean_abs_error_pct"] == pytest.approx(exp["mean_abs_error_pct"])
        assert row["max_abs_error_pct"] == pytest.approx(exp["max_abs_error_pct"])
        if np.isnan(exp["calculon_mean_abs_error_pct"]):
            assert row["calculon_mean_abs_error_pct"] is None
        else:
            assert row["calculon_mean_abs_error_pct"] == pytest.approx(
                exp["calculon_mean_abs_error_pct"])
    korth = next(r for r in summary_rows if r["set"] == "korthikanti")
    assert korth["set_label"] == fv.SET_LABELS["korthikanti"] and korth["n"] == 8
    assert len(traces(time_fig, fv.CALCULON_LABEL)[0].x) == 8
    assert len(traces(memory_fig, fv.SET_LABELS["korthikanti-memory"])) == 2
    assert any(t.type == "bar" for t in error_fig.data)
    assert message == ""
    # every record, predicted first; skipped ones with their reason
    assert len(records) == len(frame)
    assert sorted(r["id"] for r in records) == sorted(frame["id"])
    skipped = [r for r in records if r["skipped"]]
    assert skipped and all(r["role"] == "skipped" and r["predicted"] is None for r in skipped)
    assert records.index(skipped[0]) == len(records) - len(skipped)
    assert {r["role"] for r in records if not r["skipped"]} == {"calibration", "held out"}
    json.dumps([summary_rows, records], allow_nan=False)  # NaN went to null


def test_outputs_are_cached(monkeypatch):
    first = page.outputs(False)
    assert len(first) == 6 and first[-1] == ""
    assert isinstance(first[1], dict) and first[1]["data"]  # figures as JSON dicts
    monkeypatch.setattr(page, "build", lambda *a: pytest.fail("not served from the cache"))
    assert page.outputs(False) == first


def test_outputs_explain_missing_reference_data(monkeypatch):
    def broken():
        raise ModelError("no reference data in '/nowhere'")

    monkeypatch.setattr(compute, "validation", broken)
    summary_rows, *figs, records, message = page.outputs(False)
    assert summary_rows == [] and records == []
    assert "no reference data" in message
    assert all(len(f.data) == 0 for f in figs)


def test_callback_on_load_and_presentation_changes_only():
    out = page.update(True, {"presentation": False}, None)
    assert len(out) == 7 and out[-1] is False and out[-2] == ""
    with pytest.raises(PreventUpdate):  # another scenario change: nothing to redraw
        page.update(True, {"presentation": False, "layers": 12}, False)
    big = page.update(True, {"presentation": True}, False)
    assert big[-1] is True
    size = big[1]["layout"]["template"]["layout"]["font"]["size"]
    assert size > out[1]["layout"]["template"]["layout"]["font"]["size"]


def test_reference_files_exist():
    folder = mv.reference_dir()
    assert all((Path(folder) / n).is_file()
               for n in ("korthikanti_validation.json", "measurements.json"))
