"""The Design and Plan pages mark a tight configuration (issue 32, item 3): the Design top
table's "HBM fit" column and the Plan answer's configuration line say "tight" and "may not fit:
X ± Y GB of Z" (dashboard/views/selected.py's fit_state). Uses tests/test_dashboard.py's app."""

from __future__ import annotations

from test_dashboard import valid

from dashboard.pages import design, plan
from dashboard.views.selected import reserve_gb
from model import load_model, load_system
from tests.unstacked import search


def test_the_design_and_plan_pages_mark_a_tight_row():
    h200 = load_system("paper-h200")
    res = search(load_model("gpt3-1t"), h200, 1024, 4096, "1d", compat="paper", top_k=40)
    scn = valid(system="paper-h200", model="gpt3-1t", compat="paper")
    assert reserve_gb(scn) == h200.memory_reserve_gb  # the paper mode: the system's reserve
    usable = h200.usable_hbm_bytes / 1e9
    row = res.top[res.top["memory_gb"] > usable].iloc[0]
    rows = design._rows(res.top.assign(strategy="1d"), scn)
    assert {r["memory_fit"] for r in rows} >= {"tight"}
    text = plan.tight_text(scn, row)
    assert text.startswith(" — tight: may not fit: ") and text.endswith(f"GB of {usable:.1f}")
