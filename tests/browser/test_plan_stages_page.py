"""Issue 29, items 3 and 4 in a browser: a mixture-of-experts preset is planned on the Plan & cost
page (in stages, by the background job, its progress shown only while it runs and a spinner on
the figures it replaces) with the API's answer; a refused change (H100 with NVFP4) leaves a
banner in view at the top of the page, on every page with the panel, naming the scenario the
figures still show."""

from __future__ import annotations

import pytest

from dashboard.controls import presets as PR
from dashboard.controls import scenario as S
from dashboard.jobs import compute, planner
from model.api import plan
from model.engine.request import Request

# records, from before a change, whether a spinner covered a card's figure: the job's (the
# cards' grid marked busy while it runs, CSS draws it) or dcc.Loading's (a request's)
_WATCH_SPINNER = """
window.__spinner = false;
const card = document.querySelector(arguments[0]);
const seen = () => {
  if (card.querySelector('.dash-spinner') || card.closest('.busy-figures')) {
    window.__spinner = true;
  }
};
new MutationObserver(seen).observe(document.querySelector('#plan-grid'),
                                   {subtree: true, childList: true, attributes: true});
"""
_IN_VIEW = """
const r = document.querySelector(arguments[0]).getBoundingClientRect();
return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;
"""


def api_gpus(scn: dict) -> int:
    """The API's plan (the CLI's) for a scenario, as the page builds its request."""
    model, system, kw = planner.inputs(scn, whole_plan=True)
    req = Request.build(model, system, global_batch=scn["global_batch"],
                        max_gpus=scn["plan_max_gpus"], **kw)
    return plan(req, **planner.targets(scn), failures=scn["plan_failures"]).gpus


def open_plan(ui, fragment: str) -> None:
    ui.driver.get("about:blank")  # a new fragment alone does not reload the page
    ui.driver.get(f"{ui.duo.server_url}/plan#{fragment}")
    ui.idle(timeout=90)
    ui.wait_text("#plan-gpus", lambda t: t[:1].isdigit(), "a planned GPU count", timeout=60)


def progress_shown(ui) -> bool:
    return ui.driver.execute_script(
        "return getComputedStyle(document.querySelector('#plan-progress-box')).display"
        " !== 'none';")


@pytest.mark.own_page  # it opens a link first
def test_a_moe_preset_is_planned_in_stages_with_the_apis_answer(ui) -> None:
    # the results cache emptied first: another test's plan of this preset
    # (tests/browser/test_plan_every_preset.py) would answer at once, without stages
    store = compute.cache()
    if store is not None:
        store.clear()
    open_plan(ui, "strategy=all")  # every strategy: a MoE plan goes to the staged job
    assert not progress_shown(ui)
    ui.driver.execute_script(_WATCH_SPINNER, "#card-plan-pareto")
    ui.choose("model", "gpt-oss-120b")
    texts = set()

    def planned() -> bool:
        texts.add(ui.text("#plan-progress-text") if progress_shown(ui) else "")
        return "gpt-oss-120b on h200" in ui.text("#plan-headline") and \
            ui.text("#plan-gpus")[:1].isdigit() and not progress_shown(ui)
    try:
        ui.until(planned, "the staged plan of gpt-oss-120b", timeout=150)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: headline {ui.text('#plan-headline')!r}, message "
                             f"{ui.text('#plan-message')!r}, progress {sorted(texts)}, "
                             f"logs {ui.severe_logs()}") from None
    scn = S.validate_scenario({**S.default_scenario(), **PR.model_values("gpt-oss-120b")})[0]
    assert ui.text("#plan-gpus").startswith(f"{api_gpus(scn):,} (")
    assert ui.text("#plan-message") == ""
    assert any(t.startswith(("Coarse:", "Refine:")) for t in texts), texts  # its progress
    assert not any("Done" in t for t in texts)
    assert ui.driver.execute_script("return window.__spinner;")  # on the figure it replaced
    traces = ui.wait_figure("plan-pareto", lambda t: any(
        str(tr["name"]).startswith("plan:") for tr in t), "the plan starred")
    assert any(str(tr["name"]) == f"plan: {api_gpus(scn):,} GPUs" for tr in traces)
    assert ui.severe_logs() == []


@pytest.mark.own_page  # it opens a link first
def test_a_refused_change_leaves_a_banner_in_view(ui) -> None:
    open_plan(ui, "system=b200&precision=nvfp4&strategy=1d")
    headline = ui.wait_text("#plan-headline", lambda t: "on b200" in t, "the B200 plan")
    assert ui.text("#refused-banner") == ""
    ui.driver.execute_script("window.scrollTo(0, document.body.scrollHeight);")
    ui.choose("system", "h100")
    banner = ui.wait_text("#refused-banner", lambda t: t != "", "the banner")
    assert banner.startswith("Change not applied: the figures still show gpt3-1t on B200 in "
                             "NVFP4."), banner
    assert "H100" in banner and "has no NVFP4" in banner
    ui.driver.execute_script("window.scrollTo(0, document.body.scrollHeight);")
    assert ui.driver.execute_script(_IN_VIEW, "#refused-banner")  # scrolled: still in view
    ui.steady(lambda: ui.text("#plan-headline"), headline)  # the figures stay on B200
    ui.go("scaling")  # every page with the panel shows it
    ui.wait_text("#refused-banner", lambda t: t == banner, "the banner on the Scaling page")
    ui.choose("precision", "BF16")
    ui.wait_text("#refused-banner", lambda t: t == "", "the banner gone once applied")
    ui.go("plan")
    ui.wait_text("#plan-headline", lambda t: "on h100" in t, "the H100 plan", timeout=60)
