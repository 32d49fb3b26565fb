"""Accuracy against published runs, and the execution options that accuracy rests on."""

from __future__ import annotations

import json

import pytest

from model import ModelError, load_model, load_system
from model.cli.commands import main
from model.validation import run_validation, summary
from tests.unstacked import evaluate, search


@pytest.fixture(scope="module")
def validation():
    return run_validation()


def _stats(frame, set_name, metric, uncertain=False):
    s = summary(frame)
    row = s[(s["set"] == set_name) & (s["metric"] == metric) & (s["uncertain"] == uncertain)]
    assert len(row) == 1
    return row.iloc[0]


def test_korthikanti_iteration_time_targets(validation):
    """Issue target on the eight Megatron-LM runs: mean |error| ≤ 5 %, max ≤ 12 % (Calculon,
    tuned on these runs: 3.65 % / 8.87 %)."""
    row = _stats(validation, "korthikanti", "iteration_time_s")
    assert row["n"] == 8
    assert row["mean_abs_error_pct"] <= 5.0
    assert row["max_abs_error_pct"] <= 12.0


@pytest.mark.parametrize("metric", ["params_grads_optimizer_gib", "activations_gib"])
def test_korthikanti_memory_within_ten_percent(validation, metric):
    row = _stats(validation, "korthikanti-memory", metric)
    assert row["n"] == 8 and row["max_abs_error_pct"] <= 10.0


def test_megatron_bridge_in_sample(validation):
    """In sample (each release's stack fitted on its own runs, one GEMM efficiency per GPU;
    tests/test_calibration.py has the cross-validated errors): the dense Megatron-Bridge runs
    of 25.09, 25.11 and 26.02 within 5 % on average, 13 % at most (the GB200 Llama 3 70B
    recipes, whose memory strategy the record does not state, are the largest misses)."""
    rows = validation[validation["id"].str.startswith("mbridge") & (validation["skipped"] == "")]
    assert len(rows) == 29
    assert rows["error_pct"].abs().mean() <= 5.0 and rows["error_pct"].abs().max() <= 13.0
    extra = validation[validation["set"] == "megatron-bridge-extra"]
    assert extra["id"].is_unique and not extra["id"].isin(
        validation.loc[validation["set"] == "measurements", "id"]).any()


def test_llama_405b_runs_within_ten_percent(validation):
    """126 layers on 8 or 16 stages (the embedding and loss counted as layers), every release
    and GPU: within 10 %."""
    rows = validation[validation["id"].str.contains("405B") & (validation["skipped"] == "")]
    assert len(rows) == 12
    assert rows["error_pct"].abs().max() <= 10.0


def test_every_skipped_record_says_why(validation):
    skipped = validation[validation["skipped"] != ""]
    assert len(skipped) > 0
    assert skipped["skipped"].str.len().min() > 10
    moe = skipped[skipped["id"].str.contains("DeepSeek")]
    assert len(moe) and moe["skipped"].str.contains("mixture of experts").all()


