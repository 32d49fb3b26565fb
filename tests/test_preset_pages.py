"""Every model preset opens every page on a result (issue 21): the MoE presets' defaults were
refused by the scaling views' and Compare systems' memory budget ("~5M configurations over this
server's memory budget"), and the Design page's default strategy (2D SUMMA) refuses every MoE
model.

Each preset × page is walked through what decides it on the preset's defaults, fast (counting,
no search): the strategy chosen, the page's budget checks; the real callbacks run for the largest
MoE preset (deepseek-v3, ~5.5M configurations) and the default dense one, asserting figures
with data."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_TMP_CACHE = tempfile.mkdtemp(prefix="perf-preset-pages-test-")
atexit.register(shutil.rmtree, _TMP_CACHE, ignore_errors=True)
if "dashboard.settings" not in sys.modules:  # read once (app.py creates CACHE_DIR/background)
    os.environ["PERF_CACHE_DIR"] = _TMP_CACHE

import pytest  # noqa: E402

import app  # noqa: E402, F401 - registers the pages and their callbacks
from dashboard.controls import presets as PR  # noqa: E402
from dashboard.controls import scenario as S  # noqa: E402
from dashboard.jobs import budget, compute, planner, studies, sweep_parts  # noqa: E402
from dashboard.pages import design, scaling, systems  # noqa: E402
from model import list_models, load_model  # noqa: E402
from model.physics.strategies import supports  # noqa: E402

MOE_PRESETS = [m for m in list_models() if load_model(m).moe]


def preset(name: str) -> dict:
    """The scenario a link ``#model=<name>`` (or choosing the preset) opens on."""
    scn, errors = S.validate_scenario(S.with_presets({"model": name}))
    assert scn is not None, errors
    return scn


def has_data(figure) -> bool:
    """A figure (dict or plotly) with at least one trace holding numbers."""
    data = figure["data"] if isinstance(figure, dict) else figure.to_dict()["data"]
    return any(len(t.get(k) if t.get(k) is not None else []) for t in data for k in "xyz")


def test_the_moe_presets_exist():
    assert {"deepseek-v3", "kimi-k2", "mixtral-8x7b", "qwen3-235b-a22b", "gpt-oss-120b",
            "llama4-maverick"} <= set(MOE_PRESETS)


@pytest.mark.parametrize("name", list_models())
def test_every_preset_passes_every_page_s_gates_on_its_defaults(name):
    """Design: a strategy the model supports; Scaling and Compare systems: the sweep (in parts
    of GPU counts) within the memory and time budgets on every compared system; Design: its
    cells and table within budget; HBM: its default grid's searches; Plan: its search at the
    largest count within budget."""
    scn = preset(name)
    model, _ = S.build_inputs(scn)
    assert supports(scn["design_strategy"], model), scn["design_strategy"]
    counts = tuple(S.gpu_counts(scn))
    swept = S.request_of(scn, gpus=counts, strategy=compute.strategies_of(scn))
    sweep_parts.check_sweep("scaling", swept, "")
    for other in studies.COMPARE_SYSTEMS:
        sweep_parts.check_sweep(other, swept.replace(system=PR.preset_system(other)), "",
                                repeat=len(studies.COMPARE_SYSTEMS) + 1,
                                time_budget_s=studies.SWEEP_TIME_BUDGET_S)
    design_request = S.request_of(scn, gpus=(scn["gpus"],), strategy=scn["design_strategy"])
    budget.check_design("design", design_request, "")
    budget.check_searches("top", design_request, "")
    budget.check_searches("hbm", swept.with_workload(gpus=(scn["gpus"],)), "", repeat=64,
                          time_budget_s=studies.SWEEP_TIME_BUDGET_S)  # its default 8 × 8 grid
    planner.inputs(scn)


def test_a_design_strategy_the_user_names_is_kept():
    """A link or file that names SUMMA for an MoE model keeps it (the page says why it
    refuses); only the default is replaced."""
    scn = S.validate_scenario(S.with_presets({"model": "deepseek-v3",
                                              "design_strategy": "summa"}))[0]
    assert scn["design_strategy"] == "summa"
    assert preset("deepseek-v3")["design_strategy"] == "1d"
    assert preset("gpt3-1t")["design_strategy"] == "summa"  # a dense model keeps the paper's


def test_a_sweep_in_parts_answers_as_one_sweep():
    """Splitting the GPU counts (a tiny memory room forces one group per count) changes no
    result: the same best configuration at every (strategy, count)."""
    scn = {**S.default_scenario(), "model": "llama3-8b", **PR.model_values("llama3-8b"),
           "gpus_min": 8, "gpus_max": 64, "strategy": "1d"}
    scn = S.validate_scenario(scn)[0]
    counts = S.gpu_counts(scn)
    request = S.request_of(scn, gpus=tuple(counts), strategy="1d")
    whole = sweep_parts.parts(request)
    assert whole.groups == (tuple(counts),)
    split = sweep_parts.parts(request, room_bytes=1)
    assert split.groups == tuple((n,) for n in counts)
    assert split.peak_bytes < whole.peak_bytes
    one = sweep_parts.sweep_in_parts(request, whole.groups)
    parts = sweep_parts.sweep_in_parts(request, split.groups)
    assert [r.gpus for r in one] == [r.gpus for r in parts] == counts
    for a, b in zip(one, parts):
        assert a.top.iloc[0]["samples_per_s"] == b.top.iloc[0]["samples_per_s"]
        assert a.top.iloc[0][["dp", "tp1", "pp"]].tolist() == \
            b.top.iloc[0][["dp", "tp1", "pp"]].tolist()


@pytest.mark.parametrize("name", ["deepseek-v3", "gpt3-1t"])
def test_the_page_callbacks_answer_on_a_preset_s_defaults(name, tmp_cache):
    """The callbacks' builders: Scaling's five figures, the Design heatmap and its table, and
    Compare systems, each with data and no error message."""
    scn = preset(name)
    out = scaling.build(scn)
    assert out[3] == "", out[3]  # no "nothing fits" explanation
    assert all(has_data(f) for f in out[4:]), name
    heat, rows, selected, why = design.build_space(scn)
    assert why == "" and has_data(heat) and rows and selected
    # Compare systems: every default system for the dense model; for the MoE one (13 s for
    # all seven) the largest, GB200 NVL72 (its 72-GPU domains: the most configurations)
    names = None if name == "gpt3-1t" else ["gb200-nvl72"]
    figure, error, _skipped = systems.build(scn, names,
                                            time_budget_s=studies.SWEEP_TIME_BUDGET_S)
    assert error == "" and has_data(figure)
    # the HBM page's sweep (a 2 × 2 grid; it searched SUMMA too and refused every MoE model)
    frame = studies.hbm_sweep(scn, [80.0, 160.0], [2.0, 4.0])
    assert len(frame) == 4 and frame["train_days"].notna().any()
