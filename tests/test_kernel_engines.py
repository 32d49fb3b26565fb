"""The kernel layer per engine: vLLM's and SGLang's own measured kernel tables fitted beside
TensorRT-LLM's (model/physics/kernels/params.py, aic_params_<engine>.json), the serving stacks'
``kernels`` field selecting them, and the error table's engine column."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from model import ServingWorkload, load_model, load_system
from model.errors import ModelError
from model.physics.kernels import moe_kernel as mk
from model.physics.kernels import params as kp
from model.physics.kernels import pricing
from model.physics.kernels.classes import CLASSES, fixed_params
from model.physics.serving_ops import layout
from model.physics.serving_step import Engine, shape_efficiency, step_times
from model.specs.serving_stack import KERNEL_ENGINES, load_serving_stack, serving_stack_from_dict
from model.validation import kernels as kv


def test_engines_agree_between_specs_and_physics():
    assert KERNEL_ENGINES == kp.ENGINES == ("trtllm", "vllm", "sglang")


@pytest.mark.parametrize("engine,version", [("vllm", "0.24.0"), ("sglang", "0.5.14")])
def test_engine_parameters_load_with_provenance(engine, version):
    data = kp.kernel_params(engine)
    prov = data["provenance"]
    assert prov["package"] == "aiconfigurator-core" and prov["version"] == "0.12.0"
    assert prov["script"] == f"scripts/extract_kernel_tables.py --engine {engine}"
    paths = [t["path"] for t in prov["tables"]]
    assert f"aiconfigurator_core/systems/data/h100_sxm/gemm/{engine}/{version}/gemm_perf.parquet" \
        in paths
    assert all(f"/{engine}/" in p for p in paths) and all(len(t["sha256"]) == 64
                                                          for t in prov["tables"])
    for kind, by_gpu in data["params"].items():
        for groups in by_gpu.values():
            for values in groups.values():
                fixed = fixed_params(CLASSES[kind], engine)  # FlashAttention's launch rules
                assert set(values) == {*CLASSES[kind].params, *fixed, "rows", "kernel_source"}
                assert all(values[k] == v for k, v in fixed.items())
                assert values["kernel_source"] and values["rows"] > 0
    assert "collective" not in data["params"]  # NCCL is every engine's: fitted once
    assert kp.kernel_subset(engine)["provenance"] == prov


def test_engine_parameters_differ_where_the_kernels_differ():
    """vLLM's FP8 block-scale GEMM on H100 is DeepGEMM's, TensorRT-LLM's its own: different
    fitted parameters; a parameter set is never another engine's copy."""
    for kind, gpu, dtype in (("gemm", "h100_sxm", "fp8_block"), ("gemm", "h100_sxm", "bfloat16"),
                             ("decode_attention", "h200_sxm", "bfloat16"),
                             ("context_attention", "b200_sxm", "bfloat16")):
        ours = kp.fitted(kind, gpu, dtype)
        for engine in ("vllm", "sglang"):
            theirs = kp.fitted(kind, gpu, dtype, engine)
            if theirs is None:
                continue
            assert set(theirs) == set(ours) and theirs != ours, (kind, gpu, dtype, engine)
    assert kp.kernel_source("gemm", "h100_sxm", "fp8_block", "vllm") == \
        "DeepGemmFp8BlockScaledMMKernel"
    assert kp.kernel_source("context_attention", "h100_sxm", "bfloat16", "sglang") == "fa3"
    assert kp.kernel_source("gemm", "h100_sxm", "bfloat16") == ""  # TensorRT-LLM: one kernel


def test_unknown_engine_is_refused():
    with pytest.raises(kp.UnknownEngineError, match="unknown kernel engine 'tgi'"):
        kp.fitted("gemm", "h100_sxm", "bfloat16", "tgi")


def test_stacks_name_their_engine_kernels():
    for name, engine, on in (("trtllm-1.0", "trtllm", False), ("trtllm-1.0-serve", "trtllm",
                                                                False),
                             ("vllm-0.x", "vllm", True), ("sglang-0.5", "sglang", True)):
        s = load_serving_stack(name)
        assert s.kernels == engine
        assert (s.gemm_shapes == "kernel-tables") is on and (s.moe_kernel == "measured") is on
    assert not load_serving_stack("vllm-0.x").validated  # still not validated end to end
    with pytest.raises(ModelError, match="kernels"):
        serving_stack_from_dict({"source": "x", "kernels": "tgi"})


def _deepseek(stack):
    m, s = load_model("deepseek-v3"), load_system("h200")
    wl = ServingWorkload(1000, 1000, weight_precision="fp8")
    engine = Engine.make(m, s, wl, stack)
    t = np.array([4.0])
    return engine, step_times(engine, layout(8, 1, 8, True), t, t, 2000.0, True)


@pytest.mark.parametrize("name,fit", [("vllm-0.x", ("vllm/cutlass", "fp8_block")),
                                      ("sglang-0.5", ("sglang/triton", "fp8_block"))])
