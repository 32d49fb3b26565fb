"""Issue 29, item 7 in a browser: the Scenarios page's upload dropped a .txt (its accept) and
a file over its max_size without a word, and the Validation page's runs upload one over 600 kB.
Now each such file is answered in one line naming it, and the previous result is gone."""

from __future__ import annotations

import json

import pytest


def _send(ui, selector: str, path) -> None:
    found = ui.until(lambda: ui.driver.find_elements("css selector",
                                                     f"{selector} input[type=file]"),
                     f"the upload {selector}", timeout=60)
    found[0].send_keys(str(path))


@pytest.mark.own_page  # it opens the Scenarios page first
def test_scenarios_and_runs_uploads_answer_every_file(ui, tmp_path) -> None:
    ui.driver.get("about:blank")
    ui.driver.get(f"{ui.duo.server_url}/scenarios")
    good = tmp_path / "one.json"
    good.write_text(json.dumps({"layers": 64}))
    _send(ui, "#scenarios-upload", good)
    ui.wait_text("#scenarios-message", lambda t: t == "Added 1 scenario from one.json.",
                 "the file added")

    text = tmp_path / "notes.txt"
    text.write_bytes(good.read_bytes())
    _send(ui, "#scenarios-upload", text)
    shown = ui.wait_text("#scenarios-message",
                         lambda t: t.startswith("Upload rejected — notes.txt: "), "the type")
    assert "not a JSON file (.txt)" in shown and "Nothing from it was added" in shown

    big = tmp_path / "big.json"  # over the page's 320 kB: was dropped by max_size
    big.write_bytes(b" " * (400 * 1024))
    _send(ui, "#scenarios-upload", big)
    ui.wait_text("#scenarios-message", lambda t: t == (
        "Upload rejected — big.json: 400.0 kB, over the 320 kB limit. Nothing from it was "
        "added; the saved scenarios are as before."), "the size refusal")

    ui.driver.get("about:blank")
    ui.driver.get(f"{ui.duo.server_url}/validation")  # runs over the 600 kB it used to send
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (700 * 1024))
    _send(ui, "#validation-runs-upload", huge)
    ui.wait_text("#validation-runs-result", lambda t: t == (
        "Runs refused — huge.json: 700.0 kB, over the 64 kB limit. The previous fit is "
        "cleared."), "the runs size refusal")
    assert not ui.duo.find_element("#validation-runs-apply").is_enabled()
    assert ui.severe_logs() == []
