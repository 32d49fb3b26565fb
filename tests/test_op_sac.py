"""TorchTitan's per-op selective activation checkpointing as a recompute mode (issue 32, item 4):
``recompute: op-sac`` keeps what the policy saves (every op of the save list's output except
every second matmul's: model/physics/op_sac.py) and reruns the rest — closed forms for the
memory and the recomputed work of a Llama 3 8B block."""

from __future__ import annotations

import json

import pytest

import model
from model.cli import main
from model.errors import ModelError

BLOCK = ["attn/norm", "attn/qkv", "attn/flash", "attn/proj", "mlp/norm", "mlp/fc1", "mlp/act",
         "mlp/fc2"]
B, S = 2, 2.0  # microbatch, bytes per bf16 element


def _ops(recompute: str):
    m = model.load_model("llama3-8b")
    ev = model.evaluate(m, model.load_system("h100-96gb-500w"), 8, 16, "1d", tp1=1, pp=1, dp=8,
                        microbatch=B, stack="torchtitan-2025",
                        execution={"recompute": recompute, "recompute_layers": 0, "zero": 3})
    return m, ev, ev.ops.set_index("op")


def test_op_sac_keeps_what_the_policy_saves():
    """Per block and microbatch: x, Q, V, the attention output, w1's and w2's outputs (bf16)
    and the fp32 log-sum-exp — 31,744 values per token for Llama 3 8B, not selective's 69,632."""
    m, _, ops = _ops("op-sac")
    e, f, h, kv, d, r = m.hidden, m.ffn, m.heads, m.kv_heads, m.qk_head_dim, m.seq_len
    kept = S * B * r * (2 * e + h * d + kv * d + h * d + f) + 4 * B * h * r
    assert ops.loc[BLOCK, "activation_bytes"].sum() == pytest.approx(kept, rel=1e-12)
    assert (kept - 4 * B * h * r) / (S * B * r) == 31_744
    _, _, sel = _ops("selective")
    assert sel.loc[BLOCK, "activation_bytes"].sum() > 2 * kept


def test_op_sac_reruns_wk_wo_w3_norms_and_the_swiglu():
    """The backward grows by the forward of every second matmul (wk: kv·d/(H·d + 2·kv·d) = 1/6
    of the fused QKV for Llama 3 8B; wo; w3: half of fc1) and of the norms and the SwiGLU."""
    m, ev, ops = _ops("op-sac")
    _, sel_ev, sel = _ops("selective")
    wk = m.kv_heads * m.qk_head_dim / (m.heads * m.qk_head_dim + 2 * m.kv_heads * m.qk_head_dim)
    assert wk == pytest.approx(1 / 6)
    share = {"attn/qkv": wk, "attn/proj": 1.0, "mlp/fc1": 0.5, "attn/norm": 1.0,
             "mlp/norm": 1.0, "mlp/act": 1.0, "attn/flash": 0.0, "mlp/fc2": 0.0}
    for op, part in share.items():
        extra = ops.loc[op, "flop_bwd"] - sel.loc[op, "flop_bwd"]
        assert extra == pytest.approx(part * sel.loc[op, "flop_fwd"], rel=1e-9), op
    # slower than selective, faster than full recompute
    _, full_ev, _ = _ops("full")
    assert (sel_ev.row["iteration_time_s"] < ev.row["iteration_time_s"]
            < full_ev.row["iteration_time_s"])


def test_op_sac_is_refused_where_it_is_not_torchtitans_policy(capsys):
    ds = model.load_model("deepseek-v3")
    with pytest.raises(ModelError, match="op-sac' is TorchTitan's per-op policy"):
        model.evaluate(ds, model.load_system("h100"), 2048, 4096, "1d", tp1=1, pp=16, dp=128,
                       microbatch=1, execution={"recompute": "op-sac"})
    argv = ["evaluate", "--model", "llama3-8b", "--system", "h100", "--gpus", "8",
            "--global-batch", "16", "--strategy", "1d", "--tp", "1", "--pp", "1", "--dp", "8",
            "--microbatch", "2", "--recompute", "op-sac", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["recompute"] == "op-sac"
