"""The co-design section of the Plan & cost page without a browser (dashboard/jobs/codesign.py,
dashboard/views/codesign_view.py, dashboard/figures/codesign.py): its rows are the API's for the
same inputs, its form is validated on the server with the estimator's validators and bounded, its
progress counts rows, and the map marks each model's best design."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-codesign-page-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import app  # noqa: E402, F401 - registers the pages and their callbacks
from dashboard.figures import codesign_figure  # noqa: E402
from dashboard.jobs import codesign  # noqa: E402
from dashboard.server.export import caption  # noqa: E402
from dashboard.views import codesign_view  # noqa: E402
from model import ModelError, load_model, load_system  # noqa: E402
from model.api import codesign as api_codesign  # noqa: E402
from model.specs import prices  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"models": ["llama3-8b"], "batches": "256", "system": "h100", "host_gb_per_s": 100,
         "budget_usd": 2e6, "base_usd": 20000,
         "rows": [{"field": "hbm_capacity_gb", "values": "40, 80", "prices": "5000, 10000"},
                  {"field": None, "values": "", "prices": ""}]}


def api_rows() -> pd.DataFrame:
    """model.studies.codesign.codesign for SMALL, named without the dashboard."""
    system = load_system("h100").with_overrides(host_bandwidth_gb_per_s=100.0,
                                                host_memory_bandwidth_gb_per_s=100.0)
    return api_codesign([load_model("llama3-8b")], system, 2e6, {"hbm_capacity_gb": [40, 80]},
                        {"base_usd": 20000, "hbm_capacity_gb": {"40": 5000, "80": 10000}},
                        256, strategy="1d").rows


def form_values(form: dict) -> list:
    """The run callback's State values for a form (its order)."""
    rows = form["rows"]
    return [form["models"], form["batches"], form["system"], form["host_gb_per_s"],
            form["budget_usd"], form["base_usd"], [r["field"] for r in rows],
            [r["values"] for r in rows], [r["prices"] for r in rows]]


def test_the_page_rows_are_the_api_rows():
    seen = []
    stored, error = codesign_view.run_study(seen.append, 1, *form_values(SMALL))
    assert error == ""
    expected = api_rows()
    assert len(expected) == 2
    page = pd.DataFrame(json.loads(json.dumps(stored))["rows"])  # through the browser's JSON
    for column in codesign_view.ROW_COLUMNS + ("hbm_capacity_gb",):
        if pd.api.types.is_numeric_dtype(expected[column]):
            np.testing.assert_allclose(page[column].astype(float), expected[column].astype(float),
                                       rtol=1e-12, err_msg=column)
        else:
            assert page[column].tolist() == expected[column].tolist(), column
    # progress: one report per (model, design) row, then the total again (a cached run too)
    assert seen == [("1", "2", "1 / 2 rows"), ("2", "2", "2 / 2 rows"), ("2", "2", "2 / 2 rows")]
    again = []
    codesign_view.run_study(again.append, 2, *form_values(SMALL))
    assert again == [("2", "2", "2 / 2 rows")]  # served from the cache


def test_the_defaults_are_study_5():
    """The form's defaults are Calculon's Study 5 inputs, the same as bench/study5/ (which the
    README's table comes from)."""
    bench = json.loads((ROOT / "bench" / "study5" / "prices.json").read_text())
    assert prices.STUDY5_PRICES == bench
    spec = codesign.study(codesign.DEFAULTS)
    assert spec["models"] == ["gpt3-175b", "turing-530b", "megatron-1t"]
    assert spec["batches"] == [1536, 2520, 3072] and spec["budget_usd"] == 125e6
    assert spec["vary"] == {"hbm_capacity_gb": [20, 40, 80, 120],
                            "host_memory_gb": [0, 256, 512, 1024]}
    ddr = json.loads((ROOT / "bench" / "study5" / "h100-ddr.json").read_text())
    assert spec["system"] == ddr["base"]
    assert spec["host_gb_per_s"] == ddr["host_bandwidth_gb_per_s"] == ddr[
        "host_memory_bandwidth_gb_per_s"]


