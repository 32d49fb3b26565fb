"""Post-training: LoRA/QLoRA closed forms, the RL step's composition, and the two commands.

Closed forms by hand (docs/post_training.md): a small dense model's adapter parameters, the
optimizer and gradient bytes they carry, QLoRA's 4-bit weight bytes, the frozen matmul's
backward; an RL step whose phase times are given equals its composed timeline for both
placements; the CLI answers its contract's keys and refuses bad input in words.
"""

from __future__ import annotations

import json

import pytest

from model import evaluate, load_model, load_system, transformer_from_dict
from model.cli.commands import main
from model.errors import ModelError
from model.physics.lora import NF4_BYTES_PER_PARAM
from model.specs.params import total_params
from model.studies.finetune import FineTune, trainable_params
from model.studies.rl import Phases, RlStep, compose

# a dense SwiGLU model small enough to count by hand: e = 256, 4 heads of 64 (no GQA), f = 512
SMALL = dict(name="small-ft", layers=2, hidden=256, heads=4, kv_heads=4, seq_len=512, ffn=512,
             vocab=1000, mlp="swiglu", dropout=False, bias=False, samples=1e6)


def small():
    return transformer_from_dict(SMALL)


def adapters_by_hand(rank: int, targets: str) -> int:
    """r·(k + n) per adapted matmul, per layer, times the layers: the fused qkv (256 → 768),
    the projection (256 → 256), fc1 (256 → 2·512 for SwiGLU) and fc2 (512 → 256)."""
    attn = rank * (256 + 768) + rank * (256 + 256)
    mlp = rank * (256 + 1024) + rank * (512 + 256)
    per_layer = {"attn": attn, "mlp": mlp, "all": attn + mlp}[targets]
    return 2 * per_layer


@pytest.mark.parametrize("targets", ["attn", "mlp", "all"])
def test_lora_trainable_parameters_are_the_adapters_counted_by_hand(targets):
    ft = FineTune("lora", 1e6, lora_rank=8, lora_targets=targets)
    assert trainable_params(small(), ft) == adapters_by_hand(8, targets)
    assert trainable_params(small(), FineTune("full", 1e6)) == total_params(small())


def _memory(trainable: str, **extra):
    ex = {"trainable": trainable, "lora_rank": 8, "zero": 0, "fp32_gradients": False,
          "recompute": "selective", **extra}
    ev = evaluate(small(), load_system("h100"), 1, 1, "1d", tp1=1, pp=1, dp=1, microbatch=1,
                  execution=ex, stack="none")
    return ev.row


def test_lora_gradients_and_optimizer_cover_the_adapters_only():
    full, lora = _memory("all"), _memory("lora")
    adapters = adapters_by_hand(8, "all")
    params = total_params(small())
    # BF16 weights held: the base plus the adapters (2 bytes each)
    assert lora["weights_gb"] * 1e9 == pytest.approx(2 * (params + adapters), rel=1e-9)
    assert full["weights_gb"] * 1e9 == pytest.approx(2 * params, rel=1e-9)
    # one 2-byte gradient per trainable parameter; Adam's 12 bytes (fp32 master, m, v) = 6 × 2
    assert lora["gradients_gb"] * 1e9 == pytest.approx(2 * adapters, rel=1e-9)
    assert lora["optimizer_gb"] * 1e9 == pytest.approx(12 * adapters, rel=1e-9)
    assert full["optimizer_gb"] * 1e9 == pytest.approx(12 * params, rel=1e-9)


def test_qlora_holds_the_blocks_matmul_weights_in_nf4():
    lora, qlora = _memory("lora"), _memory("qlora")
    matmuls = 2 * (256 * 768 + 256 * 256 + 256 * 1024 + 512 * 256)  # the blocks' base weights
    saved = (2.0 - NF4_BYTES_PER_PARAM) * matmuls  # embedding, head and norms stay BF16
    assert (lora["weights_gb"] - qlora["weights_gb"]) * 1e9 == pytest.approx(saved, rel=1e-9)
    assert NF4_BYTES_PER_PARAM == pytest.approx(4.127 / 8)
    # the same trainable adapters: the same gradients and optimizer state
    assert qlora["gradients_gb"] == pytest.approx(lora["gradients_gb"], rel=1e-9)


