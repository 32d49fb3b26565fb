"""PyTorch-native stack mechanisms (issue 23): closed forms of the attention kernels, the
element-wise passes, PyTorch FSDP and learned positions; the presets; ``calibrate``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import model
from model.cli.commands import main
from model.errors import ModelError
from model.physics import attention_kernels as ak
from model.physics.block import op_counts
from model.physics.context import Ctx
from model.physics.optable import Shards
from model.physics.strategies import build_strategy
from model.specs.transformer import transformer_from_dict
from model.validation.user_runs import calibrate_runs, fitted_stack, read_runs

LLAMA = {"name": "l", "layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 2, "ffn": 3584,
         "mlp": "swiglu", "seq_len": 4096, "vocab": 32000, "bias": False, "dropout": False,
         "norm": "rmsnorm"}


def test_kernel_rates_are_the_tables_at_their_points():
    """At a tabulated point the forward rate is the table's; the backward follows from
    t_fb = t_f + t_b with the benchmarks' 3.5× / 2.5× FLOP counts."""
    fwd, bwd = ak.pass_rates_tflops("fa2", "h100", True, 128, 8192)
    assert fwd == 333.0
    assert bwd == pytest.approx(2.5 / (3.5 / 308.0 - 1.0 / 333.0))
    # only forward + backward on A100: both passes at that rate
    assert ak.pass_rates_tflops("triton", "a100", True, 128, 2048) == (68.0, 68.0)
    # FA3 non-causal: the FA3 paper's backward figure (Fig. 6) at its point
    assert ak.pass_rates_tflops("fa3", "h100", False, 64, 1024) == (392.0, 363.0)
    # between points: linear in log2 L; beyond 16K: the last point
    mid = ak.pass_rates_tflops("fa2", "a100", True, 64, 2048 * 2 ** 0.5)[0]
    assert mid == pytest.approx((140 + 156) / 2)
    assert ak.pass_rates_tflops("fa2", "a100", True, 64, 65536)[0] == 171.0
    eff = ak.pass_efficiencies("fa2", "ampere", True, 64, 16384)
    assert eff[0] == pytest.approx(171.0 / 312.0)


def test_backward_without_its_own_table():
    """FA3/cuDNN causal: the non-causal backward figure scaled by the kernel's own forward
    causal/non-causal ratio; Triton on H100 (no backward bar): FA2's backward/forward ratio."""
    for kernel, causal_fwd, fwd, bwd in (("fa3", 616.0, 648.0, 561.0),
                                         ("cudnn", 539.0, 595.0, 516.0)):
        f, b = ak.pass_rates_tflops(kernel, "h100", True, 128, 16384)
        assert f == causal_fwd and b == pytest.approx(bwd * causal_fwd / fwd)
    assert ak.pass_rates_tflops("fa3", "h100", True, 128, 16384)[1] < 561.0  # mask costs
    ft, bt = ak.pass_rates_tflops("triton", "h100", False, 128, 4096)
    assert ft == 389.0 and bt == pytest.approx(389.0 * 310.0 / 368.0)  # FA2: 310 / 368


def test_a_kernel_without_a_benchmark_is_refused():
    with pytest.raises(ModelError, match="fa3.*ampere"):
        ak.pass_efficiencies("fa3", "ampere", True, 128, 4096)


def _counts(ex: dict, op: str, seq: int = 4096, **spec):
    m = transformer_from_dict({**LLAMA, "seq_len": seq, **spec})
    ctx = Ctx.make(m, model.load_system("h100"), "default", ex)
    strategy = build_strategy("1d", m, ctx.mode, ctx.execution)
    spec = next(s for s in strategy.block if s.name == op)
    one = np.ones(1, dtype=int)
    sh = Shards(b=one * 2, tp1=one, tp2=one, nb=one, nv_tp1=one, nv_tp2=one)
    return op_counts(spec, sh, ctx), m


