"""The kernel layer (model/physics/kernels): closed-form limits of each kernel model, the
fitter, the shipped parameters and validation subset (schema, provenance), the held-out error
table (``validate --set kernels``, the Validation page) and the serving stacks' switch to the
kernel tables' GEMM shapes."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from model.errors import ModelError
from model.physics.kernels import attention_kernel as attn
from model.physics.kernels import comm_kernel as comm
from model.physics.kernels import gemm_kernel as gemm
from model.physics.kernels import pricing
from model.physics.kernels.classes import CLASSES, columns_of, fixed_params
from model.physics.kernels.fit import fit_log_latency
from model.physics.kernels.hardware import GPU_PRESETS, kernel_hardware
from model.physics.kernels.params import fitted, kernel_params, kernel_subset
from model.validation import kernels as kv

H100 = kernel_hardware("h100_sxm")
GEMM_P = {"eta": 0.8, "k0": 200.0, "beta": 0.8, "t0_s": 4e-6, "t_split_s": 1.5e-6}


def test_huge_gemm_runs_at_peak_times_eta():
    # 128·132 rows × 128 columns: exactly one wave of 128 × 128 tiles; k ≫ k₀
    m, n, k = 128.0 * 132, 128.0 * 64, 2.0 ** 24
    t = gemm.gemm_latency_s(m, n, k, "bfloat16", H100, GEMM_P)
    ideal = 2 * m * n * k / (H100.peak("bfloat16") * GEMM_P["eta"])
    assert t == pytest.approx(ideal, rel=2e-4 + GEMM_P["k0"] / k)


def test_tiny_gemm_costs_its_floor():
    t = gemm.gemm_latency_s(1, 32, 32, "bfloat16", H100, GEMM_P)
    assert t == pytest.approx(GEMM_P["t0_s"], rel=1e-3)


def test_decode_gemm_is_bound_by_its_weight_read():
    m, n, k = 1.0, 16384.0, 16384.0
    t = gemm.gemm_latency_s(m, n, k, "bfloat16", H100, GEMM_P)
    weights = 2.0 * n * k / (H100.hbm_bytes_per_s * GEMM_P["beta"])
    assert weights < t - GEMM_P["t0_s"] < 1.001 * weights


def test_fp8_gemm_pays_the_activation_quantisation():
    args = (8192.0, 128.0, 8192.0)
    bf16 = gemm.gemm_latency_s(*args, "fp8", H100, GEMM_P)
    assert gemm.quantise_s(8192.0, 8192.0, "fp8", H100, GEMM_P) > 0
    assert gemm.quantise_s(8192.0, 8192.0, "bfloat16", H100, GEMM_P) == 0
    no_quant = bf16 - gemm.quantise_s(8192.0, 8192.0, "fp8", H100, GEMM_P)
    assert no_quant < bf16


def test_split_gemm_pays_its_reduction_pass():
    # one 128 × 128 tile, k = 8192: cuBLAS splits k (BF16), the block-scaled FP8 kernel does not
    args = (128.0, 128.0, 8192.0)
    t = gemm.gemm_latency_s(*args, "bfloat16", H100, GEMM_P)
    no_split = dict(GEMM_P, t_split_s=0.0)
    assert t - gemm.gemm_latency_s(*args, "bfloat16", H100, no_split) == pytest.approx(1.5e-6)
    assert gemm.gemm_latency_s(*args, "fp8_block", H100, GEMM_P) == gemm.gemm_latency_s(
        *args, "fp8_block", H100, no_split)


def test_split_k_fills_the_sms_for_few_tiles():
    assert gemm.split_k(np.array([1.0]), np.array([65536.0]), 132)[0] == 132
    assert gemm.split_k(np.array([1.0]), np.array([256.0]), 132)[0] == 2  # k / 128 bounds it
    assert gemm.split_k(np.array([500.0]), np.array([65536.0]), 132)[0] == 1


def test_context_attention_limits():
    p = {"eta": 0.6, "tau_s": 1e-6, "d0": 20.0, "t0_s": 1e-5, "l0": 50.0, "passes": 2.0}
    b, s, h, d = 132.0, 2.0 ** 17, 1.0, 128.0  # long sequences: the key loops dominate
    t = attn.context_latency_s(b, s, h, h, d, 0, "bfloat16", H100, p)
    flops = attn.context_flops(b, s, h, d)
    keys = (s + 1) / 2
    compute = flops / (H100.peak("bfloat16") * 0.6 * keys / (keys + 50.0) * d / (d + 20.0))
    assert t > compute and t == pytest.approx(compute, rel=0.01)
    # one token of one head: the floor and one CTA's fixed cost (its work is < 5 %)
    assert attn.context_latency_s(1, 1, 1, 1, 64, 0, "bfloat16", H100, p) == pytest.approx(
        1e-5 + 1e-6, rel=0.05)
    # causal pairs: S(S+1)/2; a window of w keeps w(w+1)/2 + (S − w)·w
    assert attn.causal_pairs(4.0, 0.0) == 10.0
    assert attn.causal_pairs(10.0, 3.0) == 6.0 + 7.0 * 3.0
    assert context_flops_of_window_is_smaller()


def context_flops_of_window_is_smaller() -> bool:
    return bool(attn.context_flops(1, 8192, 8, 128, 1024) < attn.context_flops(1, 8192, 8, 128))


DECODE_P = {"beta": 0.8, "c0": 100.0, "tau_grouped_s": 3e-8, "tau_head_s": 9e-9, "t0_s": 8e-6,
            "l2_ratio": 2.0, "eta": 1.0, "d_tau": 128.0, "g0": 1e12}


def test_decode_attention_limits_and_kernel_paths():
    p = DECODE_P
    assert attn.decode_units(32, 8)[0] == 8 and attn.decode_units(32, 8)[1]
    assert attn.decode_units(64, 1)[0] == 64 and not attn.decode_units(64, 1)[1]  # g > 32
    assert attn.decode_units(16, 16)[0] == 16 and not attn.decode_units(16, 16)[1]
    assert attn.decode_units(64, 1, 0)[0] == 1 and attn.decode_units(64, 1, 0)[1]  # packed
    b, L = 256.0, 2.0 ** 20
    t = attn.decode_latency_s(b, L, 32, 8, 128, 0, "bfloat16", H100, p)
    # 2048 CTAs ≥ 8 waves: no split; the ramp 2048/(2048 + C₀)
    stream = 2 * 2 * b * 8 * L * 128 / (H100.hbm_bytes_per_s * 0.8 * 2048 / 2148)
    assert t == pytest.approx(8e-6 + 3e-8 * b * 8 + stream, rel=1e-6)
    # one token of cache: the floor, 8 CTAs' fixed cost (at d = 64: (64 + 128)/(128 + 128) of
    # d = 128's) and 2 KiB read at the latency-bound rate of C = 8 CTAs in flight (MMHA cannot
    # split one key), B·β·C/(C + C₀)
    tiny = 8e-6 + 9e-9 * 8 * 0.75 + 2 * 2 * 8 * 64 / (H100.hbm_bytes_per_s * 0.8 * 8 / (8 + 100))
    assert attn.decode_latency_s(1, 1, 8, 8, 64, 0, "bfloat16", H100, p) == pytest.approx(tiny)
    # a per-head kernel on a shared KV head (g = 64) reads it once per query head from L2
    mqa = attn.decode_latency_s(b, L, 64, 1, 128, 0, "bfloat16", H100, p)
    assert mqa == pytest.approx(8e-6 + 9e-9 * b * 64 + 2 * 2 * b * 64 * L * 128
                                / (H100.hbm_bytes_per_s * 2.0), rel=1e-3)
    # a sliding window caps the read
    assert attn.decode_latency_s(b, L, 32, 8, 128, 4096, "bfloat16", H100, p) < t / 100
    # a CTA's fixed cost grows with the query heads it carries: g = 4 at g₀ = 4 costs
    # (1 + 4/4)/(1 + 1/4) = 1.6 one head's; the per-head kernel's CTAs carry one
    heads = {**p, "g0": 4.0}
    t1 = attn.decode_latency_s(1024, 1, 32, 8, 128, 0, "bfloat16", H100, heads)
    t0 = attn.decode_latency_s(1024, 1, 32, 8, 128, 0, "bfloat16", H100, p)
    assert t1 - t0 == pytest.approx(3e-8 * 1024 * 8 * 0.6, rel=1e-6)
    assert attn.decode_latency_s(4, 1, 64, 1, 128, 0, "bfloat16", H100, heads) == pytest.approx(
        attn.decode_latency_s(4, 1, 64, 1, 128, 0, "bfloat16", H100, p))


def test_decode_split_kv_rules():
    """Split-KV CTAs per (sequence, KV head) as the kernels launch them: TensorRT-LLM XQA's
    computeMultiBlockCount (n₀ = ⌊L/512⌋, min(n₀, round(√(8·n₀))), ≤ 8 waves), MMHA's and
    FlashAttention's fill-the-SMs rules (132 SMs)."""
    sms, grouped = 132.0, np.array(True)
    xqa = [attn.decode_splits(c, L, grouped, sms, 1.0) for c, L in
           [(1, 65536), (1, 4096), (1, 511), (8, 65536), (64, 65536), (256, 65536)]]
    # √(8·128) = 32; 8 ≤ √64; no block under 512 keys; 8·32 CTAs; 64·32 = 15.5 waves → ⌊32/1.94⌋
    assert xqa == [32.0, 8.0, 1.0, 32.0, 16.0, 4.0]
    mmha = [attn.decode_splits(c, L, np.array(False), sms, 1.0) for c, L in
            [(1, 65536), (1, 300), (32, 65536), (200, 65536)]]
    assert mmha == [132.0, 3.0, 5.0, 1.0]  # ⌈132/c⌉, at most ⌈(L + 1)/128⌉ blocks
    fa = [attn.decode_splits(c, L, grouped, sms, 0.0) for c, L in
          [(1, 65536), (1, 300), (8, 65536), (106, 65536)]]
    assert fa == [113.0, 3.0, 15.0, 1.0]  # ⌈0.85·132/c⌉ ≤ 128; none once c ≥ 0.8·SMs
    # the term the split-KV rule adds: one sequence of 8 KV heads and a 64K cache keeps
    # 8·32 = 256 CTAs of XQA loading, not 8 — and fewer than FlashAttention's 8·15 = 120 ...
    p = DECODE_P
    one = attn.decode_latency_s(1, 65536, 64, 8, 128, 0, "bfloat16", H100, p)
    read = 2 * 2 * 8 * 65536 * 128 / (H100.hbm_bytes_per_s * 0.8)
    assert one == pytest.approx(8e-6 + 3e-8 * 8 + read * (256 + 100) / 256, rel=1e-9)
    fa_one = attn.decode_latency_s(1, 65536, 64, 8, 128, 0, "bfloat16", H100,
                                   {**p, **attn.decode_rules("vllm")})
    assert fa_one == pytest.approx(8e-6 + 3e-8 * 8 + read * (120 + 100) / 120, rel=1e-9)
    # ... and the MMA term binds once a wide group shares a narrow FP8 cache at low η
    slow = {**p, "eta": 0.01}
    t = attn.decode_latency_s(256, 8192, 32, 1, 128, 0, "fp8", H100, slow)
    mma = 4 * 256 * 32 * 8192 * 128 / (H100.peak("bfloat16") * 0.01)
    assert t == pytest.approx(8e-6 + 3e-8 * 256 + mma, rel=1e-9)


