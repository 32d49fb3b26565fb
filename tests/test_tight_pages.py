"""The Design and Plan pages mark a tight configuration (issue 32, item 3): the Design top
table's "HBM fit" column and the Plan answer's configuration line say "tight" and "may not fit:
X ± Y GB of Z" (dashboard/views/selected.py's fit_state). Uses tests/test_dashboard.py's app."""

from __future__ import annotations

from test_dashboard import valid

from dashboard.jobs.scenarios import reserve_gb
from dashboard.pages import design, plan, scaling
from model import load_model, load_system
from tests.unstacked import search


def test_the_design_and_plan_pages_mark_a_tight_row():
    h200 = load_system("paper-h200")
    res = search(load_model("gpt3-1t"), h200, 1024, 4096, "1d", top_k=5)
    scn = valid(system="paper-h200", model="gpt3-1t")
    usable = h200.hbm_capacity_gb - reserve_gb(scn)
    top = res.top.assign(strategy="1d", fits=True)
    top.loc[0, "memory_gb"] = usable  # at the limit: within the memory interval of it
    top.loc[1, "memory_gb"] = usable / 2  # far below
    rows = design._rows(top, scn)
    assert [r["memory_fit"] for r in rows[:2]] == ["tight", "fits"]
    text = plan.tight_text(scn, top.iloc[0])
    assert text.startswith(" — tight: may not fit: ") and text.endswith(f"GB of {usable:.1f}")
    assert plan.tight_text(scn, top.iloc[1]) == ""


def test_the_scaling_headline_names_the_counts_whose_best_is_tight():
    h200 = load_system("paper-h200")
    res = search(load_model("gpt3-1t"), h200, 1024, 4096, "1d", top_k=3)
    scn = valid(system="paper-h200", model="gpt3-1t")
    usable = h200.hbm_capacity_gb - reserve_gb(scn)
    frame = res.top.assign(strategy="1d", fits=True, gpus=[512, 1024, 2048])
    frame.loc[:, "memory_gb"] = usable / 2
    assert scaling.tight_text(frame, scn, frame.iloc[0]) == ""
    frame.loc[1, "memory_gb"] = usable  # the 1,024-GPU best at the limit: tight
    text = scaling.tight_text(frame, scn, frame.iloc[1])
    assert text.startswith(" Tight: may not fit: ") and text.endswith(
        " Tight (may not fit) at 1,024 GPUs.")
    assert scaling.tight_text(frame, {}, frame.iloc[1]) == ""  # no scenario: nothing said
