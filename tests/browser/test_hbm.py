"""The HBM sweep page in a browser: a background job (Dash background callback through diskcache)
reports its progress, draws the contour map when done, and can be cancelled."""

from __future__ import annotations

import math

from selenium.webdriver.common.keys import Keys


def _set(ui, selector: str, value) -> None:
    box = ui.duo.find_element(selector)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(str(value), Keys.TAB)
    ui.until(lambda: box.get_attribute("value") == str(value), f"{selector} = {value}")


def _progress(ui) -> tuple[float, float, str]:
    """The bar's value and max and the text, read in one script: separate reads straddled a
    progress report under load (value 6 read, then the text "9 / 9 systems")."""
    value, top, text = ui.driver.execute_script(
        "const bar = document.querySelector('#hbm-progress');"
        "return [bar.getAttribute('value'), bar.getAttribute('max'),"
        " document.querySelector('#hbm-progress-text').innerText];")
    return float(value or 0), float(top or 0), text.strip()


def _run(ui, steps: int) -> list[tuple[float, float, str]]:
    """Start a sweep of steps × steps points; the progress seen until the first report."""
    _set(ui, "#hbm-steps", steps)
    ui.duo.find_element("#hbm-run").click()
    seen = [_progress(ui)]
    ui.until(lambda: seen.append(_progress(ui)) or seen[-1][0] > 0, "the first progress report")
    return seen


def test_sweep_reports_progress_and_draws_the_contour(ui) -> None:
    ui.go("hbm")
    ui.wait_text("#hbm-progress-text", lambda s: s == "", "the page")
    assert _progress(ui)[0] == 0 and not ui.disabled("#hbm-run")
    assert ui.disabled("#hbm-cancel")

    seen = _run(ui, 3)
    ui.until(lambda: seen.append(_progress(ui)) or seen[-1][2] == "9 / 9 systems",
             "the sweep to finish (9 / 9 systems)", timeout=60)
    done = [v for v, _, _ in seen]
    assert done == sorted(done), f"progress went backwards: {seen}"
    assert seen[-1][:2] == (9, 9)
    assert all(m == 9 for v, m, _ in seen if v > 0)

    traces = ui.wait_data("hbm-contour")
    contour = next(t for t in traces if t["type"] == "contour")
    z = contour["z"]
    assert len(z) == 3 and all(len(row) == 3 for row in z)  # bandwidth rows × capacity columns
    values = [v for row in z for v in row if isinstance(v, (int, float)) and math.isfinite(v)]
    assert values and all(v > 0 for v in values)
    assert [round(x) for x in contour["x"]] == [40, 220, 400]  # GB
    assert [round(y, 3) for y in contour["y"]] == [1, 8.5, 16]  # TB/s
    # more bandwidth never hurts: along each capacity column, days do not increase
    for j in range(3):
        column = [z[i][j] for i in range(3) if isinstance(z[i][j], (int, float))]
        assert column == sorted(column, reverse=True) or len(set(column)) == 1, column
    points = next(t for t in traces if t["name"] == "evaluated")
    assert len(points["x"]) == 9

    ui.until(lambda: not ui.disabled("#hbm-run"), "the run button re-enabled")
    assert ui.disabled("#hbm-cancel")
    assert ui.text("#hbm-error") == ""
    assert ui.severe_logs() == []
    ui.screenshot("hbm")


def test_cancel_stops_a_long_sweep(ui) -> None:
    ui.go("hbm")
    ui.wait_text("#hbm-progress-text", lambda s: s == "", "the page")
    seen = _run(ui, 20)  # 400 points × 3 strategies: far longer than the test waits
    assert ui.disabled("#hbm-run") and not ui.disabled("#hbm-cancel")
    first = seen[-1]
    assert first[1] == 400 and first[2].endswith("/ 400 systems")
    ui.until(lambda: _progress(ui)[0] > first[0], "the progress to advance")

    ui.cancel_job("hbm", lambda: _progress(ui), 400)
    assert not ui.traces("hbm-contour") or not any(
        t["type"] in ("contour", "heatmap") for t in ui.traces("hbm-contour"))
