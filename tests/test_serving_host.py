"""Issue 31, item 3: a decode step as the engine runs it — the kernels, the CUDA graph's node
gaps (additive), the host work (added, or overlapped with the GPU's where the stack says) —
and the serving fit: the converged descent, and the stack file as the shipped fit gives it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from model.physics import serving_ops as so
from model.physics.serving_step import Engine, layer_nodes, step_times
from model.specs.hardware import load_system
from model.specs.models import load_model
from model.specs.serving import ServingWorkload
from model.specs.serving_stack import load_serving_stack
from model.validation import serving as sv

KERNELS = ("attn/norms", "attn/qkv", "attn/core", "attn/out", "mlp/fc1", "mlp/act", "mlp/fc2",
           "comm/layers", "head/norm", "head/lm", "comm/pipeline")


def _step(stack, batch: float = 1.0, keys: float = 1500.0):
    m, s = load_model("llama3-8b"), load_system("h100")
    engine = Engine.make(m, s, ServingWorkload(1000, 1000, weight_precision="fp8"), stack)
    lay = so.layout(1, 1, 1, False)
    return engine, step_times(engine, lay, np.array([batch]), np.array([batch]), keys, True)


def test_batch_one_decode_step_is_kernels_plus_graph_nodes_plus_host():
    """Llama 3 8B FP8 on one H100 at batch 1: step = Σ kernels + nodes·t_node + t_host
    (max(t_host − t_GPU, 0) for the host with the overlap scheduler), nodes = 32 layers × 8
    kernels (two norms, QKV, attention, output, fc1, activation, fc2) + the head's norm and
    LM head = 258, t_host = step + one sequence's overhead, each from the stack."""
    shipped = load_serving_stack("trtllm-1.0")
    step, seq = shipped.overheads_s(load_system("h100"))
    for overlap in (False, True):
        stack = dataclasses.replace(shipped, overlap_scheduler=overlap)
        engine, t = _step(stack)
        by = {k: float(v[0]) for k, v in t.by_op_s.items()}
        kernels = sum(by[k] for k in KERNELS)
        assert by["engine/graph"] == pytest.approx(258 * stack.kernel_overhead_s, rel=1e-12)
        gpu = kernels + by["engine/graph"]
        host = max(step + seq - gpu, 0.0) if overlap else step + seq
        assert by["engine/step"] == pytest.approx(host, abs=1e-15)
        assert float(t.total_s[0]) == pytest.approx(gpu + host, rel=1e-12)
    assert not shipped.overlap_scheduler
    # the weights' read sets the kernels' time at batch 1: the FP8 weights less the input
    # embedding (not read by a decode step) at the fitted HBM fraction, within 10 %
    weights = float(so.weight_bytes_per_gpu(engine.model, engine.workload,
                                            so.layout(1, 1, 1, False))[0])
    head_in = engine.model.vocab * engine.model.hidden * engine.workload.weight_bytes
    hbm = engine.system.hbm_bandwidth_gb_per_s * 1e9 * engine.system.hbm_efficiency
    assert kernels == pytest.approx((weights - head_in) / hbm, rel=0.10)


def test_graph_node_gaps_add_to_memory_bound_kernels():
    """A node's gap is paid after its kernel ends, not hidden under its memory time: raising
    kernel_overhead_s by Δ raises the GPU part of a batch-1 decode step by 258·Δ exactly
    (before, the overhead sat inside the compute side of each op's roofline max and a
    memory-bound decode step did not move)."""
    base = dataclasses.replace(load_serving_stack("trtllm-1.0"), overlap_scheduler=False)
    slow = dataclasses.replace(base, kernel_overhead_s=base.kernel_overhead_s + 5e-6)
    _, a = _step(base)
    _, b = _step(slow)
    gpu = [float(x.total_s[0] - x.by_op_s["engine/step"][0]) for x in (a, b)]
    assert gpu[1] - gpu[0] == pytest.approx(258 * 5e-6, rel=1e-9)


def test_layer_nodes_weight_each_op_by_its_share_of_layers():
    m = load_model("qwen3-30b-a3b")
    wl = ServingWorkload(1000, 1000, weight_precision="fp8")
    lay = so.layout(1, 1, 1, False)
    ops = so.layer_ops(m, wl, lay, np.array([8.0]), np.array([8.0]), 1000.0, True)
    # norms 2, QKV, attention, output; router, permute 2, experts 2 (every layer is MoE)
    assert layer_nodes(ops) == pytest.approx(2 + 3 + 1 + 2 + 2)


def test_overlapped_host_hides_behind_an_offline_step():
    """At the perf overview's batches the GPU's step is longer than the host's work, so with
    the overlap scheduler no host time shows (the offline runs could not fit it)."""
    stack = dataclasses.replace(load_serving_stack("trtllm-1.0"), overlap_scheduler=True)
    _, t = _step(stack, batch=241.0, keys=4224.0)
    assert float(t.by_op_s["engine/step"][0]) == 0.0
    _, off = _step(dataclasses.replace(stack, overlap_scheduler=False), 241.0, 4224.0)
    step, seq = stack.overheads_s(load_system("h100"))
    assert float(off.by_op_s["engine/step"][0]) == pytest.approx(step + 241 * seq)


def test_coordinate_descent_moves_as_far_as_the_minimum_is():
    """The optimum 3× and 0.25× the start: the line search reaches both within 1 %; three
    fixed rounds of ±40/20/10 % (the fit before issue 31) end at most 1.848× and at least
    0.432× the start."""
    target = {"a": 6e-3, "b": 0.15}

    def loss(v):
        return sum(np.log(v[k] / target[k]) ** 2 for k in target)

    best, low = sv.coordinate_descent(loss, {"a": 2e-3, "b": 0.6}, ["a", "b"],
                                      {"a": (0.0, 0.05), "b": (0.02, 1.0)})
    assert best["a"] == pytest.approx(6e-3, rel=0.01)
    assert best["b"] == pytest.approx(0.15, rel=0.01)
    assert low < 1e-3
    assert 2e-3 * 1.4 * 1.2 * 1.1 == pytest.approx(0.003696)  # the old fit's Hopper value


def test_coordinate_descent_keeps_to_its_bounds_and_budget():
    calls = []

    def loss(v):
        calls.append(v)
        return -v["a"]  # better without end: stopped by the bound

    best, _ = sv.coordinate_descent(loss, {"a": 0.5}, ["a"], {"a": (0.1, 1.0)}, max_evals=50)
    assert best["a"] == 1.0 and len(calls) <= 50


def test_the_stack_file_is_what_the_fit_gives():
    """The three-round fit from START on the 210 runs gives the stored efficiencies of both
    TensorRT-LLM presets (a physics change without ``bench/serve_fit.py`` fails here), and the
    Hopper step overhead is the top of that fit's reach, 2 ms × 1.4 × 1.2 × 1.1."""
    stored = load_serving_stack("trtllm-1.0")
    fitted = sv.fit(stored.with_efficiency({}))
    assert fitted.efficiency == stored.efficiency
    assert load_serving_stack("trtllm-1.0-serve").efficiency == stored.efficiency
    assert stored.efficiency["hopper"]["step_overhead_s"] == pytest.approx(
        sv.START["step_overhead_s"] * 1.4 * 1.2 * 1.1)
