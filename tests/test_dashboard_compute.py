"""The dashboard without a browser, continued: the cached computations
(:mod:`dashboard.jobs.compute`) — the cache key of every input and the version, cached equal
to uncached, a deleted, corrupt or unusable cache recomputing, why nothing fits. Split from
tests/test_dashboard.py, whose helpers and temporary cache these use."""

from __future__ import annotations

import math
import shutil
from typing import Any

import pandas as pd
import pytest
from test_dashboard import INFEASIBLE, default, valid

from dashboard.controls import scenario as S
from dashboard.jobs import compute, studies

pytestmark = pytest.mark.usefixtures("tmp_cache")  # a private results cache per test (conftest)


def _payload(scn: dict[str, Any]) -> dict[str, Any]:
    return {**S.estimator_inputs(scn), "counts": S.gpu_counts(scn)}


def test_cache_key_changes_with_every_input_and_the_version(monkeypatch):
    scn = default()
    base = compute.cache_key("scaling", _payload(scn))
    assert base == compute.cache_key("scaling", _payload(dict(scn)))
    assert base != compute.cache_key("design", _payload(scn))
    changed = {"model": "gpt3-175b", "layers": 96, "hidden": 12800, "heads": 80,
               "kv_heads": 80, "ffn": 51200, "mlp": "swiglu", "seq_len": 4096, "vocab": 0,
               "budget_kind": "samples", "budget": 1.5e12, "global_batch": 2048,
               "system": "b200", "nvs": 64, "hbm_gb": 141.01, "hbm_tb_per_s": 4.81,
               "matrix_tflops": 990.0, "matrix_tflops_fp4": 5000.0, "nvlink_gb_per_s": 900.0,
               "nic_gb_per_s": 25.0,
               "nics_per_gpu": 2.0, "node_gpus": 4, "tdp_w": 1000.0, "node_power_factor": 1.5,
               "usd_per_gpu_hour": 3.0, "purchase_usd_per_gpu": 40000.0,
               "mode": "paper", "gpus_max": 8192,
               "stack": "megatron-lm-2021",
               "recompute": "full", "sequence_parallel": False, "interleave": 2, "zero": 3,
               "precision": "fp8", "tp_overlap": False, "fp8_param_gather": False,
               "context_attention": "ring",
               "offload": "optimizer", "recompute_layers": 2, "offload_layers": 2,
               "flash_attention": False, "fp32_gradients": False,
               "ends_count_as_layers": False, "dp_overlap": False, "dp_bucket_mb": 25.0,
               "attention": "gqa", "q_lora_rank": 1536, "kv_lora_rank": 512,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
               "experts": 64, "top_k": 8, "expert_ffn": 2048, "shared_experts": 1,
               "dense_layers": 3, "ep_dispatcher": "alltoall", "ep_overlap": True,
               "moe_capacity_factor": 1.25, "moe_imbalance": 1.3, "production_layout": False,
               "expert_gemm": "grouped", "moe_router_padding": False, "ep_max_domains": 4,
               "swiglu_fp8_cache": True, "attention_kernel": "fa3", "elementwise": "eager",
               "pipeline_schedule": "dualpipe", "optimizer_bf16_moments": True,
               "recompute_norm_up_proj": True, "loss_fp32_eager": True, "fsdp_version": 2,
               "fsdp_reshard_after_forward": False, "fsdp_gather_dtype": "fp32",
               "fsdp_prefetch": 0, "fsdp_shard_group": 8, "tp_style": "dtensor",
               "moe_router_fusion": False, "moe_permute_fusion": False,
               "trainable": "qlora", "lora_rank": 64, "lora_targets": "attn",
               "kernel_tables": True}
    assert set(S.estimator_inputs(scn)) <= set(changed)
    for key, value in changed.items():
        assert scn[key] != value
        assert compute.cache_key("scaling", _payload({**scn, key: value})) != base, key
    monkeypatch.setattr(compute, "ESTIMATOR_VERSION", compute.ESTIMATOR_VERSION + "-next")
    assert compute.cache_key("scaling", _payload(scn)) != base


@pytest.fixture
def sweep_calls(monkeypatch) -> list[int]:
    from dashboard.jobs import sweep_parts  # the scaling views sweep through it

    calls: list[int] = []
    real = sweep_parts.sweep

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(sweep_parts, "sweep", counting)
    return calls


def test_scaling_cached_equals_uncached(sweep_calls, tmp_cache):
    scn = default()
    fresh = compute.scaling(scn)
    assert len(sweep_calls) == 1 and not fresh.empty
    assert (tmp_cache / "results").is_dir()
    again = compute.scaling(scn)
    assert len(sweep_calls) == 1, "the second call must be served from the cache"
    pd.testing.assert_frame_equal(fresh, again, check_dtype=False)
    compute.scaling(valid(hbm_gb=140.5))
    assert len(sweep_calls) == 2


def test_deleted_cache_directory_recomputes(sweep_calls, tmp_cache):
    scn = default()
    first = compute.scaling(scn)
    shutil.rmtree(tmp_cache)
    again = compute.scaling(scn)
    assert len(sweep_calls) == 2
    pd.testing.assert_frame_equal(first, again, check_dtype=False)
    compute.scaling(scn)
    assert len(sweep_calls) == 2  # and the re-created cache serves it again


@pytest.mark.parametrize("garbage", ["this is not JSON {", b"\x00\x01binary", 12345])
def test_corrupt_cache_entry_recomputes(sweep_calls, garbage):
    scn = default()
    first = compute.scaling(scn)
    store = compute.cache()
    keys = list(store.iterkeys())
    assert keys
    for key in keys:
        store.set(key, garbage)
    again = compute.scaling(scn)
    assert len(sweep_calls) == 2
    pd.testing.assert_frame_equal(first, again, check_dtype=False)
    compute.scaling(scn)
    assert len(sweep_calls) == 2  # the recomputed value replaced the garbage


def test_unusable_cache_directory_still_computes(sweep_calls, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(compute, "CACHE_DIR", blocker / "cache")
    assert compute.cache() is None
    assert not compute.scaling(default()).empty
    assert not compute.scaling(default()).empty
    assert len(sweep_calls) == 2


def test_memory_floor_names_dominant_part_and_a_count_that_fits():
    scn = valid(**INFEASIBLE)
    assert compute.scaling(scn).empty
    floor = studies.memory_floor(scn)
    assert floor["gpus"] == 32 and floor["strategy"] == "1d"
    assert floor["capacity_gb"] == scn["hbm_gb"]
    assert floor["min_memory_gb"] > floor["capacity_gb"]
    parts = floor["parts"]
    assert set(parts) == {"weights_gb", "gradients_gb", "optimizer_gb", "activations_gb"}
    assert floor["dominant"] == max(parts, key=parts.get) == "activations_gb"
    assert math.isclose(sum(parts.values()), floor["min_memory_gb"], rel_tol=0.05)
    if "fits_at_gpus" in floor:
        n = floor["fits_at_gpus"]
        assert n > 32 and n & (n - 1) == 0
        assert not compute.scaling(valid(**{**INFEASIBLE, "gpus_min": n, "gpus_max": n})).empty


def test_other_frames_cached_equal_uncached():
    scn = default()
    for fn in (compute.design, compute.top):
        pd.testing.assert_frame_equal(fn(scn), fn(scn), check_dtype=False)
    row = compute.top(scn).iloc[0].to_dict()
    pd.testing.assert_frame_equal(compute.ops(scn, row), compute.ops(scn, row),
                                  check_dtype=False)
