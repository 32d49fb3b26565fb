"""Issue 29, the Scaling page's default: "no spinner while recomputing (figures stale 2–5 s)";
item 4: "every recompute shows a spinner on the figures it will replace". A change of the panel
(another GPU) recomputes the page's views: while it runs, a spinner covers every figure card it
replaces, and it is gone once the new figures are drawn."""

from __future__ import annotations

CARDS = ("scaling-time", "scaling-breakdown", "scaling-memory", "scaling-config",
         "scaling-efficiency")

# records, from before a change, which cards showed a spinner (dcc.Loading's) at any moment
_WATCH = """
window.__spun = {};
const cards = arguments[0];
const seen = () => {
  for (const name of cards) {
    const card = document.querySelector('#card-' + name);
    if (card && card.querySelector('.dash-spinner, .dash-spinner-container, .dash-dot-spinner')) {
      window.__spun[name] = true;
    }
  }
};
new MutationObserver(seen).observe(document.body,
                                   {subtree: true, childList: true, attributes: true});
"""
_SPINNING = """
return Array.from(document.querySelectorAll(
  '.dash-spinner, .dash-dot-spinner')).filter((e) => e.offsetParent !== null).length;
"""


def test_a_recompute_shows_a_spinner_on_every_figure_it_replaces(ui) -> None:
    before = ui.ys(ui.traces("scaling-time"))
    ui.idle()
    ui.driver.execute_script(_WATCH, list(CARDS))
    ui.choose("system", "b200")
    ui.wait_changed("scaling-time", before, "choosing b200")
    ui.idle()
    spun = ui.driver.execute_script("return window.__spun;")
    assert set(spun) == set(CARDS), spun
    ui.until(lambda: ui.driver.execute_script(_SPINNING) == 0, "the spinners gone")
    assert ui.severe_logs() == []