def test_engine_stack_prices_moe_with_its_own_kernel(name, fit):
    """DeepSeek-V3 FP8 at concurrency 4 on 8 H200: the vLLM / SGLang stack prices the routed
    experts with its engine's fused-MoE fit (engine_kernels.json); the same stack with
    TensorRT-LLM's kernels differs in the experts' time by exactly the ratio of the two fits'
    kernel times on that step's routing, and in nothing else."""
    stack = load_serving_stack(name)
    own, st_own = _deepseek(stack)
    trt, st_trt = _deepseek(dataclasses.replace(stack, kernels="trtllm"))
    assert (own.moe_kernel.engine, own.moe_kernel.dtype) == fit
    assert (trt.moe_kernel.engine, trt.moe_kernel.dtype) == ("trtllm/cutlass", "fp8")
    m = own.model
    routing = (np.array([4.0]), np.array([256.0 / 8]), np.array([1.0]))
    ratio = float(mk.grouped_moe_s(own.moe_kernel, m, *routing)[0]
                  / mk.grouped_moe_s(trt.moe_kernel, m, *routing)[0])
    assert abs(ratio - 1.0) > 1e-3  # vLLM 0.98x TensorRT-LLM's, SGLang 1.01x
    got = float(st_own.by_op_s["moe/experts"][0] / st_trt.by_op_s["moe/experts"][0])
    assert got == pytest.approx(ratio, rel=1e-9)
    assert set(st_own.by_op_s) == set(st_trt.by_op_s)


def test_engine_stack_prices_dense_gemm_shapes_with_its_own_tables():
    """Llama 3 8B on an H100 under the vLLM stack: a decode GEMM's shape efficiency from vLLM's
    cuBLAS table fit (its own k₀) differs from the same stack on TensorRT-LLM's tables."""
    stack = load_serving_stack("vllm-0.x")
    wl = ServingWorkload(input_tokens=128, output_tokens=128)
    m, s = load_model("llama3-8b"), load_system("h100")
    rows = np.array([1.0, 64.0, 4096.0])
    own = shape_efficiency(Engine.make(m, s, wl, stack), rows, 4096.0, 4096.0, 0.0)
    trt = shape_efficiency(Engine.make(m, s, wl, dataclasses.replace(stack, kernels="trtllm")),
                           rows, 4096.0, 4096.0, 0.0)
    key = pricing.table_key("h100", "matrix_tflops_fp16", "vllm")
    assert key == ("h100_sxm", "bfloat16")
    assert np.array_equal(own, pricing.gemm_shape_efficiency(key, rows, 4096.0, 4096.0, "vllm"))
    assert np.all(own != trt)


def test_trtllm_stacks_keep_their_kernels():
    """The TensorRT-LLM presets' kernel switches are off: the engine field changes nothing."""
    stack = load_serving_stack("trtllm-1.0")
    engine, st = _deepseek(stack)
    assert engine.moe_kernel is None
    _, st2 = _deepseek(dataclasses.replace(stack, kernels="vllm"))
    assert all(np.array_equal(st.by_op_s[k], st2.by_op_s[k]) for k in st.by_op_s)


def test_error_table_has_engine_rows():
    stored = kv.stored_error_rows()
    assert all(set(r) == set(kv.ROW_KEYS) for r in stored)
    engines = {r["engine"] for r in stored}
    assert engines == {"trtllm", "vllm", "sglang", "pytorch"}
    for engine in ("vllm", "sglang"):
        classes = {r["class"] for r in stored if r["engine"] == engine}
        assert {"gemm", "context_attention", "decode_attention", "moe"} <= classes, engine
    assert {r["class"] for r in stored if r["engine"] == "sglang"} >= {"mla_context",
                                                                       "mla_decode"}
    again = kv.join_rows(kv.kernel_error_rows(["mla_decode"], ["sglang"]))
    assert [r for r in stored if (r["class"], r["engine"]) == ("mla_decode", "sglang")] == again


def test_validation_page_shows_the_engine():
    from dashboard.views import kernel_validation
    assert "engine" in [c["field"] for c in kernel_validation.COLUMNS]
    rows, message = kernel_validation.table_rows()
    assert message == "" and {"vllm", "sglang"} <= {r["engine"] for r in rows}


def test_validate_set_kernels_prints_engines(capsys, monkeypatch):
    from model.cli.commands import main
    stored = kv.stored_error_rows()
    monkeypatch.setattr(kv, "kernel_error_rows", lambda classes=None: [
        r for r in stored if not r["class"].endswith("(torch)")
        and r["class"] not in ("moe", "training_gemm")])
    assert main(["validate", "--set", "kernels", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["engine"] for r in out["rows"]} == {"trtllm", "vllm", "sglang", "pytorch"}
    assert main(["validate", "--set", "kernels"]) == 0
    text = capsys.readouterr().out
    assert " sglang " in text and " vllm " in text and "engine" in text
