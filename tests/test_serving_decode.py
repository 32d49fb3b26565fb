"""Low-latency decode in closed form: MTP priced per draft step, the overlap scheduler hiding
host work behind the GPU's step, and decode attention priced by the measured kernel tables
(model/serving/modes.py, model/physics/serving_step.py, model/physics/kernels/pricing.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from model import load_model, load_system
from model.physics import serving_ops as so
from model.physics.kernels import attention_kernel, pricing
from model.physics.kernels.params import fitted
from model.physics.serving_step import Engine, step_times
from model.serving import modes
from model.specs.schema import DATA_DIR
from model.specs.serving import ServingWorkload
from model.specs.serving_stack import EAGER_LAUNCH_S, load_serving_stack


def _engine(model: str, system: str, stack: str = "trtllm-1.0-serve", **kw) -> Engine:
    wl = ServingWorkload(**{"input_tokens": 2048, "output_tokens": 128,
                            "weight_precision": "fp8", **kw})
    return Engine.make(load_model(model), load_system(system), wl, load_serving_stack(stack))


def test_mtp_tokens_per_verify_step_and_step_time_in_closed_form():
    """K drafts each accepted with α: a verify step yields 1 + α + … + α^K tokens (the
    expected accepted drafts plus the verified token); the step is the verify forward over
    K + 1 tokens per sequence plus K draft passes (one layer and the head, one token each)."""
    e = _engine("deepseek-v3", "b200", weight_precision="nvfp4", mtp_depth=3,
                mtp_acceptance=0.7)
    accepted = 0.7 + 0.7**2 + 0.7**3
    assert e.workload.tokens_per_step == pytest.approx(accepted + 1)
    lay, b = so.layout(8, 1, 8, True), np.array([16.0])
    keys = modes.decode_keys(e)
    verify = step_times(e, lay, 4 * b, b, keys, True).total_s
    one = step_times(e, lay, b, b, keys, True)
    head = one.by_op_s["head/norm"] + one.by_op_s["head/lm"]
    layers = one.total_s - head - one.by_op_s["engine/step"] - one.by_op_s["comm/pipeline"]
    draft = layers / e.model.layers + head
    assert modes.decode_step_s(e, lay, b, keys) == pytest.approx(verify + 3 * draft)
    assert float(draft[0]) < 0.1 * float(one.total_s[0])  # a draft pass is one layer's work



def test_the_overlap_scheduler_hides_host_work_behind_the_gpu():
    """With ``overlap_scheduler`` a step takes max(t_GPU, t_host), not their sum; at batch 256
    the GPU's step hides the host's work entirely."""
    m, s = load_model("llama3-8b"), load_system("h100")
    wl = ServingWorkload(input_tokens=1000, output_tokens=1000, weight_precision="fp8")
    plain = Engine.make(m, s, wl, replace(load_serving_stack("trtllm-1.0"),
                                          overlap_scheduler=False))
    overlap = Engine.make(m, s, wl, replace(load_serving_stack("trtllm-1.0"),
                                            overlap_scheduler=True))
    lay = so.layout(1, 1, 1, False)
    for b in (1.0, 256.0):
        batch = np.array([b])
        serial = step_times(plain, lay, batch, batch, 1500.0, True)
        host = float(serial.by_op_s["engine/step"][0])
        gpu = float(serial.total_s[0]) - host
        hidden = step_times(overlap, lay, batch, batch, 1500.0, True)
        assert float(hidden.total_s[0]) == pytest.approx(max(gpu, host), rel=1e-12)
        assert float(hidden.by_op_s["engine/step"][0]) == pytest.approx(max(host - gpu, 0.0),
                                                                        abs=1e-15)
    assert host < gpu  # at batch 256 nothing of the host's work shows


@pytest.mark.parametrize("kv, table", [("fp8", "fp8"), ("bf16", "bfloat16")])
def test_decode_attention_from_the_kernel_tables(kv, table):
    """``decode_attention: kernel-tables``: a decode step's MHA/GQA attention is the decode
    kernel fitted to the measured tables (Llama 3 8B on H100: 32 heads over 8 KV heads, the
    grouped XQA kernel), per layer, at the system's HBM bandwidth; the roofline otherwise."""
    m, s = load_model("llama3-8b"), load_system("h100")
    wl = ServingWorkload(1000, 1000, weight_precision="fp8", kv_precision=kv)
    stack = replace(load_serving_stack("trtllm-1.0"), decode_attention="kernel-tables")
    engine = Engine.make(m, s, wl, stack)
    assert engine.decode_attention == ("h100_sxm", table, "trtllm")  # the stack's engine
    lay, b = so.layout(1, 1, 1, False), np.array([64.0])
    got = step_times(engine, lay, b, b, 1500.0, True).by_op_s["attn/core"]
    hw = replace(pricing.kernel_hardware("h100_sxm"),
                 hbm_bytes_per_s=s.hbm_bandwidth_gb_per_s * 1e9)
    one = attention_kernel.decode_latency_s(64.0, 1500.0, 32.0, 8.0, 128.0, 0.0, table, hw,
                                            fitted("decode_attention", "h100_sxm", table))
    assert float(got[0]) == pytest.approx(32 * float(one), rel=1e-12)
    vllm = Engine.make(m, s, wl, replace(stack, kernels="vllm"))  # vLLM's own decode kernel
    assert vllm.decode_attention == ("h100_sxm", table, "vllm")
    own = attention_kernel.decode_latency_s(64.0, 1500.0, 32.0, 8.0, 128.0, 0.0, table, hw,
                                            fitted("decode_attention", "h100_sxm", table, "vllm"))
    assert float(step_times(vllm, lay, b, b, 1500.0, True).by_op_s["attn/core"][0]) == \
        pytest.approx(32 * float(own), rel=1e-12)
    roof = Engine.make(m, s, wl, load_serving_stack("trtllm-1.0"))
    assert roof.decode_attention is None
    assert float(step_times(roof, lay, b, b, 1500.0, True).by_op_s["attn/core"][0]) != \
        pytest.approx(float(got[0]), rel=0.01)