@pytest.mark.parametrize("change, message", [
    ({"models": []}, "models: choose 1 to 6"),
    ({"models": ["llama3-8b"] * 2}, "models: each model once"),
    ({"models": ["../../etc/passwd"]}, "is not a workload preset"),
    ({"models": [f"m{i}" for i in range(7)]}, "models: choose 1 to 6"),
    ({"batches": "256, 512"}, "global batch: give one for every model, or one per model (1)"),
    ({"batches": "256.5"}, "global batch: whole numbers above 0"),
    ({"batches": "abc"}, "is not a list of numbers"),
    ({"system": "/tmp/x.json"}, "is not a system preset"),
    ({"budget_usd": -1}, "budget (USD) must be a number above 0"),
    ({"budget_usd": None}, "budget (USD) must be a number above 0"),
    ({"budget_usd": 1e9}, "the budget buys more than 32,768 GPUs of the cheapest design"),
    ({"host_gb_per_s": 0}, "host memory bandwidth (GB/s) must be a number above 0"),
    ({"base_usd": -5}, "prices: 'base_usd' must be a price in [0, 1e+09] USD"),
    ({"rows": [{"field": "hbm_capacity_gb", "values": "40, 80", "prices": "5000"}]},
     "hbm_capacity_gb: 2 values but 1 prices"),
    ({"rows": [{"field": "hbm_capacity_gb", "values": "1,2,3,4,5,6,7", "prices": "1"}]},
     "hbm_capacity_gb values: at most 6 values"),
    ({"rows": [{"field": "hbm_capacity_gb", "values": "-40", "prices": "5000"}]},
     "hbm_capacity_gb"),
    ({"rows": [{"field": "hbm_capacity_gb", "values": "40", "prices": "-1"}]},
     "must be a price in [0, 1e+09] USD"),
    ({"rows": [{"field": "name", "values": "1", "prices": "1"}]},
     "'name' is not a numeric system field"),
    ({"rows": [{"field": "hbm_capacity_gb", "values": "40", "prices": "1"}] * 2},
     "hbm_capacity_gb is varied twice"),
    ({"rows": [{"field": None, "values": "", "prices": ""}]}, "vary at least one system field"),
    ({"rows": [{"field": "hbm_capacity_gb", "values": "40," * 150, "prices": "1"}]},
     "at most 200 characters"),
])
def test_bad_input_is_a_message(change, message):
    with pytest.raises(ValueError, match=None) as err:
        codesign.study({**SMALL, **change})
    assert message in str(err.value), str(err.value)
    stored, shown = codesign_view.run_study(None, 1, *form_values({**SMALL, **change}))
    assert shown == str(err.value) and stored is codesign_view.dash.no_update


def test_the_work_is_bounded():
    """At most MAX_ROWS (model, design) rows; six values of three fields for six models is
    too many and is refused before anything runs."""
    rows = [{"field": f, "values": "1,2,3,4,5,6", "prices": "0,0,0,0,0,0"}
            for f in ("nvlink_domain_size", "hbm_capacity_gb", "host_memory_gb")]
    models = ["llama3-8b", "llama3-70b", "gpt3-175b", "megatron-22b", "mixtral-8x7b",
              "qwen3-30b-a3b"]
    with pytest.raises(ValueError, match="216 designs × 6 models is more than 216 rows"):
        codesign.study({**SMALL, "rows": rows, "models": models, "batches": "256",
                        "budget_usd": 1e6})
    spec = codesign.study(SMALL)
    with pytest.raises(ModelError, match="time budget after 1 of 2 rows"):
        codesign.run({**spec, "budget_usd": 2.5e6}, time_budget_s=0.0)