def test_eager_passes_on_the_norms_and_the_activation():
    """Eager adds (residual 6 + output copy 2 + RMSNorm 32) / 2 passes of 2·b·l·e bytes to each
    block norm in the forward; SwiGLU 2 passes of its [b·l, f] output; compile fewer."""
    fused, m = _counts({}, "attn/norm")
    eager, _ = _counts({"elementwise": "eager"}, "attn/norm")
    size = 2 * 2 * m.seq_len * m.hidden  # s·b·l·e
    assert eager.extra_bytes_fwd - fused.extra_bytes_fwd == pytest.approx(20 * size)
    assert eager.extra_bytes_bwd == pytest.approx((6 + 2 + 64) / 2 * size)
    act, _ = _counts({"elementwise": "eager"}, "mlp/act")
    assert act.extra_bytes_fwd == pytest.approx(2 * 2 * 2 * m.seq_len * m.ffn)
    comp, _ = _counts({"elementwise": "compile"}, "attn/norm")
    assert comp.extra_bytes_fwd == pytest.approx(2 * size)


def test_benchmarked_attention_time_is_flops_over_rate():
    m = transformer_from_dict(LLAMA)
    system = model.load_system("h100")
    ex = {"attention_kernel": "fa2", "recompute": "selective"}
    ctx = Ctx.make(m, system, "default", ex)
    fwd, bwd = ctx.attention_passes
    assert fwd == pytest.approx(ak.pass_rates_tflops("fa2", "h100", True, 128, 4096)[0] / 989)
    c, _ = _counts(ex, "attn/flash")
    causal_flops = 2 * 8 * 4096 * 4096 * (2 * 128 - 1 + 2 * 128) / 2  # ≈ 4·L²·d·h·b / 2
    assert c.flop_mat_fwd == pytest.approx(causal_flops, rel=0.01)


def test_learned_positions_and_alibi():
    base = transformer_from_dict(LLAMA)
    learned = transformer_from_dict({**LLAMA, "position_embedding": "learned"})
    assert learned.params - base.params == 4096 * 1024
    alibi, _ = _counts({}, "attn/flash")
    m = transformer_from_dict({**LLAMA, "position_embedding": "alibi"})
    assert m.params == base.params
    with pytest.raises(ModelError, match="position_embedding"):
        transformer_from_dict({**LLAMA, "position_embedding": "sinusoid"})


def test_fsdp2_copy_out_and_reshard():
    """FSDP2 adds 2 copies × 2·W bytes per gathered block per microbatch over FSDP1; without
    resharding the backward's gather is gone."""
    m = transformer_from_dict(LLAMA)
    system = model.load_system("h100")

    def t_dp(**ex):
        r = model.evaluate(m, system, 8, 16, "1d", tp1=1, pp=1, dp=8, microbatch=1,
                           execution={"zero": 3, "recompute": "selective", **ex},
                           stack="none").row
        return r["t_dp_comm_s"]
    w = 2.0 * m.params_per_block  # bytes of one block
    n_mb, layers = 2, m.layers
    diff = t_dp(fsdp_version=2) - t_dp(fsdp_version=1)
    # W: the block weights the op table holds (its norms and biases aside: within 0.1 %)
    assert diff == pytest.approx(n_mb * layers * 2 * 2 * w / system.hbm_bytes_per_s, rel=1e-3)
    assert t_dp(fsdp_version=1, fsdp_reshard_after_forward=False) <= t_dp(fsdp_version=1)
    assert t_dp(fsdp_version=1, fsdp_prefetch=0) >= t_dp(fsdp_version=1)
    assert t_dp(fsdp_version=1, fsdp_gather_dtype="fp32") > t_dp(fsdp_version=1)


def test_presets_name_their_sources_and_family():
    for name in ("pytorch-fsdp-2023", "torchtitan-2025"):
        s = model.load_stack(name) if hasattr(model, "load_stack") else None
        from model.specs.stack import load_stack
        s = load_stack(name)
        assert s.family == "pytorch" and "Calibration data" in s.source
        assert s.execution["zero"] == 3 and s.execution["attention_kernel"] == "fa2"
    assert model.load_system("h100-96gb-500w").hbm_capacity_gb == 96.0