def test_mla_kernels():
    from model.physics.kernels import mla_kernel as mla
    p = {"eta": 0.6, "tau_s": 1e-6, "d0": 20.0, "t0_s": 1e-5, "l0": 50.0, "passes": 2.0}
    # prefill: the context law with h_kv = h and head dim (192 + 128)/2
    assert mla.mla_context_latency_s(4, 4096, 16, "fp8", H100, p) == attn.context_latency_s(
        4, 4096, 16, 16, 160.0, 0, "bfloat16", H100, p)
    d = {"beta": 0.8, "w0": 1e3, "eta": 0.5, "tau_s": 1e-8, "t0_s": 1e-5, "tau_key_s": 1e-10,
         "h0": 1e12}  # no per-head share of the fixed work here (below)
    b, L = 64.0, 2.0 ** 16
    few = mla.mla_decode_latency_s(b, L, 1, "bfloat16", H100, d)  # one head: the cache read
    read = b * L * 576 * 2 / (H100.hbm_bytes_per_s * 0.8 * b * L / (b * L + 1e3))
    assert few == pytest.approx(1e-5 + 1e-8 * b + read)
    many = mla.mla_decode_latency_s(b, L, 128, "bfloat16", H100, d)  # 128 heads: the MMAs
    flops = 2 * b * 128 * L * (576 + 512)
    assert many == pytest.approx(1e-5 + 1e-8 * b + flops / (H100.peak("bfloat16") * 0.5))
    # no split-KV for MLA: one sequence's CTA walks its 64K keys at τ_k each, whatever the
    # bandwidth the other SMs leave idle
    serial = {**d, "tau_key_s": 1.2e-7}
    one = mla.mla_decode_latency_s(1, L, 16, "bfloat16", H100, serial)
    assert one == pytest.approx(1e-5 + 1e-8 + L * 1.2e-7)
    assert mla.mla_decode_latency_s(16, L, 16, "bfloat16", H100, serial) == pytest.approx(
        one + 15e-8)  # 16 sequences: 16 CTAs side by side, the same walk
    # the fixed work per sequence grows with its query heads: τ·b·(1 + h/h₀)
    heads = {**d, "h0": 32.0}
    short = [mla.mla_decode_latency_s(1024, 2, h, "bfloat16", H100, heads) for h in (16, 64)]
    cache = [mla.mla_decode_latency_s(1024, 2, h, "bfloat16", H100, d) for h in (16, 64)]
    assert short[1] - short[0] == pytest.approx(1e-8 * 1024 * 48 / 32 + cache[1] - cache[0])