def test_a_frozen_matmul_runs_no_weight_gradient():
    """Frozen base weights: the backward loses the dW GEMM (as many FLOPs as the forward and
    half the backward's bytes); an adapted matmul gains its adapters' thin GEMMs."""
    full = evaluate(small(), load_system("h100"), 1, 1, "1d", tp1=1, pp=1, dp=1, microbatch=1,
                    execution={"recompute": "selective"}, stack="none")
    frozen = evaluate(small(), load_system("h100"), 1, 1, "1d", tp1=1, pp=1, dp=1,
                      microbatch=1, execution={"recompute": "selective", "trainable": "lora",
                                               "lora_rank": 1, "lora_targets": "attn"},
                      stack="none")
    ops_full, ops_frozen = full.ops.set_index("op"), frozen.ops.set_index("op")
    fc2 = "mlp/fc2"
    fwd = ops_full.loc[fc2, "flop_fwd"]
    assert ops_frozen.loc[fc2, "flop_fwd"] == fwd  # no adapter on the MLP
    k, n, m = 512, 256, 512  # fc2: the SwiGLU's 512 features to the hidden 256, 512 rows
    assert ops_frozen.loc[fc2, "flop_bwd"] == pytest.approx(
        ops_full.loc[fc2, "flop_bwd"] - k * n * (2 * m - 1), rel=1e-9)
    # half the backward's HBM bytes (the dW GEMM's operands and output) are gone
    assert ops_frozen.loc[fc2, "hbm_bytes_bwd"] == pytest.approx(
        ops_full.loc[fc2, "hbm_bytes_bwd"] / 2, rel=1e-9)
    # the adapted projection gains its adapters' FLOPs: 2·m·r·(k + n) forward
    proj = "attn/proj"
    assert ops_frozen.loc[proj, "flop_fwd"] - ops_full.loc[proj, "flop_fwd"] == pytest.approx(
        2 * 512 * 1 * (256 + 256), rel=1e-9)


def test_padded_sequences_count_only_the_examples_tokens():
    ft = FineTune("lora", 1e9, packing="padded", mean_example_tokens=256)
    assert ft.useful_share(1024) == 0.25
    with pytest.raises(ModelError, match="exceeds the sequence length"):
        ft.useful_share(128)
    with pytest.raises(ModelError, match="mean example length"):
        FineTune("lora", 1e9, packing="padded")


PHASES = Phases(generation_s=100.0, tail_s=30.0, reference_s=10.0, training_s=40.0,
                sync_s=2.0, offload_s=3.0, generation_layout={}, training_layout={})


def test_colocated_step_is_every_phase_in_sequence():
    step, idle = compose("colocated", False, PHASES, 16, 16)
    assert step == 100 + 10 + 40 + 2 + 3
    assert idle == pytest.approx(30 / 155)


def test_split_on_policy_step_waits_for_both_pools():
    step, idle = compose("split", False, PHASES, 16, 4)
    assert step == 100 + 2 + 50
    busy = 4 * 100 + 12 * 50 + 16 * 2
    assert idle == pytest.approx(1 - busy / (16 * step))


def test_split_off_policy_step_overlaps_the_pools():
    step, idle = compose("split", True, PHASES, 16, 4)
    assert step == max(100, 50) + 2
    busy = 4 * 100 + 12 * 50 + 16 * 2
    assert idle == pytest.approx(1 - busy / (16 * step))


def test_rl_step_refuses_what_cannot_be():
    with pytest.raises(ModelError, match="shorter than the mean"):
        RlStep(8, 4, 100, 200, 100)
    with pytest.raises(ModelError, match="split placement"):
        RlStep(8, 4, 100, 200, 200, placement="colocated", off_policy=True)
    with pytest.raises(ModelError, match="million rollouts"):
        RlStep(100_000, 100, 100, 200, 200)


def _cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_finetune_json_carries_the_contract(capsys):
    code, out, _ = _cli(capsys, "finetune", "--model", "llama3-8b", "--system", "h100",
                        "--gpus", "8", "--method", "lora", "--lora-rank", "16",
                        "--lora-targets", "attn,mlp", "--tokens", "1e9", "--seq-len", "4096",
                        "--global-batch", "64", "--json")
    assert code == 0
    data = json.loads(out)
    for key in ("days", "tokens_per_s_per_gpu", "memory_gb", "trainable_params", "cost_usd",
                "layout"):
        assert key in data
    assert data["trainable_params"] == trainable_params(
        load_model("llama3-8b", seq_len=4096), FineTune("lora", 1e9, 16, "all"))
    assert data["days"] == pytest.approx(1e9 / (data["tokens_per_s_per_gpu"] * 8) / 86400)
    assert data["memory_breakdown_gb"]["gradients"] < 1.0  # adapters only


def test_rl_json_carries_the_contract(capsys):
    code, out, _ = _cli(capsys, "rl", "--model", "llama3-8b", "--system", "h100", "--gpus",
                        "16", "--prompts-per-step", "64", "--samples-per-prompt", "8",
                        "--input-tokens", "512", "--output-tokens", "1024",
                        "--max-output-tokens", "4096", "--placement", "split", "--json")
    assert code == 0
    data = json.loads(out)
    for key in ("step_s", "generation_s", "training_s", "sync_s", "idle_gpu_share",
                "generation_layout", "training_layout"):
        assert key in data
    assert data["generation_gpus"] + data["training_gpus"] == 16
    assert data["step_s"] == pytest.approx(data["generation_s"] + data["sync_s"]
                                           + data["reference_s"] + data["training_s"])


