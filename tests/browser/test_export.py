"""Figure export from a card's buttons: a real PNG (kaleido, through Debian's chromium), a
standalone offline HTML with plotly.js inline, and the CSV of the plotted data."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _click_export(ui, card: str, label: str) -> None:
    buttons = ui.driver.find_elements("css selector", f"#card-{card} .export button")
    match = [b for b in buttons if b.text.strip() == label]
    assert len(match) == 1, [b.text for b in buttons]
    match[0].click()


def _download(ui, name: str, min_bytes: int, timeout: float = 90.0) -> bytes:
    """The downloaded file ``name`` once Chrome has finished writing it."""
    path = Path(ui.duo.download_path) / name

    def done() -> bytes | None:
        partial = list(Path(ui.duo.download_path).glob("*.crdownload"))
        if path.is_file() and not partial and path.stat().st_size >= min_bytes:
            return path.read_bytes()
        return None
    return ui.until(done, f"the download {name} (>= {min_bytes} bytes)", timeout)


def test_png_html_and_csv_export(ui) -> None:
    card = "scaling-time"
    shown = ui.ys(ui.traces(card))

    _click_export(ui, card, "PNG")  # the first image starts kaleido's browser: seconds
    png = _download(ui, f"{card}.png", 10_000)
    assert png.startswith(PNG_MAGIC)
    assert len(png) > 10_000
    width = int.from_bytes(png[16:20], "big")
    height = int.from_bytes(png[20:24], "big")
    assert (width, height) == (3600, 2100)  # 1200×700 at scale 3: high resolution

    _click_export(ui, card, "HTML")
    html = _download(ui, f"{card}.html", 1_000_000).decode("utf-8")
    assert len(html) > 1_000_000  # plotly.js inline: works offline
    assert "plotly" in html.lower() and "<html" in html.lower()
    assert 'src="https://cdn.plot.ly' not in html  # not the CDN build: plotly.js is inline
    for name in shown:  # the exported figure is the one shown
        assert f'"name":"{name}"' in html.replace(": ", ":"), name

    _click_export(ui, card, "CSV")
    text = _download(ui, f"{card}.csv", 100).decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    header = text.splitlines()[0].split(",")
    assert header[:2] == ["trace", "type"] and "x" in header and "y" in header
    assert len(rows) >= 10
    # the CSV holds exactly the plotted points of each strategy
    for name, ys in shown.items():
        plotted = [y for y in ys if isinstance(y, (int, float)) and math.isfinite(y)]
        exported = [float(r["y"]) for r in rows if r["trace"] == name and r["y"] != ""]
        assert exported == plotted, name

    assert ui.text(f"#card-{card} .ctl-error") == ""  # no "export failed" message
    assert ui.severe_logs() == []


def test_exports_are_captioned_with_model_system_budget_and_date(ui) -> None:
    """A slide made from an export says what it shows (issue 12)."""
    import datetime

    card = "scaling-efficiency"
    ui.wait_data(card)
    _click_export(ui, card, "HTML")
    html = _download(ui, f"{card}.html", 1_000_000).decode("utf-8")
    today = datetime.date.today().isoformat()
    caption = (f"gpt3-1t · h200, NVLink domain 8, 150.75 GB HBM, bf16 · budget 1T tokens, "
               f"global batch 4096 · {today}")
    escaped = caption.replace("·", "\\u00b7")  # plotly's JSON escapes non-ASCII characters
    assert caption in html or escaped in html, html[html.find("subtitle") - 50:][:400]
    _click_export(ui, card, "PNG")
    png = _download(ui, f"{card}.png", 10_000)
    assert png.startswith(PNG_MAGIC) and int.from_bytes(png[16:20], "big") == 3600
    assert ui.text(f"#card-{card} .ctl-error") == ""
    assert ui.severe_logs() == []
