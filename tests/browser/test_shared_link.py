"""A shared link pasted into a tab already showing the app (issue 21): the address bar changed
and the page did not (the fragment was read at page load only). A new fragment alone does not
reload the page, so this is the same-document navigation a paste makes."""

from __future__ import annotations


def _value(ui, selector: str) -> str:
    return ui.duo.find_element(selector).get_attribute("value")


def test_a_link_pasted_into_an_open_tab_updates_the_controls_and_the_views(ui) -> None:
    before = ui.ys(ui.traces("scaling-time"))
    assert _value(ui, "#ctl-hbm_gb") != "80"
    ui.driver.get(ui.duo.server_url + "/#system=h100&hbm_gb=80&layers=96")
    ui.until(lambda: _value(ui, "#ctl-layers") == "96", "the pasted link's 96 layers")
    ui.until(lambda: _value(ui, "#ctl-hbm_gb") == "80", "the pasted link's 80 GB")
    assert ui.text("#ctl-system").strip().lower() == "h100"
    ui.wait_changed("scaling-time", before, "pasting a link")
    # the app then writes the whole scenario back, and that write changes nothing more
    ui.until(lambda: ui.fragment().get("layers") == "96" and "nvs" in ui.fragment(),
             "the whole scenario in the URL")
    ui.steady(lambda: _value(ui, "#ctl-layers"), "96")
    ui.driver.get(ui.duo.server_url + "/#heads=7")  # a broken link: said, nothing changes
    ui.wait_text("#err-_", lambda t: "invalid" in t and "heads" in t, "the link's message")
    assert _value(ui, "#ctl-layers") == "96"
    assert ui.severe_logs() == []
