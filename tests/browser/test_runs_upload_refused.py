"""Issue 29, item 7 in a browser: a runs file the browser used to drop silently (a .txt, one
over the size limit) is refused in one line naming it, and the previous file's fit is gone."""

from __future__ import annotations

import pytest

from tests.test_stacks import _synthetic_runs


@pytest.mark.own_page  # it opens the Validation page first
def test_a_refused_file_says_so_and_clears_the_fit(ui, tmp_path) -> None:
    runs = _synthetic_runs(tmp_path, 0.35)
    ui.driver.get("about:blank")
    ui.driver.get(f"{ui.duo.server_url}/validation")
    upload = "#validation-runs-upload input[type=file]"
    ui.duo.find_element(upload).send_keys(str(runs))
    ui.wait_text("#validation-runs-result", lambda t: "Fitted stack 'runs'" in t, "the fit",
                 timeout=240)
    text = tmp_path / "notes.txt"
    text.write_bytes(runs.read_bytes())
    ui.duo.find_element(upload).send_keys(str(text))
    shown = ui.wait_text("#validation-runs-result",
                         lambda t: t.startswith("Runs refused — notes.txt"), "the refusal")
    assert "not a JSON file" in shown and "Fitted stack" not in shown
    ui.until(lambda: not ui.duo.find_element("#validation-runs-apply").is_enabled(),
             "Apply disabled")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (101 * 1024))
    ui.duo.find_element(upload).send_keys(str(big))
    ui.wait_text("#validation-runs-result",
                 lambda t: t.startswith("Runs refused — big.json: 101.0 kB, over the 64 kB"),
                 "the size refusal")
