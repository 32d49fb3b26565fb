"""The views an architect asked for, in a browser: the selected configuration's iteration
timeline and memory breakdown (Design page), and on the Scenarios page the sensitivity tornado,
a named scenario saved in the browser's local storage, a file of scenarios uploaded, and two
scenarios compared with their deltas."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

ROWS = "#design-top .ag-center-cols-container .ag-row"
COMPARE_ROWS = "#scenarios-compare-table .ag-center-cols-container .ag-row"


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("+", "").replace("−", "-"))


def test_timeline_and_memory_of_the_selected_configuration(ui) -> None:
    ui.go("design")
    rows = ui.until(lambda: ui.grid_rows(ROWS), "rows in the top-configurations table")
    first = rows[0]
    traces = ui.wait_data("design-timeline")
    by_name = {t["name"]: t for t in traces}
    assert {"forward", "backward", "idle (bubble)"} <= set(by_name), ui.dump("design-timeline")
    stages = set(by_name["forward"]["y"])
    assert len(stages) == int(first["pp"])  # one row of bars per pipeline stage
    # each stage idles for the bubble the table lists (t_bubble_s, shown to 2 decimals)
    idle: dict[int, float] = defaultdict(float)
    for stage, seconds in zip(by_name["idle (bubble)"]["y"], by_name["idle (bubble)"]["x"]):
        idle[stage] += seconds
    for seconds in idle.values():
        assert seconds == pytest.approx(_number(first["t_bubble_s"]), abs=0.006)
    # every stage runs each of its microbatches forward once
    per_stage = len(by_name["forward"]["x"]) / len(stages)
    assert per_stage == int(round(per_stage)) and per_stage >= 1
    ui.wait_text("#design-timeline-summary", lambda t: "bubble" in t, "the timeline summary")

    memory = ui.wait_data("design-memory")
    parts = {t["name"]: t["x"][0] for t in memory}
    model = sum(parts[k] for k in ("weights", "gradients", "optimizer state", "activations"))
    assert model == pytest.approx(_number(first["memory_gb"]), abs=0.06)
    # the parts fill the capacity or, for a tight row (kept, marked), what it holds: the excess
    # over the capacity is its own bar
    hbm = sum(t["x"][0] for t in memory if t["y"][0] == "HBM" and t["name"] != "over capacity")
    capacity = ui.figure("design-memory")["annotations"][0]
    assert capacity.startswith("HBM capacity") and f"{hbm:.3g}" in capacity
    assert ui.severe_logs() == []
    ui.screenshot("design-timeline-memory")


def _pick(ui, ident: str, label: str) -> None:
    """Choose ``label`` in the Dash dropdown ``#ident`` (open, filter, click the option)."""
    ui.duo.find_element(f"#{ident}").click()
    ui.duo.find_element(".dash-dropdown-search").send_keys(label)

    def click() -> bool:
        for option in ui.driver.find_elements("css selector", ".dash-dropdown-option"):
            if option.text.strip() == label:
                ui.driver.execute_script(
                    "arguments[0].closest('.dash-dropdown-content').scrollTop = 0;", option)
                option.click()
                return True
        return False
    ui.until(click, f"the option {label!r} of #{ident}")
    ui.until(lambda: label in ui.text(f"#{ident}"), f"#{ident} = {label}")


def _stored(ui) -> list[dict]:
    text = ui.driver.execute_script("return window.localStorage.getItem('scenarios-saved');")
    return json.loads(text) if text else []