def test_contract_command(capsys, tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"name": "m", "layers": 8, "hidden": 2048, "heads": 16,
                                "seq_len": 2048, "vocab": 50368, "bias": False,
                                "position_embedding": "learned"}))
    code = main(["evaluate", "--model", str(path), "--system", "h100", "--gpus", "8",
                 "--global-batch", "48", "--strategy", "1d", "--tp", "1", "--pp", "1",
                 "--dp", "8", "--microbatch", "6", "--zero", "3", "--recompute", "none",
                 "--precision", "bf16", "--stack", "pytorch-fsdp-2023", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["iteration_time_s"] > 0


def _synthetic_runs(tmp_path, eta: float):
    """Runs 'measured' with a stack whose H100 GEMM efficiency is ``eta``."""
    from model.specs.stack import load_stack
    truth = fitted_stack(load_stack("torchtitan-2025"), "truth", {"h100": eta})
    runs = []
    for layers, seq, mb in ((4, 2048, 2), (8, 4096, 1), (6, 2048, 4)):
        spec = {**LLAMA, "layers": layers, "seq_len": seq}
        m = transformer_from_dict(spec)
        row = model.evaluate(m, model.load_system("h100"), 8, 8 * mb * 2, "1d", tp1=1, pp=1,
                             dp=8, microbatch=mb, execution={"recompute": "selective",
                                                             "recompute_layers": 0},
                             stack=truth).row
        runs.append({"model": {k: v for k, v in spec.items() if k != "seq_len"},
                     "seq_len": seq, "system": "h100", "gpus": 8, "global_batch": 8 * mb * 2,
                     "layout": {"tp": 1, "pp": 1, "dp": 8, "microbatch": mb},
                     "execution": {"recompute": "selective", "recompute_layers": 0},
                     "tokens_per_s_per_gpu": float(row["tokens_per_s"]) / 8})
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"runs": runs}))
    return path


