"""Production rules as data (issue 21, model/engine/production.py): every search, plan and
headline keeps tensor parallelism inside one NVLink domain and takes whole nodes unless the
user relaxes the rules (one switch: --no-production-layout, the API's execution field
``production_layout``, the dashboard's "Production layouts" control)."""

from __future__ import annotations

import json

import pytest

from model import ModelError, evaluate, load_model, load_system, search
from model.api import plan
from model.cli import main

RELAXED = {"production_layout": False}


def test_tp_across_nvlink_domains_is_refused_unless_relaxed():
    m, s = load_model("llama3-8b"), load_system("h100")
    layout = dict(tp1=16, pp=1, dp=4, microbatch=1)
    with pytest.raises(ModelError, match="tp1=16 does not fit in an NVLink domain of 8 GPUs"):
        evaluate(m, s, 64, 64, "1d", **layout)
    split = dict(tp1=8, pp=1, dp=8, microbatch=1, nv_tp1=4, nv_dp=2)
    with pytest.raises(ModelError, match="nv_tp1=4 splits the tp1=8 group"):
        evaluate(m, s, 64, 64, "1d", **split)
    assert evaluate(m, s, 64, 64, "1d", **layout, execution=RELAXED).row["tp1"] == 16
    assert evaluate(m, s, 64, 64, "1d", **split, execution=RELAXED).row["nv_tp1"] == 4


def test_every_searched_row_keeps_tp_inside_a_domain():
    m, s = load_model("gpt3-175b"), load_system("h100")
    top = search(m, s, 256, 1024, "context", top_k=50).top
    assert len(top) and (top["nv_tp1"] == top["tp1"]).all() and (top["tp1"] <= 8).all()
    loose = search(m, s, 256, 1024, "context", top_k=200, execution=RELAXED).top
    assert (loose["nv_tp1"] != loose["tp1"]).any()  # the relaxed space has more


def test_whole_nodes(capsys):
    argv = ["search", "--model", "llama3-8b", "--system", "h100", "--global-batch", "96",
            "--strategy", "1d", "--top", "1"]
    assert main([*argv, "--gpus", "12"]) == 2
    err = capsys.readouterr().err
    assert "12 GPUs are not whole nodes of 8 GPUs" in err and "--no-production-layout" in err
    assert main([*argv, "--gpus", "12", "--no-production-layout", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["results"][0]["best"]
    assert row["gpus"] == 12 and row["production_layout"] is False
    assert main([*argv, "--gpus", "4", "--json"]) == 0  # a divisor of one node: fine
    assert json.loads(capsys.readouterr().out)["results"][0]["best"]["production_layout"]


def test_the_plan_is_a_production_layout_and_relaxing_never_needs_more_gpus():
    """The plan searches with the rules (the 1T-parameter B200 plan once answered tp1 8 over
    two 8-GPU domains, nv_tp1 4: docs/accuracy.md); relaxed, its space only grows."""
    m, s = load_model("llama3-70b").with_overrides(tokens=1e12), load_system("h100")
    strict = plan(m, s, 1024, days=20.0, strategy=("1d", "context"), max_gpus=4096)
    loose = plan(m, s, 1024, days=20.0, strategy=("1d", "context"), max_gpus=4096,
                 execution=RELAXED)
    assert strict.row["nv_tp1"] == strict.row["tp1"] <= s.nvlink_domain_size
    assert strict.gpus % s.node_size == 0 and strict.row["production_layout"]
    assert loose.gpus <= strict.gpus and not loose.row["production_layout"]


def test_the_dashboard_switch_reaches_the_execution():
    from dashboard.controls import scenario as S
    scn, errors = S.validate_scenario({**S.default_scenario(), "production_layout": False})
    assert errors == {} and S.execution_of(scn)["production_layout"] is False
    assert S.execution_of(S.validate_scenario(S.default_scenario())[0])["production_layout"]