TINY_RL = ("rl", "--model", "llama3-8b", "--gpus", "8", "--prompts-per-step", "1",
           "--samples-per-prompt", "1", "--input-tokens", "1", "--output-tokens", "1",
           "--placement", "colocated", "--steps", "10", "--json")


def test_rl_cost_is_the_gpu_hour_price_times_the_step_even_for_a_tiny_step(capsys):
    # one 2-token rollout registers no training GPU-hours: the price is the system's own
    code, out, _ = _cli(capsys, *TINY_RL, "--system", "h100", "--usd-per-gpu-hour", "3")
    assert code == 0
    data = json.loads(out)
    assert data["cost_per_step_usd"] == pytest.approx(8 * data["step_s"] / 3600 * 3)
    assert data["run_cost_usd"] == pytest.approx(10 * data["cost_per_step_usd"])


def test_rl_on_a_system_without_a_price_reports_no_cost_rather_than_failing(capsys):
    assert load_system("b300").usd_per_gpu_hour == 0  # the premise: B300 has no price
    code, out, _ = _cli(capsys, *TINY_RL, "--system", "b300")
    assert code == 0
    data = json.loads(out)
    assert data["cost_per_step_usd"] is None and data["run_cost_usd"] is None
    code, out, _ = _cli(capsys, *[a for a in TINY_RL if a != "--json"], "--system", "b300")
    assert code == 0 and "cost unknown" in out


@pytest.mark.parametrize("argv, words", [
    (("finetune", "--model", "llama3-8b", "--system", "h100", "--gpus", "8", "--method",
      "lora", "--tokens", "1e9", "--packing", "padded"), "--mean-example-tokens"),
    (("finetune", "--model", "llama3-8b", "--system", "h100", "--gpus", "8", "--method",
      "lora", "--tokens", "1e9", "--lora-targets", "ffn"), "attn, mlp, attn,mlp or qkv"),
    (("finetune", "--model", "llama3-8b", "--system", "h100", "--gpus", "8", "--method",
      "dora", "--tokens", "1e9"), "invalid choice"),
    (("rl", "--model", "llama3-8b", "--system", "h100", "--gpus", "8", "--prompts-per-step",
      "8", "--samples-per-prompt", "4", "--input-tokens", "100", "--output-tokens", "100",
      "--placement", "colocated", "--generation-gpus", "4"), "--placement split"),
    (("rl", "--model", "llama3-8b", "--system", "h100", "--gpus", "8", "--prompts-per-step",
      "8", "--samples-per-prompt", "4", "--input-tokens", "100", "--output-tokens", "100",
      "--placement", "split", "--generation-gpus", "8"), "leave GPUs to train"),
])
def test_bad_post_training_input_is_one_line_in_the_users_words(capsys, argv, words):
    code, out, err = _cli(capsys, *argv)
    assert code == 2
    assert words in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_megatron_bridge_finetune_runs_are_predicted_without_fitting():
    """Megatron-Bridge 26.06's SFT and LoRA rows (model/validation/finetune.py), each in its
    published layout with the pre-training stack: every run fits in HBM, and the errors stay
    where they were measured when this was written (mean 6.0 % SFT, 4.6 % LoRA)."""
    from model.validation.finetune import records, summary
    frame = records()
    assert len(frame) == 10 and frame["fits"].all()
    stats = summary(frame)
    assert stats["full"]["mean_abs_error_pct"] < 8.0
    assert stats["lora"]["mean_abs_error_pct"] < 8.0
    assert stats["all"]["max_abs_error_pct"] < 20.0


def test_the_docs_accuracy_table_is_what_validate_prints():
    """docs/post_training.md's fine-tuning errors are the ones the validation computes now."""
    from pathlib import Path

    from model.validation.finetune import records, summary
    stats = summary(records())
    text = (Path(__file__).resolve().parents[1] / "docs" / "post_training.md").read_text()
    for method in ("full", "lora"):
        row = stats[method]
        expected = (f"{row['mean_abs_error_pct']:.1f} % mean \\|error\\|, max "
                    f"{row['max_abs_error_pct']:.1f} % ({row['runs']} runs)")
        assert expected in text, expected


def test_finetune_on_a_system_without_a_price_reports_no_cost(capsys):
    argv = ("finetune", "--model", "llama3-8b", "--system", "b300", "--gpus", "8", "--method",
            "lora", "--tokens", "1", "--seq-len", "1", "--json")
    code, out, _ = _cli(capsys, *argv)
    assert code == 0 and json.loads(out)["cost_usd"] is None
    code, out, _ = _cli(capsys, *argv[:-1])
    assert code == 0 and "cost unknown" in out