def test_collective_limits_use_nccl_bus_factors():
    p = {"alpha_small_s": 5e-6, "busbw_small": 5e10, "alpha_mid_s": 1e-5, "busbw_mid": 2e11,
         "alpha_large_s": 2e-5, "busbw_large": 4e11}
    assert comm.collective_latency_s("all_reduce", 1.0, 8, p) == pytest.approx(5e-6, rel=1e-3)
    big = 2.0 ** 34
    assert comm.collective_latency_s("all_reduce", big, 8, p) == pytest.approx(
        2e-5 + 2 * 7 / 8 * big / 4e11)
    # between them the mid regime is the cheapest: 1 MB over 8 GPUs
    mid = 1e-5 + 2 * 7 / 8 * 1e6 / 2e11
    assert comm.collective_latency_s("all_reduce", 1e6, 8, p) == pytest.approx(mid)
    assert comm.bus_factor("all_gather", 4) == 0.75


def test_fitter_recovers_known_parameters():
    rng = np.random.default_rng(0)
    m, n, k = (rng.choice([1, 8, 64, 512, 4096, 16384], 400).astype(float) for _ in range(3))
    truth = {"eta": 0.7, "k0": 150.0, "beta": 0.75, "t0_s": 5e-6, "t_split_s": 2.5e-6}
    t = gemm.gemm_latency_s(m, n, k, "bfloat16", H100, truth)

    def model(theta):
        return gemm.gemm_latency_s(m, n, k, "bfloat16", H100, dict(zip(gemm.PARAMS, theta)))
    got = dict(zip(gemm.PARAMS, fit_log_latency(model, t, gemm.gemm_starts())))
    for key, value in truth.items():
        assert got[key] == pytest.approx(value, rel=0.02), key


