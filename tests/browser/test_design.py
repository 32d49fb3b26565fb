"""The design-space page in a browser: the heatmap shows times and marks the optimum, the table
lists the top configurations, and selecting a row shows that configuration's per-op breakdown."""

from __future__ import annotations

import math

ROWS = "#design-top .ag-center-cols-container .ag-row"
OPS_ROWS = "#design-ops-table .ag-center-cols-container .ag-row"


def _finite(z) -> list[float]:
    return [v for row in z or [] for v in (row or [])
            if isinstance(v, (int, float)) and math.isfinite(v)]


def test_heatmap_table_and_row_selection(ui) -> None:
    ui.go("design")
    traces = ui.wait_data("design-heatmap")
    heat = [t for t in traces if t["type"] == "heatmap" and _finite(t["z"])]
    assert heat, ui.dump("design-heatmap")
    assert len(_finite(heat[-1]["z"])) >= 4  # several (tp1, pp) cells have a configuration
    stars = [t for t in traces if t["type"] == "scatter" and t["name"] == "optimum"]
    assert len(stars) == 1 and stars[0]["symbol"] == "star"
    assert len(stars[0]["x"]) == 1 and len(stars[0]["y"]) == 1
    # the star sits on one of the heatmap's cells
    assert stars[0]["x"][0] in heat[-1]["x"] and stars[0]["y"][0] in heat[-1]["y"]

    rows = ui.until(lambda: ui.grid_rows(ROWS), "rows in the top-configurations table")
    assert len(rows) >= 5
    first = rows[0]
    assert float(first["samples_per_s"]) > 0 and float(first["train_days"]) > 0
    # sorted fastest first, and every row multiplies to the design GPU count (4096)
    speeds = [float(r["samples_per_s"]) for r in rows]
    assert speeds == sorted(speeds, reverse=True)
    for r in rows:
        assert int(r["dp"]) * int(r["tp1"]) * int(r["tp2"]) * int(r["pp"]) == 4096, r

    # the first row is selected by default: its per-op breakdown is shown
    ops_first = ui.wait_data("design-ops")
    ui.wait_data("design-roofline")
    table_first = ui.until(lambda: ui.grid_rows(OPS_ROWS), "rows in the per-op table")
    assert any(r.get("op") for r in table_first)
    # each op's implied efficiencies (model/engine/kernel_report.py), as percentages
    assert all(r.get(f"implied_{kind}_efficiency_{way}", "").endswith("%") for r in table_first
               for kind in ("flop", "hbm") for way in ("fwd", "bwd")), table_first[0]

    # select another configuration (a different shape): the per-op views follow it
    target = next((i for i, r in enumerate(rows)
                   if (r["tp1"], r["tp2"], r["pp"], r["microbatch"])
                   != (first["tp1"], first["tp2"], first["pp"], first["microbatch"])), None)
    assert target is not None, "the top configurations all have the same shape"
    # its selection checkbox (see test_clicking_a_row_selects_it for a click on the row)
    ui.duo.find_element(f'{ROWS}[row-index="{target}"] .ag-selection-checkbox input').click()
    ui.until(lambda: "ag-row-selected" in ui.duo.find_element(
        f'{ROWS}[row-index="{target}"]').get_attribute("class"), "the clicked row selected")
    ops_new = ui.wait_figure("design-ops", lambda t: ui.ys(t) != ui.ys(ops_first)
                             or [x["x"] for x in t] != [x["x"] for x in ops_first],
                             "the per-op figure of the selected row")
    assert ops_new
    ui.until(lambda: ui.grid_rows(OPS_ROWS) and ui.grid_rows(OPS_ROWS) != table_first,
             "the per-op table of the selected row")
    assert ui.severe_logs() == []
    ui.screenshot("design")


def test_clicking_a_row_selects_it(ui) -> None:
    """The table's title says "select a row": a click on a row (not only on its checkbox) must
    select it and show its breakdown. AG Grid >= 32.2 selects on click only with
    ``rowSelection.enableClickSelection``."""
    ui.go("design")
    ui.until(lambda: len(ui.grid_rows(ROWS)) >= 4, "rows in the top-configurations table")
    ops_first = ui.wait_data("design-ops")
    table_first = ui.until(lambda: ui.grid_rows(OPS_ROWS), "rows in the per-op table")
    rows = ui.grid_rows(ROWS)
    target = next(i for i, r in enumerate(rows) if r["pp"] != rows[0]["pp"])
    ui.duo.find_element(f'{ROWS}[row-index="{target}"] .ag-cell[col-id="train_days"]').click()
    ui.until(lambda: "ag-row-selected" in ui.duo.find_element(
        f'{ROWS}[row-index="{target}"]').get_attribute("class"),
        "the clicked row to be selected", timeout=5)
    ui.wait_figure("design-ops", lambda t: t != ops_first, "the per-op figure of the row")
    ui.until(lambda: ui.grid_rows(OPS_ROWS) and ui.grid_rows(OPS_ROWS) != table_first,
             "the per-op table of the selected row")