def test_decode_attention_tables_fall_back_where_they_have_no_kernel():
    stack = replace(load_serving_stack("trtllm-1.0"), decode_attention="kernel-tables")
    nvfp4 = ServingWorkload(1000, 1000, weight_precision="nvfp4", kv_precision="nvfp4")
    assert Engine.make(load_model("llama3-8b"), load_system("b200"), nvfp4,
                       stack).decode_attention is None  # no NVFP4-KV table
    mla = Engine.make(load_model("deepseek-v3"), load_system("h200"),
                      ServingWorkload(1000, 1000, weight_precision="fp8"), stack)
    ops = so.layer_ops(mla.model, mla.workload, so.layout(8, 1, 8, True), np.array([8.0]),
                       np.array([8.0]), 1500.0, True)
    assert all(o.attention is None for o in ops)  # MLA: the latent kernel, not in this path


def test_a_separate_draft_model_is_priced_per_draft_step():
    """Llama 3 70B drafted by Llama 3 8B (same 128,256-token vocabulary), K = 3: each draft
    step is the 8B's whole one-token decode step on the same layout less its host work; the
    8B's weights and its KV cache share the GPUs, so fewer sequences fit."""
    e = _engine("llama3-70b", "h100", mtp_depth=3, mtp_acceptance=0.7, draft_model="llama3-8b")
    plain = _engine("llama3-70b", "h100")
    assert e.draft is not None and e.draft.model.name == "llama3-8b"
    lay, b = so.layout(8, 1, 1, False), np.array([16.0])
    keys = modes.decode_keys(e)
    d = step_times(e.draft, lay, b, b, modes.decode_keys(e.draft), True)
    draft = d.total_s - d.by_op_s["engine/step"]
    verify = step_times(e, lay, 4 * b, b, keys, True).total_s
    assert modes.decode_step_s(e, lay, b, keys) == pytest.approx(verify + 3 * draft)
    mem, mem0 = modes.memory(e, lay), modes.memory(plain, lay)
    w8 = so.weight_bytes_per_gpu(e.draft.model, e.workload, lay)
    assert mem["weights"] == pytest.approx(mem0["weights"] + w8)
    assert modes.max_batch(e, lay, mem["kv"])[0] < modes.max_batch(plain, lay, mem0["kv"])[0]