def test_sensitivity_saved_scenarios_and_compare(ui, tmp_path) -> None:
    ui.go("scenarios")
    tornado = ui.wait_data("scenarios-sensitivity")
    low = next(t for t in tornado if t["name"] == "input −10 %")
    high = next(t for t in tornado if t["name"] == "input +10 %")
    assert low["y"][0].startswith("matrix peak")  # the largest swing on top
    assert low["x"][0] > 5 and high["x"][0] < -5  # ~±10 % of a compute-bound run
    ui.wait_text("#scenarios-sensitivity-text", lambda t: "moves the training time most" in t,
                 "the sensitivity sentence")

    # save the current (H200) scenario under a name: it lands in the browser's local storage
    ui.duo.find_element("#scenarios-name").send_keys("H200 base")
    ui.duo.find_element("#scenarios-save").click()
    ui.wait_text("#scenarios-message", lambda t: t.startswith("Saved 'H200 base'"), "saved")
    colour = ui.driver.execute_script(  # a confirmation, not in the errors' red (issue 29)
        "return getComputedStyle(document.querySelector('#scenarios-message .ctl-ok')).color;")
    assert colour == "rgb(6, 118, 71)", colour
    ui.until(lambda: [e["name"] for e in _stored(ui)] == ["H200 base"], "local storage")
    assert _stored(ui)[0]["scenario"]["system"] == "h200"

    # a file of scenarios uploaded joins them
    b200 = dict(_stored(ui)[0]["scenario"], hbm_gb=192.0, hbm_tb_per_s=8.0,
                matrix_tflops=2250.0, system="b200")
    path = tmp_path / "scenarios.json"
    path.write_text(json.dumps({"scenarios": [{"name": "B200-ish", "scenario": b200}]}))
    ui.driver.find_element("css selector", "#scenarios-upload input[type=file]").send_keys(
        str(path))
    ui.wait_text("#scenarios-message", lambda t: t.startswith("Added 1 scenario"), "uploaded")
    ui.until(lambda: [e["name"] for e in _stored(ui)] == ["H200 base", "B200-ish"],
             "both scenarios in local storage")

    # compare them: A = the saved H200, B = the uploaded one
    _pick(ui, "scenarios-a", "H200 base")
    _pick(ui, "scenarios-b", "B200-ish")

    def days_row() -> dict | None:
        return next((r for r in ui.grid_rows(COMPARE_ROWS) if r.get("label") == "training time"
                     and r.get("a") and r.get("b") and r["a"] != r["b"]), None)
    row = ui.until(days_row, "the training-time row with two different values")
    a, b, pct = _number(row["a"]), _number(row["b"]), _number(row["delta_pct"])
    assert b < a and pct == pytest.approx(100 * (b / a - 1), abs=0.1)
    deltas = ui.wait_data("scenarios-compare")
    assert any(t["x"] and t["x"][0] == pytest.approx(pct, abs=0.01) for t in deltas)
    ui.wait_text("#scenarios-layouts", lambda t: "H200 base:" in t and "B200-ish:" in t,
                 "both layouts in words")
    # its CSV export is rebuilt on the server from the two scenarios: the same deltas
    button = next(b for b in ui.driver.find_elements(
        "css selector", "#card-scenarios-compare .export button") if b.text.strip() == "CSV")
    button.click()
    csv = Path(ui.duo.download_path) / "scenarios-compare.csv"
    text = ui.until(lambda: csv.is_file() and csv.stat().st_size > 100 and csv.read_text(),
                    "the CSV download", timeout=60)
    line = next(r for r in text.splitlines() if ",training time," in r)
    assert f"{pct:+.1f} %" in line

    # both saved scenarios download as one file; one loads back into the control panel
    ui.duo.find_element("#scenarios-download-btn").click()
    saved_file = Path(ui.duo.download_path) / "scenarios.json"
    doc = ui.until(lambda: saved_file.is_file() and saved_file.stat().st_size > 100
                   and json.loads(saved_file.read_text()), "the scenarios download", timeout=60)
    assert [e["name"] for e in doc["scenarios"]] == ["H200 base", "B200-ish"]
    _pick(ui, "scenarios-pick", "B200-ish")
    ui.duo.find_element("#scenarios-load").click()
    ui.until(lambda: ui.duo.find_element("#ctl-hbm_gb").get_attribute("value") == "192",
             "the loaded scenario's HBM in the control panel")
    ui.until(lambda: ui.fragment().get("hbm_gb") in ("192", "192.0"),
             "the loaded scenario in the link")

    # a reload keeps the saved scenarios (local storage), offered again in the pickers
    ui.driver.refresh()
    ui.until(lambda: len(_stored(ui)) == 2, "the saved scenarios after a reload")
    ui.wait_data("scenarios-sensitivity")
    ui.idle()
    assert ui.text("#scenarios-message") == ""  # no button acted without a click
    # the picks survive the reload (issue 29: they were reset to 'current')
    ui.until(lambda: ui.text("#scenarios-a").strip() == "H200 base", "A kept after a reload")
    assert ui.text("#scenarios-b").strip() == "B200-ish"
    _pick(ui, "scenarios-a", "B200-ish")  # offered again after the reload
    assert ui.severe_logs() == []
    ui.screenshot("scenarios")