def test_shipped_parameters_schema_and_provenance():
    data = kernel_params()
    prov = data["provenance"]
    assert prov["package"] == "aiconfigurator-core" and prov["version"] == "0.12.0"
    assert prov["date"] and prov["script"] == "scripts/extract_kernel_tables.py"
    for table in prov["tables"]:
        assert table["path"].startswith("aiconfigurator_core/systems/data/")
        assert len(table["sha256"]) == 64 and table["rows"] > 0
    for kind, by_gpu in data["params"].items():
        assert set(by_gpu) == set(GPU_PRESETS), kind
        for groups in by_gpu.values():
            for values in groups.values():
                fixed = fixed_params(CLASSES[kind], "trtllm")  # the engine's launch rules
                assert set(values) == {*CLASSES[kind].params, *fixed, "rows"}
                assert all(values[k] == v for k, v in fixed.items())
                assert all(v > 0 for k, v in values.items() if k != "t_split_s")
                assert values.get("t_split_s", 0.0) >= 0
    assert set(data["params"]["gemm"]["h100_sxm"]) == {"bfloat16", "fp8", "fp8_block"}
    assert set(data["params"]["gemm"]["b200_sxm"]) == {"bfloat16", "fp8", "fp8_block", "nvfp4"}


def test_shipped_subset_schema_and_size():
    sub = kernel_subset()
    assert sub["provenance"] == kernel_params()["provenance"]
    for kind, cols in sub["columns"].items():
        assert tuple(cols) == CLASSES[kind].columns and cols[-1] == "latency_s"
        for groups in sub["rows"][kind].values():
            for rows in groups.values():
                assert all(len(r) == len(cols) for r in rows)
                assert min(r[-1] for r in rows) > 0
    total = sum(p.stat().st_size for p in kv.KERNEL_DIR.iterdir())
    assert total < 5e6


