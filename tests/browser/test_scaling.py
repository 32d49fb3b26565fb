"""The scaling page in a browser: it loads cleanly and shows data; the GPU preset, NVLink domain and
HBM capacity controls change the plotted training times; invalid values are reported next to
their control and leave the views as they were; the URL fragment reproduces the view; a broken
scenario upload is refused; presentation mode enlarges the figures."""

from __future__ import annotations

import json
import math

from selenium.webdriver.common.keys import Keys

# the legend names: SUMMA, which no production stack ships, is labelled idealised
STRATEGIES = ("1D TP", "2D SUMMA (idealised)", "2D context")


def _numbers(values: list) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def test_loads_without_console_errors_and_plots_every_strategy(ui) -> None:
    traces = ui.traces("scaling-time")
    ys = ui.ys(traces)
    for name in STRATEGIES:  # the default scenario searches every strategy
        days = _numbers(ys.get(name, []))
        assert len(days) >= 5, f"{name}: too few points: {ui.dump('scaling-time')}"
        assert all(d > 0 for d in days)
        # more GPUs, less time: the curve falls from its first to its last point
        assert days[-1] < days[0] / 10
    xs = {t["name"]: t["x"] for t in traces}
    assert xs["2D SUMMA (idealised)"][-1] == 16384  # the GPU range ends at gpus_max
    for card in ("scaling-breakdown", "scaling-memory", "scaling-config", "scaling-efficiency"):
        ui.wait_data(card)
    summary = ui.text("#scaling-summary")
    assert summary.startswith("Fastest (production strategies") and "days" in summary
    assert "GPUs" in summary and "2D SUMMA" not in summary
    assert ui.text("#scaling-infeasible") == ""
    ui.idle()
    assert ui.severe_logs() == []
    ui.screenshot("scaling")


def test_gpu_generation_nvlink_and_hbm_change_the_training_time(ui) -> None:
    before = ui.ys(ui.traces("scaling-time"))

    # GPU generation: the b200 preset loads its figures into the system controls
    ui.choose("system", "b200")
    after_system = ui.wait_changed("scaling-time", before, "choosing b200")
    assert ui.fragment()["system"] == "b200" and ui.fragment()["hbm_gb"] != "141"  # H200's
    # a faster GPU with more HBM: every strategy's fastest point is faster
    for name in STRATEGIES:
        old, new = before[name], after_system[name]
        assert min(_numbers(new)) < min(_numbers(old)), name

    # NVLink domain: 8 → 64 GPUs per domain (debounced input: committed on Tab)
    ui.set_input("nvs", 64)
    after_nvs = ui.wait_changed("scaling-time", after_system, "nvs = 64")
    assert ui.fragment()["nvs"] == "64"

    # HBM capacity: keyboard on the thumb of the slider beside its number box (Dash 4 slider),
    # 20 GB less (1 GB steps); the box takes the slider's value
    thumb = ui.duo.find_element("#sld-hbm_gb .dash-slider-thumb")
    start = int(thumb.get_attribute("aria-valuenow"))
    assert str(start) == ui.fragment()["hbm_gb"]  # the b200 preset's capacity
    thumb.click()
    thumb.send_keys(*[Keys.ARROW_LEFT] * 20)
    target = str(start - 20)
    ui.until(lambda: thumb.get_attribute("aria-valuenow") == target, f"the slider at {target}")
    ui.until(lambda: ui.fragment().get("hbm_gb") == target, f"hbm_gb={target} in the URL")
    assert ui.duo.find_element("#ctl-hbm_gb").get_attribute("value") == target
    ui.wait_changed("scaling-time", after_nvs, f"hbm_gb = {target}")

    assert ui.severe_logs() == []


def test_hbm_number_box_beside_its_slider(ui) -> None:
    """HBM capacity is a number box (the value, committed on blur or Enter) with a slider
    beside it: the box is visible in the control panel and the slider follows what is typed."""
    before = ui.ys(ui.traces("scaling-time"))
    box = ui.duo.find_element("#ctl-hbm_gb")
    assert box.is_displayed(), "the HBM capacity number box is hidden"
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("80", Keys.TAB)
    ui.until(lambda: ui.fragment().get("hbm_gb") == "80", "hbm_gb=80 in the URL")
    thumb = ui.duo.find_element("#sld-hbm_gb .dash-slider-thumb")
    ui.until(lambda: thumb.get_attribute("aria-valuenow") == "80", "the slider at 80")
    at_80 = ui.ys(ui.wait_figure("scaling-time", lambda t: ui.ys(t) != before,
                                 "the plot at 80 GB"))
    # less HBM: fewer GPU counts fit (the smallest counts drop out), none appear
    for name in STRATEGIES:
        assert len(_numbers(at_80.get(name, []))) < len(_numbers(before[name])), name


