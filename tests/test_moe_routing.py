"""MoE as the kernels run it: only the experts a step's tokens touch run, each padded to its own
row tiles (model/physics/routing.py; serving: model/physics/serving_ops.py ``_moe``)."""

from __future__ import annotations

import numpy as np
import pytest

from model import ServingWorkload, load_model, load_system
from model.physics import routing
from model.physics.serving_ops import ACT_BYTES, layer_ops, layout
from model.physics.serving_step import Engine, expert_row_tiles, shape_efficiency
from model.specs.serving_stack import load_serving_stack


def _engine(model: str = "deepseek-v3", system: str = "h200", precision: str = "fp8"):
    m, s = load_model(model), load_system(system)
    wl = ServingWorkload(1000, 1000, weight_precision=precision)
    return Engine.make(m, s, wl, load_serving_stack("trtllm-1.0")), wl


def _experts_op(engine, wl, tokens: float, tp: int = 1):
    lay = layout(tp, 1, tp, tp > 1)
    t = np.array([tokens])
    ops = layer_ops(engine.model, wl, lay, t, t, 100.0, True)
    return next(op for op in ops if op.spec.name == "moe/experts"), lay


def test_one_token_reads_and_computes_exactly_k_experts():
    """The closed form: one token routed top-k of E experts on one GPU holding all E → exactly
    k experts' weights read and k experts' row tiles computed (one tile each)."""
    engine, wl = _engine()
    m = engine.model
    op, _ = _experts_op(engine, wl, 1.0)
    width = 3 * m.expert_ffn  # SwiGLU: gate, up and down per expert
    weights = wl.weight_bytes * m.top_k * m.hidden * width
    activations = ACT_BYTES * m.top_k * (m.hidden + width)
    assert float(op.counts.bytes_fwd[0]) == pytest.approx(weights + activations, rel=1e-12)
    tiles = expert_row_tiles(engine, np.array([1.0]), float(m.experts))
    assert float(tiles[0]) == pytest.approx(m.top_k, rel=1e-12)
    # each of the k rows sits in a tile of B rows of its own: the fill is 1/B
    eff = routing.padded_wave_efficiency(np.array([float(m.top_k)]), tiles, 0.0, 128.0, 0.0)
    assert float(eff[0]) == pytest.approx(1.0 / 128.0, rel=1e-12)
    for rows, _k, _n, local, tokens in op.shape:
        assert local == m.experts and float(tokens[0]) == 1.0 and float(rows[0]) == m.top_k


def test_untouched_local_experts_cost_no_tiles():
    """At concurrency 4 on 8 GPUs (32 local experts of DeepSeek-V3's 256, top 8) about 3.8
    local experts are touched: the grouped GEMM computes ~3.8 row tiles, not 32, so its shape
    efficiency is ~8× what tiling every local expert gives (the tiles' fill 32/3.8 times the
    last wave's: 122 tiles of 128 × 128 in one wave of 132 SMs against 1,024 in eight)."""
    engine, wl = _engine()
    op, _ = _experts_op(engine, wl, 4.0, tp=8)
    rows, k, n, local, tokens = op.shape[0]
    tiles = float(expert_row_tiles(engine, tokens, local)[0])
    expected = 32 * (1 - (1 - 8 / 256) ** 4)
    assert tiles == pytest.approx(expected, rel=1e-12)
    touched = shape_efficiency(engine, rows, k, n, local, tokens)
    every_expert = shape_efficiency(engine, rows, k, n, local)
    waves = (expected * 32 / 132) / (1024 / (8 * 132))
    assert float(touched[0] / every_expert[0]) == pytest.approx(32 / expected * waves, rel=1e-9)


@pytest.mark.parametrize("tokens,top_k,experts", [(100, 8, 256), (4096, 8, 256),
                                                  (16384, 8, 256), (2000, 2, 8),
                                                  (5000, 8, 128), (200_000, 4, 128)])
def test_row_tiles_match_the_binomial(tokens, top_k, experts):
    """E[⌈m/128⌉] of m ~ Binomial(T, k/E) against a seeded exact sample of 400,000 experts."""
    rng = np.random.default_rng(7)
    m = rng.binomial(tokens, top_k / experts, size=400_000)
    sampled = float(np.mean(np.ceil(m / 128.0)))
    got = float(routing.row_tiles_per_expert(np.array([float(tokens)]), top_k, experts, 128.0)[0])
    assert got == pytest.approx(sampled, rel=0.01)


def test_every_expert_full_gets_whole_tiles():
    """k = E: every expert gets every token, ⌈T/B⌉ tiles exactly."""
    got = routing.row_tiles_per_expert(np.array([300.0, 256.0, 1.0]), 4, 4, 128.0)
    assert np.allclose(got, [3.0, 2.0, 1.0])


def test_training_experts_pad_binomial_counts():
    """Training's grouped GEMM (model.physics.moe.expert_shape_efficiency): 64 local experts of
    DeepSeek-V3's 256 (top 8) with 128 routed rows each on average are not one full tile each:
    their counts are binomial, so the row tiles they fill are those of a seeded sample of the
    counts (within 1 %), about 1.5 per expert."""
    from types import SimpleNamespace

    from model.physics import gemm
    from model.physics.moe import expert_shape_efficiency

    ctx = SimpleNamespace(system=SimpleNamespace(sm_count=132, gemm_tile=128),
                          execution=SimpleNamespace(expert_gemm="grouped"),
                          model=SimpleNamespace(top_k=8, experts=256))
    experts, mean_rows, k, n = 64.0, 128.0, 7168.0, 4096.0
    fwd, _ = expert_shape_efficiency(experts * mean_rows, experts, k, n, ctx,
                                     "matrix_tflops_fp8")
    counts = np.random.default_rng(3).binomial(int(mean_rows * 256 / 8), 8 / 256,
                                               size=(2000, 64))
    tiles = np.ceil(counts / 128.0).sum(axis=1).mean()
    cta = tiles * n / 128
    busy = experts * mean_rows / (tiles * 128) * cta / (np.ceil(cta / 132) * 132)
    depth = float(gemm.depth_efficiency(k, gemm.depth_overhead("matrix_tflops_fp8")))
    assert float(fwd) / depth == pytest.approx(busy, rel=0.01)
    assert tiles / experts == pytest.approx(1.5, abs=0.05)