def test_validate_command_prints_records_and_summary(capsys):
    assert main(["validate", "--set", "korthikanti", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["records"]) == 24
    assert {r["metric"] for r in out["summary"]} == {"iteration_time_s", "activations_gib",
                                                     "params_grads_optimizer_gib"}


# ---------------------------------------------------------------------------------------------
# Execution options


CFG = dict(tp1=8, pp=8, dp=1, microbatch=1)


@pytest.fixture(scope="module")
def gpt():
    return load_model("gpt3-175b"), load_system("a100")


def row(gpt, **execution):
    m, s = gpt
    return evaluate(m, s, 64, 64, "1d", execution=execution, **CFG).row


def test_full_recompute_trades_memory_for_time(gpt):
    sel, full = row(gpt), row(gpt, recompute="full")
    assert full["activations_gb"] < 0.5 * sel["activations_gb"]
    assert full["iteration_time_s"] > sel["iteration_time_s"]
    assert full["hardware_tflops_per_gpu"] > full["model_tflops_per_gpu"]
    assert sel["model_tflops_per_gpu"] == pytest.approx(
        full["model_tflops_per_gpu"] * full["iteration_time_s"] / sel["iteration_time_s"])


def test_no_recompute_keeps_the_attention_scores(gpt):
    none = row(gpt, recompute="none", flash_attention=False)
    sel = row(gpt, recompute="selective", flash_attention=False)
    assert none["activations_gb"] > sel["activations_gb"]
    assert none["iteration_time_s"] < sel["iteration_time_s"]


def test_sequence_parallelism_shards_activations(gpt):
    assert row(gpt, sequence_parallel=False)["activations_gb"] > row(gpt)["activations_gb"]


def test_interleaving_shrinks_the_bubble(gpt):
    one, three = row(gpt), row(gpt, interleave=3)
    assert three["t_bubble_s"] == pytest.approx(one["t_bubble_s"] / 3, rel=0.05)
    assert three["t_pp_comm_s"] == pytest.approx(3 * one["t_pp_comm_s"], rel=1e-9)
    assert three["activations_gb"] > one["activations_gb"]


def test_zero_stages_shard_more_and_more():
    m, s = load_model("gpt3-175b"), load_system("a100")
    cfg = dict(tp1=8, pp=1, dp=8, microbatch=1, nv_tp1=8, nv_dp=1)  # TP in the domain
    mem = [evaluate(m, s, 64, 64, "1d", execution={"zero": z}, **cfg).row for z in range(4)]
    assert mem[0]["optimizer_gb"] == pytest.approx(8 * mem[1]["optimizer_gb"])
    assert mem[2]["gradients_gb"] == pytest.approx(mem[1]["gradients_gb"] / 8)
    assert mem[3]["weights_gb"] < mem[2]["weights_gb"]
    assert mem[3]["t_dp_comm_s"] > mem[1]["t_dp_comm_s"]  # weights gathered every microbatch


def test_fp8_speeds_up_the_linear_layers_only(without_gemm_depth):
    # without the GEMMs' depth effect, whose fixed cost per tile is twice as many reduction
    # elements in FP8 as in BF16 (tests/test_moe_kernels.py), the ratio is the peaks' and
    # efficiencies' alone
    m, s = load_model("llama3-8b"), load_system("h100")
    cfg = dict(tp1=1, pp=1, dp=8, microbatch=1)
    bf16 = evaluate(m, s, 8, 64, "1d", **cfg).ops.set_index("op")
    fp8 = evaluate(m, s, 8, 64, "1d", execution={"precision": "fp8"}, **cfg).ops.set_index("op")
    # the FP8 peak at the calibrated FP8 efficiency against the bf16 peak at the bf16 one
    ratio = (s.flop_efficiency * s.matrix_tflops_fp16) / (
        s.flop_efficiency_fp8 * s.matrix_tflops_fp8)
    fc1_bf16, fc1_fp8 = bf16.loc["mlp/fc1", "t_compute_s"], fp8.loc["mlp/fc1", "t_compute_s"]
    overhead = 2 * s.kernel_overhead_s
    assert fc1_fp8 - overhead == pytest.approx(ratio * (fc1_bf16 - overhead), rel=1e-9)
    assert fc1_fp8 < fc1_bf16
    assert fp8.loc["attn/flash", "t_compute_s"] == bf16.loc["attn/flash", "t_compute_s"]


def test_bad_execution_options_are_clear_errors(gpt):
    m, s = gpt
    for bad, word in (({"recompute": "some"}, "recompute"), ({"zero": 4}, "zero"),
                      ({"interleave": -1}, "interleave"), ({"precision": "fp4"}, "precision"),
                      ({"turbo": True}, "turbo")):
        with pytest.raises(ModelError, match=word):
            search(m, s, 64, 64, "1d", execution=bad)
    with pytest.raises(ModelError, match="paper mode"):
        search(m, s, 64, 64, "1d", mode="paper", execution={"recompute": "full"})
    with pytest.raises(ModelError, match="FP8"):
        search(m, s, 64, 64, "1d", execution={"precision": "fp8"})  # the A100 has none
    # interleaving needs layers per stage divisible by V: pp = 8 leaves 12 layers, V = 5 fails
    assert search(m, s, 64, 64, "1d", pins={"pp": 8}, execution={"interleave": 5}).best is None


def test_search_over_execution_choices_merges_their_best():
    m, s = load_model("gpt3-175b"), load_system("a100")
    both = search(m, s, 64, 64, "1d", top_k=5,
                  execution={"recompute": ["selective", "full"], "interleave": [1, 3]})
    alone = [search(m, s, 64, 64, "1d", top_k=1, execution={"recompute": r, "interleave": v})
             for r in ("selective", "full") for v in (1, 3)]
    best = max(a.best["samples_per_s"] for a in alone if a.best is not None)
    assert both.best["samples_per_s"] == pytest.approx(best, rel=1e-12)
    assert both.candidates == sum(a.candidates for a in alone)
    assert set(both.top.columns) >= {"recompute", "interleave", "zero", "precision"}
    assert list(both.top["samples_per_s"]) == sorted(both.top["samples_per_s"], reverse=True)


def test_cli_execution_flags(capsys):
    base = ["--model", "gpt3-175b", "--system", "a100", "--gpus", "64", "--global-batch", "64",
            "--strategy", "1d", "--stack", "none"]
    assert main(["search", *base, "--tp", "8", "--pp", "8", "--recompute", "full",
                 "--interleave", "3", "--no-sequence-parallel", "--zero", "0", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["results"][0]["best"]
    assert (best["recompute"], best["interleave"], best["sequence_parallel"], best["zero"]) == (
        "full", 3, False, 0)
    assert best["hardware_tflops_per_gpu"] > best["model_tflops_per_gpu"] > 0
    assert 0 < best["mfu"] < best["hfu"] < 1
    assert main(["evaluate", *base, "--tp", "8", "--pp", "8", "--dp", "1", "--microbatch", "1",
                 "--recompute", "full", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fits"] in ("fits", "tight", "no") and out["fits_bool"] in (True, False)
    code = main(["search", *base, "--mode", "paper", "--recompute", "full"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and "paper" in err
    # the flag takes what the Execution field takes (0: every count the stages allow)
    code = main(["search", *base, "--interleave", "65"])
    assert code == 2 and "interleave" in capsys.readouterr().err


def test_memory_reserve_and_small_message_bandwidth():
    m, s = load_model("gpt3-175b"), load_system("a100")
    assert s.memory_reserve_gb > 0 and s.usable_hbm_bytes < s.hbm_capacity_bytes
    free = s.with_overrides(memory_reserve_gb=0.0)
    tight, loose = (search(m, x, 64, 64, "1d", top_k=1) for x in (s, free))
    assert tight.feasible <= loose.feasible
    assert tight.best["memory_gb"] <= s.hbm_capacity_gb - s.memory_reserve_gb
    from model.physics.collectives import Collective, collective_time_s
    slow = s.with_overrides(nvlink_half_message_bytes=1e6)
    small, large = 8e4, 8e9  # bytes over 8 GPUs in one domain: 10 kB and 1 GB per ring step
    for v, factor in ((small, (1e4 + 1e6) / 1e4), (large, (1e9 + 1e6) / 1e9)):
        base = collective_time_s(Collective.ALLGATHER, v, 8, 8, s) - 7 * s.nvlink_latency_s
        fall = collective_time_s(Collective.ALLGATHER, v, 8, 8, slow) - 7 * s.nvlink_latency_s
        assert fall == pytest.approx(base * factor, rel=1e-9)


def test_ring_attention_hides_context_parallel_communication():
    """Long sequences on the context strategy: ring attention overlaps the K/V exchange with
    the attention compute, so it exposes less communication than all-gathering K/V."""
    m, s = load_model("llama3-70b").with_overrides(seq_len=65536), load_system("h100")
    cfg = dict(tp1=8, tp2=8, pp=1, dp=1, microbatch=1)
    gather, ring = (evaluate(m, s, 64, 8, "context", execution={"context_attention": a,
                                                                "recompute": "full"}, **cfg)
                    for a in ("allgather", "ring"))
    assert ring.row["t_tp_comm_s"] < gather.row["t_tp_comm_s"]
    assert ring.row["t_compute_s"] == pytest.approx(gather.row["t_compute_s"], rel=1e-12)
    flash = ring.ops.set_index("op").loc["attn/flash"]
    assert "p2p" in flash["collectives"]
    with pytest.raises(ModelError, match="context_attention"):
        evaluate(m, s, 64, 8, "context", execution={"context_attention": "tree"}, **cfg)


def test_offload_moves_memory_to_the_host_at_a_transfer_cost():
    m, s = load_model("gpt3-175b"), load_system("h100")
    cfg = dict(tp1=8, pp=8, dp=1, microbatch=1)
    base = evaluate(m, s, 64, 64, "1d", **cfg).row
    opt = evaluate(m, s, 64, 64, "1d", execution={"offload": "optimizer"}, **cfg).row
    assert opt["optimizer_gb"] == 0 and opt["host_memory_gb"] == pytest.approx(base["optimizer_gb"])
    assert opt["memory_gb"] < base["memory_gb"]
    assert opt["t_optimizer_s"] > base["t_optimizer_s"]  # PCIe and host DRAM, not HBM
    acts = evaluate(m, s, 64, 64, "1d", execution={"offload": "activations"}, **cfg).row
    assert acts["activations_gb"] < base["activations_gb"]
    assert acts["t_offload_s"] >= 0.0 and base["t_offload_s"] == 0.0
    slow = s.with_overrides(host_bandwidth_gb_per_s=0.5)  # a link too slow to hide
    crawl = evaluate(m, slow, 64, 64, "1d", execution={"offload": "activations"}, **cfg).row
    assert crawl["t_offload_s"] > 0 and crawl["iteration_time_s"] > base["iteration_time_s"]
    tiny = s.with_overrides(host_memory_gb=1.0)
    assert not evaluate(m, tiny, 64, 64, "1d", execution={"offload": "all"}, **cfg).fits
    with pytest.raises(ModelError, match="host memory tier"):
        evaluate(m, load_system("paper-h200"), 64, 64, "1d", execution={"offload": "all"}, **cfg)


def test_records_of_other_sources_map_to_presets_and_never_raise():
    """Another source's record (other GPU names, "n/a" fields, missing keys) is predicted or
    skipped with a reason: `python -m model validate` never stops on a record."""
    from model.validation import measurement_case, record_system

    assert record_system({"gpu": "NVIDIA H100 80GB HBM3"}).name == "h100"
    assert record_system({"gpu": "GB300 NVL72", "nvlink_domain": 72}).name == "gb300-nvl72"
    a100_40 = record_system({"gpu": "A100-SXM4-40GB", "nvlink_domain": 16})
    assert (a100_40.name, a100_40.hbm_capacity_gb, a100_40.nvlink_domain_size) == (
        "a100", 42.94, 16)  # 40,960 MiB
    good = {"id": "mlperf-like", "source": "some 2024 report",
            "model": {"name": "Llama 3 8B", "layers": 32, "hidden": 4096, "heads": 32,
                      "kv_heads": 8, "ffn": 14336, "vocab": 128256, "seq_len": 8192},
            "system": {"gpu": "NVIDIA H100 SXM", "n_gpus": 8},
            "parallel": {"tp": 2, "pp": 1, "cp": "n/a", "vp": "n/a", "global_batch": 64,
                         "microbatch": 1, "precision": "BF16"},
            "measured": {"tokens_per_s_per_gpu": 8000}}
    case = measurement_case(good)
    assert case.skip == "" and case.system.name == "h100"
    # a 2023+ record: the first Megatron-Bridge stack (flash attention, TP overlap)
    assert case.stack == "megatron-bridge-25.09"
    assert case.config == {"tp1": 2, "tp2": 1, "pp": 1, "dp": 4, "microbatch": 1}
    for bad in ({"id": "empty"}, {**good, "parallel": {**good["parallel"], "tp": "two"}},
                {**good, "system": {"gpu": "H100 PCIe", "n_gpus": 8}},
                {**good, "measured": {"nothing": 1}}, {**good, "model": None}):
        skipped = measurement_case(bad)
        assert skipped.skip, bad
