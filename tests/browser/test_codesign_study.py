"""The co-design section of the Plan & cost page in a browser: a small study runs as a background
job whose progress reaches every row, the map shows the API's rows with each model's best
marked, bad input is an inline message, and Cancel stops a long study."""

from __future__ import annotations

from selenium.webdriver.common.keys import Keys

from model import load_model, load_system
from model.api import codesign

BUDGET_USD = 2_000_000  # 56 to 88 GPUs: the whole study takes well under a second
FIELDS = (("hbm_capacity_gb", "40, 80", "5000, 10000"), ("host_memory_gb", "0, 256", "0, 2500"))
LABELS = ["HBM 80 GB · host 0 GB", "HBM 40 GB · host 0 GB", "HBM 80 GB · host 256 GB",
          "HBM 40 GB · host 256 GB"]  # the study's order: HBM varies fastest, largest first
MODELS = ["gpt3-175b", "turing-530b", "megatron-1t"]

_CELLS_JS = """
const gd = document.querySelector('#card-plan-codesign .js-plotly-plot');
if (!gd || !gd.data || !gd.data.length || gd.data[0].type !== 'heatmap') { return null; }
return {x: gd.data[0].x, y: gd.data[0].y, text: gd.data[0].text,
        shapes: (gd.layout.shapes || []).length};
"""


def _type(ui, selector: str, value) -> None:
    box = ui.duo.find_element(selector)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    box.send_keys(str(value), Keys.TAB)
    ui.until(lambda: box.get_attribute("value") == str(value),
             f"{selector} = {value} (reads {box.get_attribute('value')!r})")


def _pattern(kind: str, i: int) -> str:
    """CSS selector of a pattern-matching input (Dash renders its id as sorted JSON)."""
    return f"[id='{{\"i\":{i},\"type\":\"{kind}\"}}']"


def _progress(ui) -> tuple[float, float, str]:
    """The bar's value and max and the text, read in one script: separate reads could straddle
    a progress report (a small study's first report is already its last)."""
    value, top, text = ui.driver.execute_script(
        "const bar = document.querySelector('#cd-progress');"
        "return [bar.getAttribute('value'), bar.getAttribute('max'),"
        " document.querySelector('#cd-progress-text').innerText];")
    return float(value or 0), float(top or 0), text.strip()


def _open(ui) -> None:
    ui.go("plan")
    ui.wait_text("#cd-progress-text", lambda s: s == "", "the co-design section")
    assert not ui.disabled("#cd-run") and ui.disabled("#cd-cancel")


def _api_best() -> set[tuple[str, str]]:
    """(model, design label) of each model's best design, from the API."""
    system = load_system("h100").with_overrides(host_bandwidth_gb_per_s=100.0,
                                                host_memory_bandwidth_gb_per_s=100.0)
    rows = codesign([load_model(m) for m in MODELS], system, BUDGET_USD,
                    {"hbm_capacity_gb": [40, 80], "host_memory_gb": [0, 256]},
                    {"base_usd": 20000, "hbm_capacity_gb": {"40": 5000, "80": 10000},
                     "host_memory_gb": {"0": 0, "256": 2500}}, [1536, 2520, 3072]).rows
    best = rows[rows["best"]]
    return {(r["model"], f"HBM {r['hbm_capacity_gb']:g} GB · host {r['host_memory_gb']:g} GB")
            for _, r in best.iterrows()}


def test_a_small_study_runs_to_completion_with_the_best_marked(ui) -> None:
    _open(ui)
    _type(ui, "#cd-budget", -5)
    ui.duo.find_element("#cd-run").click()
    ui.wait_text("#cd-error", lambda t: t.startswith("budget (USD) must be a number above 0"),
                 "the budget's message")
    _type(ui, "#cd-budget", BUDGET_USD)
    for i, (_, values, prices) in enumerate(FIELDS):
        _type(ui, _pattern("cd-values", i), values)
        _type(ui, _pattern("cd-prices", i), prices)
    ui.duo.find_element("#cd-run").click()
    seen = [_progress(ui)]
    ui.until(lambda: seen.append(_progress(ui)) or seen[-1][2] == "12 / 12 rows",
             "the study to finish (12 / 12 rows)", timeout=90)
    done = [v for v, _, _ in seen]
    assert done == sorted(done), f"progress went backwards: {seen}"
    assert seen[-1][:2] == (12, 12) and all(m == 12 for v, m, _ in seen if v > 0)
    ui.wait_text("#cd-error", lambda t: t == "", "no message")

    cells = ui.until(lambda: ui.driver.execute_script(_CELLS_JS), "the co-design map")
    assert cells["x"] == MODELS and cells["y"] == LABELS
    starred = {(cells["x"][j], cells["y"][i]) for i, row in enumerate(cells["text"])
               for j, text in enumerate(row) if text.startswith("★")}
    assert starred == _api_best() and cells["shapes"] == len(starred)
    assert any(text == "no fit" for row in cells["text"] for text in row)  # 1T on ≤ 88 GPUs
    rows = ui.grid_rows("#cd-table .ag-center-cols-container .ag-row")
    assert len(rows) == 12
    ui.until(lambda: not ui.disabled("#cd-run"), "the run button re-enabled")
    assert ui.disabled("#cd-cancel")
    assert ui.severe_logs() == []
    ui.screenshot("plan-codesign")


def test_cancel_stops_a_long_study(ui) -> None:
    _open(ui)
    _type(ui, "#cd-budget", 700_000_000)  # Study 5 at up to 31,000 GPUs: about a minute
    ui.duo.find_element("#cd-run").click()
    seen = [_progress(ui)]
    ui.until(lambda: seen.append(_progress(ui)) or seen[-1][0] > 0, "the first progress report",
             timeout=60)
    assert ui.disabled("#cd-run") and not ui.disabled("#cd-cancel")
    assert seen[-1][1] == 48 and seen[-1][2].endswith("/ 48 rows")

    ui.cancel_job("cd", lambda: _progress(ui), 48)
    assert ui.driver.execute_script(_CELLS_JS) is None  # still the placeholder