def test_shipped_fit_prices_its_own_rows():
    """The shipped GEMM parameters, applied to the shipped H100 BF16 rows: median within 12 %
    (the fit saw these shapes among its 6000 rows)."""
    rows = kernel_subset()["rows"]["gemm"]["h100_sxm"]["bfloat16"]
    cols = columns_of(rows, CLASSES["gemm"])
    pred = CLASSES["gemm"].price(cols, "h100_sxm", "bfloat16", fitted("gemm", "h100_sxm",
                                                                      "bfloat16"))
    assert np.median(np.abs(pred / cols["latency_s"] - 1)) < 0.12


def test_stored_error_table_is_what_validate_computes():
    stored = kv.stored_error_rows()
    again = kv.join_rows(kv.kernel_error_rows(["collective"]))
    assert [r for r in stored if r["class"] == "collective"] == again
    fitted_classes = {"gemm", "context_attention", "decode_attention", "mla_context",
                      "mla_decode", "collective"}
    assert {r["class"] for r in stored} == fitted_classes | {"moe", "training_gemm"} | {
        f"{c} (torch)" for c in ("gemm", "context_attention", "decode_attention")}
    from model.validation.kernels_training import held_out_rows
    assert [r for r in stored if r["class"] == "training_gemm"] == kv.join_rows(
        held_out_rows())
    assert [r for r in stored if r["class"] == "moe"] == kv.join_rows(kv.moe_error_rows())


def _row(cls, gpu, dtype):
    return next(r for r in kv.stored_error_rows()
                if (r["class"], r["gpu"], r["engine"], r["dtype"]) == (cls, gpu, "trtllm", dtype))


@pytest.mark.parametrize("cls,gpu,dtype,median,p90", [
    # held-out figures of the shipped table (docs/accuracy.md): the target where a class meets
    # it, a regression bound where it does not
    ("gemm", "b200_sxm", "all", 10.0, 25.0),
    ("gemm", "gb200", "all", 10.0, 25.0),
    ("gemm", "h100_sxm", "all", 10.0, 30.0),
    ("context_attention", "h100_sxm", "all", 10.0, 25.0),
    ("context_attention", "b200_sxm", "all", 10.0, 25.0),
    ("context_attention", "a100_sxm", "bfloat16", 10.0, 25.0),
    ("decode_attention", "gb200", "all", 10.0, 25.0),  # was 9.0 / 28.8
    ("decode_attention", "b200_sxm", "all", 10.0, 25.0),  # was 9.0 / 30.8
    ("decode_attention", "h100_sxm", "all", 16.0, 40.0),  # split-KV: was 18.6 / 47.1
    ("decode_attention", "a100_sxm", "bfloat16", 14.0, 32.0),  # was 19.4 / 41.6
    ("mla_decode", "a100_sxm", "all", 10.0, 30.0),  # no split for MLA: was 71.9 / 185
    ("mla_decode", "h100_sxm", "all", 10.0, 30.0),  # heads' share of the fixed cost: was 9.3 / 47
    ("mla_decode", "h200_sxm", "all", 10.0, 25.0),
    ("mla_context", "h100_sxm", "all", 10.0, 25.0),
    ("mla_context", "b200_sxm", "all", 10.0, 25.0),
    ("collective", "gb200", "all", 10.0, 25.0),
    ("collective", "h100_sxm", "all", 10.0, 25.0),
])
def test_held_out_error_bounds(cls, gpu, dtype, median, p90):
    row = _row(cls, gpu, dtype)
    assert row["median_pct"] <= median and row["p90_pct"] <= p90, row


