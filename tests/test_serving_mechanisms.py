"""Serving step mechanisms priced beyond the roofline (docs/serving.md, "Physics"): the GEMMs'
shape efficiency (decode's few rows, grouped experts' tile padding, fc2's shallow reduction)
and the attention-DP MoE layer's all-gather + reduce-scatter, each against its closed form."""

from __future__ import annotations

import numpy as np
import pytest

from model import load_model, load_system
from model.physics import gemm
from model.physics import serving_ops as so
from model.physics.collectives import Collective, collective_time_s
from model.physics.serving_step import Engine, layer_comm_s, shape_efficiency
from model.specs.serving import ServingWorkload
from model.specs.serving_stack import load_serving_stack


def _engine(model: str = "qwen3-235b-a22b", system: str = "h200", precision: str = "fp8"):
    wl = ServingWorkload(1000, 1000, weight_precision=precision)
    return Engine.make(load_model(model), load_system(system), wl,
                       load_serving_stack("trtllm-1.0"))


def test_dense_gemm_shape_efficiency_closed_form():
    eng = _engine()
    sysm = eng.system
    rows, k, n = 100.0, 4096.0, 8192.0  # one 128-row tile of rows, 64 column tiles
    tiles = 1 * 64
    waves = np.ceil(tiles / sysm.sm_count) * sysm.sm_count
    depth = k / (k + gemm.depth_overhead("matrix_tflops_fp8"))
    got = float(shape_efficiency(eng, np.array([rows]), k, n, 0.0)[0])
    assert got == pytest.approx(depth * tiles / waves)
    assert got < 0.5  # decode's few rows leave most SMs idle


def test_grouped_expert_gemm_pads_each_experts_rows():
    eng = _engine()
    e_local, n, k = 16.0, 3072.0, 4096.0
    few = float(shape_efficiency(eng, np.array([16 * 40.0]), k, n, e_local)[0])
    full = float(shape_efficiency(eng, np.array([16 * 128.0]), k, n, e_local)[0])
    # 40 rows per expert fill 40/128 of their tile, 128 rows all of it (same tile count)
    assert few == pytest.approx(full * 40 / 128)


def test_expert_fc2_is_shallower_than_fc1():
    m = load_model("qwen3-235b-a22b")  # expert FFN 1536 < hidden 4096
    eng = _engine()
    lay = so.layout(8, 1, 8, True)
    ops = {op.spec.name: op for op in so.layer_ops(m, eng.workload, lay, np.array([4096.0]),
                                                   np.array([4096.0]), 1500.0, True)}
    (r1, k1, n1, e1, t1), (r2, k2, n2, e2, t2) = ops["moe/experts"].shape
    assert (k1, n1, k2, n2) == (m.hidden, 2 * m.expert_ffn, m.expert_ffn, m.hidden)
    eta1 = shape_efficiency(eng, r1, k1, n1, e1, t1)
    eta2 = shape_efficiency(eng, r2, k2, n2, e2, t2)
    assert float(eta2[0]) < float(eta1[0])


@pytest.mark.parametrize("model", ["qwen3-235b-a22b", "llama4-maverick"])
def test_attention_dp_moe_gathers_and_scatters_every_token(model):
    eng = _engine(model)
    m, sysm = eng.model, eng.system
    tokens = np.array([2048.0])
    lay = so.layout(8, 1, 8, True)
    v = tokens * m.hidden
    expected = (m.moe_layers / m.layers) * (
        collective_time_s(Collective.ALLGATHER, 1.0 * v, 8, 8, sysm)
        + collective_time_s(Collective.REDUCESCATTER, 2.0 * v, 8, 8, sysm))
    assert float(layer_comm_s(eng, lay, tokens)[0]) == pytest.approx(float(expected[0]))


def test_attention_dp_gather_is_top_k_free_and_follows_the_token_format():
    fp8, fp4 = _engine(precision="fp8"), _engine(system="b200", precision="nvfp4")
    lay, tokens = so.layout(8, 1, 8, True), np.array([4096.0])
    m = fp8.model
    sent = [float(layer_comm_s(e, lay, tokens)[0]) for e in (fp8, fp4)]
    assert all(s > 0 for s in sent)
    # the same volume whatever top_k: a top-1 copy of the model moves the same bytes
    top1 = Engine.make(m.__class__(**{**m.__dict__, "top_k": 1}), fp8.system, fp8.workload,
                       fp8.stack)
    assert float(layer_comm_s(top1, lay, tokens)[0]) == pytest.approx(sent[0])
