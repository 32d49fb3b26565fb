"""The polish of issue 29 (its "Polish seen" lines and item 10): one number formatter
(model/cli/numbers.py) for people — thousands separators, units, singular and plural, no
scientific notation — and the layout slips: the design timeline's title under its legend, a
17,250-px PNG, validation cells cut, a co-design budget read as $125k, "1 microbatches"."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from dashboard.figures.maker import plain
from dashboard.figures.timeline import PHASES, timeline_figure
from dashboard.server.export import MAX_PNG_HEIGHT, png_height
from dashboard.views import codesign_view, selected
from dashboard.views.grid import SIGNIFICANT
from model.cli import numbers as n


@pytest.mark.parametrize("value, text", [
    (15000, "15,000"), (1.8993e7, "18,993,000"), (21.24, "21.2"), (0.01234, "0.0123"),
    (1e-9, "<0.000001"), (0, "0"), (float("nan"), "–"), (None, "–"), (-2500.4, "-2,500")])
def test_number_has_no_exponent_and_separates_thousands(value, text):
    assert n.number(value) == text


def test_units_plurals_money_and_durations():
    assert (n.count(1, "node"), n.count(2, "node"), n.count(1, "microbatch"),
            n.count(4, "microbatch"), n.count(1024, "GPU")) == (
        "1 node", "2 nodes", "1 microbatch", "4 microbatches", "1,024 GPUs")
    assert n.quantity(15000, "TFLOP/s") == "15,000 TFLOP/s"  # not '1.5e+04 TFLOP/s'
    assert (n.money(1.899e7), n.money(125e6), n.money(125000), n.money(2.486)) == (
        "$18.99M", "$125.00M", "$125,000", "$2.49")
    assert (n.duration_days(0.2), n.duration_days(25.34), n.duration_days(1.0),
            n.duration_days(148752.85), n.duration_days(0.001)) == (
        "4.8 hours", "25.3 days", "1.0 day", "148,752.9 days", "1.4 minutes")
    assert n.share(0.5, "replica") == "0.5 per replica"
    assert n.fixed(12) == "12.0" and n.fixed(0.0123) == "0.0123"


def test_the_grids_write_no_exponent():
    """d3's ',.4g' wrote a cost of 18,993,000 as '1.899e+7'; 'r' keeps decimal notation."""
    import app  # noqa: F401 - registers the pages
    from dashboard.pages import design, scenarios
    assert SIGNIFICANT.endswith("r") and "g" not in SIGNIFICANT
    for columns in (scenarios.COMPARE_COLUMNS, design.TOP_COLUMNS,
                    codesign_view.columns(["hbm_gb"])):
        for col in columns:
            fmt = col.get("valueFormatter", {}).get("function", "")
            assert "g')" not in fmt and "e')" not in fmt, col


def test_the_timeline_legend_never_covers_its_title():
    rows = [dict(stage=s, phase=p, microbatch=0, virtual_stage=0, start_s=float(i),
                 duration_s=1.0) for s in range(4) for i, p in enumerate(PHASES)]
    layout = plain(timeline_figure(pd.DataFrame(rows)))["layout"]
    assert layout["legend"]["y"] < 0 and layout["legend"]["yanchor"] == "top"  # under the axis
    assert layout["margin"]["b"] >= 140


def test_a_png_export_stays_a_slide_high():
    assert png_height(go.Figure(layout=dict(height=5750))) == MAX_PNG_HEIGHT <= 2000
    assert png_height(go.Figure()) == 700
    assert png_height(go.Figure(layout=dict(height=900))) == 900


def test_validation_cells_wrap_instead_of_being_cut():
    import app  # noqa: F401 - registers the pages
    from dashboard.pages import validation

    grids = {g.id: g for g in _grids(validation.layout)}
    for name in ("validation-summary", "validation-records"):
        options = grids[name].defaultColDef
        assert options["wrapText"] and options["autoHeight"] and options["wrapHeaderText"]


def _grids(node):
    children = getattr(node, "children", None)
    if type(node).__name__ == "AgGrid":
        yield node
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if child is not None and not isinstance(child, str):
            yield from _grids(child)


def test_the_codesign_budget_reads_as_dollars():
    assert codesign_view.budget_text(125e6) == "= $125.00M"
    assert codesign_view.budget_text(125000) == "= $125,000"
    assert codesign_view.dollars(125e6, 25000) == ("= $125.00M", "= $25,000")
    assert codesign_view.budget_text(None) == "" and codesign_view.budget_text(True) == ""


def test_one_microbatch_and_one_stage_are_singular():
    row = pd.Series(dict(pp=1, n_microbatches=1, interleave=1, iteration_time_s=12.5))
    timeline = pd.DataFrame(dict(stage=[0], phase=["idle"], start_s=[0.0], duration_s=[0.0]))
    text = selected.summary(timeline, row)
    assert "1 microbatch:" in text and "1 microbatches" not in text
    two = row.copy()
    two["pp"] = 2
    assert selected.summary(timeline, two).startswith("2 stages × 1 microbatch:")


def test_hovers_write_no_exponent():
    """d3's '.4g' wrote an NVFP4 peak of 15,000 TFLOP/s as '1.500e+4' in every hover."""
    from dashboard.figures.hover import Hover, for_people

    assert for_people(".4g") == ",.4~r" and for_people(".1%") == ".1%"
    hover = Hover(pd.DataFrame({"mfu_peak_tflops": [15000.0]}), "<b>x</b>").add(
        "mfu_peak_tflops", "of the peak", ".4g", " TFLOP/s")
    assert hover.lines[-1] == "of the peak %{customdata[0]:,.4~r} TFLOP/s"
