"""The dashboard without a browser, continued: the pages' builders and callbacks (scaling,
design, HBM grid) on the default and edited scenarios, and the exports (standalone HTML, one
CSV row per point, PNG through kaleido's Chromium — never skipped). Split from
tests/test_dashboard.py, whose helpers and temporary cache these use."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from test_dashboard import INFEASIBLE, default, valid

from dashboard.controls import presets as PR
from dashboard.controls import scenario as S
from dashboard.jobs import compute
from dashboard.pages import design, hbm, scaling
from dashboard.server import export

pytestmark = pytest.mark.usefixtures("tmp_cache")  # a private results cache per test (conftest)


def _numbers(values: Any) -> list[float]:
    if values is None:
        return []
    return pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").tolist()


def _ys(figs) -> list[list[float]]:
    """Every trace's y values, rounded (NaN for gaps), for all figures."""
    return [[round(v, 9) if math.isfinite(v) else None for v in _numbers(tr.y)]
            for fig in figs for tr in fig.data]


TEXTS = len(scaling.TEXTS)  # summary, idealised, knee, infeasible; then the figures


def _scaling(**over: Any) -> tuple:
    out = scaling.build(valid(**over))
    assert len(out) == TEXTS + len(scaling.GRAPHS)
    assert all(isinstance(f, go.Figure) for f in out[TEXTS:])
    return out


def test_scaling_page_builds_default():
    out = _scaling()
    summary, idealised, knee, infeasible, figs = *out[:TEXTS], out[TEXTS:]
    assert summary.startswith("Fastest (production strategies") and "days" in summary
    assert "2D SUMMA" not in summary and "2D SUMMA (idealised)" in idealised
    assert "of the 989.4 TFLOP/s bf16 peak" in summary  # MFU with its peak
    assert knee.startswith("Recommended size:") and "at or above 50%" in knee
    assert infeasible == ""
    assert all(len(f.data) > 0 for f in figs)
    assert any(v is not None for ys in _ys(figs) for v in ys)


@pytest.mark.parametrize("over", [
    PR.system_values("b200"), PR.system_values("a100"),  # GPU generation
    {"nvs": 64}, {"nvs": 4},
    {"hbm_gb": 80.0}, {"hbm_gb": 400.0},
], ids=["b200", "a100", "nvs64", "nvs4", "hbm80", "hbm400"])
def test_scaling_figures_follow_the_inputs(over):
    base, other = _scaling()[TEXTS:], _scaling(**over)[TEXTS:]
    time_fig, mem_fig = 0, 2
    assert _ys(other) != _ys(base)
    if "hbm_gb" in over:  # the memory figure draws the capacity
        assert _ys([other[mem_fig]]) != _ys([base[mem_fig]])
    else:  # a different system or domain changes the training time itself
        assert _ys([other[time_fig]]) != _ys([base[time_fig]])


@pytest.mark.parametrize("over", [{}, {"presentation": True}, INFEASIBLE],
                         ids=["default", "presentation", "infeasible"])
def test_scaling_callback_sends_the_figures_json(over):
    """The callback builds plain dicts (no plotly Figure): the same JSON as the Figures."""
    from plotly.io.json import to_json_plotly

    from dashboard.figures.maker import plain

    scn = valid(**over)
    scaling.build(scn)  # both below read the sweep's frame from the results cache
    figs = [plain(f) if isinstance(f, go.Figure) else f for f in scaling.build(scn)]
    sent = scaling.update(scn)
    shown = len(scaling.TEXTS) + len(scaling.GRAPHS)
    assert json.loads(to_json_plotly(figs)) == sent[:shown]
    # then what each figure's export rebuilds it with (the threshold and the breakdown scale)
    assert sent[shown:] == [[50.0, "log"]] * len(scaling.GRAPHS)


def test_scaling_page_infeasible_explains():
    # with the production rules relaxed, tp1 16 over two 8-GPU domains fits at 64 GPUs
    # (model/engine/production.py); with them, no count up to 64x does
    assert "64" in scaling.build(valid(**INFEASIBLE, production_layout=False))[3]
    out = scaling.build(valid(**INFEASIBLE))
    assert out[:3] == ("", "", "")
    text = out[3]
    assert text and "GB" in text and "activations" in text
    for fig in out[TEXTS:]:
        assert len(fig.data) == 0
        assert any("No configuration fits" in (a.text or "") for a in fig.layout.annotations)


def test_scaling_page_with_no_gpu_count_in_range_does_not_crash():
    # valid scenario whose range holds no count of the grid (powers of two): 65…100
    scn, errors = S.validate_scenario({**default(), "nvs": 72, "gpus_min": 65, "gpus_max": 100})
    if scn is None:
        assert set(errors) & {"gpus_min", "gpus_max", "nvs"}
        return
    assert S.gpu_counts(scn) == []
    out = scaling.build(scn)
    assert out[0] == "" and "65" in out[3] and "100" in out[3]
    assert all(len(fig.data) == 0 for fig in out[TEXTS:])