def test_the_figure_marks_each_models_best():
    frame = pd.DataFrame({
        "model": ["a", "a", "b", "b"], "hbm_capacity_gb": [80.0, 40.0, 80.0, 40.0],
        "price_per_gpu_usd": [30000.0, 25000.0, 30000.0, 25000.0],
        "max_gpus": [64, 80, 64, 80], "gpus": [64, 80, 64, 0],
        "samples_per_s": [10.0, 12.0, 3.0, 0.0], "samples_per_s_per_musd": [5.2, 6.0, 1.5, 0.0],
        "best": [False, True, True, False], "tp1": [1, 2, 4, np.nan], "pp": [1, 1, 2, np.nan],
        "dp": [64, 40, 8, np.nan], "microbatch": [1, 1, 1, np.nan],
        "recompute": ["selective", "full", "selective", None],
        "offload": ["none", "none", "optimizer", None]})
    fig = codesign_figure(frame, ["hbm_capacity_gb"], "samples_per_s")
    heat = fig.data[0]
    assert list(heat.x) == ["a", "b"] and list(heat.y) == ["HBM 80 GB", "HBM 40 GB"]
    text = np.asarray(heat.text)
    assert text.tolist() == [["10", "★ 3"], ["★ 12", "no fit"]]
    np.testing.assert_allclose(np.asarray(heat.z, dtype=float),
                               [[10 / 12, 1.0], [1.0, np.nan]])
    # the outlines: (model column, design row) of each best
    assert sorted((s.x0 + 0.5, s.y0 + 0.5) for s in fig.layout.shapes) == [(0, 1), (1, 0)]
    assert heat.customdata[1][0][-1] == "tp 2 · pp 1 · dp 40 · mb 1 · full"
    assert heat.customdata[0][1][-1] == "tp 4 · pp 2 · dp 8 · mb 1 · selective · offload " \
                                        "optimizer"
    per_musd = codesign_figure(frame, ["hbm_capacity_gb"]).data[0]
    np.testing.assert_allclose(np.asarray(per_musd.z, dtype=float)[:, 0], [5.2 / 6.0, 1.0])
    assert "Unknown metric" in codesign_figure(frame, ["hbm_capacity_gb"], "x").layout.annotations[
        0].text
    assert "No co-design rows" in codesign_figure(pd.DataFrame(), []).layout.annotations[0].text


def test_the_stored_rows_are_checked_and_exported_with_their_own_caption():
    stored, _ = codesign_view.run_study(lambda _: None, 1, *form_values(SMALL))
    fig, columns, rows = codesign_view.rendered(stored, "samples_per_s_per_musd")
    assert len(rows) == 2 and {c["field"] for c in columns} >= {"hbm_capacity_gb", "gpus"}
    text = caption({"model": "gpt3-1t"}, "plan-codesign", fig.to_dict())
    assert text.startswith("co-design of h100 designs (host memory at 100 GB/s) under "
                           "$2,000,000 · llama3-8b (batch 256) · transformer-perf ")
    for bad in ({"rows": 5, "varied": []}, {"varied": None}, "text"):
        fig, columns, rows = codesign_view.rendered(bad, "samples_per_s")
        assert rows == [] and fig.layout.annotations, bad
    fig, _, rows = codesign_view.rendered(
        {**stored, "varied": ["hbm_capacity_gb", "__class__"], "rows": stored["rows"] * 200},
        "evil")
    assert len(rows) == codesign_view.MAX_STORED_ROWS  # at most that many are drawn


def test_the_map_s_export_is_the_study_the_page_holds():
    """Issue 21: the map's export was a 400 (no builder). The draw callback hands the study to
    the export as its context (only plain JSON of a study's size: a store the browser sends back
    is never echoed otherwise), and the export draws the same map from it."""
    from dashboard.controls.scenario import default_scenario
    from dashboard.server import export

    stored, _ = codesign_view.run_study(lambda _: None, 1, *form_values(SMALL))
    drawn = codesign_view.draw.__wrapped__(stored, "samples_per_s", default_scenario())
    context = drawn[-1]
    assert context == [stored, "samples_per_s"]
    figure = export.card_figure("plan-codesign", default_scenario(), context)
    np.testing.assert_array_equal(np.asarray(figure["data"][0]["z"], dtype=float),
                                  np.asarray(drawn[0].data[0].z, dtype=float))
    for junk in ([stored, ["samples_per_s"]], [{"rows": [2 ** 100]}, "samples_per_s"]):
        assert codesign_view.draw.__wrapped__(*junk, default_scenario())[-1] is None
    with pytest.raises(ModelError, match="run the co-design study first"):
        export.card_figure("plan-codesign", default_scenario(), None)