def test_calibrate_recovers_a_known_efficiency(tmp_path, capsys):
    path = _synthetic_runs(tmp_path, 0.52)
    from model.specs.stack import load_stack
    cases = read_runs(path, "torchtitan-2025")
    result = calibrate_runs(cases)
    assert result["efficiency"]["h100"] == pytest.approx(0.52, abs=0.002)
    out = tmp_path / "mine.json"
    assert main(["calibrate", "--runs", str(path), "--base", "torchtitan-2025",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "h100: GEMM efficiency 0.52" in text and "leave-one-out" in text
    assert load_stack(str(out)).gemm_efficiency["h100"]["bf16"] == pytest.approx(0.52, abs=0.002)


@pytest.mark.parametrize(("value", "words"), [
    # NaN, Infinity and 1e300 never reach the fit: the runs file's reader refuses them
    # (model/specs/strict_json.py); the physical checks refuse what a JSON file can hold
    (float("nan"), "NaN is not a number JSON allows"),
    (float("inf"), "Infinity is not a number JSON allows"),
    (-5.0, "'tokens_per_s_per_gpu' is -5.0"), (0.0, "'tokens_per_s_per_gpu' is 0.0"),
    (1e300, "the number 1e+300 is out of range"),
    (1e6, "above what h100 can compute for llama3-70b: its bf16 peak allows at most 2,202"),
    (50_000.0, "runs[1] ('bad'): 50,000 tokens/s per GPU is above what h100 can compute"),
])
def test_calibrate_refuses_a_run_that_cannot_be(tmp_path, capsys, value, words):
    """Issue 32: NaN, 1e300 or 50,000 tokens/s/GPU for Llama 3 70B (~20x the H100's bf16
    peak over its 449 GFLOP per token) were fitted and written with exit 0."""
    good = {"model": "llama3-70b", "seq_len": 8192, "system": "h100", "gpus": 64,
            "global_batch": 64, "layout": {"tp": 8, "pp": 1}, "tokens_per_s_per_gpu": 500.0}
    path = tmp_path / "runs.json"
    # json.dumps writes NaN/Infinity as Python's json.loads reads them back
    path.write_text(json.dumps({"runs": [good, {**good, "id": "bad",
                                                "tokens_per_s_per_gpu": value}]}))
    out = tmp_path / "x.json"
    assert main(["calibrate", "--runs", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and not out.exists()


def test_a_fitted_stack_carries_its_leave_one_out_interval(tmp_path, capsys):
    """calibrate writes its leave-one-out scores; every command using --stack my.json prints
    the split-conformal interval of those, not "not validated"."""
    path = _synthetic_runs(tmp_path, 0.52)
    out = tmp_path / "mine.json"
    assert main(["calibrate", "--runs", str(path), "--base", "torchtitan-2025",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    scores = json.loads(out.read_text())["calibration"]["leave_one_out_scores"]["h100"]
    assert len(scores) == 3
    argv = ["evaluate", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
            "--global-batch", "64", "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp", "8",
            "--microbatch", "1", "--stack", str(out), "--coverage", "0.5", "--json"]
    assert main(argv) == 0
    bar = json.loads(capsys.readouterr().out)["error_bar"]
    r = sorted(scores)[1]  # ⌈4·0.5⌉ = 2nd smallest of 3
    assert bar["validated"] and bar["n"] == 3 and "your runs on h100" in bar["population"]
    assert bar["high_pct"] == pytest.approx(100 * (math.exp(r) - 1))
    assert "80 % interval not stated: 3 runs: an 80 % interval needs ≥ 4" in text
    assert main(argv[:-3]) == 0
    assert "80 % interval not stated: 3 runs" in capsys.readouterr().out
    summa = [*argv[:10], "2d", "--tp1", "1", "--tp2", "1", *argv[13:]]  # the layout in SUMMA
    assert main(summa) == 0
    bar = json.loads(capsys.readouterr().out)["error_bar"]
    assert not bar["validated"] and bar["low_pct"] is None
    assert "none ships the idealised 2D SUMMA tensor parallel strategy" in bar["text"]


def test_calibrate_refuses_what_no_run_pins(tmp_path, capsys):
    path = _synthetic_runs(tmp_path, 0.5)
    code = main(["calibrate", "--runs", str(path), "--fit", "h100,b200", "--out",
                 str(tmp_path / "x.json")])
    assert code == 2
    assert "no run pins its efficiency; add a run on b200" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"runs": [{"model": "gpt3-175b"}]}))
    assert main(["calibrate", "--runs", str(bad), "--out", str(tmp_path / "y.json")]) == 2


def test_sinks_fall_back_to_math_where_the_kernel_lacks_them():
    """Learnable sinks: cuDNN runs them fused (Transformer Engine 2.8), FlashAttention-2/-3 and
    the Triton kernel have no sink backward: the unfused math kernel runs instead."""
    assert ak.kernel_used("fa2", True) == "math" and ak.kernel_used("fa3", True) == "math"
    assert ak.kernel_used("cudnn", True) == "cudnn" and ak.kernel_used("fa2", False) == "fa2"
    spec = {**LLAMA, "attention_sinks": True}
    m, h100 = transformer_from_dict(spec), model.load_system("h100")
    with_sinks = Ctx.make(m, h100, "default", {"attention_kernel": "fa2"}).attention_passes
    plain_math = Ctx.make(transformer_from_dict(LLAMA), h100, "default",
                          {"attention_kernel": "math"}).attention_passes
    assert with_sinks == plain_math


def test_windows_skip_blocks_only_in_kernels_that_have_them():
    """A 512-token window over 4K: FA2 skips the blocks outside it (FLOPs × the window's share
    of the keys) and runs at the rate of its effective length; the 2023 Triton kernel masks
    the full causal attention."""
    spec = {**LLAMA, "sliding_window": 512}
    fa2, _ = _counts({"attention_kernel": "fa2"}, "attn/flash", sliding_window=512)
    masked, _ = _counts({"attention_kernel": "triton"}, "attn/flash", sliding_window=512)
    full, _ = _counts({"attention_kernel": "triton"}, "attn/flash")
    m = transformer_from_dict(spec)
    ctx = Ctx.make(m, model.load_system("h100"), "default", {"attention_kernel": "fa2"})
    keys = 512 - 512 * 512 / (2 * 4096)  # mean keys of a sliding window (params.attention_keys)
    want = ak.pass_efficiencies("fa2", "hopper", True, 128, 2 * keys)
    assert ctx.attention_passes == pytest.approx(want)
    assert masked.flop_mat_fwd == pytest.approx(full.flop_mat_fwd)  # masked, not skipped
    assert fa2.flop_mat_fwd == pytest.approx(full.flop_mat_fwd * keys / 2048)


def test_eager_loss_in_fp32():
    """Eager PyTorch's FP32 cross-entropy: 5 extra passes of the BF16 logits forward, 9
    backward (reference/elementwise_passes.json); under compile too (torchtitan compiles the
    blocks, not the loss); fused: none."""
    m = transformer_from_dict(LLAMA)
    logits = 2 * m.seq_len * m.vocab
    for mode, passes in (("eager", 5), ("compile", 5), ("fused", 0)):
        ctx = Ctx.make(m, model.load_system("h100"), "default", {"elementwise": mode})
        strategy = build_strategy("1d", m, ctx.mode, ctx.execution)
        spec = next(s for s in strategy.post if s.name == "head/loss")
        one = np.ones(1, dtype=int)
        sh = Shards(b=one * 2, tp1=one, tp2=one, nb=one, nv_tp1=one, nv_tp2=one)
        counts = op_counts(spec, sh, ctx)
        assert counts.extra_bytes_fwd == pytest.approx(passes * 2 * logits)
        assert counts.extra_bytes_bwd == pytest.approx(passes * 1.8 * 2 * logits)


def test_calibrate_refuses_runs_that_do_not_depend_on_the_efficiency(tmp_path, monkeypatch):
    """A run whose time the GEMM efficiency barely moves cannot pin it."""
    from model.validation import user_runs
    cases = read_runs(_synthetic_runs(tmp_path, 0.5), "torchtitan-2025")
    curve = user_runs.Curve.of(cases[0])
    assert 0.2 < user_runs.sensitivity(curve) < 0.55  # GEMM-bound in part: ~0.3 per doubling
    flat = user_runs.Curve(cases[0], np.full_like(curve.log_time, curve.log_time[0]))
    assert user_runs.sensitivity(flat) == 0.0
    monkeypatch.setattr(user_runs.Curve, "of", classmethod(lambda cls, case: flat))
    with pytest.raises(ModelError, match="do not pin it; add a compute-bound run on h100"):
        calibrate_runs(cases)


def test_hsdp_shards_within_groups_and_replicates_across():
    from model.physics.fsdp import gather_factor, shard_group
    from model.specs.execution import Execution
    group, tau, replicas = shard_group(np.array([8.0, 16.0]), np.array([8.0, 8.0]),
                                       Execution(zero=3, fsdp_version=2, fsdp_shard_group=8))
    assert group.tolist() == [8.0, 8.0] and tau.tolist() == [8.0, 8.0]
    assert replicas.tolist() == [1.0, 2.0]
    assert gather_factor(Execution(fsdp_gather_dtype="fp32"), 1.0) == 2.0
    assert gather_factor(Execution(), 0.5) == 0.5  # auto: the precision's (FP8 gather)
    m = transformer_from_dict(LLAMA)
    system = model.load_system("h100")

    def t_dp(**ex):
        return model.evaluate(m, system, 16, 32, "1d", tp1=1, pp=1, dp=16, microbatch=1,
                              execution={"zero": 3, "fsdp_version": 2, **ex},
                              stack="none").row["t_dp_comm_s"]
    # a shard group as large as the data-parallel group is plain FSDP
    assert t_dp(fsdp_shard_group=16) == pytest.approx(t_dp())
    assert t_dp(fsdp_shard_group=8) != pytest.approx(t_dp())


def test_fsdp_memory_of_gathered_blocks():
    """ZeRO-3 holds two gathered blocks; FSDP without resharding after the forward holds every
    block of the stage until its backward; FP32 gathers twice the bytes."""
    m = transformer_from_dict(LLAMA)
    system = model.load_system("h100")

    def weights_gb(**ex):  # with the optimizer state: PyTorch FSDP's shards are the master
        row = model.evaluate(m, system, 8, 16, "1d", tp1=1, pp=1, dp=8, microbatch=1,
                             execution={"zero": 3, "recompute": "full", **ex},
                             stack="none").row
        return row["weights_gb"] + row["optimizer_gb"]
    block = 2.0 * m.params_per_block / 1e9  # GB of one gathered block
    base = weights_gb(fsdp_version=2)
    # FSDP2's root (embedding, final norm, head) stays gathered (model/physics/peak_memory.py)
    root = 2.0 * 2 * LLAMA["vocab"] * LLAMA["hidden"] / 1e9
    copy = 2.0 * m.params / 8 / 1e9  # ZeRO-3's 2-byte shards beside its FP32 master
    assert base - weights_gb() == pytest.approx(root - copy, rel=1e-3)
    held = weights_gb(fsdp_version=2, fsdp_reshard_after_forward=False)
    assert held - base == pytest.approx((m.layers - 2) * block, rel=1e-3)
    assert weights_gb(fsdp_version=1, fsdp_gather_dtype="fp32") - weights_gb() == pytest.approx(
        2 * block - copy, rel=1e-3)