def test_design_page_space_and_ops():
    scn = default()
    heat, rows, selected, why = design.build_space(scn)
    assert why == ""
    assert isinstance(heat, go.Figure)
    assert "heatmap" in [t.type for t in heat.data]
    assert sum(_points(go.Figure(data=[t])) for t in heat.data if t.type == "heatmap") > 0
    assert 0 < len(rows) <= compute.TOP_K
    assert selected == [rows[0]]
    assert {"samples_per_s", "train_days", "placement", "tp1", "pp"} <= set(rows[0])
    days = [r["train_days"] for r in rows]
    assert min(days) == days[0]
    ops_fig, roof, op_rows = design.build_ops(scn, [rows[0]])
    assert isinstance(ops_fig, go.Figure) and isinstance(roof, go.Figure)
    assert len(ops_fig.data) > 0 and len(roof.data) > 0
    assert op_rows and {"op", "t_iteration_s"} <= set(op_rows[0])
    empty_ops, empty_roof, none = design.build_ops(scn, [])
    assert none == [] and len(empty_ops.data) == 0 and len(empty_roof.data) == 0


def test_hbm_grid_validates():
    caps, bws = hbm.grid(40, 400, 1, 16, 8)
    assert len(caps) == len(bws) == 8
    assert caps[0] == 40 and caps[-1] == 400 and bws[0] == 1 and bws[-1] == 16
    for args, needle in [((None, 400, 1, 16, 8), "fill in every field"),
                         ((40, None, 1, 16, 8), "fill in every field"),
                         ((400, 40, 1, 16, 8), "0 < from < to"),
                         ((0, 40, 1, 16, 8), "0 < from < to"),
                         ((40, 400, -1, 16, 8), "0 < from < to"),
                         ((40, 400, 16, 16, 8), "0 < from < to"),
                         ((40, 400, 1, 16, 1), "between 2 and 20"),
                         ((40, 400, 1, 16, 21), "between 2 and 20"),
                         # the control panel's HBM ranges (the spec's), in its words
                         ((0.5, 400, 1, 16, 8), "HBM capacity must be at least 1 GB"),
                         ((40, 200_000, 1, 16, 8), "HBM capacity must be at most 100,000 GB"),
                         ((40, 400, 1, 2_000, 8), "HBM bandwidth must be at most 1,000 TB/s")]:
        with pytest.raises(ValueError, match=needle):
            hbm.grid(*args)


# --------------------------------------------------------------------------- export


def _points(fig: go.Figure) -> int:
    """Plotted points of a figure: finite cells of 2-D traces, (x, y) pairs of the others
    (legend-only placeholders excluded)."""
    total = 0
    for tr in fig.data:
        z = getattr(tr, "z", None)
        if z is not None:
            cells = pd.DataFrame(list(z)).apply(pd.to_numeric, errors="coerce").to_numpy(float)
            total += int(np.isfinite(cells).sum())
            continue
        xs = list(tr.x) if tr.x is not None else []
        ys = list(tr.y) if tr.y is not None else []
        for i in range(max(len(xs), len(ys))):
            x = xs[i] if i < len(xs) else None
            y = ys[i] if i < len(ys) else None
            total += not (x is None and y is None)
    return total


EXPORTED = (*scaling.GRAPHS, "design-heatmap", "design-ops", "design-roofline")


@pytest.fixture(scope="module")
def figures_by_name() -> dict[str, go.Figure]:
    """The figures of the scaling and design pages for the default scenario."""
    scn = default()
    figs = dict(zip(scaling.GRAPHS, scaling.build(scn)[TEXTS:]))
    heat, _, selected, _ = design.build_space(scn)
    ops_fig, roof, _ = design.build_ops(scn, selected)
    figs.update({"design-heatmap": heat, "design-ops": ops_fig, "design-roofline": roof})
    assert set(figs) == set(EXPORTED)
    return figs


@pytest.fixture(scope="module")
def time_figure(figures_by_name) -> go.Figure:
    return figures_by_name["scaling-time"]


def test_export_html_is_standalone(time_figure):
    html, ext = export.render(time_figure.to_dict(), "html")
    assert ext == "html" and isinstance(html, str)
    assert "plotly" in html and "<html" in html
    assert len(html) > 1_000_000  # plotly.js inline
    assert 'src="https://cdn.plot.ly' not in html


@pytest.mark.parametrize("name", EXPORTED)
def test_export_csv_has_one_row_per_point(figures_by_name, name):
    fig = figures_by_name[name]
    points = _points(fig)
    assert points > 0
    text, ext = export.render(fig.to_dict(), "csv")  # a dict, as the browser sends it back
    assert ext == "csv"
    lines = text.strip().splitlines()
    assert lines[0].startswith("trace,type,group,x,y")
    assert len(lines) - 1 == points
    table = pd.read_csv(io.StringIO(text))
    assert len(table) == points and table["trace"].notna().all()


def test_export_png(time_figure):
    data, ext = export.render(time_figure.to_dict(), "png")  # fails (no skip) without chromium
    assert ext == "png" and isinstance(data, bytes)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000
