"""What the dashboard's budgets rely on: the size of a search space counted without building it
(``model.engine.size.space_size``), the design heatmap's cells evaluated in chunks
(``model.engine.design.design_cells``) and the leanest configuration computed per shape
(``model.engine.design.leanest``) — each exactly equal to what the full construction gives."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model import ModelError, best_per_cell, design_space, list_models, load_model, load_system
from model.api import design_cells, leanest
from model.engine.rules import Problem
from model.engine.size import space_size
from model.engine.space import build_shapes, build_space
from model.physics.strategies import build_strategy
from model.specs.execution import resolve_execution
from model.specs.modes import resolve_mode

CASES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GPUS = [1, 8, 64, 72, 96, 128, 144, 512, 576, 1000, 1024, 4096, 4608]
BATCHES = [1, 16, 96, 512, 1000, 1536, 4096]
PIN_NAMES = ["tp1", "tp2", "pp", "dp", "microbatch", "nb", "nv_tp1", "nv_dp"]


@CASES
@given(model=st.sampled_from(list_models()), strategy=st.sampled_from(["1d", "summa", "context"]),
       mode_name=st.sampled_from([None, "paper"]), gpus=st.sampled_from(GPUS),
       gbs=st.sampled_from(BATCHES), nvs=st.sampled_from([1, 4, 8, 64, 72]),
       interleave=st.sampled_from([0, 1, 2, 3, 4]), block=st.sampled_from([1, 7, 4096]),
       pins=st.dictionaries(st.sampled_from(PIN_NAMES), st.sampled_from([1, 2, 3, 4, 8, 16]),
                            max_size=2))
def test_space_size_counts_what_the_space_holds(model, strategy, mode_name, gpus, gbs, nvs,
                                                interleave, block, pins):
    m = load_model(model)
    mode = resolve_mode(mode_name)
    il = 1 if mode_name else interleave
    ex = resolve_execution(None if mode_name else {"interleave": il})
    try:
        strat = build_strategy(strategy, m, mode, ex)
    except ModelError:  # a strategy that cannot model this model (SUMMA for MoE)
        return
    problem = Problem(m, strat, gpus, gbs, il, mode.equal_pipeline_stages, nvs=nvs, pins=pins,
                      exact_domain_fill=mode.exact_domain_fill)
    shapes = build_shapes(problem)
    space = build_space(problem, 10**9)
    # blocks of any size count the same
    counted = space_size(problem, block_rows=block)
    assert counted == (len(shapes["tp1"]), len(space))


def test_space_size_stops_past_its_limit():
    m = load_model("gpt3-1t")
    strat = build_strategy("summa", m, resolve_mode(None), resolve_execution(None))
    mode = resolve_mode(None)
    problem = Problem(m, strat, 4608, 4096, equal_stages=mode.equal_pipeline_stages, nvs=72)
    _, whole = space_size(problem, block_rows=8)
    assert whole > 10_000
    shapes, found = space_size(problem, limit=10_000, block_rows=8)
    assert 10_000 < found < whole


@pytest.mark.parametrize("model,system,gpus,strategy,x,y", [
    ("gpt3-175b", "h200", 256, "summa", "dp", "nb"),
    ("llama3-70b", "gb200-nvl72", 576, "context", "tp2", "pp"),
    ("gpt3-1t", "a100", 1024, "1d", "tp1", "pp"),
    ("megatron-1t", "h200", 512, "context", "microbatch", "nv_dp"),
])
@pytest.mark.parametrize("chunk", [97, 1000, 20_000])
def test_design_cells_in_chunks_equal_the_whole_space(model, system, gpus, strategy, x, y,
                                                      chunk):
    m, s = load_model(model), load_system(system)
    whole = best_per_cell(design_space(m, s, gpus, 1024, strategy), x, y)
    assert len(whole) > 0
    pd.testing.assert_frame_equal(design_cells(m, s, gpus, 1024, strategy, x, y, chunk=chunk),
                                  whole, check_exact=True)


def test_design_cells_stop_at_their_deadline():
    from model import ModelError

    m, s = load_model("gpt3-175b"), load_system("h200")
    with pytest.raises(ModelError, match="time budget"):
        design_cells(m, s, 256, 1024, "summa", "tp1", "pp", chunk=100, deadline=0.0)


@pytest.mark.parametrize("model,system,gpus,strategy,execution", [
    ("gpt3-1t", "h200", 64, "summa", None), ("llama3-70b", "a100", 32, "1d", {"zero": 3}),
    ("vit-era5", "a100", 32, "1d", {"recompute": "full"}),
    ("llama3-405b", "gb200-nvl72", 576, "context", {"offload": "optimizer"}),
    ("mixtral-8x7b", "h100", 64, "1d", {"recompute_layers": "auto"}),
])
def test_leanest_is_the_least_memory_row_of_the_design_space(model, system, gpus, strategy,
                                                             execution):
    m, s = load_model(model), load_system(system)
    frame = design_space(m, s, gpus, 512, strategy, execution=execution)
    row = frame.loc[frame["memory_gb"].idxmin()]
    want = {k: float(row[k]) for k in ("memory_gb", "weights_gb", "gradients_gb",
                                       "optimizer_gb", "activations_gb")}
    assert leanest(m, s, gpus, 512, strategy, execution=execution) == want