def test_join_rows_takes_other_classes_rows():
    moe = [{"class": "moe", "gpu": "h100_sxm", "dtype": "fp8", "n": 10, "median_pct": 5.0,
            "p90_pct": 9.0, "extra": 1}]
    joined = kv.join_rows(kv.stored_error_rows(), moe)
    assert {"class": "moe", "gpu": "h100_sxm", "engine": "trtllm", "dtype": "fp8", "n": 10,
            "median_pct": 5.0, "p90_pct": 9.0} in joined
    assert all(set(r) == set(kv.ROW_KEYS) for r in joined)


def test_validate_set_kernels_prints_the_table(capsys, monkeypatch):
    import model.validation.kernels_torch as kt
    from model.cli.commands import main
    stored = kv.stored_error_rows()
    monkeypatch.setattr(kv, "kernel_error_rows", lambda classes=None: [
        r for r in stored if not r["class"].endswith("(torch)")
        and r["class"] not in ("moe", "training_gemm")])
    assert main(["validate", "--set", "kernels", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == kv.join_rows(stored)
    assert [r for r in stored if r["class"].endswith("(torch)")] == kv.join_rows(
        kt.torch_error_rows())
    assert main(["validate", "--set", "kernels"]) == 0
    text = capsys.readouterr().out
    assert "decode_attention" in text and "above target" in text and "median" in text


def test_validation_page_kernel_table():
    from dashboard.views import kernel_validation
    rows, message = kernel_validation.table_rows()
    assert message == "" and len(rows) == len(kv.stored_error_rows())
    assert {r["target"] for r in rows} <= {"yes", "no"}
    assert all((r["target"] == "yes") == kv.meets_target(r) for r in rows)
    card = kernel_validation.section()
    assert "validation-kernels" in str(card)


def test_validation_page_kernel_table_unreadable(monkeypatch, tmp_path):
    from dashboard.views import kernel_validation
    monkeypatch.setattr(kv, "ERRORS_FILE", tmp_path / "missing.json")
    rows, message = kernel_validation.table_rows()
    assert rows == [] and "could not be read" in message


def test_serving_gemm_shapes_switch():
    from model import load_model
    from model.physics.serving_step import Engine, shape_efficiency
    from model.specs.hardware import load_system
    from model.specs.serving import ServingWorkload
    from model.specs.serving_stack import load_serving_stack
    stack = load_serving_stack("trtllm-1.0")
    assert stack.gemm_shapes == "tiles"
    kt = dataclasses.replace(stack, gemm_shapes="kernel-tables")
    wl = ServingWorkload(input_tokens=128, output_tokens=128)
    rows, k, n = np.array([1.0, 64.0, 4096.0]), 4096.0, 4096.0
    for system, covered in (("h100", True), ("h800", False)):
        old = shape_efficiency(Engine.make(load_model("llama3-8b"), load_system(system), wl,
                                           stack), rows, k, n, 0.0)
        new = shape_efficiency(Engine.make(load_model("llama3-8b"), load_system(system), wl,
                                           kt), rows, k, n, 0.0)
        assert np.all((new != old) if covered else (new == old)), system
    key = pricing.table_key("h100", "matrix_tflops_fp16")
    assert key == ("h100_sxm", "bfloat16")
    # a 64-row decode GEMM of 32 output tiles: split-K fills the SMs, 128-row tiles do not
    eff = pricing.gemm_shape_efficiency(key, 64.0, 4096.0, 4096.0)
    assert eff > 0.5 > shape_efficiency(Engine.make(load_model("llama3-8b"),
                                                    load_system("h100"), wl, stack),
                                        64.0, 4096.0, 4096.0, 0.0)


def test_serving_stack_refuses_an_unknown_gemm_shape_model():
    from model.specs.serving_stack import serving_stack_from_dict
    with pytest.raises(ModelError, match="gemm_shapes"):
        serving_stack_from_dict({"source": "x", "gemm_shapes": "lookup"})