@pytest.mark.parametrize("kw, words", [
    ({"mtp_depth": 2, "mtp_acceptance": 0.8}, "give a separate draft model"),
    ({"mtp_depth": 2, "mtp_acceptance": 0.8, "draft_model": "qwen3-30b-a3b"},
     "a draft must share the tokenizer"),
    ({"mtp_depth": 2, "mtp_acceptance": 0.8, "draft_model": "no-such-model"},
     "is not a model preset"),
    ({"draft_model": "llama3-8b"}, "needs mtp_depth K"),
])
def test_speculative_decoding_without_a_head_needs_a_fitting_draft(kw, words):
    from model import ModelError, serve

    wl = {"input_tokens": 1000, "output_tokens": 100, "weight_precision": "fp8", **kw}
    with pytest.raises(ModelError) as err:
        serve(load_model("llama3-70b"), load_system("h100"), 8, wl, {"tp": 8, "pp": 1})
    assert words in str(err.value)


def test_the_cli_takes_a_draft_model_and_refuses_a_foreign_one(capsys):
    import json

    from model.cli.commands import main

    base = ["serve", "--model", "llama3-70b", "--system", "h100", "--gpus", "8", "--tp", "8",
            "--precision", "fp8", "--input-tokens", "1000", "--output-tokens", "200",
            "--concurrency", "4", "--mtp", "2"]
    assert main(base + ["--draft-model", "llama3-8b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tpot_s"] > 0 and "MTP: not in the fit data" in out["error_bars"]["tpot_s"]
    assert main(base + ["--draft-model", "qwen3-30b-a3b"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --draft-model qwen3-30b-a3b:") and "\n" not in err
    assert main(base) == 2
    assert "--draft-model NAME" in capsys.readouterr().err


def test_without_cuda_graphs_every_kernel_pays_an_eager_launch():
    """``cuda_graphs: false``: each kernel of a step costs at least the measured eager launch
    (the constant is the measured table's row), not a graph node's 2 us, so a small decode step
    (batch 1, where kernels are launch-bound) takes longer; with a free launch it is faster
    still."""
    rows = json.loads((DATA_DIR / "reference" / "kernels" / "h100_torch_measured.json")
                      .read_text())["rows"]
    eager = next(r for r in rows if r["kind"] == "launch" and r["what"].startswith("eager"))
    assert EAGER_LAUNCH_S == pytest.approx(eager["latency_ms"] * 1e-3, rel=0.01)
    m, s = load_model("llama3-8b"), load_system("h100")
    wl = ServingWorkload(input_tokens=1000, output_tokens=1000, weight_precision="fp8")
    base = replace(load_serving_stack("trtllm-1.0"), overlap_scheduler=False)  # host apart
    assert base.cuda_graphs and base.kernel_overhead_s == pytest.approx(2e-6)
    lay, b = so.layout(1, 1, 1, False), np.array([1.0])

    def step(stack) -> float:
        engine = Engine.make(m, s, wl, stack)
        return float(step_times(engine, lay, b, b, 1500.0, True).total_s[0])

    eager_engine = Engine.make(m, s, wl, replace(base, cuda_graphs=False))
    assert eager_engine.system.kernel_overhead_s == EAGER_LAUNCH_S
    t0, graph = step(replace(base, kernel_overhead_s=0.0)), step(base)
    eager_step = step(replace(base, cuda_graphs=False))
    assert eager_step > graph > t0