def test_invalid_input_shows_message_and_keeps_the_views(ui) -> None:
    before = ui.ys(ui.traces("scaling-time"))
    url_before = ui.driver.current_url

    ui.set_input("heads", 7)  # 7 does not divide the hidden size 25600
    message = ui.wait_text("#err-heads", lambda s: s != "", "an error message")
    assert "must divide" in message
    assert ui.fragment()["heads"] == "160"  # the URL (the last valid scenario) is unchanged
    ui.steady(lambda: ui.ys(ui.traces("scaling-time")), before)
    assert ui.duo.find_element("#ctl-heads").get_attribute("value") == "7"  # not reset

    ui.set_input("heads", 320)  # divides 25600 (and is divided by the 160 KV heads): valid
    ui.wait_text("#err-heads", lambda s: s == "", "the message to disappear")
    ui.until(lambda: ui.fragment().get("heads") == "320", "heads=320 in the URL")
    assert ui.driver.current_url != url_before
    # 320 heads of 80 instead of 160 of 160: the per-head attention work changes the times
    valid = ui.wait_changed("scaling-time", before, "heads = 320")
    ui.set_input("layers", 0)  # below the minimum of 1
    message = ui.wait_text("#err-layers", lambda s: s != "", "an error message")
    assert message == "Layers must be at least 1"
    ui.steady(lambda: ui.ys(ui.traces("scaling-time")), valid)
    ui.set_input("layers", -3)
    ui.wait_text("#err-layers", lambda s: s != "", "an error message")
    ui.set_input("layers", 96)
    ui.wait_text("#err-layers", lambda s: s == "", "the message to disappear")
    ui.wait_changed("scaling-time", valid, "layers = 96")
    assert ui.severe_logs() == []


def test_url_fragment_reproduces_the_view(ui) -> None:
    before = ui.ys(ui.traces("scaling-time"))
    ui.set_input("nvs", 64)
    ui.until(lambda: ui.fragment().get("nvs") == "64", "nvs=64 in the URL")
    shown = ui.wait_changed("scaling-time", before, "nvs = 64")
    url = ui.driver.current_url

    ui.driver.get("about:blank")
    ui.driver.get(url)  # a fresh page from the shared link
    ui.until(lambda: ui.duo.find_element("#ctl-nvs").get_attribute("value") == "64",
             "the link to restore nvs = 64")
    restored = ui.wait_figure("scaling-time", lambda t: ui.ys(t) == shown,
                              "the same plotted data as before the reload", timeout=30)
    assert ui.ys(restored) == shown
    assert ui.fragment()["nvs"] == "64"

    # a fresh page without the fragment shows the defaults again
    ui.driver.get(ui.duo.server_url)
    ui.until(lambda: ui.duo.find_element("#ctl-nvs").get_attribute("value") == "8",
             "the default nvs = 8")
    ui.wait_figure("scaling-time", lambda t: ui.ys(t) == before, "the default view")
    assert ui.severe_logs() == []


def test_malformed_scenario_upload_is_refused(ui, tmp_path) -> None:
    before = ui.ys(ui.traces("scaling-time"))
    fragment = ui.fragment()
    upload = ui.duo.find_element("#scenario-upload input[type=file]")

    bad_json = tmp_path / "broken.json"
    bad_json.write_text('{"layers": 12, "hidden": ')
    upload.send_keys(str(bad_json))
    message = ui.wait_text("#err-_", lambda s: s != "", "the upload's error")
    assert "Upload rejected" in message and "JSON" in message

    bad_value = tmp_path / "bad-value.json"
    bad_value.write_text(json.dumps({"layers": -5}))
    upload.send_keys(str(bad_value))
    message = ui.wait_text("#err-_", lambda s: "layers" in s, "the bad value's error")
    assert "Upload rejected" in message

    ui.steady(lambda: ui.ys(ui.traces("scaling-time")), before)
    assert ui.fragment() == fragment
    assert ui.duo.find_element("#ctl-layers").get_attribute("value") == "128"

    good = tmp_path / "good.json"
    good.write_text(json.dumps({"layers": 64, "nvs": 64}))
    upload.send_keys(str(good))
    ui.wait_text("#err-_", lambda s: s == "", "the error to clear")
    ui.until(lambda: ui.duo.find_element("#ctl-layers").get_attribute("value") == "64",
             "the uploaded layers = 64")
    ui.wait_changed("scaling-time", before, "the uploaded scenario")


def test_presentation_mode_enlarges_the_figures(ui) -> None:
    normal = ui.figure("scaling-time")
    assert "presentation" not in ui.duo.find_element("#root").get_attribute("class").split()
    ui.duo.find_element("#ctl-presentation input[type=checkbox]").click()
    ui.until(lambda: "presentation" in ui.duo.find_element("#root").get_attribute(
        "class").split(), "#root.presentation")
    big = ui.until(lambda: (lambda f: f if f and f["font"] > normal["font"] else None)(
        ui.figure("scaling-time")), "larger figure fonts")
    assert big["font"] >= 1.4 * normal["font"]
    assert big["xtitle"] > normal["xtitle"]
    assert ui.ys(big["traces"]) == ui.ys(normal["traces"])  # same data, bigger type
    assert ui.fragment()["presentation"] == "1"
    ui.duo.find_element("#ctl-presentation input[type=checkbox]").click()
    ui.until(lambda: "presentation" not in ui.duo.find_element("#root").get_attribute(
        "class").split(), "#root without presentation")
    ui.until(lambda: ui.figure("scaling-time")["font"] == normal["font"], "normal fonts")
