"""Every export button of every page gives a real file (issue 21: the Plan & cost page's
exports answered 400, with a TypeError in the console): each card's PNG (the PNG signature, a
3600-pixel-wide image), HTML (a document with plotly.js inline and the card's own traces) and
CSV (the header and at least one row of the plotted data)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from selenium.webdriver.common.keys import Keys

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TIMEOUT_S = 120.0  # a PNG starts kaleido's browser; a card's figure may be rebuilt


def _cards(ui) -> list[str]:
    """The names of the page's cards that have export buttons."""
    return ui.driver.execute_script(
        "return Array.from(document.querySelectorAll('.card[id^=\"card-\"] .export'))"
        ".map((e) => e.closest('.card').id.slice(5));")


def _download(ui, name: str) -> bytes:
    path = Path(ui.duo.download_path) / name

    def done() -> bytes | None:
        partial = list(Path(ui.duo.download_path).glob("*.crdownload"))
        return path.read_bytes() if path.is_file() and not partial and path.stat().st_size \
            else None
    return ui.until(done, f"the download {name}", TIMEOUT_S)


def _traces(ui, card: str) -> list[str]:
    """The names (or, unnamed, the types) of the card's plotted traces."""
    return [t["name"] or t["type"] for t in ui.wait_data(card, TIMEOUT_S)]


def export_every_format(ui, card: str) -> None:
    """Click PNG, HTML and CSV of ``card``; check each file's content."""
    shown = _traces(ui, card)
    for label in ("PNG", "HTML", "CSV"):
        button = [b for b in ui.driver.find_elements("css selector", f"#card-{card} .export button")
                  if b.text.strip() == label]
        assert len(button) == 1, (card, label)
        ui.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", button[0])
        button[0].click()
        data = _download(ui, f"{card}.{label.lower()}")
        if label == "PNG":
            assert data.startswith(PNG_MAGIC), card
            assert int.from_bytes(data[16:20], "big") == 3600, card  # 1200 px at scale 3
        elif label == "HTML":
            text = data.decode("utf-8")
            assert "<html" in text.lower() and len(text) > 1_000_000, card  # plotly.js inline
            flat = text.replace("\\u002f", "/").replace('": "', '":"')  # plotly escapes /
            names = [json.dumps(n, ensure_ascii=a)[1:-1] for n in shown for a in (True, False)]
            assert any(f'"name":"{n}"' in flat or f'"type":"{n}"' in flat for n in names), \
                (card, names)
        else:
            text = data.decode("utf-8")
            rows = list(csv.DictReader(io.StringIO(text)))
            assert text.splitlines()[0].split(",")[:2] == ["trace", "type"], card
            assert rows and {r["trace"] or r["type"] for r in rows} & set(shown), card
    ui.wait_text(f"#card-{card} .ctl-error", lambda t: t == "", f"{card}: no export message")


def export_page(ui, page: str | None, expected: set[str]) -> None:
    if page:
        ui.go(page)
    cards = ui.until(lambda: set(_cards(ui)) >= expected and _cards(ui),
                     f"the cards {sorted(expected)}")
    assert set(cards) == expected, cards
    for card in cards:
        export_every_format(ui, card)
    assert ui.severe_logs() == []


def test_scaling_and_design_exports(ui) -> None:
    export_page(ui, None, {"scaling-time", "scaling-breakdown", "scaling-memory",
                           "scaling-config", "scaling-efficiency"})
    export_page(ui, "design", {"design-heatmap", "design-ops", "design-roofline",
                                "design-timeline", "design-memory"})


def test_systems_and_validation_exports(ui) -> None:
    export_page(ui, "systems", {"systems-compare"})
    ui.go("validation")
    cards = ui.until(lambda: [c for c in _cards(ui) if c.startswith("validation-")],
                     "the validation cards")
    export_page(ui, None, set(cards))


def _type(ui, selector: str, value) -> None:
    box = ui.duo.find_element(selector)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    box.send_keys(str(value), Keys.TAB)
    ui.until(lambda: box.get_attribute("value") == str(value), f"{selector} = {value}")


def test_plan_and_hbm_exports(ui) -> None:
    """The Plan & cost page's three cards (the co-design map after a small study) and the HBM
    sweep's contour after a 2 × 2 sweep."""
    ui.go("plan")
    _type(ui, "#cd-budget", 2_000_000)  # 56 to 88 GPUs: well under a second
    ui.duo.find_element("#cd-run").click()
    ui.wait_text("#cd-progress-text", lambda s: s.endswith("rows") and s.split(" / ")[0]
                 == s.split(" / ")[1].split()[0], "the study to finish", TIMEOUT_S)
    export_page(ui, None, {"plan-pareto", "plan-lost", "plan-codesign"})
    ui.go("hbm")
    ui.wait_text("#hbm-progress-text", lambda s: s == "", "the HBM page")
    _type(ui, "#hbm-steps", 2)
    ui.duo.find_element("#hbm-run").click()
    export_page(ui, None, {"hbm-contour"})
