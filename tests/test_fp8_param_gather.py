"""FP8 parameter gather (Megatron-Core's --fp8-param-gather): the data-parallel all-gather of the
updated parameters moves the precision's FP8 bytes instead of BF16 ones; the gradient
reduce-scatter, the embedding and the LM head are unchanged (model.physics.pipeline)."""

from __future__ import annotations

import json

import pytest

from model import evaluate, load_system, transformer_from_dict
from model.cli import main
from model.specs.precision import PRECISIONS
from model.specs.stack import load_stack

GPT = dict(name="closed-form", layers=4, hidden=2048, heads=16, seq_len=8192, vocab=0,
           mlp="gelu", bias=True, dropout=True, tokens=1e9)


def _row(system, precision: str, gather: bool, **execution):
    m = transformer_from_dict(GPT)
    ex = {"precision": precision, "fp8_param_gather": gather, "sequence_parallel": True,
          "recompute": "selective", "fp32_gradients": False, "dp_bucket_mb": 0.0, **execution}
    return m, evaluate(m, system, 8, 64, "1d", tp1=1, pp=1, dp=8, microbatch=1,
                       execution=ex).row


def _ring_s(system, volume_bytes: float, n: int = 8) -> float:
    """One ring collective of V bytes over n GPUs of one NVLink domain:
    λ·(n − 1) + (n − 1)/n · V / b."""
    return (n - 1) * system.nvlink_latency_s + (n - 1) / n * volume_bytes / system.fast_bytes_per_s


@pytest.mark.parametrize(("system_name", "precision", "bytes_per_param"), [
    ("h100", "fp8", 1.0), ("h100", "fp8-delayed", 1.0),
    ("h100", "fp8-blockwise", 1.0 + 4 / 128**2), ("b200", "mxfp8", 1.0 + 1 / 32)])
def test_fsdp_exposes_the_first_gather_in_fp8_bytes(system_name, precision, bytes_per_param):
    """ZeRO-3, compute far longer than communication, no overlap slowdown: only the first
    block's gather is exposed, T_AG of W₁·q/2 bytes (q: the FP8 bytes per parameter)."""
    system = load_system(system_name).with_overrides(overlap_slowdown=0.0)
    m, row = _row(system, precision, True, zero=3)
    w1 = 2.0 * m.params_per_block
    assert PRECISIONS[precision].gathered_bytes_per_param == bytes_per_param
    assert row["t_dp_comm_s"] == pytest.approx(_ring_s(system, w1 * bytes_per_param / 2),
                                               rel=1e-9)


def test_exposed_data_parallel_time_halves_only_the_gather():
    """ZeRO-1 without overlap: every block's collectives are exposed, t_dp = D·(T_AG + T_RS),
    the gather of W₁/2 bytes in FP8 and the (bf16) gradient reduce-scatter of W₁."""
    system = load_system("h100")
    m, on = _row(system, "fp8", True, zero=1, dp_overlap=False)
    _, off = _row(system, "fp8", False, zero=1, dp_overlap=False)
    w1 = 2.0 * m.params_per_block
    assert off["t_dp_comm_s"] == pytest.approx(4 * 2 * _ring_s(system, w1), rel=1e-9)
    assert on["t_dp_comm_s"] == pytest.approx(
        4 * (_ring_s(system, w1 / 2) + _ring_s(system, w1)), rel=1e-9)
    assert on["iteration_time_s"] < off["iteration_time_s"]


def test_bf16_ignores_the_fp8_gather():
    system = load_system("h100")
    _, on = _row(system, "bf16", True, dp_overlap=False)
    _, off = _row(system, "bf16", False, dp_overlap=False)
    assert on["iteration_time_s"] == off["iteration_time_s"]
    assert on["t_dp_comm_s"] == off["t_dp_comm_s"] and bool(on["fp8_param_gather"])


def test_megatron_bridge_stacks_gather_fp8_parameters():
    """Megatron-Bridge's FP8 and MXFP8 precision presets set fp8_param_gather; the 2021–2022
    Megatron-LM and DeepSpeed stacks predate it."""
    assert all(load_stack(f"megatron-bridge-{r}").execution["fp8_param_gather"]
               for r in ("25.09", "25.11", "26.02", "26.04", "26.06", "26.08"))
    assert not any(load_stack(s).execution.get("fp8_param_gather")
                   for s in ("megatron-lm-2021", "megatron-lm-2022", "deepspeed-zero3-2021"))


def test_cli_option_reaches_the_row(capsys):
    argv = ["evaluate", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
            "--global-batch", "64", "--strategy", "1d", "--tp", "1", "--pp", "1",
            "--dp", "8", "--microbatch", "1", "--precision", "fp8", "--json"]
    rows = []
    for flag in ("--fp8-param-gather", "--no-fp8-param-gather"):
        assert main([*argv, flag]) == 0
        rows.append(json.loads(capsys.readouterr().out))
    on, off = (r["results"][0]["best"] if "results" in r else r for r in rows)
    assert on["fp8_param_gather"] is True and off["fp8_param_gather"] is False
    assert on["t_dp_comm_s"] < off["t_dp_comm_s"]
