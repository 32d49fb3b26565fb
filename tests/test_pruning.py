"""Exact pruning of a search (model.engine.pruning.pruned): the shapes' lower bounds never exceed a
placed candidate's exact iteration time, and a pruned search returns exactly what pricing every
candidate returns (rows, order, dtypes, candidate and feasible counts), also through the
per-process search cache (model.engine.frontier)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from test_frontier import same

from model import load_model, load_system
from model.engine.evaluate import (
    ShapeCounts,
    candidate_times,
    shape_lower_bound,
    shape_memory,
)
from model.engine.frontier import CACHE
from model.engine.request import Request
from model.engine.rules import Problem
from model.engine.space import build_shapes, expand_placements, placement_mask
from model.physics.context import Ctx
from model.physics.strategies import build_strategy
from model.specs.execution import resolve_execution
from model.specs.modes import resolve_mode
from model.specs.workload import ALWAYS, NEVER
from tests.unstacked import search, sweep

SEARCH = sys.modules["model.engine.variant"]  # where a search prunes and prices
COUNTS = [8, 16, 64, 256, 1024, 4096]


def lower_and_exact(model, system, gpus, global_batch, strategy, mode=None, execution=None,
                    pins=None):
    """(each candidate's shape lower bound, its exact iteration time) for every placed
    candidate of a search, fitting or not."""
    mode = resolve_mode(mode)
    ex = resolve_execution(execution)
    ctx = Ctx.make(model, system, mode, ex)
    strat = build_strategy(strategy, model, mode, ctx.execution)
    shapes = build_shapes(Problem(model, strat, gpus, global_batch, ex.interleave,
                                  mode.equal_pipeline_stages, pins=pins or {}))
    shapes["shape"] = np.arange(len(shapes["tp1"]))
    counts = ShapeCounts.of(strat, shapes, ctx)
    mem = shape_memory(model, strat, shapes, global_batch, counts, ctx)
    lower = shape_lower_bound(strat, shapes, global_batch, ctx, counts,
                              {k: mem[k] for k in ("params_bytes", "expert_params_bytes")})
    mask, table = placement_mask(shapes, gpus, system.nvlink_domain_size, pins,
                                 mode.exact_domain_fill)
    cands = expand_placements(shapes, mask, table)
    shape = cands.pop("shape")
    cands["params_bytes"] = mem["params_bytes"][shape]
    cands["expert_params_bytes"] = mem["expert_params_bytes"][shape]
    exact = candidate_times(strat, cands, global_batch, ctx, counts, shape)
    return lower[shape], exact["iteration_time_s"]


CASES = [
    ("gpt3-1t", "h200", None, None),
    ("gpt3-175b", "paper-h200", "paper", None),
    ("gpt3-175b", "paper-a100", "paper", None),
    ("llama3-70b", "gb200-nvl72", None, {"recompute": "full", "zero": 3}),
    ("llama3-405b", "h100", None, {"precision": "fp8", "tp_overlap": True}),
    ("gpt3-175b", "h200", None, {"interleave": 2, "fp32_gradients": True, "zero": 2}),
    ("gpt3-175b", "h200", None, {"offload": "all", "recompute": "none",
                                 "sequence_parallel": False}),
    ("llama3-8b", "mi300x", None, {"context_attention": "ring", "zero": 0}),
    ("llama3-8b", "h100", None, {"context_attention": "pytorch", "attention_kernel": "fa2"}),
    # training through the measured kernel layer (GEMMs at their shapes, attention's kernel)
    ("llama3-70b", "h100", None, {"kernel_tables": True, "precision": "fp8"}),
    ("gpt3-175b", "a100", None, {"kernel_tables": True, "attention_kernel": "fa2"}),
    ("vit-era5", "b200", None, None),
    ("megatron-22b", "a100", None, {"offload": "optimizer"}),
    ("llama3-70b", "h100", None, {"recompute_layers": 3, "precision": "fp8"}),
    # mixtures of experts: EP searched, the all-to-all on both tiers, its overlap, MLA, MTP,
    # windows, imbalance and capacity (small variants keep every candidate cheap to price)
    ("mixtral-8x7b", "h100", None, {"ep_overlap": True, "moe_imbalance": 1.3}),
    ("deepseek-v3-small", "gb200-nvl72", None, {"precision": "mxfp8", "ep_overlap": True}),
    ("deepseek-v3-small", "b200", None, {"zero": 3, "moe_capacity_factor": 1.25,
                                        "recompute": "full"}),
    ("gpt-oss-small", "h100", None, {"precision": "fp8", "tp_overlap": True}),
    ("deepseek-v3-small", "h100", None, {"ep_dispatcher": "flex", "ep_overlap": True}),
    # FP8 parameters gathered: the dense and the expert weights' all-gathers shrink
    ("deepseek-v3-small", "h100", None, {"precision": "fp8-blockwise",
                                        "fp8_param_gather": True}),
    ("llama3-70b", "h100", None, {"precision": "fp8", "fp8_param_gather": True, "zero": 3}),
    # DeepSeek's own stack's terms: DualPipe, node-limited flex dispatch, grouped expert GEMMs,
    # BF16 moments, and FP8 padding copies (router padding off); its light recompute and FP8
    # SwiGLU cache, with recomputed layers' all-to-alls paired under DualPipe
    ("deepseek-v3-small", "h800", None, {"precision": "fp8-blockwise", "ep_dispatcher": "flex",
                                        "ep_overlap": True, "pipeline_schedule": "dualpipe",
                                        "ep_max_domains": 2, "expert_gemm": "grouped",
                                        "optimizer_bf16_moments": True,
                                        "moe_router_padding": False,
                                        "recompute_norm_up_proj": True,
                                        "swiglu_fp8_cache": True}),
]
MOE_MODELS = {  # a few layers and experts of the presets: the same op tables, fewer candidates
    "deepseek-v3-small": lambda: load_model("deepseek-v3").with_overrides(
        layers=8, dense_layers=1, experts=32, seq_len=2048),
    "gpt-oss-small": lambda: load_model("gpt-oss-120b").with_overrides(
        layers=6, window_layers=3, experts=16),
}


def _model(name):
    return MOE_MODELS[name]() if name in MOE_MODELS else load_model(name)


def _strategies(name):  # SUMMA has no MoE op table
    return ["1d", "context"] if _model(name).moe else ["1d", "summa", "context"]


@pytest.mark.parametrize("model_name,system_name,mode,execution,strategy", [
    (*case, strategy) for case in CASES for strategy in _strategies(case[0])])
def test_lower_bound_never_exceeds_the_exact_time(model_name, system_name, mode, execution,
                                                   strategy):
    model, system = _model(model_name), load_system(system_name)
    checked = 0
    for gpus in (4, 64, 512, 4096):
        for system_variant in (system, system.with_overrides(
                nic_bandwidth_gb_per_s=system.nic_bandwidth_gb_per_s / 7, nics_per_gpu=2.0,
                network_half_message_bytes=1e6, overlap_slowdown=0.5)):
            lower, exact = lower_and_exact(model, system_variant, gpus, 2048, strategy, mode,
                                           execution)
            assert np.all(lower <= exact), (gpus, np.max(lower / exact))
            assert np.all(lower > 0)
            checked += len(exact)
    assert checked > 0


def test_lower_bound_is_tight_enough_to_prune():
    """Not a correctness property, a guard of the speed-up: the best candidate's bound is
    not far below its exact time (about 0.8 of it here)."""
    lower, exact = lower_and_exact(load_model("gpt3-1t"), load_system("h200"), 4096, 4096,
                                   "summa")
    best = int(np.argmin(exact))
    assert lower[best] > 0.7 * exact[best]


def both(fn):
    """``fn(pruning)`` with pruning (of any search, however small) and with every candidate
    priced, each from an empty cache."""
    out = []
    for pruning in (ALWAYS, NEVER):
        CACHE.clear()
        try:
            out.append(fn(pruning))
        finally:
            CACHE.clear()
    return out


def _sweep(model, system, counts, global_batch, pruning, **kw):
    """A sweep of every strategy as one request, pruned as ``pruning`` says."""
    return sweep(Request.build(model, system, global_batch=global_batch, gpus=tuple(counts),
                               strategy="all", pruning=pruning, **{"top_k": 1, **kw}))


@pytest.mark.parametrize("model_name,system_name,mode,execution", CASES)
def test_pruned_sweeps_equal_full_ones(model_name, system_name, mode, execution):
    model, system = _model(model_name), load_system(system_name)
    pruned, full = both(lambda p: _sweep(model, system, COUNTS, 2048, p, mode=mode,
                                         execution=execution))
    same(pruned, full)


@pytest.mark.parametrize("top_k", [1, 3, 10, 50])
@pytest.mark.parametrize("pins", [{}, {"pp": 8}, {"tp1": 8, "microbatch": 1}, {"nv_dp": 2},
                                  {"tp2": 4}])
def test_pruned_searches_equal_full_ones(top_k, pins):
    model, system = load_model("gpt3-175b"), load_system("h200")
    for strategy in ("1d", "summa", "context"):
        pruned, full = both(lambda p, strategy=strategy: [
            search(Request.build(model, system, global_batch=1024, gpus=n, strategy=strategy,
                                 pins=pins, top_k=top_k, pruning=p)) for n in (64, 512)])
        same(pruned, full)


def test_pruned_search_with_execution_variants():
    model, system = load_model("gpt3-175b"), load_system("h200")
    execution = {"recompute": ["selective", "full"], "interleave": [1, 2]}
    pruned, full = both(lambda p: [search(Request.build(
        model, system, global_batch=1024, gpus=512, top_k=5, execution=execution,
        pruning=p))])
    same(pruned, full)


def test_pruned_frontier_answers_other_capacities_as_a_full_one():
    """The cache keeps what any capacity up to the evaluated one needs: searches answered
    from a pruned evaluation equal searches from a full one, at every capacity."""
    model, base = load_model("gpt3-175b"), load_system("h200")
    caps = (80.0, 79.5, 40.0, 24.0, 80.0, 85.0, 300.0, 20.0, 150.0)
    for top_k in (1, 4):
        def run(pruning, top_k=top_k):
            return [r for cap in caps
                    for r in _sweep(model, base.with_overrides(hbm_capacity_gb=cap), COUNTS,
                                    1024, pruning, top_k=top_k)]
        pruned, full = both(run)
        same(pruned, full)


def test_nothing_fits_and_tiny_memory():
    model = load_model("gpt3-1t")
    for cap in (1.0, 5.0, 12.0):
        system = load_system("h200").with_overrides(hbm_capacity_gb=cap, memory_reserve_gb=0.0)
        pruned, full = both(lambda p, system=system: _sweep(model, system, COUNTS, 4096, p,
                                                             top_k=2))
        same(pruned, full)


def test_pruning_prices_far_fewer_candidates(monkeypatch):
    """The point of it: a default sweep of gpt3-1t prices a small part of its candidates."""
    real, priced, now = SEARCH.candidate_times, {ALWAYS: 0, NEVER: 0}, []

    def counted(strategy, cols, *args, **kwargs):
        priced[now[-1]] += len(cols["tp1"])
        return real(strategy, cols, *args, **kwargs)

    def run(pruning):
        now.append(pruning)
        return _sweep(model, system, counts, 4096, pruning, nvs=8)

    monkeypatch.setattr(SEARCH, "candidate_times", counted)
    model, system = load_model("gpt3-1t"), load_system("h200")
    counts = [2 ** k for k in range(2, 15)]
    pruned, full = both(run)
    same(pruned, full)
    assert priced[NEVER] >= sum(r.feasible for r in full)  # every fitting candidate
    assert 0 < priced[ALWAYS] < priced[NEVER] / 5
