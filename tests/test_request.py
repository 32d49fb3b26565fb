"""One request object: a frozen, validated description of the question, taken by every entry
point (search, search_counts, evaluate, sweep, plan) and built once by the command line and the
dashboard; the keyword forms are adapters that build the same request."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

import pandas as pd
import pytest

import model as api
from dashboard.controls import presets as PR
from dashboard.controls import scenario as S
from dashboard.jobs import compute
from model import Request, Training, evaluate, load_model, load_system, plan, search, sweep
from model.api import search_counts
from model.cli import main
from model.errors import ModelError

M, SYS = load_model("llama3-8b"), load_system("h100")


def _request(**kw) -> Request:
    return Request.build(M, SYS, global_batch=kw.pop("global_batch", 256),
                         gpus=kw.pop("gpus", 64), **kw)


def test_a_request_is_frozen_and_its_parts_read_only():
    req = _request(pins={"tp1": 8}, execution={"recompute": ["selective", "full"]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.top_k = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        req.pins["pp"] = 2  # type: ignore[index]
    with pytest.raises(TypeError):
        req.execution["zero"] = 3  # type: ignore[index]
    assert req.execution_given() == {"recompute": ["selective", "full"]}
    assert (req.workload.global_batch, req.workload.gpus, req.workload.max_gpus) == (
        256, (64,), None)
    assert req.workload.search.pins is req.pins and req.pins["tp1"] == 8


def test_each_workload_carries_its_own_parts():
    """A training request's search knobs, mode and execution live in its Training workload
    (its Search part); a serving request has none of them: four fields, and each knob read
    from it is refused in words."""
    req = _request(strategy="context", top_k=3, budget=10**6, pins={"pp": 2}, mode="paper")
    work = req.workload
    assert isinstance(work, Training) and (work.search.top_k, work.search.budget) == (3, 10**6)
    assert work.search.strategy == req.strategy == "context" and work.mode == req.mode
    moved = req.replace(top_k=5, strategy="1d")
    assert (moved.top_k, moved.strategy, moved.workload.gpus, req.top_k) == (5, "1d", (64,), 3)
    built = Request(M, SYS, Training(64, (8,), search=api.Search("1D", pins={"pp": 2})))
    assert built.strategy == "1d" and built.top_k == 10  # made canonical by the request
    with pytest.raises(TypeError):
        built.pins["pp"] = 4  # type: ignore[index]
    with pytest.raises(ModelError, match="unknown pin 'tq'"):
        Request(M, SYS, Training(64, (8,), search=api.Search(pins={"tq": 2})))
    serving = Request(M, SYS, api.Serving(api.ServingWorkload(512, 128), 8))
    assert [f.name for f in dataclasses.fields(serving)] == ["model", "system", "workload",
                                                             "stack"]
    assert not hasattr(serving.workload, "search")
    for name in ("strategy", "pins", "top_k", "budget", "pruning", "mode", "execution"):
        with pytest.raises(ModelError, match="for training; the request's workload is serving"):
            getattr(serving, name)
    with pytest.raises(ModelError, match="for training; the request's workload is serving"):
        serving.replace(top_k=3)


@pytest.mark.parametrize("kwargs, words", [
    ({"gpus": 0}, "'gpus' must be a positive integer"),
    ({"global_batch": 10**9}, "'global_batch' = 1000000000 is out of range"),
    ({"pins": {"tq": 2}}, "unknown pin 'tq'"),
    ({"pins": {"pp": -1}}, "pin 'pp' must be a positive integer"),
    ({"execution": {"recompute": ["partial"]}}, "recompute must be one of"),
    ({"execution": {"bogus": 1}}, "unknown execution option 'bogus'"),
    ({"strategy": "3d"}, "unknown strategy '3d'"),
    ({"top_k": 0}, "'top_k' must be a positive integer"),
    ({"gpus": 64, "max_gpus": 64}, "not both"),
    ({"mode": "fast"}, "unknown mode"),
])
def test_a_bad_request_is_refused_when_built(kwargs, words):
    with pytest.raises(ModelError, match=words):
        _request(**kwargs)


def test_every_entry_point_takes_the_request_and_its_keyword_form_builds_the_same():
    req = _request(strategy="1d", top_k=3, execution={"interleave": [1, 2]})
    by_keywords = search(M, SYS, 64, 256, "1d", top_k=3, execution={"interleave": [1, 2]})
    pd.testing.assert_frame_equal(search(req).top, by_keywords.top)
    [counted] = search_counts(req)
    pd.testing.assert_frame_equal(counted.top, by_keywords.top)
    best = by_keywords.best
    pins = {k: int(best[k]) for k in ("tp1", "pp", "dp", "microbatch")}
    one = evaluate(req.replace(pins=pins, execution={"interleave": int(best["interleave"])}))
    assert one.row["samples_per_s"] == pytest.approx(best["samples_per_s"], rel=1e-12)
    swept = sweep(req.replace(strategy=("1d", "context")).with_workload(gpus=(64, 128)))
    assert [(r.strategy, r.gpus) for r in swept] == [("1d", 64), ("1d", 128), ("context", 64),
                                                      ("context", 128)]
    budgeted = load_model("llama3-8b", tokens=1e11)
    planned = plan(Request.build(budgeted, SYS, global_batch=256, max_gpus=512), days=30)
    assert planned.summary() == plan(budgeted, SYS, 256, days=30, max_gpus=512).summary()


def test_a_request_comes_alone():
    with pytest.raises(ModelError, match="give a Request alone"):
        search(_request(), SYS)


def test_another_workload_plugs_into_the_same_field():
    """A workload record of another kind (serving's) is a valid request; the training entry
    points refuse it in words, not with an AttributeError."""
    @dataclass(frozen=True)
    class Serving:
        requests_per_s: float = 10.0
        kind = "serving"

    req = dataclasses.replace(_request(), workload=Serving())
    assert req.workload.kind == "serving"
    for entry in (search, evaluate, sweep):
        with pytest.raises(ModelError, match="the request's workload is serving"):
            entry(req)


def test_the_command_line_builds_one_request(monkeypatch, capsys):
    seen: list[Request] = []
    runs = sys.modules["model.cli.runs"]  # the command's front door: the request form
    real = runs.search_request

    def spy(req):
        seen.append(req)
        return real(req)

    monkeypatch.setattr(runs, "search_request", spy)
    code = main(["search", "--model", "llama3-8b", "--system", "h100", "--gpus", "64,128",
                 "--global-batch", "256", "--strategy", "1d", "--tp", "8", "--zero", "2"])
    capsys.readouterr()
    assert code == 0 and [r.workload.gpus for r in seen] == [(64,), (128,)]
    assert {(r.model, r.system, r.stack, dict(r.pins)["tp1"], r.execution["zero"])
            for r in seen} == {(M, SYS, None, 8, 2)}


def test_the_dashboard_builds_its_request_from_the_scenario():
    scn = {**S.default_scenario(), **PR.model_values("llama3-8b"), "gpus": 64,
           "design_strategy": "1d"}
    scn, errors = S.validate_scenario(scn)
    assert errors == {}
    req = S.request_of(scn, gpus=(64,), strategy="1d", top_k=compute.TOP_K)
    model, system = S.build_inputs(scn)
    assert (req.model, req.system, req.stack) == (model, system, S.stack_of(scn))
    assert req.execution_given() == S.execution_of(scn)
    direct = search(model, system, 64, scn["global_batch"], "1d", top_k=compute.TOP_K,
                    execution=S.execution_of(scn), stack=S.stack_of(scn))
    pd.testing.assert_frame_equal(search(req).top, direct.top)


def test_the_design_space_and_lost_node_studies_take_the_request_too():
    from model.api import design_cells, design_space, leanest, lost_node_frame
    req = _request(strategy="1d", execution={"recompute_layers": 0})
    keywords = {"execution": {"recompute_layers": 0}}
    pd.testing.assert_frame_equal(design_space(req), design_space(M, SYS, 64, 256, "1d",
                                                                  **keywords))
    pd.testing.assert_frame_equal(design_cells(req, x="tp1", y="pp"),
                                  design_cells(M, SYS, 64, 256, "1d", "tp1", "pp", **keywords))
    assert leanest(req) == leanest(M, SYS, 64, 256, "1d", **keywords)
    job = Request.build(M, SYS, global_batch=256, gpus=64)
    pd.testing.assert_frame_equal(lost_node_frame(job, lost=2),
                                  lost_node_frame(M, SYS, 64, 256, lost=2))
    with pytest.raises(ModelError, match="one GPU count and one strategy"):
        design_space(req.with_workload(gpus=(64, 128)))


def test_the_codesign_pareto_and_ablation_studies_take_the_request_too():
    """A request per model for the co-design, one request and the systems to compare for the
    cost/time frontier, one request for the ablation: each equals its keyword form."""
    from model.api import codesign, pareto_frame
    from model.studies.ablation import ablation
    small = M.with_overrides(layers=4)
    vary, prices = {"hbm_capacity_gb": [40, 80]}, {"base_usd": 20000,
                                                  "hbm_capacity_gb": {"40": 5000, "80": 10000}}
    reqs = [Request.build(small, SYS, global_batch=gbs, execution={"recompute": "full"})
            for gbs in (64, 128)]
    by_requests = codesign(reqs, budget_usd=2e6, vary=vary, prices=prices).rows
    by_keywords = codesign([small, small], SYS, 2e6, vary, prices, [64, 128],
                           execution={"recompute": "full"}).rows
    pd.testing.assert_frame_equal(by_requests, by_keywords)
    assert by_requests["samples_per_s"].gt(0).all()
    with pytest.raises(ModelError, match="share one system"):
        codesign([reqs[0], reqs[1].replace(system=load_system("a100"))], budget_usd=2e6,
                 vary=vary, prices=prices)
    systems = [SYS, load_system("h200")]
    costs = {"usd_per_kwh": 0.2}
    front = Request.build(small, SYS, global_batch=64, max_gpus=64, costs=costs)
    frontier = pareto_frame(front, [s.with_costs(costs) for s in systems], max_counts=4)
    pd.testing.assert_frame_equal(frontier, pareto_frame(small, systems, 64, 64, costs=costs,
                                                         max_counts=4))
    assert set(frontier["system"]) == {"h100", "h200"} and frontier["pareto"].any()
    ablated = ablation(Request.build(small, SYS, global_batch=64, gpus=8))
    pd.testing.assert_frame_equal(ablated, ablation(small, SYS, 8, 64, "1d"))
    assert len(ablated) > 2 and ablated["samples_per_s"].gt(0).all()


def test_serving_enters_through_the_request():
    """Serving is the request's second workload: serve(request) with a Serving workload equals
    the keyword form; each entry point refuses the other kind in words."""
    m, s = load_model("llama3-8b"), load_system("h100")
    work = api.ServingWorkload(512, 128, weight_precision="fp8")
    request = Request(m, s, api.Serving(work, 8, api.ServingLayout(tp=2)))
    assert request.workload.kind == "serving"
    by_request = api.serve(request).best
    by_keywords = api.serve(m, s, 8, work, {"tp": 2}).best
    assert by_request == by_keywords and by_request["tp"] == 2
    with pytest.raises(ModelError, match="for training; the request's workload is serving"):
        evaluate(request)
    training = Request.build(m, s, global_batch=8, gpus=8)
    with pytest.raises(ModelError, match="for serving; the request's workload is training"):
        api.serve(training)
    with pytest.raises(ModelError, match="gpus must be an integer"):
        api.Serving(work, 0)
