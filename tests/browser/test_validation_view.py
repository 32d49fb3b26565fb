"""The Validation page in a browser (issue 13): per source, the in-sample and the cross-validated
(leave-one-source-out) error — the table and the figure show exactly the numbers of
model/data/reference/cross_validation.json (the README's Accuracy table), say which sources are
releases of the same recipes and which are uncertain; and a full-page screenshot."""

from __future__ import annotations

import json

from model.validation.error_bars import CROSS_VALIDATION

CV_ROWS = "#validation-cv-table .ag-center-cols-container .ag-row"
PINNED = "#validation-cv-table .ag-pinned-left-cols-container .ag-row"
_BARS_JS = """
const gd = document.querySelector('#card-validation-cv .js-plotly-plot');
if (!gd || !gd._fullData) { return null; }
const L = gd._fullLayout;
return {bars: gd._fullData.filter((t) => t.type === 'bar').map((t) => ({
          group: t.legendgroup, x: Array.from(t.x), y: Array.from(t.y),
          hatch: Array.from(t.marker.pattern.shape)})),
        ticks: {vals: Array.from(L.yaxis.tickvals), text: Array.from(L.yaxis.ticktext)},
        annotations: (L.annotations || []).map((a) => a.text)};
"""


def _bars_as_stored(ui, script: str, stored: dict) -> tuple:
    """(figure data, tick labels, source order, bars by group) of a cross-validation figure,
    once drawn, after checking its sources and both bars' means against ``stored``."""
    shown = ui.until(lambda: (lambda d: d if d and d["bars"] else None)(
        ui.driver.execute_script(script)), "the cross-validation figure", timeout=60)
    labels = dict(zip(shown["ticks"]["vals"], shown["ticks"]["text"]))
    order = [labels[i].split(" · ")[0] for i in range(len(labels))]
    assert set(order) == set(stored) and order[-1] == "all firm runs"
    bars = {b["group"]: b for b in shown["bars"]}
    for kind in ("cross_validated", "in_sample"):
        assert bars[kind]["x"] == [stored[s][f"{kind}_mean_pct"] for s in order], kind
    return shown, labels, order, bars


def test_cross_validated_error_per_source_equals_the_json(ui) -> None:
    stored = {s["source"]: s for s in json.loads(CROSS_VALIDATION.read_text())["sources"]}
    ui.go("validation")
    shown, labels, order, bars = _bars_as_stored(ui, _BARS_JS, stored)
    for source, hatch in zip(order, bars["cross_validated"]["hatch"]):
        assert (hatch == "/") == stored[source]["uncertain"], source  # uncertain: hatched
        if stored[source]["uncertain"] and source != "all firm runs":
            assert "(uncertain)" in labels[order.index(source)]
    assert any("releases of the same recipes" in a and "repeatability" in a
               for a in shown["annotations"])

    rows = ui.until(lambda: ui.grid_rows(CV_ROWS), "rows in the cross-validation table")
    names = [r["source"] for r in ui.grid_rows(PINNED)]
    assert names == order
    for name, row in zip(names, rows):
        want = stored[name]
        for key in ("in_sample_mean_pct", "in_sample_max_pct", "cross_validated_mean_pct",
                    "cross_validated_max_pct"):
            assert row[key] == f"{want[key]:.2f}", (name, key)
        assert int(row["runs"]) == want["runs"]
        reading = row["reading"]
        if name.startswith("megatron-bridge-"):
            assert "repeatability, not generalisation" in reading
        if want["uncertain"] and name != "all firm runs":
            assert row["confidence"] == "uncertain" and "never fitted" in reading
    ui.idle()
    assert ui.severe_logs() == []
    ui.screenshot("validation")


_MOE_BARS_JS = _BARS_JS.replace("#card-validation-cv ", "#card-validation-moe-cv ")
MOE_PINNED = "#validation-moe-cv-table .ag-pinned-left-cols-container .ag-row"
MOE_ROWS = "#validation-moe-cv-table .ag-center-cols-container .ag-row"


def test_moe_cross_validation_per_release_equals_the_json(ui) -> None:
    """The mixture-of-experts section: one bar pair per Megatron-Bridge release and the summary,
    the in-sample and leave-one-release-out means of the moe part of the stored table."""
    stored = {s["source"]: s for s in json.loads(CROSS_VALIDATION.read_text())["moe"]["sources"]}
    ui.go("validation")
    _, _, order, _ = _bars_as_stored(ui, _MOE_BARS_JS, stored)
    rows = ui.until(lambda: ui.grid_rows(MOE_ROWS), "rows in the MoE cross-validation table")
    assert [r["source"] for r in ui.grid_rows(MOE_PINNED)] == order
    for name, row in zip(order, rows):
        assert row["cross_validated_mean_pct"] == f"{stored[name]['cross_validated_mean_pct']:.2f}"
    ui.idle()
    assert ui.severe_logs() == []
