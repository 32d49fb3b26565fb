"""The Serving page as a presenter shows it (issue 29, item 5): opened fresh it serves Llama 3
70B on 8 H100 (the panel says so), its axis titles are drawn (Plotly.js 3 ignores bare-string
titles), and in presentation mode nothing scrolls sideways."""

from __future__ import annotations

import pytest

from dashboard.views.serve_view import DEFAULT_FORM, checked_form
from model import load_model, load_system, serve
from model.cli.numbers import integer

_OVERFLOW_JS = """
const root = document.documentElement;
const wide = [];
for (const el of document.querySelectorAll('body *')) {
  const r = el.getBoundingClientRect();
  if (r.width > 0 && r.right > root.clientWidth + 1) {
    wide.push((el.id || el.className || el.tagName).toString().slice(0, 60) + ':' + r.right);
  }
}
return {scroll: root.scrollWidth, client: root.clientWidth, wide: wide.slice(0, 12)};
"""
_TITLES_JS = """
const gd = document.querySelector(arguments[0]);
if (!gd) { return null; }
return Array.from(gd.querySelectorAll('.g-xtitle text, .g-ytitle text, .g-y2title text'),
                  (t) => t.textContent).filter((t) => t);
"""


@pytest.mark.own_page  # it opens the Serving page first, with no scenario in its link
def test_the_serving_page_fits_a_slide(ui) -> None:
    ui.driver.get("about:blank")
    ui.driver.get(f"{ui.duo.server_url}/serving")
    ui.until(lambda: ui.fragment().get("model") == "llama3-70b"
             and ui.fragment().get("system") == "h100", "the serving default in the link",
             timeout=60)
    gpus, workload, pins = checked_form(DEFAULT_FORM)
    best = serve(load_model("llama3-70b"), load_system("h100"), gpus, workload, pins).best
    per_gpu = f"{integer(best['output_tokens_per_s_per_gpu'])} output tokens/s per GPU"
    ui.wait_text("#serve-headline", lambda t: per_gpu in t, "the Llama 3 70B answer",
                 timeout=90)
    graph = ui.graph("serve-pareto")
    titles = ui.until(lambda: ui.driver.execute_script(_TITLES_JS, graph), "axis titles drawn")
    assert "output tokens/s per GPU" in titles and "tokens/s per user (1 / TPOT)" in titles
    load = ui.graph("serve-load")
    ui.until(lambda: "TPOT (ms)" in (ui.driver.execute_script(_TITLES_JS, load) or []),
             "the TPOT axis title drawn")
    ui.duo.find_element("#ctl-presentation input[type=checkbox]").click()
    ui.until(lambda: "presentation" in ui.duo.find_element("#root").get_attribute(
        "class").split(), "#root.presentation")
    ui.idle()
    size = ui.driver.execute_script(_OVERFLOW_JS)
    assert size["scroll"] <= size["client"], size
