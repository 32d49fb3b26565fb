"""The Design page's per-op table and roofline show the efficiencies each op's kernel time
implies (model/engine/kernel_report.py), without a browser."""

from __future__ import annotations

import pytest
from test_dashboard import default

from dashboard.pages import design

pytestmark = pytest.mark.usefixtures("tmp_cache")  # a private results cache (conftest)

SHOWN = ("implied_flop_efficiency_fwd", "implied_flop_efficiency_bwd",
         "implied_hbm_efficiency_fwd", "implied_hbm_efficiency_bwd")


def test_the_design_ops_table_and_roofline_carry_the_implied_efficiencies():
    fields = {col["field"]: col for col in design.OPS_COLUMNS}
    assert all(name in fields and "%" in str(fields[name]["valueFormatter"]) for name in SHOWN)
    scn = default()
    _, rows, _, why = design.build_space(scn)
    assert why == "" and rows
    _, roof, op_rows = design.build_ops(scn, [rows[0]])
    assert op_rows and all(set(SHOWN) <= set(row) for row in op_rows)
    matmuls = [row for row in op_rows if row["kind"].endswith("linear")]
    assert matmuls and all(0.2 < row["implied_flop_efficiency_fwd"] < 1.0 for row in matmuls)
    points = [t for t in roof.data if t.meta and t.meta.get("group") != "roof"]
    assert points and all("implied FLOP efficiency fwd" in t.hovertemplate for t in points)
    assert all({*SHOWN, "kernel_time_fwd_s", "kernel_time_bwd_s"} <= set(t.meta["customdata"])
               for t in points)
