"""Issue 23, item 3 in a browser: upload measured runs on the Validation page, fit them, apply the
fitted stack to the session, and the Scaling page's headline is the API's answer with that same
fitted stack (python -m model calibrate's fit, stack= a Stack) — with the fit's own error."""

from __future__ import annotations

import re

import model
from dashboard.controls import scenario as S
from dashboard.controls import scenario_link as L
from dashboard.controls.fitted import FITTED, FITTED_KEY
from model.specs.stack import load_stack
from model.validation.user_runs import calibrate_runs, fitted_stack, runs_from_text
from tests.test_stacks import _synthetic_runs

SMALL = "#model=llama3-8b&system=h100&stack=torchtitan-2025&gpus_min=8&gpus_max=64&strategy=1d"
HEADLINE = re.compile(r"on (\d+) GPUs — ([\d.]+) days \((.*?)\), ")


def _headline(ui, check, what: str) -> tuple[int, float, str]:
    text = ui.wait_text("#scaling-summary", lambda t: HEADLINE.search(t) and check(t), what,
                        timeout=240)
    gpus, days, bar = HEADLINE.search(text).groups()
    return int(gpus), float(days), bar


def _api_best(scn: dict, stack) -> tuple[int, float]:
    """The fastest (GPUs, days) over the scenario's GPU counts, from model.search."""
    m, s = S.build_inputs(scn)
    best = []
    for gpus in S.gpu_counts(scn):
        found = model.search(m, s, gpus, scn["global_batch"], "1d", top_k=1,
                             execution=S.execution_of(scn), stack=stack)
        if not found.top.empty:
            best.append((float(found.top.iloc[0]["train_days"]), gpus))
    days, gpus = min(best)
    return gpus, days


def test_a_fit_applied_to_the_session_is_the_headlines_stack(ui, tmp_path) -> None:
    runs = _synthetic_runs(tmp_path, 0.35)  # three runs on H100, 'measured' at η = 0.35
    ui.driver.get(ui.duo.server_url + "/" + SMALL)
    small = lambda t: int(HEADLINE.search(t).group(1)) <= 64  # noqa: E731 - not 16,384 GPUs
    before = _headline(ui, small, "the small scenario's headline (8 to 64 GPUs)")
    ui.until(lambda: ui.fragment().get("strategy") == "1d", "the small scenario in the URL")
    preset, _ = S.validate_scenario(L.from_query(ui.driver.current_url.split("#")[1]))
    gpus, days = _api_best(preset, "torchtitan-2025")
    assert before[0] == gpus and abs(before[1] - days) <= 0.05 + 1e-9, (before, gpus, days)

    ui.go("validation")
    ui.duo.find_element("#validation-runs-upload input[type=file]").send_keys(str(runs))
    fitted = "Fitted stack 'runs' from torchtitan-2025 on 3 runs"
    ui.wait_text("#validation-runs-result", lambda t: fitted in t, "the fit", timeout=240)
    apply = ui.duo.find_element("#validation-runs-apply")
    ui.until(lambda: apply.is_enabled(), "the Apply button enabled after the fit")
    apply.click()
    ui.wait_text("#validation-runs-applied", lambda t: t.startswith("Applied"), "applied")
    ui.until(lambda: ui.text("#ctl-stack").strip() == "fitted: runs", "the stack control")
    ui.until(lambda: ui.fragment().get("stack") == FITTED and FITTED_KEY in ui.fragment(),
             "the fitted stack in the link")

    # the API's answer with the same fit (calibrate from the same base, same runs)
    cases = runs_from_text(runs.read_bytes(), "torchtitan-2025")
    efficiency = calibrate_runs(cases)["efficiency"]
    stack = fitted_stack(load_stack("torchtitan-2025"), "runs", efficiency)
    scn, errors = S.validate_scenario(L.from_query("#" + ui.driver.current_url.split("#")[1]))
    assert errors == {} and scn["stack"] == FITTED
    assert scn[FITTED_KEY]["stack"]["gemm_efficiency"]["h100"] == stack.gemm_efficiency["h100"]
    gpus, days = _api_best(scn, stack)

    ui.go("scaling")
    shown = _headline(ui, lambda t: "fitted stack 'runs'" in t and small(t),
                      "the fitted headline")
    assert shown[0] == gpus and abs(shown[1] - days) <= 0.05 + 1e-9, (shown, gpus, days)
    assert shown[1] != before[1]  # the fit changed the answer
    # its own interval: 3 leave-one-out runs state no 80 % interval, and the words say so
    assert "leave-one-out runs of your runs on h100 (fitted stack 'runs')" in shown[2]
    assert "cross-validation" not in shown[2]  # never a preset's error bar

    # back to the preset, and to the fit again: each its own answer
    ui.choose("stack", "torchtitan-2025")
    again = _headline(ui, lambda t: "fitted stack" not in t and small(t),
                      "the preset's headline")
    assert again[:2] == before[:2]
    ui.choose("stack", "fitted: runs")
    assert _headline(ui, lambda t: "fitted stack 'runs'" in t, "the fit again") == shown
    assert ui.severe_logs() == []
